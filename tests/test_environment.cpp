// Linked into every test binary: points RECON_BINARY at the built `recon`
// and RECON_SOURCE_DIR at the sources, unless the caller already set them
// (so a test binary also runs by hand, outside ctest).

#include <cstdlib>

namespace {

const bool environment_set = [] {
    setenv("RECON_BINARY", RECON_TEST_BINARY, 0);
    setenv("RECON_SOURCE_DIR", RECON_TEST_SOURCES, 0);
    return true;
}();

}  // namespace

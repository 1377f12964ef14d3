#include "pipeline/version.hpp"

namespace recon::pipeline {

const char* program_version() { return RECON_VERSION; }

}  // namespace recon::pipeline

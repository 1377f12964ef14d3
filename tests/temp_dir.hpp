#pragma once
// A scratch directory for one test: fresh under the system temp dir (named
// by the process and a random number, never by a test's seed, which
// RECON_TEST_SEED makes the same for every test ctest runs side by side),
// removed with its contents at scope exit.

#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <system_error>

namespace recon::test {

class TempDir {
public:
    TempDir()
    {
        std::random_device rd;
        path_ = std::filesystem::temp_directory_path() /
                ("recon-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
        std::filesystem::create_directories(path_);
    }
    ~TempDir()
    {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    std::string file(const std::string& name) const { return (path_ / name).string(); }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

}  // namespace recon::test

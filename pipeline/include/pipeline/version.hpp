#pragma once
// The program version (the CMake project version), for output files and --version.

namespace recon::pipeline {

const char* program_version();

}  // namespace recon::pipeline

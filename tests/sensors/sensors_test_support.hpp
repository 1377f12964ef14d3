#pragma once
// Helpers for the sensors and file-format tests: error-message checks and
// optional Python (h5py/scipy) file makers; their scratch directories are
// temp_dir.hpp's.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

#include "temp_dir.hpp"

namespace recon::test {

/// The message of the exception `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f)
{
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

/// Expects `f` to throw a one-line message containing every part.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts)
{
    const std::string message = error_of(std::forward<F>(f));
    ASSERT_FALSE(message.empty()) << "no exception; expected one mentioning '" << *parts.begin()
                                  << "'";
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
    for (const std::string& part : parts) {
        EXPECT_NE(message.find(part), std::string::npos)
            << "message lacks '" << part << "': " << message;
    }
}

inline void write_text(const std::string& path, const std::string& text)
{
    std::ofstream out(path);
    out << text;
}

/// True when /usr/bin/python3 with numpy, scipy and h5py is available.
inline bool have_python_h5py()
{
    static const bool available =
        std::system(
            "/usr/bin/python3 -c 'import numpy, scipy.sparse, scipy.io, h5py' "
            ">/dev/null 2>&1") == 0;
    return available;
}

/// Runs a Python script (written to `dir`); fails the test on a non-zero exit.
inline void run_python(const TempDir& dir, const std::string& script)
{
    const std::string path = dir.file("script.py");
    write_text(path, script);
    const std::string log = dir.file("script.log");
    const int status = std::system(("/usr/bin/python3 " + path + " >" + log + " 2>&1").c_str());
    if (status != 0) {
        std::ifstream in(log);
        const std::string output((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
        FAIL() << "python script failed:\n" << output;
    }
}

#define RECON_REQUIRE_PYTHON()                                                                  \
    do {                                                                                        \
        if (!::recon::test::have_python_h5py()) GTEST_SKIP() << "python3 + h5py/scipy missing"; \
    } while (false)

}  // namespace recon::test

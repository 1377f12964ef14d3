#pragma once
// Runs the real `recon` binary (RECON_BINARY) as a child process with its
// output in files, with hard time limits so that no test can hang.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace recon::stream::testing {

inline std::string recon_binary()
{
    const char* path = std::getenv("RECON_BINARY");
    return path ? path : "recon";
}

inline std::string read_text(const std::filesystem::path& path)
{
    std::ifstream in{path};
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

struct ExitStatus {
    bool exited = false;     // exited normally (not killed, not timed out)
    int code = -1;
    bool timed_out = false;
    long max_rss_kb = 0;
};

/// One child process running `recon ARGS...`, stdout and stderr in files.
class ReconProcess {
public:
    ReconProcess(const std::vector<std::string>& args, const std::filesystem::path& dir)
        : out_{dir / "stdout.txt"}, err_{dir / "stderr.txt"}
    {
        std::vector<std::string> argv_text{recon_binary()};
        argv_text.insert(argv_text.end(), args.begin(), args.end());
        std::vector<char*> argv;
        for (auto& a : argv_text) argv.push_back(a.data());
        argv.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(&actions, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        if (rc != 0) pid_ = -1;
    }
    ~ReconProcess()
    {
        if (pid_ > 0 && !status_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    ReconProcess(const ReconProcess&) = delete;
    ReconProcess& operator=(const ReconProcess&) = delete;

    bool started() const { return pid_ > 0; }
    void signal(int sig) const
    {
        if (pid_ > 0 && !status_) ::kill(pid_, sig);
    }

    /// Waits up to `limit`; kills the child (and reports timed_out) after it.
    ExitStatus wait(std::chrono::milliseconds limit)
    {
        if (status_) return *status_;
        ExitStatus s;
        const auto until = std::chrono::steady_clock::now() + limit;
        int raw = 0;
        rusage usage{};
        while (true) {
            const pid_t got = ::wait4(pid_, &raw, WNOHANG, &usage);
            if (got == pid_) break;
            if (std::chrono::steady_clock::now() > until) {
                ::kill(pid_, SIGKILL);
                ::wait4(pid_, &raw, 0, &usage);
                s.timed_out = true;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds{10});
        }
        s.exited = !s.timed_out && WIFEXITED(raw);
        s.code = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
        s.max_rss_kb = usage.ru_maxrss;
        status_ = s;
        return s;
    }

    /// Whether the process is still running.
    bool running()
    {
        if (status_) return false;
        int raw = 0;
        rusage usage{};
        const pid_t got = ::wait4(pid_, &raw, WNOHANG, &usage);
        if (got != pid_) return true;
        status_ = ExitStatus{WIFEXITED(raw), WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, false, usage.ru_maxrss};
        return false;
    }

    std::string out() const { return read_text(out_); }
    std::string err() const { return read_text(err_); }

    /// Waits until stderr contains `text` (true) or `limit` passes (false).
    bool wait_for_err(const std::string& text, std::chrono::milliseconds limit)
    {
        const auto until = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < until) {
            if (err().find(text) != std::string::npos) return true;
            if (!running()) return err().find(text) != std::string::npos;
            std::this_thread::sleep_for(std::chrono::milliseconds{20});
        }
        return false;
    }

private:
    std::filesystem::path out_, err_;
    pid_t pid_ = -1;
    std::optional<ExitStatus> status_;
};

}  // namespace recon::stream::testing

// The implementation of control/alerting/alert_actions.h (the contract is there).
#include "control/alerting/alert_actions.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "http/client.h"

extern char** environ;

namespace pagoda::control {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

HookResult post_once(const std::string& url, const std::string& body, int64_t timeout_ms) {
    HookResult r;
    const auto t0 = Clock::now();
    auto parsed = http::parse_url(url);
    if (!parsed.ok()) return {false, parsed.error().message, 0};
    http::ClientOptions o;
    o.connect_timeout_s = double(timeout_ms) / 1000.0;
    o.read_timeout_s = double(timeout_ms) / 1000.0;
    auto client = http::Client::create(url, o);
    if (!client.ok()) return {false, client.error().message, since(t0)};
    http::ClientRequest req;
    req.path = "/";
    if (!parsed->base_path.empty()) req.path = "";
    req.body = body;
    auto resp = (*client)->fetch(req);
    r.seconds = since(t0);
    if (!resp.ok()) {
        r.detail = resp.error().message;
        return r;
    }
    r.ok = resp->status >= 200 && resp->status < 300;
    r.detail = fmt::format("HTTP {}", resp->status);
    return r;
}

// Runs `/bin/sh -c command` in its own process group with `input` on stdin.
HookResult run_command(const std::string& command, const std::string& input,
                       const std::map<std::string, std::string>& env, int64_t timeout_ms) {
    const auto t0 = Clock::now();
    int in[2];
    if (pipe2(in, O_CLOEXEC) != 0) return {false, "pipe failed", 0};
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
        close(in[0]);
        close(in[1]);
        return {false, "fork failed", 0};
    }
    if (pid == 0) {  // child: only async-signal-safe calls until exec
        setpgid(0, 0);
        dup2(in[0], 0);
        const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
        execve("/bin/sh", const_cast<char* const*>(argv), envp.data());
        _exit(127);
    }
    close(in[0]);
    // Write stdin without blocking forever on a hook that does not read it.
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    size_t off = 0;
    int status = 0;
    bool exited = false;
    const auto deadline = t0 + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < deadline) {
        if (in[1] >= 0 && off < input.size()) {
            const ssize_t n = write(in[1], input.data() + off, input.size() - off);
            if (n > 0) off += size_t(n);
            if (n < 0 && errno != EAGAIN) off = input.size();
        }
        if (in[1] >= 0 && off >= input.size()) {
            close(in[1]);
            in[1] = -1;
        }
        if (waitpid(pid, &status, WNOHANG) == pid) {
            exited = true;
            break;
        }
        // A hook is a child process: there is no fd to wait on for its exit (pidfd needs
        // Linux 5.3 and glibc 2.36), so poll it at 20 ms, bounded by the timeout.
        usleep(20'000);
    }
    if (in[1] >= 0) close(in[1]);
    HookResult r;
    if (!exited) {
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        r.detail = fmt::format("killed after {:.1f} s (--hook-timeout)", double(timeout_ms) / 1000);
    } else if (WIFEXITED(status)) {
        r.ok = WEXITSTATUS(status) == 0;
        r.detail = fmt::format("exit {}", WEXITSTATUS(status));
    } else {
        r.detail = fmt::format("signal {}", WTERMSIG(status));
    }
    r.seconds = since(t0);
    return r;
}

}  // namespace

HookResult run_hook(const std::string& hook, const nlohmann::json& payload,
                    const std::map<std::string, std::string>& env, int64_t timeout_ms) {
    if (hook.rfind("http://", 0) == 0 || hook.rfind("https://", 0) == 0) {
        return post_once(hook, payload.dump(), timeout_ms);
    }
    return run_command(hook, payload.dump() + "\n", env, timeout_ms);
}

HookResult post_json(const std::string& url, const nlohmann::json& payload, int attempts,
                     int64_t timeout_ms) {
    HookResult r;
    const std::string body = payload.dump();
    double backoff_s = 0.5;
    for (int i = 0; i < std::max(1, attempts); ++i) {
        if (i > 0) {
            std::this_thread::sleep_for(std::chrono::duration<double>(backoff_s));
            backoff_s *= 2;
        }
        r = post_once(url, body, timeout_ms);
        if (r.ok) break;
    }
    return r;
}

ActionWorker::ActionWorker(size_t capacity) : capacity_(capacity) {
    thread_ = std::thread([this] { loop(); });
}

ActionWorker::~ActionWorker() { stop(); }

size_t ActionWorker::stop() {
    size_t dropped = 0;
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        dropped = jobs_.size();
        jobs_.clear();
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return dropped;
}

bool ActionWorker::submit(std::function<void()> job) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_ || jobs_.size() >= capacity_) return false;
        jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
}

void ActionWorker::wait_idle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return jobs_.empty() && !busy_; });
}

void ActionWorker::loop() {
    for (;;) {
        std::function<void()> job;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
            if (stop_) break;
            job = std::move(jobs_.front());
            jobs_.pop_front();
            busy_ = true;
        }
        job();
        {
            std::lock_guard<std::mutex> lock(mu_);
            busy_ = false;
        }
        idle_cv_.notify_all();
    }
    idle_cv_.notify_all();
}

}  // namespace pagoda::control

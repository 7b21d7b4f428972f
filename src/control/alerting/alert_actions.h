#pragma once
// What alert actions do outside the process: hooks (a command run with the alert as JSON
// on stdin and as PAGODA_ALERT_* environment variables, or an HTTP POST when the hook is a
// URL), each bounded in time with its exit status or HTTP status recorded; the alert
// webhook (a JSON POST with bounded retries and backoff); and ActionWorker, the one thread
// that runs them so that no alert ever blocks serving. Thread-safe.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace pagoda::control {

struct HookResult {
    bool ok = false;
    std::string detail;  // "exit 0", "exit 3", "killed after 10 s", "HTTP 200", "connect: ..."
    double seconds = 0;
};

// `hook`: a shell command, or an http:// URL. `env`: extra environment variables.
HookResult run_hook(const std::string& hook, const nlohmann::json& payload,
                    const std::map<std::string, std::string>& env, int64_t timeout_ms);

// POSTs `payload` to `url`, trying `attempts` times with backoff 0.5 s, 1 s, 2 s ...
// between them; the result of the last try.
HookResult post_json(const std::string& url, const nlohmann::json& payload, int attempts,
                     int64_t timeout_ms);

// A single worker thread with a bounded queue; submit() refuses (returns false) when full.
class ActionWorker {
  public:
    explicit ActionWorker(size_t capacity = 256);
    ~ActionWorker();  // stop()
    bool submit(std::function<void()> job);
    void wait_idle();  // tests: until the queue is empty and no job runs
    // Finishes the job in hand and drops the rest; returns how many were dropped (the
    // owner audits them). Idempotent.
    size_t stop();

  private:
    void loop();
    size_t capacity_;
    std::mutex mu_;
    std::condition_variable cv_, idle_cv_;
    std::deque<std::function<void()>> jobs_;  // guarded by mu_
    bool stop_ = false, busy_ = false;        // guarded by mu_
    std::thread thread_;
};

}  // namespace pagoda::control

#include "apps/fleet_supervisor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/log.h"

namespace pagoda::app {

Supervisor::Supervisor(const FleetFile& f, std::string log_dir, std::string state_root, Audit audit)
    : f_(f),
      log_dir_(std::move(log_dir)),
      state_root_(std::move(state_root)),
      audit_(std::move(audit)) {
    for (const auto& p : f.router.pools) {
        if (p.profile.empty()) continue;
        int slot = 0;
        for (const auto& url : p.backends) {
            Replica r;
            r.pool = p.name;
            r.profile = p.profile;
            r.url = url;
            r.port = std::stoi(url.substr(url.rfind(':') + 1));
            r.wanted = p.start == "up" && (!p.sized() || slot < p.replicas);
            ++slot;
            replicas_.push_back(r);
        }
    }
}

double Supervisor::now_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void Supervisor::spawn(Replica& r) {
    std::vector<std::string> args = {"pagoda",    "serve",  "--host",
                                     "127.0.0.1", "--port", std::to_string(r.port)};
    const auto& prof = f_.profiles.at(r.profile).args;
    args.insert(args.end(), prof.begin(), prof.end());
    auto names = [&prof](const char* flag) {
        return std::any_of(prof.begin(), prof.end(), [flag](const std::string& a) {
            return a == flag || a.starts_with(std::string(flag) + "=");
        });
    };
    if (!names("--state-dir")) {
        args.insert(args.end(),
                    {"--state-dir", fmt::format("{}/replicas/{}-{}", state_root_, r.pool, r.port)});
    }
    if (!names("--weight-cache-dir") && !names("--no-weight-cache")) {
        args.insert(args.end(), {"--weight-cache-dir", state_root_ + "/weight-cache"});
    }
    const std::string log = fmt::format("{}/{}-{}.log", log_dir_, r.pool, r.port);
    const pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);  // a fleet killed hard takes its replicas along
        sigset_t none;
        sigemptyset(&none);
        pthread_sigmask(SIG_SETMASK, &none, nullptr);
        const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv("/proc/self/exe", argv.data());
        _exit(127);
    }
    if (pid < 0) {
        log_warn("fleet_spawn pool={} port={} error=\"fork failed\"", r.pool, r.port);
        r.next_start_s = now_s() + r.backoff_s;
        return;
    }
    r.pid = pid;
    r.started_s = now_s();
    log_info("fleet_replica_start pool={} profile={} port={} pid={} log={}", r.pool, r.profile,
             r.port, pid, log);
}

void Supervisor::start() {
    std::lock_guard lock(mu_);
    for (auto& r : replicas_) {
        if (r.wanted) spawn(r);
    }
}

void Supervisor::reaped(Replica& r, int status) {
    const double ran = now_s() - r.started_s;
    r.pid = 0;
    if (r.leaving) {  // a scale-down finished: drained and gone, not restarted
        r.leaving = false;
        const double sent = r.term_sent_s;
        r.term_sent_s = -1;
        const nlohmann::json d = {{"pool", r.pool},
                                  {"port", r.port},
                                  {"drain_s", now_s() - sent},
                                  {"exit", WIFEXITED(status) ? "exit" : "signal"}};
        log_info("fleet_replica_drained pool={} port={} drain_s={:.1f}", r.pool, r.port,
                 now_s() - sent);
        if (audit_) audit_("fleet_replica_drained", d);
        return;
    }
    r.last_exit = WIFEXITED(status)     ? fmt::format("exit {}", WEXITSTATUS(status))
                  : WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status))
                                        : "gone";
    if (ran > 30) {
        r.backoff_s = 1;
        r.quick_failures = 0;
    } else {
        ++r.quick_failures;
    }
    r.next_start_s = now_s() + r.backoff_s;
    ++r.restarts;
    nlohmann::json d = {{"pool", r.pool},
                        {"port", r.port},
                        {"exit", r.last_exit},
                        {"ran_s", ran},
                        {"restart_in_s", r.backoff_s},
                        {"restarts", r.restarts}};
    log_warn("fleet_replica_exit pool={} port={} exit=\"{}\" ran_s={:.1f} restart_in_s={}", r.pool,
             r.port, r.last_exit, ran, r.backoff_s);
    if (r.quick_failures >= 3) {
        log_error(
            "fleet_replica_failing pool={} profile={} port={}: it exits within 30 s of "
            "each start; see {}/{}-{}.log",
            r.pool, r.profile, r.port, log_dir_, r.pool, r.port);
    }
    if (audit_) audit_("fleet_replica_exit", d);
    r.backoff_s = std::min(30.0, r.backoff_s * 2);
}

void Supervisor::step() {
    std::lock_guard lock(mu_);
    int status = 0;
    pid_t pid = 0;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (auto& r : replicas_) {
            if (r.pid == pid) reaped(r, status);
        }
    }
    const double now = now_s();
    for (auto& r : replicas_) {
        if (r.wanted && r.pid == 0 && now >= r.next_start_s) spawn(r);
        if (r.leaving && r.pid > 0 && r.term_sent_s >= 0 &&
            now - r.term_sent_s > f_.drain_timeout_s) {
            log_warn("fleet_replica_drain_timeout pool={} port={}: SIGKILL after {} s", r.pool,
                     r.port, f_.drain_timeout_s);
            kill(r.pid, SIGKILL);
        }
    }
}

void Supervisor::set_pool_size(const std::string& pool, int n) {
    std::lock_guard lock(mu_);
    int kept = 0;
    for (auto& r : replicas_) {
        if (r.pool != pool) continue;
        if (kept < n && !r.leaving) {
            r.wanted = true;
            ++kept;
        } else if (r.wanted) {
            r.wanted = false;
            r.leaving = r.pid > 0;
        }
    }
}

int Supervisor::pool_size(const std::string& pool) const {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const auto& r : replicas_) n += r.pool == pool && r.wanted;
    return n;
}

std::vector<std::string> Supervisor::wanted_urls(const std::string& pool) const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& r : replicas_) {
        if (r.pool == pool && r.wanted) out.push_back(r.url);
    }
    return out;
}

void Supervisor::retire() {
    std::lock_guard lock(mu_);
    for (auto& r : replicas_) {
        if (r.leaving && r.pid > 0 && r.term_sent_s < 0) {
            r.term_sent_s = now_s();
            kill(r.pid, SIGTERM);
            log_info("fleet_replica_retire pool={} port={} pid={}", r.pool, r.port, r.pid);
        }
    }
}

void Supervisor::want_pool(const std::string& pool) {
    std::lock_guard lock(mu_);
    for (auto& r : replicas_) {
        if (r.pool == pool) r.wanted = true;
    }
}

void Supervisor::stop() {
    std::unique_lock lock(mu_);
    for (auto& r : replicas_) {
        r.wanted = false;
        if (r.pid > 0) kill(r.pid, SIGTERM);
    }
    const double deadline = now_s() + f_.drain_timeout_s + 5;
    for (;;) {
        int status = 0;
        pid_t pid = 0;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            for (auto& r : replicas_) {
                if (r.pid == pid) r.pid = 0;
            }
        }
        bool any = false;
        for (const auto& r : replicas_) any = any || r.pid > 0;
        if (!any) return;
        if (now_s() > deadline) {
            for (auto& r : replicas_) {
                if (r.pid > 0) kill(r.pid, SIGKILL);
            }
        }
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        lock.lock();
    }
}

nlohmann::json Supervisor::status() const {
    std::lock_guard lock(mu_);
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : replicas_) {
        out.push_back({{"pool", r.pool},
                       {"profile", r.profile},
                       {"url", r.url},
                       {"pid", r.pid},
                       {"wanted", r.wanted},
                       {"leaving", r.leaving},
                       {"restarts", r.restarts},
                       {"last_exit", r.last_exit}});
    }
    return out;
}

}  // namespace pagoda::app

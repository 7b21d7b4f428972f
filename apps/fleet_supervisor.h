#pragma once
// The process supervisor of `pagoda fleet up`: one `pagoda serve` child per replica of each
// pool with a profile, restarted with backoff when it dies (1 s doubling to 30 s; reset
// after 30 s of running), stopped with SIGTERM (the replica drains) and SIGKILL after the
// drain timeout. Pools with start = "prewarm" start when a schedule pre-warms them.

#include <sys/types.h>

#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/fleet_file.h"

namespace pagoda::app {

class Supervisor {
  public:
    using Audit = std::function<void(const std::string& kind, const nlohmann::json& detail)>;
    // Logs go to `log_dir`; each replica's control state to <state_root>/replicas/
    // <pool>-<port> (its own pagoda.db) and the packed weights to <state_root>/weight-cache
    // (shared: keyed and written atomically), unless its profile names them.
    Supervisor(const FleetFile& f, std::string log_dir, std::string state_root, Audit audit);
    // Starts the replicas of pools that start with the fleet.
    void start();
    // One pass: reaps exited children, schedules restarts, starts what is due. Main thread.
    void step();
    // Marks a pool's replicas wanted (started on the next step). Any thread.
    void want_pool(const std::string& pool);
    // A sized pool runs `n` replicas: the first n free slots are wanted (started on the next
    // step); a running replica beyond them is marked leaving. The caller takes the leaving
    // ones out of routing (wanted_urls), then retire() sends them SIGTERM: each drains its
    // streams and exits; SIGKILL after the drain timeout (the router resumes what was cut).
    void set_pool_size(const std::string& pool, int n);
    int pool_size(const std::string& pool) const;  // wanted replicas
    std::vector<std::string> wanted_urls(const std::string& pool) const;
    void retire();
    // SIGTERM to every replica, then SIGKILL after the drain timeout; waits for all.
    void stop();
    nlohmann::json status() const;

  private:
    struct Replica {
        std::string pool, profile, url;
        int port = 0;
        bool wanted = false;
        bool leaving = false;     // out of routing, draining; not restarted
        double term_sent_s = -1;  // when retire() sent SIGTERM
        pid_t pid = 0;
        int restarts = 0, quick_failures = 0;
        double backoff_s = 1, next_start_s = 0, started_s = 0;
        std::string last_exit;
    };
    void spawn(Replica& r);
    void reaped(Replica& r, int status);
    double now_s() const;

    const FleetFile& f_;
    const std::string log_dir_, state_root_;
    Audit audit_;
    mutable std::mutex mu_;
    std::vector<Replica> replicas_;
};

}  // namespace pagoda::app

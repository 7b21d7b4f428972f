#pragma once
// RouterConfig: the pools of backends with their roles, and the balancing, health, retry
// and rollout policies of `pagoda router`. Built from flags (--backend: one primary pool) or
// a TOML file (`pagoda router --config ROUTER.toml`; a fleet file embeds the same [router]
// table). Errors name FILE:LINE:KEY and what is allowed.

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace toml {
inline namespace v3 {
class table;
}
}  // namespace toml

namespace pagoda::router {

// primary: takes traffic by weight. standby: takes it when no primary backend is available
// (down, ejected, shedding or saturated). dr: disaster recovery, takes everything when the
// severe hook says so (POST /admin/dr) or when no other pool is available.
enum class PoolRole { kPrimary, kStandby, kDr };
const char* role_name(PoolRole r);
Result<PoolRole> parse_role(std::string_view s);

struct PoolConfig {
    std::string name;
    PoolRole role = PoolRole::kPrimary;
    std::vector<std::string> backends;  // base URLs, "http://host:port"
    std::string backends_file;          // one URL per line (# comments), re-read on change
    std::string dns;  // "http://name:port": one backend per address, re-resolved (headless Service)
    double weight = -1;  // share among primary pools, in percent; -1: equal shares
    // Fleet files only: the `pagoda serve` profile and replica count of the pool, and
    // whether its replicas start with the fleet ("up") or when a schedule pre-warms it.
    std::string profile;
    int replicas = 0;
    std::string start = "up";
    // Fleet files only: pool sizing (control/sizing/pool_sizer.h) when max_replicas > 0:
    // the fleet runs between min_replicas and max_replicas, sized on the live signals.
    struct Sizing {
        int min_replicas = 1, max_replicas = 0;
        double replica_rps = 0;  // requests/s one replica holds within the SLO; 0 = live only
        double target_waiting = 4;
        double ttft_slo_ms = 0;
        double cold_start_s = 60;
        double up_cooldown_s = 30, down_cooldown_s = 120, down_stabilisation_s = 300;
        double idle_to_zero_s = 600;
    } sizing;
    bool sized() const { return sizing.max_replicas > 0; }
};

struct RouterConfig {
    std::string host = "127.0.0.1";
    int port = 9000;
    std::vector<PoolConfig> pools;
    std::vector<std::string> api_keys;        // empty: no key needed
    std::vector<std::string> admin_api_keys;  // empty: admin routes on loopback only
    bool admin_read_open = false;  // GET /admin/* without the admin key (the console's view)
    bool access_log = true;        // one `access` line per proxied request
    // Sent as a bearer token with the router's own admin calls to backends (pre-warm,
    // Alertmanager alerts dispatched to the replica they name): their --admin-api-key.
    std::string backend_admin_key;

    // Balancing.
    std::string session_header = "x-session-id";  // stickiness: same value, same backend
    int affinity_prefix_chars = 512;    // the prompt's first characters hashed; 0 = no affinity
    double affinity_load_factor = 1.5;  // affinity holds while load <= factor x mean + 1
    double kv_usage_weight = 4;         // load = outstanding + waiting + weight x KV use

    // Health and failure handling.
    double health_interval_s = 1;
    double health_timeout_s = 2;
    double connect_timeout_s = 2;
    double read_timeout_s = 60;    // longest silence from a backend before it counts as hung
    int eject_after_failures = 3;  // consecutive failures that eject a backend
    double eject_base_s = 1, eject_max_s = 30;  // ejection time doubles per ejection
    int max_retries = 2;            // other backends tried before the first byte reaches the client
    int max_resumes = 3;            // resumptions of one stream after a backend failed mid-stream
    int64_t max_outstanding = 256;  // per backend; more is saturated
    double max_waiting = 0;  // a backend's num_requests_waiting above this is saturated; 0 = off
                             // (a Pagoda replica bounds its own queue and answers 429)
    int retry_after_s = 1;   // Retry-After of the router's own 429 and 503
    // The hold queue: a request that finds no healthy backend in any pool (a pool scaled to
    // zero and waking) waits up to hold_timeout_s for one, at most hold_max_requests at once,
    // then gets 503 with Retry-After. 0: answer 503 at once.
    double hold_timeout_s = 0;
    int hold_max_requests = 256;
    // Largest request body the router accepts (413 above, before any backend sees it): at
    // most the backends' own limit (`pagoda serve --max-request-body`, 8 MiB), so a
    // client's oversized body is the client's error, never a backend failure.
    double max_request_body = 8 << 20;

    // Rollouts: the breaker compares the target arm's P99 with the source arm's.
    double breaker_threshold = 0.20;   // pause when target P99 > source P99 x (1 + this)
    double breaker_window_s = 30;      // each comparison covers this much recent traffic
    int breaker_min_samples = 20;      // per arm and length class before a decision
    int breaker_rollback_windows = 2;  // consecutive windows above the threshold -> rollback
    int long_prompt_tokens = 1024;     // length classes: short below, long at or above

    // Canaries: the judge (judges.h) runs every breaker_window_s on all samples so far.
    double canary_tolerance = 0.10;
    int canary_min_samples = 50, canary_max_samples = 1000;

    // [schedule]: "HH:MM ACTION ARGS" lines in a time zone (schedule.h).
    std::string schedule_time_zone = "UTC";
    std::vector<std::string> schedule;

    std::string state_dir;  // audit log and verdicts (the state db); empty: the default
};

// Reads a [schedule] table (time_zone, entries) into `c` and checks it, including that
// every pool it names is a primary pool of `c`.
Status read_schedule_table(const toml::table& t, std::string_view file, RouterConfig& c);

// Checks the whole configuration: at least one pool with a backend source, unique names,
// at least one primary pool, weights in [0, 100] that add up to 100 when all are given.
Status validate(const RouterConfig& c);

// Reads the keys of a [router] table (and its [[router.pools]]) into `c`. `file` names the
// source in errors.
// `check` false: the caller fills the backends (a fleet) and validates afterwards.
Status read_router_table(const toml::table& t, std::string_view file, RouterConfig& c,
                         bool check = true);
Result<RouterConfig> load_router_file(const std::string& path);

}  // namespace pagoda::router

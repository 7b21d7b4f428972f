// FleetScaler: the router's signals to PoolSizer decisions, applied drain-safe (fleet_scaler.h).
#include "apps/fleet_scaler.h"

#include <algorithm>
#include <cmath>

#include "base/log.h"

namespace pagoda::app {

using json = nlohmann::json;

namespace {

control::PoolSizingConfig sizing_of(const router::PoolConfig& p) {
    control::PoolSizingConfig c;
    c.min_replicas = p.sizing.min_replicas;
    c.max_replicas = p.sizing.max_replicas;
    c.replica_rps = p.sizing.replica_rps;
    c.target_waiting = p.sizing.target_waiting;
    c.ttft_slo_s = p.sizing.ttft_slo_ms / 1000;
    c.cold_start_s = p.sizing.cold_start_s;
    c.up_cooldown_s = p.sizing.up_cooldown_s;
    c.down_cooldown_s = p.sizing.down_cooldown_s;
    c.down_stabilisation_s = p.sizing.down_stabilisation_s;
    c.idle_to_zero_s = p.sizing.idle_to_zero_s;
    return c;
}

}  // namespace

FleetScaler::FleetScaler(const FleetFile& f, Supervisor& sup, router::Router& r, bool dry_run)
    : sup_(sup), r_(r), dry_run_(dry_run) {
    for (const auto& p : f.router.pools) {
        if (!p.sized() || p.profile.empty()) continue;
        pools_.emplace(p.name, PoolState{p.name, control::PoolSizer(sizing_of(p)), false, r.now_s(),
                                         0, json::object()});
    }
}

void FleetScaler::start() {
    std::lock_guard lock(mu_);
    for (auto& [name, p] : pools_) r_.set_pool_members(name, sup_.wanted_urls(name));
}

control::PoolSignals FleetScaler::signals(PoolState& p, double now) const {
    control::PoolSignals s;
    s.now_s = now;
    s.current = sup_.pool_size(p.name);
    // The last minute, but no longer than the idle time that takes the pool to zero.
    const double window =
        std::clamp(std::min(now - p.started_s, p.sizer.config().idle_to_zero_s), 1.0, 60.0);
    std::vector<router::ArmSample> done = r_.arm_samples(p.name, now - window);
    s.rate_rps = double(done.size()) / window;
    std::vector<double> ttft;
    p.last_request_s = std::max(p.last_request_s, p.started_s);
    for (const auto& a : done) {  // the window (>= 1 s) covers every tick's new requests
        if (a.ttft_s >= 0) ttft.push_back(a.ttft_s);
        p.last_request_s = std::max(p.last_request_s, a.t_s);
    }
    s.since_request_s = now - p.last_request_s;
    if (!ttft.empty()) {
        std::sort(ttft.begin(), ttft.end());
        s.p99_ttft_s = ttft[std::min(ttft.size() - 1, size_t(0.99 * double(ttft.size())))];
    }
    s.waiting = double(r_.held());
    const json pools = r_.pools_json();
    for (const auto& pj : pools["pools"]) {
        if (pj["name"] != p.name) continue;
        for (const auto& b : pj["backends"]) s.waiting += b.value("waiting", 0.0);
    }
    // A request that found no replica (held, or refused after the hold) is demand too.
    const double unserved = r_.last_unserved_s();
    if (unserved >= 0 && now - unserved < 2) s.waiting = std::max(s.waiting, 1.0);
    if (s.waiting > 0) s.since_request_s = 0;
    return s;
}

// Supervisor first (which slots), then routing (the leaving ones out), then SIGTERM.
void FleetScaler::resize(PoolState& p, int n, const std::string& reason, const json& inputs) {
    const int from = sup_.pool_size(p.name);
    json d = {{"pool", p.name},   {"from", from},     {"to", n},
              {"reason", reason}, {"inputs", inputs}, {"dry_run", dry_run_}};
    log_info("fleet_pool_sized pool={} from={} to={} reason={} dry_run={}", p.name, from, n, reason,
             dry_run_);
    r_.audit("pool_sized", d);
    p.last = d;
    if (dry_run_) return;
    p.check_to = n;
    p.check_from = from;
    p.check_since = r_.now_s();
    sup_.set_pool_size(p.name, n);
    r_.set_pool_members(p.name, sup_.wanted_urls(p.name));
    sup_.retire();
}

// Did the last change take effect? Up: `to` backends routed and ready; down: no more than
// `to` routed. Audited either way; a failure is logged as a warning.
void FleetScaler::check_effect(PoolState& p, double now) {
    if (p.check_to < 0) return;
    int routed = 0, ready = 0;
    const json pools = r_.pools_json();  // (a temporary's member would dangle in the loop)
    for (const auto& pj : pools["pools"]) {
        if (pj["name"] != p.name) continue;
        for (const auto& b : pj["backends"]) {
            ++routed;
            ready += b.value("ready", false) ? 1 : 0;
        }
    }
    const bool up = p.check_to >= p.check_from;
    const bool done = up ? ready >= p.check_to : routed <= p.check_to;
    const double limit = std::max(5.0, 3 * p.sizer.config().cold_start_s);
    if (!done && now - p.check_since < limit) return;
    const json d = {{"pool", p.name},
                    {"from", p.check_from},
                    {"to", p.check_to},
                    {"routed", routed},
                    {"ready", ready},
                    {"seconds", now - p.check_since},
                    {"outcome", done ? "ok" : "failed"}};
    if (!done) {
        log_warn("fleet_pool_sized_failed pool={} to={} ready={} after_s={:.0f}", p.name,
                 p.check_to, ready, now - p.check_since);
    }
    r_.audit("pool_sized_checked", d);
    p.check_to = -1;
}

void FleetScaler::tick() {
    std::lock_guard lock(mu_);
    const double now = r_.now_s();
    for (auto& [name, p] : pools_) {
        check_effect(p, now);
        // Read while paused too: the idle time must count from the last request, not from
        // the last automatic tick, when the pool is handed back.
        const control::PoolSignals s = signals(p, now);
        if (p.paused) continue;
        const control::SizingDecision d = p.sizer.decide(s);
        if (!d.changed()) continue;
        resize(p, d.desired, d.reason, d.inputs);
        p.sizer.applied(d, now);
    }
}

json FleetScaler::status() const {
    std::lock_guard lock(mu_);
    json out = json::object();
    for (const auto& [name, p] : pools_) {
        out[name] = {{"replicas", sup_.pool_size(name)},
                     {"min_replicas", p.sizer.config().min_replicas},
                     {"max_replicas", p.sizer.config().max_replicas},
                     {"automatic", !p.paused},
                     {"dry_run", dry_run_},
                     {"last_decision", p.last}};
    }
    return out;
}

std::pair<int, json> FleetScaler::admin(const std::string& method, const json& body) {
    if (method == "GET") return {200, status()};
    if (method != "POST") return {405, {{"error", "GET or POST"}}};
    std::lock_guard lock(mu_);
    const std::string pool = body.value("pool", "");
    auto it = pools_.find(pool);
    if (it == pools_.end()) {
        std::string names;
        for (const auto& [n, _] : pools_) names += (names.empty() ? "" : ", ") + n;
        return {400,
                {{"error", fmt::format("'{}' is not a sized pool (sized pools: {})", pool,
                                       names.empty() ? "none" : names)}}};
    }
    PoolState& p = it->second;
    if (body.value("auto", false)) {
        p.paused = false;
        r_.audit("pool_sizing_resumed", {{"pool", pool}});
        return {200, {{"pool", pool}, {"automatic", true}}};
    }
    if (!body.contains("replicas") || !body["replicas"].is_number_integer()) {
        return {400, {{"error", "give \"replicas\": N or \"auto\": true"}}};
    }
    const int n = body["replicas"].get<int>();
    const auto& c = p.sizer.config();
    if (n < 0 || n > c.max_replicas) {
        return {400,
                {{"error", fmt::format("replicas {} is outside [0, {}] (max_replicas)", n,
                                       c.max_replicas)}}};
    }
    p.paused = true;  // a person decided: the sizer waits for --auto
    resize(p, n, "manual", {{"requested", n}});
    return {200, {{"pool", pool}, {"replicas", n}, {"automatic", false}}};
}

}  // namespace pagoda::app

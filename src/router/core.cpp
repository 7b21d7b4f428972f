// Core: pools, weights, backend choice and per-arm samples (router_core.h).
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "base/log.h"
#include "router/router_core.h"

namespace pagoda::router {

using json = nlohmann::json;

Core::Core(RouterConfig c, RouterHooks h) : cfg(std::move(c)), hooks(std::move(h)) {
    int primaries = 0;
    for (const auto& p : cfg.pools) primaries += p.role == PoolRole::kPrimary ? 1 : 0;
    for (const auto& p : cfg.pools) {
        Pool pool;
        pool.cfg = p;
        for (const auto& url : p.backends) pool.backends.push_back(make_backend(p.name, url));
        if (p.role == PoolRole::kPrimary) {
            weights_[p.name] = p.weight >= 0 ? p.weight : 100.0 / primaries;
        }
        pools_.push_back(std::move(pool));
    }
}

double Core::now_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void Core::audit(const std::string& kind, const json& detail) const {
    if (hooks.audit) hooks.audit(kind, detail);
}

std::shared_ptr<Backend> Core::make_backend(const std::string& pool, const std::string& url) const {
    http::ClientOptions o;
    o.user_agent = "pagoda-router";
    o.connect_timeout_s = cfg.connect_timeout_s;
    o.read_timeout_s = cfg.read_timeout_s;
    auto client = http::Client::create(url, o);
    o.read_timeout_s = cfg.health_timeout_s;
    o.connect_timeout_s = std::min(cfg.connect_timeout_s, cfg.health_timeout_s);
    auto health = http::Client::create(url, o);
    // The URLs were validated with the configuration.
    return std::make_shared<Backend>(pool, url, std::move(*client), std::move(*health));
}

Core::Picked Core::pick(const RouteKey& key, const std::vector<const Backend*>& exclude) const {
    std::vector<PoolView> views;
    std::vector<std::vector<std::shared_ptr<Backend>>> members;
    bool dr = false;
    {
        std::lock_guard lock(mu_);
        dr = dr_forced_;
        const double now = now_s();
        for (const auto& p : pools_) {
            PoolView v;
            v.name = p.cfg.name;
            v.role = p.cfg.role;
            auto w = weights_.find(p.cfg.name);
            v.weight = w == weights_.end() ? 0 : w->second;
            for (const auto& b : p.backends) {
                Candidate c = b->candidate(now, cfg);
                c.excluded = std::find(exclude.begin(), exclude.end(), b.get()) != exclude.end();
                v.backends.push_back(c);
            }
            views.push_back(std::move(v));
            members.push_back(p.backends);
        }
    }
    Choice ch = choose(views, key, dr, cfg.affinity_load_factor, cfg.kv_usage_weight);
    Picked out;
    out.saturated = ch.saturated;
    out.reason = ch.reason;
    if (ch.pool >= 0) out.backend = members[size_t(ch.pool)][size_t(ch.backend)];
    return out;
}

bool Core::hold(std::function<void(bool expired)> retry, double deadline_s) {
    std::lock_guard lock(held_mu_);
    if (int64_t(held_.size()) >= cfg.hold_max_requests) return false;
    held_.emplace_back(deadline_s, std::move(retry));
    return true;
}

void Core::drop_retired() {
    std::vector<std::shared_ptr<Backend>> drop;
    {
        std::lock_guard lock(mu_);
        for (auto it = retired_.begin(); it != retired_.end();) {
            if (it->use_count() == 1) {
                drop.push_back(std::move(*it));
                it = retired_.erase(it);
            } else {
                ++it;
            }
        }
    }
}  // `drop` goes here, on the calling (health) thread

int64_t Core::held() const {
    std::lock_guard lock(held_mu_);
    return int64_t(held_.size());
}

void Core::release_held() {
    std::deque<std::pair<double, std::function<void(bool)>>> due;
    {
        std::lock_guard lock(held_mu_);
        if (held_.empty()) return;
        const bool ready = any_ready();
        const double now = now_s();
        for (auto it = held_.begin(); it != held_.end();) {
            if (ready || now >= it->first || stopping.load()) {
                due.push_back(std::move(*it));
                it = held_.erase(it);
            } else {
                ++it;
            }
        }
    }
    const double now = now_s();
    for (auto& [deadline, retry] : due) retry(now >= deadline || stopping.load());
}

bool Core::any_ready() const {
    std::lock_guard lock(mu_);
    const double now = now_s();
    for (const auto& p : pools_) {
        for (const auto& b : p.backends) {
            if (b->candidate(now, cfg).healthy) return true;
        }
    }
    return false;
}

std::vector<std::shared_ptr<Backend>> Core::backends_of(const std::string& pool) const {
    std::lock_guard lock(mu_);
    for (const auto& p : pools_) {
        if (p.cfg.name == pool) return p.backends;
    }
    return {};
}

std::vector<std::shared_ptr<Backend>> Core::all_backends() const {
    std::lock_guard lock(mu_);
    std::vector<std::shared_ptr<Backend>> out;
    for (const auto& p : pools_) out.insert(out.end(), p.backends.begin(), p.backends.end());
    return out;
}

std::vector<PoolConfig> Core::pool_configs() const {
    std::lock_guard lock(mu_);
    std::vector<PoolConfig> out;
    for (const auto& p : pools_) out.push_back(p.cfg);
    return out;
}

std::string Core::source_sig(const std::string& pool) const {
    std::lock_guard lock(mu_);
    for (const auto& p : pools_) {
        if (p.cfg.name == pool) return p.source_sig;
    }
    return {};
}

// Discovery: the pool's members become the static backends plus `urls`.
void Core::set_members(const std::string& pool, const std::vector<std::string>& urls,
                       const std::string& sig) {
    std::lock_guard lock(mu_);
    for (auto& p : pools_) {
        if (p.cfg.name != pool) continue;
        // A sized pool's members are what the fleet says; other pools keep their static
        // backends and add the discovered ones.
        std::set<std::string> want(urls.begin(), urls.end());
        if (!p.cfg.sized()) want.insert(p.cfg.backends.begin(), p.cfg.backends.end());
        std::vector<std::shared_ptr<Backend>> next;
        std::set<std::string> have;
        for (auto& b : p.backends) {
            if (want.count(b->url()) != 0) {
                next.push_back(b);
                have.insert(b->url());
            } else {
                retired_.push_back(b);
            }
        }
        for (const auto& u : want) {
            if (have.count(u) == 0) next.push_back(make_backend(pool, u));
        }
        if (next.size() != p.backends.size() || have.size() != p.backends.size()) {
            log_info("router_pool_members pool={} backends={}", pool, next.size());
            audit("router_pool_members", {{"pool", pool}, {"backends", json(want)}});
        }
        p.backends = std::move(next);
        p.source_sig = sig;
    }
}

Status Core::set_weights(const std::map<std::string, double>& w, const std::string& reason) {
    double sum = 0;
    std::lock_guard lock(mu_);
    for (const auto& [pool_name, v] : w) {
        const std::string& name = pool_name;  // (clang 14 cannot capture a binding)
        auto it = std::find_if(pools_.begin(), pools_.end(),
                               [&](const Pool& p) { return p.cfg.name == name; });
        if (it == pools_.end()) {
            return make_error(ErrorCode::kInvalidArgument, "no pool named '{}'", name);
        }
        if (it->cfg.role != PoolRole::kPrimary) {
            return make_error(ErrorCode::kInvalidArgument,
                              "pool '{}' is {}: only primary pools take a weight", name,
                              role_name(it->cfg.role));
        }
        if (!(v >= 0 && v <= 100)) {
            return make_error(ErrorCode::kInvalidArgument,
                              "weight {} of pool '{}' is outside [0, 100]", v, name);
        }
        sum += v;
    }
    if (std::abs(sum - 100) > 1e-6) {
        return make_error(ErrorCode::kInvalidArgument, "weights add up to {}, not 100", sum);
    }
    const json before = weights_;
    for (auto& [name, v] : weights_) {
        auto it = w.find(name);
        v = it == w.end() ? 0 : it->second;
    }
    log_info("router_weights weights={} reason=\"{}\"", json(weights_).dump(), reason);
    audit("router_weights", {{"before", before}, {"after", weights_}, {"reason", reason}});
    return ok_status();
}

std::map<std::string, double> Core::weights() const {
    std::lock_guard lock(mu_);
    return weights_;
}

void Core::set_dr(bool on, const std::string& reason) {
    {
        std::lock_guard lock(mu_);
        if (dr_forced_ == on) return;
        dr_forced_ = on;
    }
    log_warn("router_dr active={} reason=\"{}\"", on, reason);
    audit("router_dr", {{"active", on}, {"reason", reason}});
}

bool Core::dr_forced() const {
    std::lock_guard lock(mu_);
    return dr_forced_;
}

void Core::record_arm(const std::string& pool, const ArmSample& s) {
    std::lock_guard lock(mu_);
    auto& q = arms_[pool];
    q.push_back(s);
    const double keep = std::max(600.0, cfg.breaker_window_s * 4);
    while (!q.empty() && q.front().t_s < s.t_s - keep) q.pop_front();
    while (q.size() > 200000) q.pop_front();
}

std::vector<ArmSample> Core::arm_samples(const std::string& pool, double since_s) const {
    std::lock_guard lock(mu_);
    std::vector<ArmSample> out;
    auto it = arms_.find(pool);
    if (it == arms_.end()) return out;
    for (const auto& s : it->second) {
        if (s.t_s >= since_s) out.push_back(s);
    }
    return out;
}

json Core::pools_json() const {
    std::lock_guard lock(mu_);
    const double now = now_s();
    json pools = json::array();
    for (const auto& p : pools_) {
        json bs = json::array();
        for (const auto& b : p.backends) {
            const HealthState h = b->health();
            bs.push_back({{"url", b->url()},
                          {"up", h.up},
                          {"ready", h.ready},
                          {"shedding", h.shedding},
                          {"ejected", b->ejected(now)},
                          {"pagoda", h.pagoda},
                          {"outstanding", b->outstanding.load()},
                          {"waiting", h.waiting},
                          {"kv_usage", h.kv_usage},
                          {"detail", h.detail}});
        }
        auto w = weights_.find(p.cfg.name);
        pools.push_back({{"name", p.cfg.name},
                         {"role", role_name(p.cfg.role)},
                         {"weight", w == weights_.end() ? json(nullptr) : json(w->second)},
                         {"backends", bs}});
    }
    return {{"pools", pools}, {"dr_forced", dr_forced_}};
}

std::string Core::metrics_text() const {
    metrics::TextWriter w;
    const json pj = pools_json();
    std::vector<std::string> names;
    for (const auto& p : pj["pools"]) names.push_back(p["name"].get<std::string>());
    metrics.write(w, names);
    w.family("pagoda_router_held_requests", "gauge",
             "Requests waiting in the hold queue for a backend (a pool waking from zero)");
    w.sample("pagoda_router_held_requests", {}, double(held()));
    w.family("pagoda_router_traffic_weight", "gauge",
             "Share of traffic (percent) a primary pool takes; rollouts and canaries move it");
    for (const auto& p : pj["pools"]) {
        if (p["weight"].is_number()) {
            w.sample("pagoda_router_traffic_weight", {{"pool", p["name"]}},
                     p["weight"].get<double>());
        }
    }
    const double now = now_s();
    const auto backends = all_backends();
    auto each = [&](const char* name, const char* type, const char* help, auto value) {
        w.family(name, type, help);
        for (const auto& b : backends) {
            w.sample(name, {{"pool", b->pool()}, {"backend", b->url()}}, value(*b));
        }
    };
    each("pagoda_router_backend_up", "gauge",
         "1 when the backend is up, ready, not shedding and not ejected",
         [&](const Backend& b) { return b.candidate(now, cfg).healthy ? 1.0 : 0.0; });
    each("pagoda_router_backend_outstanding_requests", "gauge",
         "Requests this router has in flight on the backend",
         [](const Backend& b) { return double(b.outstanding.load()); });
    each("pagoda_router_ejections_total", "counter",
         "Times the backend was ejected after consecutive failures",
         [](const Backend& b) { return double(b.ejections_total()); });
    w.family("pagoda_router_dr_active", "gauge", "1 while the severe hook sends all traffic to DR");
    w.sample("pagoda_router_dr_active", {}, pj["dr_forced"].get<bool>() ? 1 : 0);
    return w.text();
}

}  // namespace pagoda::router

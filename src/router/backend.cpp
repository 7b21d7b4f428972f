// One backend of a pool: the implementation (the contract is in router/backend.h).
#include "router/backend.h"

#include <algorithm>
#include <cmath>

namespace pagoda::router {

bool Ejection::on_failure(double now_s, int after, double base_s, double max_s) {
    ++failures;
    if (failures < after || ejected(now_s)) return false;
    ++ejections;
    ++total;
    until_s = now_s + std::min(max_s, base_s * std::pow(2.0, double(ejections - 1)));
    failures = 0;
    return true;
}

void Ejection::on_success() {
    failures = 0;
    ejections = 0;
}

Backend::Backend(std::string pool, std::string url, std::unique_ptr<http::Client> client,
                 std::unique_ptr<http::Client> health_client)
    : pool_(std::move(pool)),
      url_(std::move(url)),
      id_hash_(hash64(url_)),
      client_(std::move(client)),
      health_(std::move(health_client)) {}

HealthState Backend::health() const {
    std::lock_guard lock(mu_);
    return health_state_;
}

void Backend::set_health(HealthState h) {
    std::lock_guard lock(mu_);
    health_state_ = std::move(h);
}

bool Backend::on_failure(double now_s, const RouterConfig& c) {
    std::lock_guard lock(mu_);
    return ejection_.on_failure(now_s, c.eject_after_failures, c.eject_base_s, c.eject_max_s);
}

void Backend::on_success() {
    std::lock_guard lock(mu_);
    ejection_.on_success();
}

bool Backend::ejected(double now_s) const {
    std::lock_guard lock(mu_);
    return ejection_.ejected(now_s);
}

int64_t Backend::ejections_total() const {
    std::lock_guard lock(mu_);
    return ejection_.total;
}

Candidate Backend::candidate(double now_s, const RouterConfig& c) const {
    std::lock_guard lock(mu_);
    Candidate out;
    out.id_hash = id_hash_;
    out.outstanding = outstanding.load(std::memory_order_relaxed);
    out.waiting = health_state_.waiting;
    out.kv_usage = health_state_.kv_usage;
    out.healthy = health_state_.up && health_state_.ready && !health_state_.shedding &&
                  !ejection_.ejected(now_s);
    out.saturated = out.outstanding >= c.max_outstanding ||
                    (c.max_waiting > 0 && health_state_.waiting > c.max_waiting);
    return out;
}

}  // namespace pagoda::router

// ConfigManager: the implementation (the contract is in control/config/config_manager.h).
#include "control/config/config_manager.h"

#include "base/log.h"
#include "control/policy/oom_guard.h"
#include "metrics/metrics.h"

namespace pagoda::control {

int64_t unix_ms_now() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

Result<std::unique_ptr<ConfigManager>> ConfigManager::open(engine::Engine& engine,
                                                           const ConfigManagerOptions& opts) {
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<StateDb> db, StateDb::open(opts.state_dir));
    std::unique_ptr<ConfigManager> m(new ConfigManager(engine, std::move(db), opts));
    PAGODA_ASSIGN_OR_RETURN(std::optional<ConfigVersion> last, m->store_.latest());
    const EngineSettings running = EngineSettings::of(engine);
    if (last && last->value == running && last->deployment == opts.deployment) {
        m->current_ = *last;
    } else {
        const char* reason = !last ? "first start with this state directory"
                             : last->deployment != opts.deployment
                                 ? "started on a different deployment than the last version"
                                 : "started with settings that differ from the last version";
        const std::string why =
            opts.origin.empty() ? reason : fmt::format("{}; {}", reason, opts.origin);
        PAGODA_ASSIGN_OR_RETURN(m->current_,
                                m->store_.append(running, "startup", why, unix_ms_now()));
    }
    log_info("config_version id={} source={} state_db={}", m->current_.id, m->current_.source,
             m->db_->path());
    return m;
}

ConfigVersion ConfigManager::current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
}

Result<std::vector<ConfigVersion>> ConfigManager::history(int limit) {
    std::lock_guard<std::mutex> lock(mu_);
    return store_.history(limit);
}

// The new pool is allocated while the old one lives, and the kernel lets an mmap succeed
// that touching would not survive: refuse what the machine cannot hold now.
Status ConfigManager::fits_memory(int64_t bytes) const {
    if (engine_.kv_config().virtual_memory) return ok_status();  // the simulated GPU's
    const int64_t avail = read_available_memory();
    if (avail > 0 && bytes > avail) {
        return make_error(ErrorCode::kOutOfRange,
                          "KV re-layout refused, the old pool keeps serving: kv_cache_memory {} "
                          "bytes ({:.1f} MiB) is more than this machine can hold now ({:.1f} MiB "
                          "available)",
                          bytes, double(bytes) / (1 << 20), double(avail) / (1 << 20));
    }
    return ok_status();
}

Result<ConfigVersion> ConfigManager::commit(const EngineSettings& next, const std::string& source,
                                            const std::string& reason) {
    PAGODA_TRY(engine_.check_knobs(next.knobs));
    if (!(next.layout == current_.value.layout)) {
        kvcache::KvCacheConfig kv = engine_.kv_config();
        kv.block_size = next.layout.block_size;
        kv.dtype = next.layout.kv_cache_dtype;
        kv.memory_bytes = next.layout.kv_cache_memory_bytes;
        kv.num_blocks = 0;  // sized from memory_bytes
        const Status fits = fits_memory(next.layout.kv_cache_memory_bytes);
        auto rep = fits.ok() ? engine_.relayout(kv) : Result<engine::RelayoutReport>(fits.error());
        if (!rep.ok()) {
            ++refusals_;
            // KvPool::create's allocation failure; a live sequence that cannot fit is
            // kResourceExhausted and a bad size kInvalidArgument.
            const bool allocation = rep.error().code == ErrorCode::kOutOfRange;
            allocation_failures_ += allocation ? 1 : 0;
            log_warn("config_refused source={} reason=\"{}\" error=\"{}\"", source, reason,
                     rep.error().message);
            const json detail = {{"source", source},
                                 {"reason", reason},
                                 {"diff", diff(current_.value, next)},
                                 {"allocation_failure", allocation},
                                 {"error", rep.error().message}};
            if (Status st = db_->record_event("refusal", detail, unix_ms_now()); !st.ok()) {
                log_warn("audit_log_failed error=\"{}\"", st.error().message);
            }
            return rep.error();
        }
        last_relayout_ = *rep;
    }
    PAGODA_TRY(engine_.set_knobs(next.knobs));
    PAGODA_ASSIGN_OR_RETURN(ConfigVersion v, store_.append(next, source, reason, unix_ms_now()));
    log_info("config_changed id={} source={} reason=\"{}\" diff={}", v.id, source, reason,
             v.diff.dump());
    current_ = v;
    ++changes_by_source_[source];
    return v;
}

Result<ConfigVersion> ConfigManager::change(const ChangeRequest& req) {
    std::lock_guard<std::mutex> lock(mu_);
    if (req.base_version && *req.base_version != current_.id) {
        return make_error(ErrorCode::kConflict,
                          "the change was based on version {} but version {} is current; read it "
                          "and retry",
                          *req.base_version, current_.id);
    }
    // "auto" is the backend's KV dtype, as --kv-cache-dtype auto is at start.
    const auto auto_dtype =
        engine_.model().simulated() ? kvcache::KvDtype::kBF16 : kvcache::KvDtype::kF32;
    PAGODA_ASSIGN_OR_RETURN(EngineSettings next,
                            apply_patch(current_.value, req.patch, auto_dtype));
    if (next == current_.value) return current_;  // nothing changes: no new version
    return commit(next, req.source, req.reason.empty() ? "admin change" : req.reason);
}

Result<ConfigVersion> ConfigManager::rollback(std::optional<int64_t> to, const std::string& reason,
                                              const std::string& source, const std::string& label) {
    std::lock_guard<std::mutex> lock(mu_);
    return rollback_locked(to, reason, source, label);
}

Result<ConfigVersion> ConfigManager::rollback_locked(std::optional<int64_t> to,
                                                     const std::string& reason,
                                                     const std::string& source,
                                                     const std::string& label) {
    std::optional<ConfigVersion> target;
    if (to) {
        PAGODA_ASSIGN_OR_RETURN(target, store_.get(*to));
        if (!target) {
            return make_error(ErrorCode::kNotFound, "there is no config version {} (current: {})",
                              *to, current_.id);
        }
        if (target->deployment != store_.deployment()) {
            return make_error(ErrorCode::kInvalidArgument,
                              "config version {} was recorded by another deployment ({}), not "
                              "this one ({}); roll back to a version of this deployment",
                              *to, target->deployment.empty() ? "unnamed" : target->deployment,
                              store_.deployment());
        }
    } else {
        PAGODA_ASSIGN_OR_RETURN(target, store_.last_stable(current_.id));
        if (!target) {
            return make_error(
                ErrorCode::kNotFound,
                "no stable version to roll back to (a version turns stable after "
                "serving --stable-window); name one: `pagoda config rollback --to ID` "
                "(POST /admin/config/rollback {{\"to\": ID}}), ids in `pagoda "
                "config history`");
        }
    }
    const std::string why =
        fmt::format("rollback to version {}{}{}", target->id, reason.empty() ? "" : ": ", reason);
    PAGODA_ASSIGN_OR_RETURN(ConfigVersion v, commit(target->value, source, why));
    ++rollbacks_by_reason_[label];
    return v;
}

Result<ConfigVersion> ConfigManager::guard_rollback(int64_t to, const std::string& reason,
                                                    nlohmann::json event, int64_t now_ms) {
    // One critical section: whoever reads the version (current(), with_db) sees the
    // rollback's audit record with it, never the new version without its record.
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t from = current_.id;
    PAGODA_ASSIGN_OR_RETURN(ConfigVersion v, rollback_locked(to, reason, "oom_guard", "oom_guard"));
    PAGODA_TRY(store_.clear_stable(from));
    event["new_version"] = v.id;
    if (Status st = db_->record_event("oom_rollback", event, now_ms); !st.ok()) {
        log_warn("audit_log_failed kind=oom_rollback error=\"{}\"", st.error().message);
    }
    return v;
}

Result<std::optional<ConfigVersion>> ConfigManager::last_stable() {
    std::lock_guard<std::mutex> lock(mu_);
    return store_.last_stable(current_.id);
}

void ConfigManager::note_risk(int64_t now_ms) {
    std::lock_guard<std::mutex> lock(mu_);
    last_risk_ms_ = std::max(last_risk_ms_, now_ms);
}

int64_t ConfigManager::allocation_failures() const {
    std::lock_guard<std::mutex> lock(mu_);
    return allocation_failures_;
}

Status ConfigManager::tick(int64_t now_ms) {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_.stable_at_ms) return ok_status();
    const int64_t window_ms = int64_t(opts_.stable_window.count()) * 1000;
    if (now_ms - std::max(current_.created_at_ms, last_risk_ms_) < window_ms) return ok_status();
    PAGODA_TRY(store_.mark_stable(current_.id, now_ms));
    current_.stable_at_ms = now_ms;
    log_info("config_stable id={}", current_.id);
    return ok_status();
}

std::string ConfigManager::metrics_text(const std::string& model_name) const {
    std::lock_guard<std::mutex> lock(mu_);
    metrics::TextWriter w;
    const metrics::Labels model = {{"model_name", model_name}};
    w.family("pagoda_config_version", "gauge", "Id of the running configuration version.");
    w.sample("pagoda_config_version", model, double(current_.id));
    w.family("pagoda_config_changes_total", "counter",
             "Configuration changes applied since start, by source.");
    for (const auto& [source, n] : changes_by_source_) {
        w.sample("pagoda_config_changes_total", {{"model_name", model_name}, {"source", source}},
                 double(n));
    }
    w.family("pagoda_config_refusals_total", "counter",
             "Configuration changes refused when applied (a KV pool that could not be built).");
    w.sample("pagoda_config_refusals_total", model, double(refusals_));
    if (last_relayout_) {
        w.family("pagoda_kv_relayout_pause_seconds", "gauge",
                 "Engine pause of the last KV re-layout (allocation included).");
        w.sample("pagoda_kv_relayout_pause_seconds", model, last_relayout_->pause_seconds);
        w.family("pagoda_kv_relayout_recompute_tokens", "gauge",
                 "Computed tokens the last KV re-layout sent back to be recomputed.");
        w.sample("pagoda_kv_relayout_recompute_tokens", model,
                 double(last_relayout_->recompute_tokens));
    }
    w.family("pagoda_config_rollbacks_total", "counter", "Configuration rollbacks, by reason.");
    for (const auto& [reason, n] : rollbacks_by_reason_) {
        w.sample("pagoda_config_rollbacks_total", {{"model_name", model_name}, {"reason", reason}},
                 double(n));
    }
    return w.text();
}

}  // namespace pagoda::control

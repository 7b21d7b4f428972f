#pragma once
// ConfigManager: the one path by which a running replica's settings change. Every change,
// from any source (admin API, rollback, later policies and alert actions), is validated
// whole, applied to the engine, and recorded as a new version in the state database.
// Changes are serialised; a change that names the version it was based on loses with
// kConflict when another change came first. Thread-safe.

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "control/config/config_store.h"
#include "engine/engine.h"

namespace pagoda::control {

struct ConfigManagerOptions {
    std::string state_dir;                    // where pagoda.db lives
    std::chrono::seconds stable_window{600};  // --stable-window
    // What this replica runs (backend, model, card, TP): a version recorded by another
    // deployment sharing the state directory is never a rollback target.
    std::string deployment;
    // Where the starting settings came from ("--config tuned.toml, written by pagoda tune:
    // ..."), added to a startup version's reason; `pagoda check` reads it.
    std::string origin;
};

struct ChangeRequest {
    json patch;  // partial settings
    std::string source = "admin_api";
    std::string reason;
    std::optional<int64_t> base_version;  // optimistic concurrency: fail if not current
};

class ConfigManager {
  public:
    // Opens the state database and records the engine's settings as a version when they
    // differ from the latest stored one (the first start, or a restart with other flags).
    static Result<std::unique_ptr<ConfigManager>> open(engine::Engine& engine,
                                                       const ConfigManagerOptions& opts);

    ConfigVersion current() const;
    Result<std::vector<ConfigVersion>> history(int limit);
    // A change that leaves the settings as they are returns the current version.
    Result<ConfigVersion> change(const ChangeRequest& req);
    // To version `to`, or to the last stable version before the current one. `label` is
    // the metric's reason label: "manual" (the admin API) or the automatic action's name.
    Result<ConfigVersion> rollback(std::optional<int64_t> to, const std::string& reason,
                                   const std::string& source = "rollback",
                                   const std::string& label = "manual");
    // The OOM guard's rollback: to the last stable version, and the version it leaves
    // loses any stable mark (it may have turned stable before the risk showed). Records
    // `event` (with "new_version" added) as the audit log's oom_rollback in the same
    // critical section; on an error nothing is recorded (the caller records the failure).
    Result<ConfigVersion> guard_rollback(int64_t to, const std::string& reason,
                                         nlohmann::json event, int64_t now_ms);
    // The last stable version other than the current one, if any.
    Result<std::optional<ConfigVersion>> last_stable();
    // Marks the current version stable once it has served the stable window since it was
    // made and since the last OOM-risk event. Called periodically (tests pass the time).
    Status tick(int64_t now_ms);
    // An OOM-risk signal at `now_ms`: the stable window starts again.
    void note_risk(int64_t now_ms);
    // Changes refused when applied because a KV pool could not be allocated, since start.
    int64_t allocation_failures() const;
    // Runs `fn` on the state database with changes held off (StateDb is single-threaded).
    template <typename F>
    auto with_db(F&& fn) {
        std::lock_guard<std::mutex> lock(mu_);
        return fn(*db_);
    }

    // pagoda_config_version, pagoda_config_changes_total{source},
    // pagoda_config_rollbacks_total{reason}, as Prometheus text.
    std::string metrics_text(const std::string& model_name) const;

  private:
    ConfigManager(engine::Engine& e, std::unique_ptr<StateDb> db, ConfigManagerOptions o)
        : engine_(e), db_(std::move(db)), store_(*db_, o.deployment), opts_(std::move(o)) {}
    Status fits_memory(int64_t bytes) const;
    Result<ConfigVersion> rollback_locked(std::optional<int64_t> to, const std::string& reason,
                                          const std::string& source, const std::string& label);
    // Applies `next` to the engine and records it; mu_ held.
    Result<ConfigVersion> commit(const EngineSettings& next, const std::string& source,
                                 const std::string& reason);

    engine::Engine& engine_;
    std::unique_ptr<StateDb> db_;
    ConfigStore store_;
    ConfigManagerOptions opts_;
    mutable std::mutex mu_;
    ConfigVersion current_;                                // guarded by mu_
    std::map<std::string, int64_t> changes_by_source_;     // guarded by mu_
    std::map<std::string, int64_t> rollbacks_by_reason_;   // guarded by mu_
    int64_t refusals_ = 0;                                 // guarded by mu_
    int64_t allocation_failures_ = 0;                      // guarded by mu_
    int64_t last_risk_ms_ = 0;                             // guarded by mu_
    std::optional<engine::RelayoutReport> last_relayout_;  // guarded by mu_
};

int64_t unix_ms_now();

}  // namespace pagoda::control

#pragma once
// ConfigStore: the versions of a replica's EngineSettings in the state database. Every
// change appends a version (id, time, source, reason, full value, diff); a version turns
// stable after serving a stable window without OOM risk; rollback targets are stable
// versions. Not thread-safe (ConfigManager serialises).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "control/config/engine_settings.h"
#include "control/config/state_db.h"

namespace pagoda::control {

struct ConfigVersion {
    int64_t id = 0;
    int64_t created_at_ms = 0;  // Unix time
    std::string source;         // startup, admin_api, rollback, ...
    std::string reason;
    EngineSettings value;
    json diff;                            // against the version before it
    std::string deployment;               // what it ran on; see ConfigStore
    std::optional<int64_t> stable_at_ms;  // set once stable

    json to_json() const;
};

class ConfigStore {
  public:
    // `deployment` names what this replica runs (backend, model, card, TP); versions are
    // recorded with it, and only versions of the same deployment are rollback targets.
    ConfigStore(StateDb& db, std::string deployment)
        : db_(db), deployment_(std::move(deployment)) {}

    Result<ConfigVersion> append(const EngineSettings& value, const std::string& source,
                                 const std::string& reason, int64_t now_ms);
    Result<std::optional<ConfigVersion>> latest();
    Result<std::optional<ConfigVersion>> get(int64_t id);
    // Newest first, at most `limit`.
    Result<std::vector<ConfigVersion>> history(int limit);
    Status mark_stable(int64_t id, int64_t now_ms);
    // A version the OOM guard rolled back is never a rollback target again.
    Status clear_stable(int64_t id);
    // The newest stable version of this deployment other than `except` (the one running).
    Result<std::optional<ConfigVersion>> last_stable(int64_t except);

    const std::string& deployment() const { return deployment_; }

  private:
    StateDb& db_;
    std::string deployment_;
};

}  // namespace pagoda::control

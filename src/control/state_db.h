#pragma once
// StateDb: the one SQLite file of a replica's control state (`pagoda.db` in the state
// directory: --state-dir, else $XDG_STATE_HOME/pagoda, else ~/.local/state/pagoda). Opens or
// creates it, applies the schema, and turns SQLite's failures (corrupt file, locked by
// another process, unwritable directory) into errors that name the file and what to do.
// Not thread-safe: its owner serialises access.

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace SQLite {
class Database;
}

namespace pagoda::control {

// $XDG_STATE_HOME/pagoda, else $HOME/.local/state/pagoda.
std::string default_state_dir();

class StateDb {
  public:
    ~StateDb();
    static Result<std::unique_ptr<StateDb>> open(const std::string& state_dir);
    SQLite::Database& db() { return *db_; }
    const std::string& path() const { return path_; }

    // Named JSON values of the control plane (length statistics, calibrations).
    Result<std::optional<nlohmann::json>> get_json(const std::string& key);
    Status put_json(const std::string& key, const nlohmann::json& value, int64_t now_ms);
    // The audit log of automatic actions and refusals: kind (refusal, oom_signal,
    // oom_rollback, block_size_decision, automation) and what happened.
    Status record_event(const std::string& kind, const nlohmann::json& detail, int64_t now_ms);
    // Newest first; kind "" for every kind. Each: {"id", "at_ms", "kind", "detail"}.
    Result<std::vector<nlohmann::json>> events(const std::string& kind, int limit);

  private:
    StateDb() = default;
    std::unique_ptr<SQLite::Database> db_;
    std::string path_;
};

}  // namespace pagoda::control

#pragma once
// StateDb: the one SQLite file of a replica's control state (`pagoda.db` in the state
// directory: --state-dir, else $XDG_STATE_HOME/pagoda, else ~/.local/state/pagoda). Opens or
// creates it, applies the schema, and turns SQLite's failures (corrupt file, unwritable
// directory) into errors that name the file and what to do. The directory belongs to one
// process: open() takes an exclusive lock (<dir>/pagoda.lock, naming its holder) for the
// StateDb's life, and a second opener, in this process or another, gets a kConflict error
// that names the holder and the fix.
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

// One minute of the request-rate history (table rate_history).
struct RateMinute {
    int64_t minute = 0;  // unix minutes (or the forecast clock's)
    int64_t requests = 0;
    int64_t short_requests = 0, long_requests = 0;  // by length class
    int64_t max_waiting = 0;                        // the deepest waiting queue seen
};

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

    // The request-rate history: rows replaced by minute; read in [from, to), oldest first.
    // Errors: a row with a negative count (a corrupt history).
    Status put_rate_minutes(const std::vector<RateMinute>& rows);
    Result<std::vector<RateMinute>> rate_minutes(int64_t from_minute, int64_t to_minute);

  private:
    StateDb() = default;
    std::unique_ptr<SQLite::Database> db_;
    std::string path_;
    int lock_fd_ = -1;  // holds the state directory's flock
};

}  // namespace pagoda::control

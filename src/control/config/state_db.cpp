// StateDb: the implementation (the contract is in control/config/state_db.h).
#include "control/config/state_db.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pagoda::control {

namespace {

// Schema, by version (PRAGMA user_version); each step runs once, in order.
const char* const kSchema[] = {
    "CREATE TABLE config_versions ("
    " id INTEGER PRIMARY KEY,"
    " created_at_ms INTEGER NOT NULL,"
    " source TEXT NOT NULL,"  // startup, admin_api, rollback, policy:<name>, guard
    " reason TEXT NOT NULL,"
    " value TEXT NOT NULL,"    // EngineSettings as JSON
    " diff TEXT NOT NULL,"     // against the version before it
    " stable_at_ms INTEGER)",  // NULL until it served a stable window without OOM risk
    "CREATE TABLE control_state ("
    " key TEXT PRIMARY KEY,"
    " value TEXT NOT NULL,"  // JSON
    " updated_at_ms INTEGER NOT NULL);"
    "CREATE TABLE events ("
    " id INTEGER PRIMARY KEY,"
    " at_ms INTEGER NOT NULL,"
    " kind TEXT NOT NULL,"
    " detail TEXT NOT NULL)",  // JSON
    // What the version ran on (backend, model, card, TP): rollback targets stay within one.
    "ALTER TABLE config_versions ADD COLUMN deployment TEXT NOT NULL DEFAULT ''",
    // Arrivals per minute for the forecaster: minute is unix time / 60 (or the forecast
    // clock's); requests by length class (prompt + output at or below the boundary: short).
    "CREATE TABLE rate_history ("
    " minute INTEGER PRIMARY KEY,"
    " requests INTEGER NOT NULL,"
    " short INTEGER NOT NULL DEFAULT 0,"
    " long INTEGER NOT NULL DEFAULT 0,"
    " max_waiting INTEGER NOT NULL DEFAULT 0)",
};

Error db_error(const std::string& path, const SQLite::Exception& e) {
    return Error{ErrorCode::kIo, fmt::format("state database {}: {}", path, e.what())};
}

// This process as a person would name it: "pid 123: pagoda serve --port 8000".
std::string describe_self() {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : cmd) {
        if (c == '\0') c = ' ';
    }
    while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
    if (cmd.size() > 300) cmd = cmd.substr(0, 300) + "...";
    return fmt::format("pid {}: {}", getpid(), cmd);
}

// Takes the state directory's lock (an exclusive flock on <dir>/pagoda.lock, held until
// the descriptor closes, so a crashed holder releases it) and writes who holds it.
Result<int> lock_state_dir(const std::string& dir) {
    const std::string path = dir + "/pagoda.lock";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        return make_error(ErrorCode::kIo,
                          "state directory {}: cannot open {} (check the "
                          "directory's permissions or use another --state-dir)",
                          dir, path);
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        std::ifstream in(path);
        std::string holder;
        std::getline(in, holder);
        ::close(fd);
        return make_error(ErrorCode::kConflict,
                          "state directory {} is in use by {}; a state directory belongs to one "
                          "process: stop that one, or give this one its own with --state-dir "
                          "DIR (`pagoda fleet up` gives each replica <state_dir>/replicas/"
                          "<pool>-<port>)",
                          dir, holder.empty() ? "another process" : holder);
    }
    const std::string me = describe_self() + "\n";
    if (ftruncate(fd, 0) != 0 || pwrite(fd, me.data(), me.size(), 0) != ssize_t(me.size())) {
        // The lock holds either way; only the holder's name is missing for the next one.
    }
    return fd;
}

}  // namespace

std::string default_state_dir() {
    const char* xdg = std::getenv("XDG_STATE_HOME");
    if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/pagoda";
    const char* home = std::getenv("HOME");
    return std::string(home != nullptr && *home != '\0' ? home : ".") + "/.local/state/pagoda";
}

StateDb::~StateDb() {
    db_.reset();
    if (lock_fd_ >= 0) ::close(lock_fd_);
}

Result<std::unique_ptr<StateDb>> StateDb::open(const std::string& state_dir) {
    std::error_code ec;
    std::filesystem::create_directories(state_dir, ec);
    if (ec) {
        return make_error(ErrorCode::kIo, "state directory {}: cannot create it: {} (--state-dir)",
                          state_dir, ec.message());
    }
    std::unique_ptr<StateDb> s(new StateDb());
    PAGODA_ASSIGN_OR_RETURN(s->lock_fd_, lock_state_dir(state_dir));
    s->path_ = state_dir + "/pagoda.db";
    try {
        s->db_ = std::make_unique<SQLite::Database>(
            s->path_, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, 2000 /* busy timeout ms */);
        s->db_->exec("PRAGMA journal_mode=WAL");
        const int have = s->db_->execAndGet("PRAGMA user_version").getInt();
        const int want = int(std::size(kSchema));
        if (have > want) {
            return make_error(ErrorCode::kUnsupported,
                              "{}: schema version {} is newer than this pagoda knows ({}); use a "
                              "newer pagoda or another --state-dir",
                              s->path_, have, want);
        }
        for (int v = have; v < want; ++v) {
            SQLite::Transaction t(*s->db_);
            s->db_->exec(kSchema[v]);
            s->db_->exec(fmt::format("PRAGMA user_version = {}", v + 1));
            t.commit();
        }
    } catch (const SQLite::Exception& e) {
        const int code = e.getErrorCode();
        const char* hint = code == SQLITE_BUSY || code == SQLITE_LOCKED
                               ? "another process holds it locked; stop it or use another "
                                 "--state-dir"
                           : code == SQLITE_CORRUPT || code == SQLITE_NOTADB
                               ? "the file is not a valid state database; move it away to start "
                                 "afresh"
                               : "check the file and directory permissions";
        return make_error(ErrorCode::kIo, "state database {}: {} ({})", s->path_, e.what(), hint);
    }
    return s;
}

Result<std::optional<nlohmann::json>> StateDb::get_json(const std::string& key) {
    try {
        SQLite::Statement q(*db_, "SELECT value FROM control_state WHERE key = ?");
        q.bind(1, key);
        if (!q.executeStep()) return std::optional<nlohmann::json>();
        const std::string text = q.getColumn(0).getString();
        auto j = nlohmann::json::parse(text, nullptr, false);
        if (j.is_discarded()) {
            return make_error(ErrorCode::kIo, "state database {}: control_state \"{}\" is not JSON",
                              path_, key);
        }
        return std::optional<nlohmann::json>(std::move(j));
    } catch (const SQLite::Exception& e) {
        return db_error(path_, e);
    }
}

Status StateDb::put_json(const std::string& key, const nlohmann::json& value, int64_t now_ms) {
    try {
        SQLite::Statement q(
            *db_,
            "INSERT INTO control_state (key, value, updated_at_ms) VALUES (?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value, "
            "updated_at_ms = excluded.updated_at_ms");
        q.bind(1, key);
        q.bind(2, value.dump());
        q.bind(3, now_ms);
        q.exec();
        return ok_status();
    } catch (const SQLite::Exception& e) {
        return db_error(path_, e);
    }
}

Status StateDb::record_event(const std::string& kind, const nlohmann::json& detail,
                             int64_t now_ms) {
    try {
        SQLite::Statement q(*db_, "INSERT INTO events (at_ms, kind, detail) VALUES (?, ?, ?)");
        q.bind(1, now_ms);
        q.bind(2, kind);
        q.bind(3, detail.dump());
        q.exec();
        return ok_status();
    } catch (const SQLite::Exception& e) {
        return db_error(path_, e);
    }
}

Result<std::vector<nlohmann::json>> StateDb::events(const std::string& kind, int limit) {
    std::vector<nlohmann::json> out;
    try {
        SQLite::Statement q(*db_,
                            "SELECT id, at_ms, kind, detail FROM events WHERE (? = '' OR kind = ?) "
                            "ORDER BY id DESC LIMIT ?");
        q.bind(1, kind);
        q.bind(2, kind);
        q.bind(3, limit);
        while (q.executeStep()) {
            auto detail = nlohmann::json::parse(q.getColumn(3).getString(), nullptr, false);
            out.push_back({{"id", q.getColumn(0).getInt64()},
                           {"at_ms", q.getColumn(1).getInt64()},
                           {"kind", q.getColumn(2).getString()},
                           {"detail", detail.is_discarded() ? nlohmann::json() : detail}});
        }
    } catch (const SQLite::Exception& e) {
        return db_error(path_, e);
    }
    return out;
}

Status StateDb::put_rate_minutes(const std::vector<RateMinute>& rows) {
    try {
        SQLite::Transaction t(*db_);
        SQLite::Statement q(*db_,
                            "INSERT OR REPLACE INTO rate_history (minute, requests, short, long, "
                            "max_waiting) VALUES (?, ?, ?, ?, ?)");
        for (const RateMinute& r : rows) {
            q.bind(1, r.minute);
            q.bind(2, r.requests);
            q.bind(3, r.short_requests);
            q.bind(4, r.long_requests);
            q.bind(5, r.max_waiting);
            q.exec();
            q.reset();
        }
        t.commit();
        return ok_status();
    } catch (const SQLite::Exception& e) {
        return db_error(path_, e);
    }
}

Result<std::vector<RateMinute>> StateDb::rate_minutes(int64_t from_minute, int64_t to_minute) {
    std::vector<RateMinute> out;
    try {
        SQLite::Statement q(*db_,
                            "SELECT minute, requests, short, long, max_waiting FROM rate_history "
                            "WHERE minute >= ? AND minute < ? ORDER BY minute");
        q.bind(1, from_minute);
        q.bind(2, to_minute);
        while (q.executeStep()) {
            RateMinute r{q.getColumn(0).getInt64(), q.getColumn(1).getInt64(),
                         q.getColumn(2).getInt64(), q.getColumn(3).getInt64(),
                         q.getColumn(4).getInt64()};
            if (r.requests < 0 || r.short_requests < 0 || r.long_requests < 0) {
                return make_error(ErrorCode::kIo,
                                  "state database {}: rate_history minute {} holds a negative "
                                  "count; delete the row or move the file away",
                                  path_, r.minute);
            }
            out.push_back(r);
        }
    } catch (const SQLite::Exception& e) {
        return db_error(path_, e);
    }
    return out;
}

}  // namespace pagoda::control

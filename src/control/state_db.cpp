#include "control/state_db.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/core.h>
#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>

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
};

}  // namespace

std::string default_state_dir() {
    const char* xdg = std::getenv("XDG_STATE_HOME");
    if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/pagoda";
    const char* home = std::getenv("HOME");
    return std::string(home != nullptr && *home != '\0' ? home : ".") + "/.local/state/pagoda";
}

StateDb::~StateDb() = default;

Result<std::unique_ptr<StateDb>> StateDb::open(const std::string& state_dir) {
    std::error_code ec;
    std::filesystem::create_directories(state_dir, ec);
    if (ec) {
        return make_error(ErrorCode::kIo, "state directory {}: cannot create it: {} (--state-dir)",
                          state_dir, ec.message());
    }
    std::unique_ptr<StateDb> s(new StateDb());
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

}  // namespace pagoda::control

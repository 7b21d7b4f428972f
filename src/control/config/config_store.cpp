// ConfigStore: the implementation (the contract is in control/config/config_store.h).
#include "control/config/config_store.h"

#include <SQLiteCpp/SQLiteCpp.h>

namespace pagoda::control {

namespace {

Error db_error(const StateDb& db, const SQLite::Exception& e) {
    return Error{ErrorCode::kIo, fmt::format("state database {}: {}", db.path(), e.what())};
}

// Columns in the order of kColumns.
const char* const kColumns =
    "id, created_at_ms, source, reason, value, diff, stable_at_ms, deployment";

Result<ConfigVersion> read_row(SQLite::Statement& q) {
    ConfigVersion v;
    v.id = q.getColumn(0).getInt64();
    v.created_at_ms = q.getColumn(1).getInt64();
    v.source = q.getColumn(2).getString();
    v.reason = q.getColumn(3).getString();
    const json value = json::parse(q.getColumn(4).getString(), nullptr, false);
    auto s = apply_patch(EngineSettings{}, value);
    if (value.is_discarded() || !s.ok()) {
        return make_error(ErrorCode::kInvalidFile, "config version {} holds an invalid value: {}",
                          v.id, s.ok() ? "not JSON" : s.error().message);
    }
    v.value = *s;
    v.diff = json::parse(q.getColumn(5).getString(), nullptr, false);
    if (!q.getColumn(6).isNull()) v.stable_at_ms = q.getColumn(6).getInt64();
    v.deployment = q.getColumn(7).getString();
    return v;
}

}  // namespace

json ConfigVersion::to_json() const {
    return {{"id", id},
            {"created_at_ms", created_at_ms},
            {"source", source},
            {"reason", reason},
            {"value", value.to_json()},
            {"diff", diff},
            {"deployment", deployment},
            {"stable", stable_at_ms.has_value()},
            {"stable_at_ms", stable_at_ms ? json(*stable_at_ms) : json(nullptr)}};
}

Result<ConfigVersion> ConfigStore::append(const EngineSettings& value, const std::string& source,
                                          const std::string& reason, int64_t now_ms) {
    PAGODA_ASSIGN_OR_RETURN(std::optional<ConfigVersion> prev, latest());
    ConfigVersion v;
    v.created_at_ms = now_ms;
    v.source = source;
    v.reason = reason;
    v.value = value;
    v.diff = prev ? diff(prev->value, value) : json::object();
    v.deployment = deployment_;
    try {
        SQLite::Statement q(db_.db(),
                            "INSERT INTO config_versions (created_at_ms, source, reason, value, "
                            "diff, deployment) VALUES (?, ?, ?, ?, ?, ?)");
        q.bind(1, now_ms);
        q.bind(2, source);
        q.bind(3, reason);
        q.bind(4, value.to_json().dump());
        q.bind(5, v.diff.dump());
        q.bind(6, deployment_);
        q.exec();
        v.id = db_.db().getLastInsertRowid();
    } catch (const SQLite::Exception& e) {
        return db_error(db_, e);
    }
    return v;
}

Result<std::optional<ConfigVersion>> ConfigStore::latest() {
    PAGODA_ASSIGN_OR_RETURN(std::vector<ConfigVersion> h, history(1));
    if (h.empty()) return std::optional<ConfigVersion>();
    return std::optional<ConfigVersion>(h[0]);
}

Result<std::optional<ConfigVersion>> ConfigStore::get(int64_t id) {
    try {
        SQLite::Statement q(db_.db(),
                            fmt::format("SELECT {} FROM config_versions WHERE id = ?", kColumns));
        q.bind(1, id);
        if (!q.executeStep()) return std::optional<ConfigVersion>();
        PAGODA_ASSIGN_OR_RETURN(ConfigVersion v, read_row(q));
        return std::optional<ConfigVersion>(std::move(v));
    } catch (const SQLite::Exception& e) {
        return db_error(db_, e);
    }
}

Result<std::vector<ConfigVersion>> ConfigStore::history(int limit) {
    std::vector<ConfigVersion> out;
    try {
        SQLite::Statement q(
            db_.db(),
            fmt::format("SELECT {} FROM config_versions ORDER BY id DESC LIMIT ?", kColumns));
        q.bind(1, limit);
        while (q.executeStep()) {
            PAGODA_ASSIGN_OR_RETURN(ConfigVersion v, read_row(q));
            out.push_back(std::move(v));
        }
    } catch (const SQLite::Exception& e) {
        return db_error(db_, e);
    }
    return out;
}

Status ConfigStore::clear_stable(int64_t id) {
    try {
        SQLite::Statement q(db_.db(),
                            "UPDATE config_versions SET stable_at_ms = NULL WHERE id = ?");
        q.bind(1, id);
        q.exec();
    } catch (const SQLite::Exception& e) {
        return db_error(db_, e);
    }
    return ok_status();
}

Status ConfigStore::mark_stable(int64_t id, int64_t now_ms) {
    try {
        SQLite::Statement q(db_.db(),
                            "UPDATE config_versions SET stable_at_ms = ? WHERE id = ? AND "
                            "stable_at_ms IS NULL");
        q.bind(1, now_ms);
        q.bind(2, id);
        q.exec();
    } catch (const SQLite::Exception& e) {
        return db_error(db_, e);
    }
    return ok_status();
}

Result<std::optional<ConfigVersion>> ConfigStore::last_stable(int64_t except) {
    try {
        SQLite::Statement q(db_.db(),
                            fmt::format("SELECT {} FROM config_versions WHERE stable_at_ms IS NOT "
                                        "NULL AND id != ? AND deployment = ? ORDER BY id DESC "
                                        "LIMIT 1",
                                        kColumns));
        q.bind(1, except);
        q.bind(2, deployment_);
        if (!q.executeStep()) return std::optional<ConfigVersion>();
        PAGODA_ASSIGN_OR_RETURN(ConfigVersion v, read_row(q));
        return std::optional<ConfigVersion>(std::move(v));
    } catch (const SQLite::Exception& e) {
        return db_error(db_, e);
    }
}

}  // namespace pagoda::control

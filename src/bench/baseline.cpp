// The performance-baseline store: the implementation (the contract is in bench/baseline.h).
#include "bench/baseline.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

namespace pagoda::bench {

using json = nlohmann::json;

std::string hardware_fingerprint() {
    std::string cpu = "unknown cpu";
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.starts_with("model name")) {
            auto colon = line.find(':');
            if (colon != std::string::npos)
                cpu = line.substr(line.find_first_not_of(' ', colon + 1));
            break;
        }
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    double gib = pages > 0 && page > 0 ? double(pages) * double(page) / double(1ull << 30) : 0;
    return fmt::format("{}, {} threads, {:.0f} GiB", cpu, std::thread::hardware_concurrency(), gib);
}

struct BaselineStore::Impl {
    explicit Impl(const std::string& path)
        : db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE) {}
    SQLite::Database db;
};

BaselineStore::~BaselineStore() = default;

std::string BaselineStore::default_path() {
    const char* xdg = std::getenv("XDG_DATA_HOME");
    const char* home = std::getenv("HOME");
    std::string base =
        xdg && *xdg ? std::string(xdg) : std::string(home && *home ? home : ".") + "/.local/share";
    return base + "/pagoda/bench.db";
}

Result<std::unique_ptr<BaselineStore>> BaselineStore::open(const std::string& path) {
    std::error_code ec;
    auto parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    std::unique_ptr<BaselineStore> s(new BaselineStore());
    try {
        s->impl_ = std::make_unique<Impl>(path);
        s->impl_->db.exec(
            "CREATE TABLE IF NOT EXISTS runs ("
            " id INTEGER PRIMARY KEY AUTOINCREMENT, created_at TEXT NOT NULL, baseline TEXT,"
            " scenario TEXT NOT NULL, scenario_hash TEXT NOT NULL, url TEXT, model TEXT, hardware "
            "TEXT,"
            " version TEXT, verdict TEXT, server TEXT, metrics TEXT NOT NULL);"
            "CREATE INDEX IF NOT EXISTS runs_baseline ON runs(baseline);");
    } catch (const std::exception& e) {
        return make_error(ErrorCode::kIo, "baseline store '{}': {}", path, e.what());
    }
    return s;
}

Result<int64_t> BaselineStore::record(const RunRow& row) {
    try {
        SQLite::Statement q(impl_->db,
                            "INSERT INTO runs (created_at, baseline, scenario, scenario_hash, url, "
                            "model, hardware, version,"
                            " verdict, server, metrics) VALUES (?,?,?,?,?,?,?,?,?,?,?)");
        std::string created = row.created_at;
        if (created.empty()) {
            std::time_t t = std::time(nullptr);
            char buf[32];
            std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
            created = buf;
        }
        q.bind(1, created);
        if (row.baseline.empty()) {
            q.bind(2);
        } else {
            q.bind(2, row.baseline);
        }
        q.bind(3, row.scenario);
        q.bind(4, row.scenario_hash);
        q.bind(5, row.url);
        q.bind(6, row.model);
        q.bind(7, row.hardware);
        q.bind(8, row.version);
        q.bind(9, row.verdict);
        q.bind(10, row.server_json);
        q.bind(11, json(row.metrics).dump());
        q.exec();
        return int64_t(impl_->db.getLastInsertRowid());
    } catch (const std::exception& e) {
        return make_error(ErrorCode::kIo, "baseline store: cannot record the run: {}", e.what());
    }
}

Status BaselineStore::save_baseline(const std::string& name, const std::vector<int64_t>& ids) {
    try {
        SQLite::Transaction tx(impl_->db);
        SQLite::Statement clear(impl_->db, "UPDATE runs SET baseline = NULL WHERE baseline = ?");
        clear.bind(1, name);
        clear.exec();
        for (int64_t id : ids) {
            SQLite::Statement set(impl_->db, "UPDATE runs SET baseline = ? WHERE id = ?");
            set.bind(1, name);
            set.bind(2, id);
            set.exec();
        }
        tx.commit();
    } catch (const std::exception& e) {
        return make_error(ErrorCode::kIo, "baseline store: cannot save baseline '{}': {}", name,
                          e.what());
    }
    return ok_status();
}

namespace {

std::vector<RunRow> read_rows(SQLite::Statement& q) {
    std::vector<RunRow> out;
    while (q.executeStep()) {
        RunRow r;
        r.id = q.getColumn(0).getInt64();
        r.created_at = q.getColumn(1).getString();
        r.baseline = q.getColumn(2).isNull() ? "" : q.getColumn(2).getString();
        r.scenario = q.getColumn(3).getString();
        r.scenario_hash = q.getColumn(4).getString();
        r.url = q.getColumn(5).getString();
        r.model = q.getColumn(6).getString();
        r.hardware = q.getColumn(7).getString();
        r.version = q.getColumn(8).getString();
        r.verdict = q.getColumn(9).getString();
        r.server_json = q.getColumn(10).getString();
        json m = json::parse(q.getColumn(11).getString(), nullptr, false);
        if (m.is_object()) {
            for (auto it = m.begin(); it != m.end(); ++it) {
                if (it.value().is_number()) r.metrics[it.key()] = it.value().get<double>();
            }
        }
        out.push_back(std::move(r));
    }
    return out;
}

constexpr const char* kColumns =
    "SELECT id, created_at, baseline, scenario, scenario_hash, url, model, hardware, version, "
    "verdict, server, metrics FROM runs ";

}  // namespace

Result<std::vector<RunRow>> BaselineStore::baseline(const std::string& name) {
    try {
        SQLite::Statement q(impl_->db, std::string(kColumns) + "WHERE baseline = ? ORDER BY id");
        q.bind(1, name);
        return read_rows(q);
    } catch (const std::exception& e) {
        return make_error(ErrorCode::kIo, "baseline store: {}", e.what());
    }
}

Result<std::vector<std::string>> BaselineStore::baseline_names() {
    try {
        SQLite::Statement q(
            impl_->db,
            "SELECT DISTINCT baseline FROM runs WHERE baseline IS NOT NULL ORDER BY baseline");
        std::vector<std::string> out;
        while (q.executeStep()) out.push_back(q.getColumn(0).getString());
        return out;
    } catch (const std::exception& e) {
        return make_error(ErrorCode::kIo, "baseline store: {}", e.what());
    }
}

Result<std::vector<RunRow>> BaselineStore::history(int limit) {
    try {
        SQLite::Statement q(impl_->db, std::string(kColumns) + "ORDER BY id DESC LIMIT ?");
        q.bind(1, limit);
        return read_rows(q);
    } catch (const std::exception& e) {
        return make_error(ErrorCode::kIo, "baseline store: {}", e.what());
    }
}

}  // namespace pagoda::bench

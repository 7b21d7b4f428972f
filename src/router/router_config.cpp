// RouterConfig: the implementation (the contract is in router/router_config.h).
#include "router/router_config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <set>

#include "base/toml_reader.h"
#include "http/client.h"
#include "router/schedule.h"

namespace pagoda::router {

const char* role_name(PoolRole r) {
    switch (r) {
        case PoolRole::kPrimary: return "primary";
        case PoolRole::kStandby: return "standby";
        case PoolRole::kDr: return "dr";
    }
    return "primary";
}

Result<PoolRole> parse_role(std::string_view s) {
    if (s == "primary") return PoolRole::kPrimary;
    if (s == "standby") return PoolRole::kStandby;
    if (s == "dr") return PoolRole::kDr;
    return make_error(ErrorCode::kInvalidArgument,
                      "pool role '{}' is not one of primary, standby, dr", s);
}

namespace {

Status check_pool(const PoolConfig& p) {
    if (p.name.empty()) return make_error(ErrorCode::kInvalidArgument, "a pool has no name");
    if (p.backends.empty() && p.backends_file.empty() && p.dns.empty() && !p.sized()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "pool '{}' has no backends: give 'backends', 'backends_file' or 'dns'",
                          p.name);
    }
    for (const auto& b : p.backends) {
        auto u = http::parse_url(b);
        if (!u) {
            return make_error(ErrorCode::kInvalidArgument, "pool '{}': backend {}", p.name,
                              u.error().message);
        }
    }
    if (!p.dns.empty()) {
        auto u = http::parse_url(p.dns);
        if (!u)
            return make_error(ErrorCode::kInvalidArgument, "pool '{}': dns {}", p.name,
                              u.error().message);
    }
    if (p.sized() && p.sizing.min_replicas > p.sizing.max_replicas) {
        return make_error(ErrorCode::kInvalidArgument,
                          "pool '{}': min_replicas {} is above max_replicas {}", p.name,
                          p.sizing.min_replicas, p.sizing.max_replicas);
    }
    if (p.weight != -1 && !(p.weight >= 0 && p.weight <= 100)) {
        return make_error(ErrorCode::kInvalidArgument,
                          "pool '{}': weight {} is outside [0, 100] (percent)", p.name, p.weight);
    }
    return ok_status();
}

}  // namespace

Status validate(const RouterConfig& c) {
    if (c.pools.empty()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "no backends: give --backend URL or --config ROUTER.toml with pools");
    }
    std::set<std::string> names;
    int primaries = 0, weighted = 0;
    double sum = 0;
    for (const auto& p : c.pools) {
        PAGODA_TRY(check_pool(p));
        if (!names.insert(p.name).second) {
            return make_error(ErrorCode::kInvalidArgument, "two pools are named '{}'", p.name);
        }
        if (p.role != PoolRole::kPrimary) {
            if (p.weight != -1) {
                return make_error(ErrorCode::kInvalidArgument,
                                  "pool '{}' is {}: only primary pools take a weight", p.name,
                                  role_name(p.role));
            }
            continue;
        }
        ++primaries;
        if (p.weight != -1) {
            ++weighted;
            sum += p.weight;
        }
    }
    if (primaries == 0) {
        return make_error(ErrorCode::kInvalidArgument,
                          "no primary pool: at least one pool needs role = \"primary\"");
    }
    if (weighted > 0 && weighted != primaries) {
        return make_error(ErrorCode::kInvalidArgument,
                          "give a weight to every primary pool or to none ({} of {} have one)",
                          weighted, primaries);
    }
    if (weighted > 0 && std::abs(sum - 100) > 1e-6) {
        return make_error(ErrorCode::kInvalidArgument,
                          "the primary pools' weights add up to {}, not 100", sum);
    }
    if (c.affinity_load_factor < 1) {
        return make_error(ErrorCode::kInvalidArgument, "affinity_load_factor must be >= 1, got {}",
                          c.affinity_load_factor);
    }
    return ok_status();
}

namespace {

void read_pool(TomlReader& r, const toml::table& t, std::string_view prefix, PoolConfig& p) {
    r.only(t, prefix,
           {"name", "role", "backends", "backends_file", "dns", "weight", "profile", "replicas",
            "start", "min_replicas", "max_replicas", "replica_rps", "target_waiting", "ttft_slo_ms",
            "cold_start_s", "scale_up_cooldown_s", "scale_down_cooldown_s",
            "scale_down_stabilisation_s", "idle_to_zero_s"});
    PoolConfig::Sizing& z = p.sizing;
    auto num = [&](std::string_view k, double lo, double hi, auto& field) {
        if (auto v = r.number(t, prefix, k, lo, hi))
            field = static_cast<std::decay_t<decltype(field)>>(*v);
    };
    num("min_replicas", 0, 64, z.min_replicas);
    num("max_replicas", 1, 64, z.max_replicas);
    num("replica_rps", 0, 1e6, z.replica_rps);
    num("target_waiting", 0.01, 1e6, z.target_waiting);
    num("ttft_slo_ms", 0, 1e7, z.ttft_slo_ms);
    num("cold_start_s", 0, 86400, z.cold_start_s);
    num("scale_up_cooldown_s", 0, 86400, z.up_cooldown_s);
    num("scale_down_cooldown_s", 0, 86400, z.down_cooldown_s);
    num("scale_down_stabilisation_s", 0, 86400, z.down_stabilisation_s);
    num("idle_to_zero_s", 0, 86400 * 7, z.idle_to_zero_s);
    if (auto v = r.str(t, prefix, "profile")) p.profile = *v;
    if (auto v = r.number(t, prefix, "replicas", 0, 64)) p.replicas = int(*v);
    if (auto v = r.str(t, prefix, "start")) {
        if (*v != "up" && *v != "prewarm") {
            r.fail(t.get("start"), TomlReader::key(prefix, "start"),
                   "'" + *v + "' is not one of up, prewarm");
        }
        p.start = *v;
    }
    if (auto v = r.str(t, prefix, "name")) p.name = *v;
    if (auto v = r.str(t, prefix, "role")) {
        auto role = parse_role(*v);
        if (role) {
            p.role = *role;
        } else {
            r.fail(t.get("role"), TomlReader::key(prefix, "role"), role.error().message);
        }
    }
    if (auto v = r.strings(t, prefix, "backends")) p.backends = *v;
    if (auto v = r.str(t, prefix, "backends_file")) p.backends_file = *v;
    if (auto v = r.str(t, prefix, "dns")) p.dns = *v;
    if (auto v = r.number(t, prefix, "weight", 0, 100)) p.weight = *v;
}

void read_numbers(TomlReader& r, const toml::table& t, RouterConfig& c) {
    const std::string_view p = "router";
    auto num = [&](std::string_view k, double lo, double hi, auto& field) {
        if (auto v = r.number(t, p, k, lo, hi))
            field = static_cast<std::decay_t<decltype(field)>>(*v);
    };
    num("port", 0, 65535, c.port);
    num("affinity_prefix_chars", 0, 1 << 20, c.affinity_prefix_chars);
    num("affinity_load_factor", 1, 100, c.affinity_load_factor);
    num("kv_usage_weight", 0, 1000, c.kv_usage_weight);
    num("health_interval_s", 0.05, 3600, c.health_interval_s);
    num("health_timeout_s", 0.05, 3600, c.health_timeout_s);
    num("connect_timeout_s", 0.05, 3600, c.connect_timeout_s);
    num("read_timeout_s", 0.1, 86400, c.read_timeout_s);
    num("eject_after_failures", 1, 1000, c.eject_after_failures);
    num("eject_base_s", 0.01, 3600, c.eject_base_s);
    num("eject_max_s", 0.01, 86400, c.eject_max_s);
    num("max_retries", 0, 100, c.max_retries);
    num("max_resumes", 0, 100, c.max_resumes);
    num("max_outstanding", 1, 1e9, c.max_outstanding);
    num("max_waiting", 0, 1e9, c.max_waiting);
    num("retry_after_s", 1, 3600, c.retry_after_s);
    num("hold_timeout_s", 0, 3600, c.hold_timeout_s);
    num("hold_max_requests", 1, 1e6, c.hold_max_requests);
    num("max_request_body", 1024, 1 << 30, c.max_request_body);
    num("breaker_threshold", 0, 100, c.breaker_threshold);
    num("breaker_window_s", 1, 86400, c.breaker_window_s);
    num("breaker_min_samples", 1, 1e6, c.breaker_min_samples);
    num("breaker_rollback_windows", 1, 1000, c.breaker_rollback_windows);
    num("long_prompt_tokens", 1, 1e7, c.long_prompt_tokens);
    num("canary_tolerance", 0, 10, c.canary_tolerance);
    num("canary_min_samples", 1, 1e7, c.canary_min_samples);
    num("canary_max_samples", 1, 1e8, c.canary_max_samples);
}

const std::set<std::string>& router_keys() {
    static const std::set<std::string> keys = {"host",
                                               "port",
                                               "pools",
                                               "api_keys",
                                               "admin_api_keys",
                                               "admin_read_open",
                                               "access_log",
                                               "backend_admin_key",
                                               "session_header",
                                               "affinity_prefix_chars",
                                               "affinity_load_factor",
                                               "kv_usage_weight",
                                               "health_interval_s",
                                               "health_timeout_s",
                                               "connect_timeout_s",
                                               "read_timeout_s",
                                               "eject_after_failures",
                                               "eject_base_s",
                                               "eject_max_s",
                                               "max_retries",
                                               "max_resumes",
                                               "max_outstanding",
                                               "max_waiting",
                                               "retry_after_s",
                                               "hold_timeout_s",
                                               "hold_max_requests",
                                               "max_request_body",
                                               "breaker_threshold",
                                               "breaker_window_s",
                                               "breaker_min_samples",
                                               "breaker_rollback_windows",
                                               "long_prompt_tokens",
                                               "canary_tolerance",
                                               "canary_min_samples",
                                               "canary_max_samples",
                                               "state_dir"};
    return keys;
}

}  // namespace

Status read_router_table(const toml::table& t, std::string_view file, RouterConfig& c, bool check) {
    TomlReader r{std::string(file)};
    r.only(t, "router", router_keys());
    if (auto v = r.str(t, "router", "host")) c.host = *v;
    if (auto v = r.strings(t, "router", "api_keys")) c.api_keys = *v;
    if (auto v = r.strings(t, "router", "admin_api_keys")) c.admin_api_keys = *v;
    if (auto v = r.boolean(t, "router", "admin_read_open")) c.admin_read_open = *v;
    if (auto v = r.boolean(t, "router", "access_log")) c.access_log = *v;
    if (auto v = r.str(t, "router", "session_header")) c.session_header = *v;
    if (auto v = r.str(t, "router", "backend_admin_key")) c.backend_admin_key = *v;
    if (auto v = r.str(t, "router", "state_dir")) c.state_dir = *v;
    read_numbers(r, t, c);
    if (const toml::node* n = t.get("pools")) {
        const toml::array* a = n->as_array();
        if (!a) r.fail(n, "router.pools", "expected [[router.pools]] tables");
        for (size_t i = 0; a && i < a->size(); ++i) {
            const toml::table* pt = (*a)[i].as_table();
            const std::string prefix = fmt::format("router.pools[{}]", i);
            if (!pt) {
                r.fail(&(*a)[i], prefix, "expected a table");
                break;
            }
            PoolConfig p;
            read_pool(r, *pt, prefix, p);
            c.pools.push_back(std::move(p));
        }
    }
    if (r.failed()) return r.error();
    for (auto& s : c.session_header) s = char(std::tolower(static_cast<unsigned char>(s)));
    if (!check) return ok_status();
    if (auto s = validate(c); !s.ok()) {
        return make_error(ErrorCode::kInvalidFile, "{}: {}", file, s.error().message);
    }
    return ok_status();
}

Status read_schedule_table(const toml::table& t, std::string_view file, RouterConfig& c) {
    TomlReader r{std::string(file)};
    r.only(t, "schedule", {"time_zone", "entries"});
    if (auto v = r.str(t, "schedule", "time_zone")) c.schedule_time_zone = *v;
    if (auto v = r.strings(t, "schedule", "entries")) c.schedule = *v;
    if (r.failed()) return r.error();
    const int line = int(t.source().begin.line);
    auto s = parse_schedule(c.schedule_time_zone, c.schedule);
    if (!s)
        return make_error(ErrorCode::kInvalidFile, "{}:{}:schedule: {}", file, line,
                          s.error().message);
    for (const auto& e : s->entries) {
        if (e.action == ScheduleEntry::Action::kReverse) continue;
        const bool known = std::any_of(c.pools.begin(), c.pools.end(), [&](const PoolConfig& p) {
            return p.name == e.pool && p.role == PoolRole::kPrimary;
        });
        if (!known) {
            return make_error(ErrorCode::kInvalidFile,
                              "{}:{}:schedule: '{}' names '{}', which is not a primary pool", file,
                              line, e.text, e.pool);
        }
    }
    return ok_status();
}

Result<RouterConfig> load_router_file(const std::string& path) {
    PAGODA_ASSIGN_OR_RETURN(toml::table t, parse_toml_file(path));
    RouterConfig c;
    TomlReader r{path};
    r.only(t, "", {"router", "schedule"});
    if (r.failed()) return r.error();
    const toml::table* rt = r.table(t, "", "router");
    if (r.failed()) return r.error();
    if (!rt) return make_error(ErrorCode::kInvalidFile, "{}: no [router] table", path);
    PAGODA_TRY(read_router_table(*rt, path, c));
    const toml::table* st = r.table(t, "", "schedule");
    if (r.failed()) return r.error();
    if (st) PAGODA_TRY(read_schedule_table(*st, path, c));
    return c;
}

}  // namespace pagoda::router

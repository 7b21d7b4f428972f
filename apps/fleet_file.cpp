#include "apps/fleet_file.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "apps/commands.h"
#include "base/toml_reader.h"

namespace pagoda::app {

Status check_serve_args(const std::vector<std::string>& args) {
    CLI::App app{"pagoda"};
    std::function<int()> action;
    add_serve(app, action);
    std::vector<std::string> argv = {"pagoda", "serve"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> ptrs;
    for (auto& a : argv) ptrs.push_back(a.data());
    try {
        app.parse(int(ptrs.size()), ptrs.data());
    } catch (const CLI::ParseError& e) {
        return make_error(ErrorCode::kInvalidArgument, "{}", e.what());
    }
    return ok_status();
}

namespace {

// A profile table's keys as `pagoda serve` flags.
Profile read_profile(TomlReader& r, const std::string& name, const toml::table& t) {
    Profile p;
    p.name = name;
    const std::string prefix = "profiles." + name;
    for (const auto& [key, v] : t) {
        const std::string k(key.str());
        const std::string flag = "--" + k;
        auto scalar = [&](const toml::node& n) -> std::optional<std::string> {
            if (auto s = n.as_string()) return s->get();
            if (auto i = n.as_integer()) return std::to_string(i->get());
            if (auto f = n.as_floating_point()) return fmt::format("{}", f->get());
            r.fail(&n, TomlReader::key(prefix, k), "expected a string, number or boolean");
            return std::nullopt;
        };
        if (auto b = v.as_boolean()) {
            if (b->get()) p.args.push_back(flag);
        } else if (auto a = v.as_array()) {
            for (const auto& e : *a) {
                if (auto s = scalar(e)) p.args.insert(p.args.end(), {flag, *s});
            }
        } else if (auto s = scalar(v)) {
            p.args.insert(p.args.end(), {flag, *s});
        }
    }
    for (const char* reserved : {"--port", "--host"}) {
        if (std::find(p.args.begin(), p.args.end(), reserved) != p.args.end()) {
            r.fail(&t, prefix, fmt::format("{} is set by the fleet (base_port, host)", reserved));
        }
    }
    if (!r.failed()) {
        if (auto s = check_serve_args(p.args); !s) r.fail(&t, prefix, s.error().message);
    }
    return p;
}

void read_fleet_table(TomlReader& r, const toml::table& t, FleetFile& f) {
    r.only(
        t, "fleet",
        {"name", "host", "base_port", "state_dir", "image", "drain_timeout_s", "prometheus_url"});
    if (auto v = r.str(t, "fleet", "prometheus_url")) f.prometheus_url = *v;
    if (auto v = r.str(t, "fleet", "name")) f.name = *v;
    if (auto v = r.str(t, "fleet", "host")) f.host = *v;
    if (auto v = r.number(t, "fleet", "base_port", 1, 65000)) f.base_port = int(*v);
    if (auto v = r.str(t, "fleet", "state_dir")) f.state_dir = *v;
    f.image = std::string("pagoda:") + PAGODA_VERSION;  // the image of the build that renders
    if (auto v = r.str(t, "fleet", "image")) f.image = *v;
    if (auto v = r.number(t, "fleet", "drain_timeout_s", 0, 3600)) f.drain_timeout_s = *v;
}

Status fill_pools(FleetFile& f) {
    int port = f.base_port;
    for (auto& p : f.router.pools) {
        if (p.profile.empty()) continue;  // an outside pool (backends, file or DNS)
        if (f.profiles.count(p.profile) == 0) {
            std::string names;
            for (const auto& [n, _] : f.profiles) names += (names.empty() ? "" : ", ") + n;
            return make_error(ErrorCode::kInvalidFile,
                              "{}: pool '{}' names profile '{}'; the "
                              "profiles are: {}",
                              f.path, p.name, p.profile, names);
        }
        if (p.sized()) {  // replicas: the start count, within the bounds
            if (p.replicas == 0) p.replicas = p.sizing.min_replicas;
            p.replicas = std::clamp(p.replicas, p.sizing.min_replicas, p.sizing.max_replicas);
            if (p.sizing.min_replicas == 0 && f.router.hold_timeout_s == 0) {
                f.router.hold_timeout_s = 60;  // a pool at zero: hold its requests while it wakes
            }
        } else if (p.replicas < 1) {
            return make_error(ErrorCode::kInvalidFile,
                              "{}: pool '{}' needs replicas >= 1 (or max_replicas, to size it)",
                              f.path, p.name);
        }
        if (!p.backends.empty() || !p.dns.empty() || !p.backends_file.empty()) {
            return make_error(ErrorCode::kInvalidFile,
                              "{}: pool '{}' has a profile and backends: give one or the other",
                              f.path, p.name);
        }
        // A sized pool gets a port for each replica it may run.
        const int slots = p.sized() ? p.sizing.max_replicas : p.replicas;
        for (int i = 0; i < slots; ++i) {
            p.backends.push_back(fmt::format("http://127.0.0.1:{}", port++));
        }
    }
    if (f.router.port >= f.base_port && f.router.port < port) {
        return make_error(ErrorCode::kInvalidFile,
                          "{}: the router's port {} is one of the replicas' ports {}-{}", f.path,
                          f.router.port, f.base_port, port - 1);
    }
    return ok_status();
}

}  // namespace

Result<FleetFile> load_fleet_file(const std::string& path) {
    PAGODA_ASSIGN_OR_RETURN(toml::table t, parse_toml_file(path));
    FleetFile f;
    f.path = path;
    TomlReader r{path};
    r.only(t, "", {"fleet", "profiles", "router", "schedule"});
    if (const toml::table* ft = r.table(t, "", "fleet")) read_fleet_table(r, *ft, f);
    if (const toml::table* pt = r.table(t, "", "profiles")) {
        for (const auto& [k, v] : *pt) {
            const toml::table* one = v.as_table();
            if (!one) {
                r.fail(&v, "profiles." + std::string(k.str()), "expected a table of serve flags");
                continue;
            }
            f.profiles[std::string(k.str())] = read_profile(r, std::string(k.str()), *one);
        }
    }
    const toml::table* rt = r.table(t, "", "router");
    if (r.failed()) return r.error();
    if (!rt) return make_error(ErrorCode::kInvalidFile, "{}: no [router] table with pools", path);
    PAGODA_TRY(router::read_router_table(*rt, path, f.router, false));
    PAGODA_TRY(fill_pools(f));
    if (auto s = router::validate(f.router); !s) {
        return make_error(ErrorCode::kInvalidFile, "{}: {}", path, s.error().message);
    }
    if (const toml::table* st = r.table(t, "", "schedule")) {
        PAGODA_TRY(router::read_schedule_table(*st, path, f.router));
    }
    if (r.failed()) return r.error();
    if (f.router.state_dir.empty()) f.router.state_dir = f.state_dir;
    return f;
}

}  // namespace pagoda::app

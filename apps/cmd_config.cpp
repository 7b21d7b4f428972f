// `pagoda config get|set|history|rollback --url URL`: the versioned configuration of a
// running `pagoda serve` over its admin API (GET/PUT /admin/config, history, rollback);
// `pagoda config settings`: the settings table itself, offline.
// Prints the server's JSON answer; exits 1 on an HTTP error (the message printed), 2 on
// bad arguments.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "apps/cli_common.h"
#include "apps/commands.h"
#include "http/client.h"
#include "settings/settings.h"

namespace pagoda::app {
namespace {

using json = nlohmann::json;

struct ConfigFlags {
    std::string url = "http://127.0.0.1:8000";
    std::string admin_key;              // else PAGODA_ADMIN_API_KEY
    std::vector<std::string> settings;  // KEY=VALUE for set
    std::string reason;
    int limit = 20;
    int64_t to = 0;  // rollback target; 0 = the last stable version
    int64_t if_match = 0;
};

// KEY=VALUE -> {"KEY": VALUE}; VALUE as JSON when it parses (8, "f16"), else as a string.
Result<json> parse_settings(const std::vector<std::string>& kvs) {
    json patch = json::object();
    for (const auto& kv : kvs) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0) {
            return make_error(ErrorCode::kInvalidArgument,
                              "'{}' is not KEY=VALUE (for example max_num_seqs=64)", kv);
        }
        const std::string value = kv.substr(eq + 1);
        json v = json::parse(value, nullptr, false);
        patch[kv.substr(0, eq)] = v.is_discarded() ? json(value) : v;
    }
    if (patch.empty()) {
        return make_error(ErrorCode::kInvalidArgument,
                          "nothing to set: give KEY=VALUE pairs (for example block_size=32)");
    }
    return patch;
}

// The settings table (settings/settings.h) as text, Markdown (docs/operations.md) or JSON.
void print_settings(const std::string& format) {
    if (format == "markdown") {
        std::fputs(settings::markdown_table().c_str(), stdout);
        return;
    }
    json out = json::array();
    for (const settings::Spec& s : settings::all()) {
        const auto d = settings::default_value(s);
        json j = {{"name", s.name},
                  {"flag", s.flag()},
                  {"toml_key", s.flag().substr(2)},
                  {"allowed", s.allowed()},
                  {"default", settings::to_json(s, d)},
                  {"live", s.live()},
                  {"knob", settings::is_knob(s)},
                  {"help", s.help}};
        if (s.kind == settings::Kind::kInt || s.kind == settings::Kind::kBytes)
            j["range"] = {s.min, s.max};
        if (!s.int_choices.empty()) j["choices"] = s.int_choices;
        if (s.kind == settings::Kind::kChoice) {
            j["choices"] = json::array();
            for (auto c : s.choices) j["choices"].push_back(std::string(c.substr(0, c.find('|'))));
        }
        const char* kinds[] = {"int", "bytes", "bool", "choice"};
        j["type"] = kinds[int(s.kind)];
        out.push_back(j);
    }
    if (format == "json") {
        std::printf("%s\n", out.dump(2).c_str());
        return;
    }
    for (const json& j : out) {
        std::printf("%-30s %-8s %-24s default %-8s %s\n", j["name"].get<std::string>().c_str(),
                    j["live"].get<bool>() ? "live" : "restart",
                    j["allowed"].get<std::string>().c_str(), j["default"].dump().c_str(),
                    j["help"].get<std::string>().c_str());
    }
}

int request(const ConfigFlags& f, const std::string& method, const std::string& path,
            const std::string& body) {
    return admin_request({f.url, f.admin_key}, method, path, body, f.if_match);
}

void common_flags(CLI::App* c, ConfigFlags& f) {
    c->add_option("--url", f.url, "Base URL of the pagoda server")->capture_default_str();
    c->add_option("--admin-api-key", f.admin_key,
                  "Admin key (default: PAGODA_ADMIN_API_KEY; none on loopback)");
}

}  // namespace

void add_config(CLI::App& app, std::function<int()>& action) {
    auto f = std::make_shared<ConfigFlags>();
    CLI::App* c = app.add_subcommand(
        "config", "Read and change a running server's versioned configuration (/admin/config)");
    c->require_subcommand(1);
    CLI::App* get = c->add_subcommand("get", "Print the running version and its settings");
    common_flags(get, *f);
    get->callback(
        [f, &action] { action = [f] { return request(*f, "GET", "/admin/config", ""); }; });

    CLI::App* set =
        c->add_subcommand("set",
                          "Change settings (KEY=VALUE ...; step knobs, block_size, kv_cache_dtype, "
                          "kv_cache_memory): a new version, applied live");
    common_flags(set, *f);
    set->add_option("settings", f->settings, "KEY=VALUE pairs, e.g. max_num_seqs=64 block_size=32")
        ->required();
    set->add_option("--reason", f->reason, "Why (recorded with the version)");
    set->add_option("--if-match", f->if_match,
                    "Only if this version is still current (409 otherwise)");
    set->callback([f, &action] {
        action = [f] {
            auto patch = parse_settings(f->settings);
            if (!patch.ok()) {
                fail(patch.error());
                return 2;
            }
            if (!f->reason.empty()) (*patch)["reason"] = f->reason;
            return request(*f, "PUT", "/admin/config", patch->dump());
        };
    });

    CLI::App* table = c->add_subcommand(
        "settings", "Print every engine setting (flag, TOML key, range, default, live or not)");
    auto format = std::make_shared<std::string>("text");
    table->add_option("--format", *format, "text, markdown (the docs' table) or json")
        ->capture_default_str()
        ->check(CLI::IsMember({"text", "markdown", "json"}));
    table->callback([format, &action] {
        action = [format] {
            print_settings(*format);
            return 0;
        };
    });

    CLI::App* hist = c->add_subcommand("history", "List versions, newest first");
    common_flags(hist, *f);
    hist->add_option("-n,--limit", f->limit, "How many")
        ->capture_default_str()
        ->check(CLI::Range(1, 10000));
    hist->callback([f, &action] {
        action = [f] {
            return request(*f, "GET", "/admin/config/history?limit=" + std::to_string(f->limit),
                           "");
        };
    });

    CLI::App* rb = c->add_subcommand(
        "rollback", "Return to a version (--to ID) or to the last stable one (a new version)");
    common_flags(rb, *f);
    rb->add_option("--to", f->to, "Version id (default: the last stable version)");
    rb->add_option("--reason", f->reason, "Why (recorded; also the metric's reason label)");
    rb->callback([f, &action] {
        action = [f] {
            json body = json::object();
            if (f->to > 0) body["to"] = f->to;
            if (!f->reason.empty()) body["reason"] = f->reason;
            return request(*f, "POST", "/admin/config/rollback", body.dump());
        };
    });
}

}  // namespace pagoda::app

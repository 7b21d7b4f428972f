#include "apps/config_file.h"

#include <fmt/core.h>
#include <toml++/toml.h>

#include <CLI/CLI.hpp>

#include "base/toml_reader.h"

namespace pagoda::app {

namespace {

std::string scalar_text(const toml::node& n) {
    if (auto s = n.as_string()) return s->get();
    if (auto i = n.as_integer()) return std::to_string(i->get());
    if (auto f = n.as_floating_point()) return fmt::format("{}", f->get());
    if (auto b = n.as_boolean()) return b->get() ? "true" : "false";
    return "";
}

}  // namespace

void add_config_file_option(CLI::App* app, std::string& path) {
    app->add_option("--config", path,
                    "TOML file of these flags, long names as keys (max-num-seqs = 64); the "
                    "command line wins over it. With `serve` it seeds the first config version")
        ->check(CLI::ExistingFile);
}

Status apply_config_file(CLI::App* app, const std::string& path) {
    if (path.empty()) return ok_status();
    auto parsed = parse_toml_file(path, TomlErrorStyle::kProse);
    if (!parsed.ok()) {
        return make_error(ErrorCode::kInvalidArgument, "--config {}", parsed.error().message);
    }
    const toml::table& t = *parsed;
    for (const auto& [k, node] : t) {
        std::string key(k.str());
        for (char& c : key) c = c == '_' ? '-' : c;
        const auto line = node.source().begin.line;
        CLI::Option* opt = key == "config" ? nullptr : app->get_option_no_throw("--" + key);
        if (opt == nullptr) {
            return make_error(ErrorCode::kInvalidArgument,
                              "--config {}: line {}: unknown key \"{}\"; keys are the long flag "
                              "names of `pagoda {} --help` (e.g. max-num-seqs = 64)",
                              path, line, k.str(), app->get_name());
        }
        if (node.is_table()) {
            return make_error(ErrorCode::kInvalidArgument,
                              "--config {}: line {}: \"{}\" is a table; the file is flat (key = "
                              "value)",
                              path, line, k.str());
        }
        if (opt->count() > 0) continue;  // the command line wins
        std::vector<std::string> inputs;
        if (const toml::array* a = node.as_array()) {
            for (const toml::node& e : *a) inputs.push_back(scalar_text(e));
        } else {
            inputs.push_back(scalar_text(node));
        }
        try {
            opt->add_result(inputs);
            opt->run_callback();
        } catch (const CLI::Error& e) {
            return make_error(ErrorCode::kInvalidArgument, "--config {}: line {}: {}: {}", path,
                              line, k.str(), e.what());
        }
    }
    return ok_status();
}

}  // namespace pagoda::app

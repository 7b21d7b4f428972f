#pragma once
// TomlReader: typed reads from a toml++ table with errors of the form FILE:LINE:KEY: reason,
// the first one kept. Unknown keys are errors that list the allowed ones. Header-only; used
// by the parsers of configuration files (router, fleet).

#include <fmt/format.h>
#include <toml++/toml.h>

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace pagoda {

// Parses a TOML file; a syntax error is FILE:LINE: what.
inline Result<toml::table> parse_toml_file(const std::string& path) {
    try {
        return toml::parse_file(path);
    } catch (const toml::parse_error& e) {
        return make_error(ErrorCode::kInvalidFile, "{}:{}: {}", path, e.source().begin.line,
                          e.description());
    }
}

class TomlReader {
  public:
    explicit TomlReader(std::string file) : file_(std::move(file)) {}
    bool failed() const { return err_.has_value(); }
    Error error() const { return *err_; }
    const std::string& file() const { return file_; }

    void fail(const toml::node* n, std::string_view key, std::string_view reason) {
        if (err_) return;
        const int line = n ? int(n->source().begin.line) : 0;
        err_ = make_error(ErrorCode::kInvalidFile, "{}:{}:{}: {}", file_, line, key, reason);
    }
    std::optional<std::string> str(const toml::table& t, std::string_view prefix,
                                   std::string_view k) {
        const toml::node* n = t.get(k);
        if (!n) return std::nullopt;
        if (auto s = n->as_string()) return s->get();
        fail(n, key(prefix, k), "expected a string");
        return std::nullopt;
    }
    std::optional<bool> boolean(const toml::table& t, std::string_view prefix, std::string_view k) {
        const toml::node* n = t.get(k);
        if (!n) return std::nullopt;
        if (auto b = n->as_boolean()) return b->get();
        fail(n, key(prefix, k), "expected true or false");
        return std::nullopt;
    }
    std::optional<double> number(const toml::table& t, std::string_view prefix, std::string_view k,
                                 double lo, double hi) {
        const toml::node* n = t.get(k);
        if (!n) return std::nullopt;
        double v = 0;
        if (auto i = n->as_integer()) {
            v = double(i->get());
        } else if (auto f = n->as_floating_point()) {
            v = f->get();
        } else {
            fail(n, key(prefix, k), "expected a number");
            return std::nullopt;
        }
        if (!(v >= lo && v <= hi)) {
            fail(n, key(prefix, k), fmt::format("{} is outside [{}, {}]", v, lo, hi));
            return std::nullopt;
        }
        return v;
    }
    // A list of strings (a single string is a list of one).
    std::optional<std::vector<std::string>> strings(const toml::table& t, std::string_view prefix,
                                                    std::string_view k) {
        const toml::node* n = t.get(k);
        if (!n) return std::nullopt;
        std::vector<std::string> out;
        if (auto s = n->as_string()) return std::vector<std::string>{s->get()};
        const toml::array* a = n->as_array();
        if (!a) {
            fail(n, key(prefix, k), "expected a list of strings");
            return std::nullopt;
        }
        for (const auto& e : *a) {
            auto s = e.as_string();
            if (!s) {
                fail(&e, key(prefix, k), "expected a list of strings");
                return std::nullopt;
            }
            out.push_back(s->get());
        }
        return out;
    }
    const toml::table* table(const toml::table& t, std::string_view prefix, std::string_view k) {
        const toml::node* n = t.get(k);
        if (!n) return nullptr;
        if (auto tt = n->as_table()) return tt;
        fail(n, key(prefix, k), "expected a table");
        return nullptr;
    }
    void only(const toml::table& t, std::string_view prefix, const std::set<std::string>& allowed) {
        for (const auto& [k, v] : t) {
            if (allowed.count(std::string(k.str())) != 0) continue;
            std::string list;
            for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
            fail(&v, key(prefix, k.str()), "unknown key (allowed: " + list + ")");
        }
    }
    static std::string key(std::string_view prefix, std::string_view k) {
        return prefix.empty() ? std::string(k) : std::string(prefix) + "." + std::string(k);
    }

  private:
    std::string file_;
    std::optional<Error> err_;
};

}  // namespace pagoda

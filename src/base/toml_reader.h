#pragma once
// The one TOML reader of every file format (router and fleet files, alert rules, bench
// scenarios, the simulator's GPU tables and measurements, --config): parse_toml (syntax
// errors with file, line and column) and TomlReader, typed reads from a toml++ table with
// errors of the form FILE:LINE:KEY: reason, the first one kept. Unknown keys are errors that
// list the allowed ones. Header-only.

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/units.h"

namespace pagoda {

// How a syntax error names its place: "SOURCE:LINE:COLUMN: what" (as compilers do), or
// "SOURCE: line LINE, column COLUMN: what" (for a flag's file: --config FILE: line 1, ...).
enum class TomlErrorStyle { kCompiler, kProse };

// Parses TOML text; `source` names it in errors (a file name, "built-in defaults").
inline Result<toml::table> parse_toml(std::string_view text, const std::string& source,
                                      TomlErrorStyle style = TomlErrorStyle::kCompiler) {
    try {
        return toml::parse(text, source);
    } catch (const toml::parse_error& e) {
        const auto& at = e.source().begin;
        if (style == TomlErrorStyle::kProse) {
            return make_error(ErrorCode::kInvalidFile, "{}: line {}, column {}: {}", source,
                              at.line, at.column, e.description());
        }
        return make_error(ErrorCode::kInvalidFile, "{}:{}:{}: {}", source, at.line, at.column,
                          e.description());
    }
}

// Reads and parses a TOML file; a file that cannot be read names the OS's reason.
inline Result<toml::table> parse_toml_file(const std::string& path,
                                           TomlErrorStyle style = TomlErrorStyle::kCompiler) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return make_error(ErrorCode::kIo, "{}: cannot read: {}", path, std::strerror(errno));
    }
    std::stringstream text;
    text << in.rdbuf();
    return parse_toml(text.str(), path, style);
}

class TomlReader {
  public:
    // `columns`: errors as FILE:LINE:COLUMN: KEY: reason (bench scenarios).
    explicit TomlReader(std::string file, bool columns = false)
        : file_(std::move(file)), columns_(columns) {}
    bool failed() const { return err_.has_value(); }
    Error error() const { return *err_; }
    const std::string& file() const { return file_; }

    void fail(const toml::node* n, std::string_view key, std::string_view reason) {
        if (err_) return;
        const int line = n ? int(n->source().begin.line) : 0;
        if (columns_) {
            const int col = n ? int(n->source().begin.column) : 0;
            err_ = make_error(ErrorCode::kInvalidFile, "{}:{}:{}: {}: {}", file_, line, col, key,
                              reason);
            return;
        }
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
    // An array of tables ([[key]]): f(index, count, element, element's key) for each, in
    // order, until an error. Not an array, empty, or an element that is not a table: an error.
    template <typename F>
    void each_table(const toml::node* n, const std::string& key, F&& f) {
        const toml::array* arr = n->as_array();
        if (!arr || arr->empty()) {
            fail(n, key, fmt::format("expected one or more [[{}]] tables", key));
            return;
        }
        for (size_t i = 0; i < arr->size() && !failed(); ++i) {
            const toml::node& e = *arr->get(i);
            const std::string k = fmt::format("{}[{}]", key, i);
            if (!e.is_table()) {
                fail(&e, k, "expected a table");
                return;
            }
            f(i, arr->size(), e, k);
        }
    }
    // A duration string ("30s", "5m") in milliseconds.
    std::optional<int64_t> duration(const toml::table& t, std::string_view prefix,
                                    std::string_view k) {
        auto s = str(t, prefix, k);
        if (!s) return std::nullopt;
        auto d = parse_duration_ms(*s);
        if (!d.ok()) {
            fail(t.get(k), key(prefix, k), d.error().message);
            return std::nullopt;
        }
        return *d;
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
    // "router" + "pools" -> "router.pools"; a prefix that ends in '.' is used as it is.
    static std::string key(std::string_view prefix, std::string_view k) {
        if (prefix.empty() || prefix.back() == '.') return std::string(prefix) + std::string(k);
        return std::string(prefix) + "." + std::string(k);
    }

  private:
    std::string file_;
    bool columns_ = false;
    std::optional<Error> err_;
};

// One table of a file read through a TomlReader, with the messages of the bench's scenario
// files: "expected a number, got a string", "is out of range; allowed: from 1 to 10", and
// unknown keys checked by finish().
class TomlTable {
  public:
    TomlTable(const toml::table& t, std::string prefix, TomlReader& ctx)
        : t_(t), prefix_(std::move(prefix)), ctx_(ctx) {}

    std::string key(std::string_view k) const {
        return prefix_.empty() ? std::string(k) : prefix_ + "." + std::string(k);
    }
    const toml::node* get(std::string_view k) {
        used_.insert(std::string(k));
        return t_.get(k);
    }
    bool has(std::string_view k) const { return t_.contains(k); }
    void fail(const toml::node* n, std::string_view k, std::string_view reason) {
        ctx_.fail(n, key(k), reason);
    }

    void number(std::string_view k, double& out, double min, double max,
                bool min_exclusive = false) {
        const toml::node* n = get(k);
        if (!n) return;
        double v;
        if (auto i = n->as_integer()) {
            v = double(i->get());
        } else if (auto f = n->as_floating_point()) {
            v = f->get();
        } else {
            return ctx_.fail(n, key(k), fmt::format("expected a number, got {}", type_name(*n)));
        }
        if (!std::isfinite(v) || v < min || v > max || (min_exclusive && v == min)) {
            return ctx_.fail(n, key(k),
                             fmt::format("{} is out of range; allowed: {} {} to {}", v,
                                         min_exclusive ? "above" : "from", min, max));
        }
        out = v;
    }
    void integer(std::string_view k, int64_t& out, int64_t min, int64_t max) {
        const toml::node* n = get(k);
        if (!n) return;
        auto i = n->as_integer();
        if (!i)
            return ctx_.fail(n, key(k), fmt::format("expected an integer, got {}", type_name(*n)));
        if (i->get() < min || i->get() > max) {
            return ctx_.fail(
                n, key(k),
                fmt::format("{} is out of range; allowed: {} to {}", i->get(), min, max));
        }
        out = i->get();
    }
    void string(std::string_view k, std::string& out) {
        const toml::node* n = get(k);
        if (!n) return;
        auto s = n->as_string();
        if (!s)
            return ctx_.fail(n, key(k), fmt::format("expected a string, got {}", type_name(*n)));
        out = s->get();
    }
    void choice(std::string_view k, std::string& out, const std::vector<std::string>& allowed) {
        const toml::node* n = t_.get(k);
        string(k, out);
        if (n && !ctx_.failed() &&
            std::find(allowed.begin(), allowed.end(), out) == allowed.end()) {
            std::string list;
            for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
            ctx_.fail(n, key(k), fmt::format("'{}' is not allowed; use one of: {}", out, list));
        }
    }
    const toml::table* table(std::string_view k) {
        const toml::node* n = get(k);
        if (!n) return nullptr;
        if (!n->is_table()) {
            ctx_.fail(n, key(k), fmt::format("expected a table, got {}", type_name(*n)));
            return nullptr;
        }
        return n->as_table();
    }
    // Unknown keys are errors (a typo must not silently change the load).
    void finish(const std::vector<std::string>& allowed) {
        for (auto&& [k, v] : t_) {
            if (std::find(allowed.begin(), allowed.end(), std::string(k.str())) == allowed.end()) {
                std::string list;
                for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
                ctx_.fail(&v, key(k.str()), fmt::format("unknown key; allowed here: {}", list));
                return;
            }
        }
    }
    static const char* type_name(const toml::node& n) {
        switch (n.type()) {
            case toml::node_type::string: return "a string";
            case toml::node_type::integer: return "an integer";
            case toml::node_type::floating_point: return "a number";
            case toml::node_type::boolean: return "a boolean";
            case toml::node_type::array: return "an array";
            case toml::node_type::table: return "a table";
            default: return "a date or time";
        }
    }

  private:
    const toml::table& t_;
    std::string prefix_;
    TomlReader& ctx_;
    std::set<std::string> used_;
};

}  // namespace pagoda

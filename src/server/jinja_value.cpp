#include <cctype>
#include <cmath>
#include <optional>

#include "server/jinja_internal.h"

namespace pagoda::server::jinja {

[[noreturn]] void fail(int line, const std::string& what) {
    throw JinjaError(fmt::format("chat template line {}: {}", line, what));
}

const json& undefined() {
    static const json u(json::value_t::discarded);
    return u;
}

bool truthy(const json& v) {
    if (is_undef(v) || v.is_null()) return false;
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number_integer()) return v.get<int64_t>() != 0;
    if (v.is_number()) return v.get<double>() != 0.0;
    if (v.is_string()) return !v.get_ref<const std::string&>().empty();
    if (v.is_array() || v.is_object()) return !v.empty();
    return true;
}

void py_json(const json& v, std::string& out, const JsonStyle& st, int depth) {
    const bool nl = st.indent >= 0;
    auto newline = [&](int d) {
        out += '\n';
        out.append(size_t(st.indent) * size_t(d), ' ');
    };
    const char* sep = nl ? "," : ", ";
    if (v.is_object() || v.is_array()) {
        const bool obj = v.is_object();
        out += obj ? "{" : "[";
        if (v.empty()) {
            out += obj ? "}" : "]";
            return;
        }
        bool first = true;
        for (const auto& [k, x] : v.items()) {
            if (!first) out += sep;
            first = false;
            if (nl) newline(depth + 1);
            if (obj)
                out +=
                    json(k).dump(-1, ' ', st.ensure_ascii, json::error_handler_t::replace) + ": ";
            py_json(x, out, st, depth + 1);
        }
        if (nl) newline(depth);
        out += obj ? "}" : "]";
    } else if (is_undef(v)) {
        out += "null";
    } else {
        out += v.dump(-1, ' ', st.ensure_ascii, json::error_handler_t::replace);
    }
}

std::string to_str(const json& v) {
    if (is_undef(v)) return "";
    if (v.is_string()) return v.get<std::string>();
    if (v.is_null()) return "None";
    if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
    if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
    if (v.is_number()) return fmt::format("{}", v.get<double>());
    std::string s;
    py_json(v, s);
    return s;
}

json* Scope::find(const std::string& name) {
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
        auto f = it->find(name);
        if (f != it->end()) return &f->second;
    }
    return nullptr;
}

namespace {

bool is_ws(char ch) { return std::isspace(static_cast<unsigned char>(ch)) != 0; }

// strip/lstrip/rstrip with an optional set of characters (default: whitespace).
std::string strip(const std::string& x, const std::string& set, bool left, bool right) {
    auto drop = [&](char ch) {
        return set.empty() ? is_ws(ch) : set.find(ch) != std::string::npos;
    };
    size_t b = 0, e = x.size();
    while (left && b < e && drop(x[b])) ++b;
    while (right && e > b && drop(x[e - 1])) --e;
    return x.substr(b, e - b);
}

std::string change_case(const std::string& s, const std::string& m) {
    std::string r = s;
    bool start = true;
    for (size_t k = 0; k < r.size(); ++k) {
        const unsigned char ch = static_cast<unsigned char>(r[k]);
        if (m == "upper") {
            r[k] = char(std::toupper(ch));
        } else if (m == "lower") {
            r[k] = char(std::tolower(ch));
        } else if (m == "capitalize") {
            r[k] = char(k == 0 ? std::toupper(ch) : std::tolower(ch));
        } else {  // title
            r[k] = char(start ? std::toupper(ch) : std::tolower(ch));
            start = !std::isalpha(ch);
        }
    }
    return r;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
    if (from.empty()) return s;
    std::string r;
    size_t p = 0, q;
    while ((q = s.find(from, p)) != std::string::npos) {
        r += s.substr(p, q - p) + to;
        p = q + from.size();
    }
    return r + s.substr(p);
}

// Python's str.split: on runs of whitespace without a separator.
json split_string(const std::string& s, const json* sep_arg, int line) {
    json out = json::array();
    if (sep_arg == nullptr || sep_arg->is_null()) {
        size_t p = 0;
        while (p < s.size()) {
            while (p < s.size() && is_ws(s[p])) ++p;
            size_t q = p;
            while (q < s.size() && !is_ws(s[q])) ++q;
            if (q > p) out.push_back(s.substr(p, q - p));
            p = q;
        }
        return out;
    }
    const std::string sep = to_str(*sep_arg);
    if (sep.empty()) fail(line, "split() with an empty separator");
    size_t p = 0, q;
    while ((q = s.find(sep, p)) != std::string::npos) {
        out.push_back(s.substr(p, q - p));
        p = q + sep.size();
    }
    out.push_back(s.substr(p));
    return out;
}

std::optional<json> string_method(const std::string& s, const std::string& m,
                                  const std::vector<json>& a, int line) {
    const std::string chars = !a.empty() && a[0].is_string() ? a[0].get<std::string>() : "";
    if (m == "strip") return strip(s, chars, true, true);
    if (m == "lstrip") return strip(s, chars, true, false);
    if (m == "rstrip") return strip(s, chars, false, true);
    if (m == "upper" || m == "lower" || m == "title" || m == "capitalize") {
        return change_case(s, m);
    }
    if (m == "startswith" && !a.empty()) return s.rfind(to_str(a[0]), 0) == 0;
    if (m == "endswith" && !a.empty()) {
        const std::string t = to_str(a[0]);
        return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
    }
    if (m == "replace" && a.size() >= 2) return replace_all(s, to_str(a[0]), to_str(a[1]));
    if (m == "split") return split_string(s, a.empty() ? nullptr : &a[0], line);
    return std::nullopt;
}

std::optional<json> dict_method(const json& obj, const std::string& m, const std::vector<json>& a) {
    if (m == "items" || m == "keys" || m == "values") {
        json out = json::array();
        for (const auto& [k, v] : obj.items()) {
            out.push_back(m == "items" ? json::array({k, v}) : m == "keys" ? json(k) : v);
        }
        return out;
    }
    if (m == "get" && !a.empty()) {
        auto it = obj.find(to_str(a[0]));
        return it != obj.end() ? *it : (a.size() > 1 ? a[1] : json(nullptr));
    }
    return std::nullopt;
}

}  // namespace

json call_method(const json& obj, const std::string& m, const std::vector<json>& a, int line) {
    std::optional<json> r;
    if (obj.is_string()) r = string_method(obj.get_ref<const std::string&>(), m, a, line);
    if (obj.is_object()) r = dict_method(obj, m, a);
    if (r) return *r;
    fail(line, fmt::format("unknown method '{}' on a {}", m,
                           is_undef(obj) ? "undefined value" : obj.type_name()));
}

namespace {

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, ...).
json tojson(const json& v, const std::vector<json>& a, const json& kw, int line) {
    JsonStyle st;
    for (const auto& [k, x] : kw.items()) {
        if (k == "indent" && (x.is_number_integer() || x.is_null())) {
            st.indent = x.is_null() ? -1 : int(x.get<int64_t>());
        } else if (k == "ensure_ascii" && x.is_boolean()) {
            st.ensure_ascii = x.get<bool>();
        } else if (k != "sort_keys" || !x.is_boolean()) {  // keys are kept sorted already
            fail(line, fmt::format("tojson: keyword argument '{}' is not supported (indent, "
                                   "ensure_ascii, sort_keys)",
                                   k));
        }
    }
    if (a.size() == 1 && a[0].is_number_integer()) st.indent = int(a[0].get<int64_t>());
    std::string s;
    py_json(v, s, st);
    return s;
}

}  // namespace

json apply_filter(const std::string& f, const json& v, const std::vector<json>& a, int line,
                  const json& kw) {
    if (!kw.empty() && f != "tojson") {
        fail(line, fmt::format("filter '{}' takes no keyword argument '{}'", f, kw.begin().key()));
    }
    if (f == "trim") return call_method(json(to_str(v)), "strip", {}, line);
    if (f == "length" || f == "count") {
        if (v.is_string()) return json(v.get_ref<const std::string&>().size());
        if (v.is_array() || v.is_object()) return json(v.size());
        return json(0);
    }
    if (f == "tojson") return tojson(v, a, kw, line);
    if (f == "upper" || f == "lower" || f == "capitalize" || f == "title")
        return call_method(json(to_str(v)), f, {}, line);
    if (f == "string") return to_str(v);
    if (f == "safe") return v;
    if (f == "int") {
        if (v.is_number()) return json(int64_t(v.get<double>()));
        try {
            return json(std::stoll(to_str(v)));
        } catch (...) {
            return json(0);
        }
    }
    if (f == "first") return v.is_array() && !v.empty() ? v.front() : undefined();
    if (f == "last") return v.is_array() && !v.empty() ? v.back() : undefined();
    if (f == "default" || f == "d") {
        const bool use = is_undef(v) || (a.size() > 1 && truthy(a[1]) && !truthy(v));
        return use ? (a.empty() ? json("") : a[0]) : v;
    }
    if (f == "join") {
        std::string s;
        const std::string sep = a.empty() ? "" : to_str(a[0]);
        if (v.is_array()) {
            for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + to_str(v[i]);
        }
        return s;
    }
    if (f == "items") return call_method(v, "items", {}, line);
    if (f == "list") return v.is_array() ? v : json::array();
    fail(line, fmt::format("unknown filter '{}'", f));
}

bool apply_test(const std::string& t, const json& v, const std::vector<json>& a, int line) {
    if (t == "defined") return !is_undef(v);
    if (t == "undefined") return is_undef(v);
    if (t == "none") return v.is_null();
    if (t == "string") return v.is_string();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.is_number_integer();
    if (t == "boolean") return v.is_boolean();
    if (t == "mapping") return v.is_object();
    if (t == "sequence" || t == "iterable") return v.is_array() || v.is_string() || v.is_object();
    if (t == "true") return v.is_boolean() && v.get<bool>();
    if (t == "false") return v.is_boolean() && !v.get<bool>();
    if ((t == "equalto" || t == "eq" || t == "sameas") && !a.empty()) return v == a[0];
    if (t == "odd" && v.is_number_integer()) return v.get<int64_t>() % 2 != 0;
    if (t == "even" && v.is_number_integer()) return v.get<int64_t>() % 2 == 0;
    fail(line, fmt::format("unknown test '{}'", t));
}

json arith(const std::string& op, const json& l, const json& r, int line) {
    if (op == "+" && l.is_string() && r.is_string())
        return l.get<std::string>() + r.get<std::string>();
    if (op == "+" && l.is_array() && r.is_array()) {
        json out = l;
        for (const auto& x : r) out.push_back(x);
        return out;
    }
    if (!l.is_number() || !r.is_number()) {
        fail(line, fmt::format("'{}' needs numbers (or two strings / lists for +), got {} and {}",
                               op, is_undef(l) ? "undefined" : l.type_name(),
                               is_undef(r) ? "undefined" : r.type_name()));
    }
    const bool ints = l.is_number_integer() && r.is_number_integer();
    if (ints && op != "/") {
        const int64_t a = l.get<int64_t>(), b = r.get<int64_t>();
        if (op == "+") return a + b;
        if (op == "-") return a - b;
        if (op == "*") return a * b;
        if (b == 0) fail(line, "division by zero");
        if (op == "//") return a / b;
        if (op == "%") return ((a % b) + b) % b;
    }
    const double a = l.get<double>(), b = r.get<double>();
    if (op == "+") return a + b;
    if (op == "-") return a - b;
    if (op == "*") return a * b;
    if (b == 0) fail(line, "division by zero");
    if (op == "/") return a / b;
    if (op == "//") return std::floor(a / b);
    return std::fmod(a, b);
}

bool less(const json& l, const json& r, int line) {
    if (l.is_number() && r.is_number()) return l.get<double>() < r.get<double>();
    if (l.is_string() && r.is_string()) return l.get<std::string>() < r.get<std::string>();
    fail(line, "comparison needs two numbers or two strings");
}

}  // namespace pagoda::server::jinja

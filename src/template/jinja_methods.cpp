// Methods of Python's str, list and dict that templates call, loop.cycle, and the global
// functions: raise_exception, strftime_now, range, namespace, dict.
#include <algorithm>
#include <cctype>

#include "template/jinja_internal.h"

namespace pagoda::jinja {

namespace {

bool is_ws(char ch) { return std::isspace(static_cast<unsigned char>(ch)) != 0; }

std::string strip(const std::string& x, const json& chars, bool left, bool right) {
    const bool ws = !chars.is_string();
    const std::string set = ws ? "" : chars.get<std::string>();
    auto drop = [&](char ch) { return ws ? is_ws(ch) : set.find(ch) != std::string::npos; };
    size_t b = 0, e = x.size();
    while (left && b < e && drop(x[b])) ++b;
    while (right && e > b && drop(x[e - 1])) --e;
    return x.substr(b, e - b);
}

std::string replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count) {
    std::string r;
    size_t p = 0;
    for (int64_t n = 0; count < 0 || n < count; ++n) {
        const size_t q = from.empty() ? (p <= s.size() ? p : std::string::npos) : s.find(from, p);
        if (q == std::string::npos) break;
        r += s.substr(p, q - p) + to;
        if (from.empty()) {
            if (q < s.size()) r += s[q];
            p = q + 1;
        } else {
            p = q + from.size();
        }
    }
    return p <= s.size() ? r + s.substr(p) : r;
}

// str.split / str.rsplit (Python's rules: no separator splits on runs of whitespace).
json split(const std::string& s, const json& sep_arg, int64_t maxsplit, bool from_right, int line) {
    std::vector<std::string> parts;
    if (!sep_arg.is_string()) {
        size_t p = 0;
        while (p < s.size()) {
            while (p < s.size() && is_ws(s[p])) ++p;
            if (p >= s.size()) break;
            size_t q = p;
            while (q < s.size() && !is_ws(s[q])) ++q;
            if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) q = s.size();
            parts.push_back(s.substr(p, q - p));
            p = q;
        }
        if (maxsplit >= 0 && !parts.empty() && int64_t(parts.size()) > maxsplit) {
            parts.back() = strip(parts.back(), json(), false, true);
        }
    } else {
        const std::string sep = sep_arg.get<std::string>();
        if (sep.empty()) fail(line, "empty separator");
        if (!from_right) {
            size_t p = 0, q;
            while ((maxsplit < 0 || int64_t(parts.size()) < maxsplit) &&
                   (q = s.find(sep, p)) != std::string::npos) {
                parts.push_back(s.substr(p, q - p));
                p = q + sep.size();
            }
            parts.push_back(s.substr(p));
        } else {
            size_t e = s.size();
            std::vector<std::string> rev;
            size_t q;
            while ((maxsplit < 0 || int64_t(rev.size()) < maxsplit) && e >= sep.size() &&
                   (q = s.rfind(sep, e - sep.size())) != std::string::npos) {
                rev.push_back(s.substr(q + sep.size(), e - q - sep.size()));
                e = q;
            }
            parts.push_back(s.substr(0, e));
            parts.insert(parts.end(), rev.rbegin(), rev.rend());
        }
    }
    return json(parts);
}

bool affix(const std::string& s, const json& arg, bool prefix, int line) {
    if (arg.is_array()) {
        return std::any_of(arg.begin(), arg.end(),
                           [&](const json& a) { return affix(s, a, prefix, line); });
    }
    if (!arg.is_string()) fail(line, "startswith/endswith need a string or a tuple of strings");
    const std::string& t = arg.get_ref<const std::string&>();
    if (t.size() > s.size()) return false;
    return prefix ? s.compare(0, t.size(), t) == 0
                  : s.compare(s.size() - t.size(), t.size(), t) == 0;
}

std::string change_case(const std::string& s, const std::string& m) {
    std::string r = s;
    bool start = true;
    for (size_t k = 0; k < r.size(); ++k) {
        const auto ch = static_cast<unsigned char>(r[k]);
        if (m == "upper") {
            r[k] = char(std::toupper(ch));
        } else if (m == "lower") {
            r[k] = char(std::tolower(ch));
        } else if (m == "capitalize") {
            r[k] = char(k == 0 ? std::toupper(ch) : std::tolower(ch));
        } else {  // title: a letter after a non-letter starts a word
            r[k] = char(start ? std::toupper(ch) : std::tolower(ch));
            start = !std::isalpha(ch) && ch < 0x80;
        }
    }
    return r;
}

// str.format: {} {0} {name}, with {{ and }} as braces.
std::string format(const std::string& f, const Args& a, int line) {
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < f.size(); ++i) {
        if ((f[i] == '{' || f[i] == '}') && i + 1 < f.size() && f[i + 1] == f[i]) {
            out += f[i++];
            continue;
        }
        if (f[i] != '{') {
            out += f[i];
            continue;
        }
        const size_t close = f.find('}', i);
        if (close == std::string::npos) fail(line, "format: unmatched '{'");
        const std::string field = f.substr(i + 1, close - i - 1);
        json v;
        if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
            const size_t k = field.empty() ? auto_index++ : size_t(std::stoul(field));
            if (k >= a.pos.size()) fail(line, "format: replacement index out of range");
            v = a.pos[k];
        } else {
            if (!a.kw.contains(field)) fail(line, fmt::format("format: no argument '{}'", field));
            v = a.kw[field];
        }
        out += to_str(v);
        i = close;
    }
    return out;
}

std::optional<json> string_method(const std::string& s, const std::string& m, const Args& args,
                                  int line) {
    auto arg = [&](size_t i, const char* name) {
        return i < args.pos.size() ? args.pos[i] : args.kw.value(name, undefined());
    };
    auto int_arg = [&](size_t i, const char* name, int64_t def) {
        const json v = arg(i, name);
        return v.is_number_integer() ? v.get<int64_t>() : def;
    };
    if (m == "strip" || m == "lstrip" || m == "rstrip") {
        return strip(s, arg(0, "chars"), m != "rstrip", m != "lstrip");
    }
    if (m == "upper" || m == "lower" || m == "title" || m == "capitalize") return change_case(s, m);
    if (m == "startswith" || m == "endswith")
        return affix(s, arg(0, "prefix"), m == "startswith", line);
    if (m == "replace") {
        return replace(s, to_str(arg(0, "old")), to_str(arg(1, "new")), int_arg(2, "count", -1));
    }
    if (m == "split" || m == "rsplit") {
        return split(s, arg(0, "sep"), int_arg(1, "maxsplit", -1), m == "rsplit", line);
    }
    if (m == "splitlines") return split(s, json("\n"), -1, false, line);
    if (m == "format") return format(s, args, line);
    if (m == "join") {
        std::string out;
        bool first = true;
        for (const auto& x : iterate(arg(0, "iterable"), line)) {
            out += (first ? "" : s) + to_str(x);
            first = false;
        }
        return out;
    }
    if (m == "find" || m == "rfind" || m == "count") {
        const std::string t = to_str(arg(0, "sub"));
        if (m == "find") return s.find(t) == std::string::npos ? -1 : int64_t(s.find(t));
        if (m == "rfind") return s.rfind(t) == std::string::npos ? -1 : int64_t(s.rfind(t));
        int64_t n = 0;
        for (size_t p = 0; !t.empty() && (p = s.find(t, p)) != std::string::npos; p += t.size())
            ++n;
        return n;
    }
    if (m == "removeprefix" || m == "removesuffix") {
        const std::string t = to_str(arg(0, "prefix"));
        if (m == "removeprefix") return affix(s, json(t), true, line) ? s.substr(t.size()) : s;
        return affix(s, json(t), false, line) ? s.substr(0, s.size() - t.size()) : s;
    }
    auto all = [&](int (*pred)(int)) {
        return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) {
            return pred(static_cast<unsigned char>(c)) != 0;
        });
    };
    if (m == "isdigit") return all(std::isdigit);
    if (m == "isalpha") return all(std::isalpha);
    if (m == "isalnum") return all(std::isalnum);
    if (m == "isspace") return all(std::isspace);
    return std::nullopt;
}

std::optional<json> list_method(json* target, const json& list, const std::string& m, const Args& a,
                                int line) {
    const bool mutating = m == "append" || m == "extend" || m == "pop" || m == "insert";
    if (mutating && target == nullptr) {
        fail(line, fmt::format("list.{}() needs a variable or attribute to change", m));
    }
    if (m == "append") {
        if (a.pos.size() != 1) fail(line, "append() takes exactly one argument");
        target->push_back(a.pos[0]);
        return json(nullptr);
    }
    if (m == "extend") {
        for (const auto& x : iterate(a.pos.empty() ? undefined() : a.pos[0], line))
            target->push_back(x);
        return json(nullptr);
    }
    if (m == "pop") {
        if (target->empty()) fail(line, "pop from empty list");
        int64_t i = a.pos.empty() ? -1 : a.pos[0].get<int64_t>();
        if (i < 0) i += int64_t(target->size());
        if (i < 0 || i >= int64_t(target->size())) fail(line, "pop index out of range");
        json v = (*target)[size_t(i)];
        target->erase(size_t(i));
        return v;
    }
    if (m == "index" || m == "count") {
        const json x = a.pos.empty() ? undefined() : a.pos[0];
        int64_t n = 0;
        for (size_t i = 0; i < list.size(); ++i) {
            if (!py_equal(list[i], x)) continue;
            if (m == "index") return int64_t(i);
            ++n;
        }
        if (m == "index") fail(line, "index(): the value is not in the list");
        return n;
    }
    return std::nullopt;
}

std::optional<json> dict_method(const json& obj, const std::string& m, const Args& a) {
    if (m == "items" || m == "keys" || m == "values") {
        json out = json::array();
        for (const auto& [k, v] : obj.items()) {
            out.push_back(m == "items" ? json::array({k, v}) : m == "keys" ? json(k) : v);
        }
        return out;
    }
    if (m == "get") {
        const json k = a.pos.empty() ? undefined() : a.pos[0];
        auto it = k.is_string() ? obj.find(k.get<std::string>()) : obj.end();
        return it != obj.end() ? *it : (a.pos.size() > 1 ? a.pos[1] : json(nullptr));
    }
    if (m == "cycle" && obj.contains("index0") && obj.contains("revindex0") && !a.pos.empty()) {
        return a.pos[obj["index0"].get<size_t>() % a.pos.size()];  // loop.cycle
    }
    return std::nullopt;
}

}  // namespace

json call_method(Scope&, json* target, const json& obj_in, const std::string& m, const Args& a,
                 int line) {
    json t;
    const json& obj = plain(obj_in, t);
    if (is_markup(obj_in)) target = nullptr;
    std::optional<json> r;
    if (obj.is_string()) r = string_method(obj.get_ref<const std::string&>(), m, a, line);
    if (obj.is_array()) r = list_method(target, obj, m, a, line);
    if (obj.is_object()) r = dict_method(obj, m, a);
    if (r) return *r;
    if (is_undef(obj)) fail(line, fmt::format("'{}' of an undefined value", m));
    fail(line, fmt::format("'{}' object has no method '{}'", type_name(obj), m));
}

namespace {

json range(const std::vector<json>& a, int line) {
    for (const auto& x : a) {
        if (!x.is_number_integer()) fail(line, "range() arguments must be integers");
    }
    if (a.empty() || a.size() > 3) fail(line, "range() takes 1 to 3 arguments");
    const int64_t b = a.size() == 1 ? 0 : a[0].get<int64_t>();
    const int64_t e = a.size() == 1 ? a[0].get<int64_t>() : a[1].get<int64_t>();
    const int64_t step = a.size() == 3 ? a[2].get<int64_t>() : 1;
    if (step == 0) fail(line, "range() step must not be zero");
    json out = json::array();
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step) {
        if (out.size() >= 100000) fail(line, "range() of more than 100000 numbers");
        out.push_back(i);
    }
    return out;
}

std::string strftime_now(const Scope& s, const std::string& f, int line) {
    const std::time_t t = s.now ? *s.now : std::time(nullptr);
    std::tm tm{};
    if (localtime_r(&t, &tm) == nullptr) fail(line, "strftime_now: the time is out of range");
    if (f.empty()) return "";
    char buf[512];
    const size_t n = std::strftime(buf, sizeof buf, f.c_str(), &tm);
    if (n == 0) fail(line, "strftime_now: the format is too long or empty");
    return std::string(buf, n);
}

}  // namespace

namespace {
const char* const kGlobals[] = {"raise_exception", "strftime_now", "range", "namespace", "dict"};
constexpr uint64_t kGlobalBase = uint64_t(1) << 40;
}  // namespace

json global_value(const std::string& name) {
    for (size_t i = 0; i < std::size(kGlobals); ++i) {
        if (name == kGlobals[i]) return json::binary({}, kGlobalBase + i);
    }
    return undefined();
}

std::optional<std::string> global_name(const json& v) {
    if (!is_macro(v) || !v.get_binary().has_subtype()) return std::nullopt;
    const uint64_t k = v.get_binary().subtype();
    if (k < kGlobalBase || k - kGlobalBase >= std::size(kGlobals)) return std::nullopt;
    return kGlobals[k - kGlobalBase];
}

std::optional<json> call_global(Scope& s, const std::string& name, const Args& a, int line) {
    if (name == "raise_exception") {
        throw TemplateRaised(a.pos.empty() ? std::string() : to_str(a.pos[0]));
    }
    if (name == "strftime_now") {
        if (a.pos.size() != 1 || !a.pos[0].is_string())
            fail(line, "strftime_now() takes one format string");
        return strftime_now(s, a.pos[0].get<std::string>(), line);
    }
    if (name == "range") return range(a.pos, line);
    if (name == "namespace" || name == "dict") {
        json o = json::object();
        for (const auto& p : a.pos) {  // namespace({'a': 1}) and dict({'a': 1})
            if (!p.is_object()) fail(line, fmt::format("{}() takes a dict or keywords", name));
            for (const auto& [k, v] : p.items()) o[k] = v;
        }
        for (const auto& [k, v] : a.kw.items()) o[k] = v;
        return o;
    }
    return std::nullopt;
}

}  // namespace pagoda::jinja

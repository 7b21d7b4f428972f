// Values as Python sees them: truth, str(), repr(), json.dumps, equality and ordering,
// arithmetic, `in`, len(), indexing, slicing and iteration, with strings counted in code
// points.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "template/jinja_internal.h"

namespace pagoda::jinja {

void check_size(size_t n, int line) {
    if (n > (size_t(16) << 20)) fail(line, "a value larger than 16 MiB (16 Mi items)");
}

[[noreturn]] void fail(int line, const std::string& what) {
    throw JinjaError(line, what, fmt::format("chat template line {}: {}", line, what));
}

const json& undefined() {
    static const json u(json::value_t::discarded);
    return u;
}

json make_markup(std::string text) {
    json m = json::object();
    m["\x01markup"] = std::move(text);
    return m;
}

bool is_markup(const json& v) {
    return v.is_object() && v.size() == 1 && v.begin().key() == "\x01markup";
}

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&#34;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

const char* type_name(const json& v) {
    if (is_undef(v)) return "Undefined";
    if (is_markup(v)) return "Markup";
    if (is_macro(v)) return "Macro";
    if (v.is_null()) return "NoneType";
    if (v.is_boolean()) return "bool";
    if (v.is_number_integer()) return "int";
    if (v.is_number()) return "float";
    if (v.is_string()) return "str";
    if (v.is_array()) return "list";
    return "dict";
}

bool truthy(const json& v) {
    if (is_undef(v) || v.is_null()) return false;
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number_integer()) return v.get<int64_t>() != 0;
    if (v.is_number()) return v.get<double>() != 0.0;
    if (v.is_string()) return !v.get_ref<const std::string&>().empty();
    if (is_markup(v)) return !v.begin()->get_ref<const std::string&>().empty();
    if (v.is_array() || v.is_object()) return !v.empty();
    return true;
}

std::string py_float(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    char buf[40];
    for (int prec = 1; prec <= 17; ++prec) {  // the shortest text that reads back exactly
        std::snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (std::strtod(buf, nullptr) == d) break;
    }
    std::string s = buf;
    const size_t e = s.find('e');
    if (e != std::string::npos) {  // Python: 1e+16, 1e-05
        const double mag = std::fabs(d);
        if (mag >= 1e16 || mag < 1e-4) return s;
        std::snprintf(buf, sizeof buf, "%.17g", d);  // in range: positional notation
        s = buf;
    }
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return s;
}

namespace {

std::string repr_string(const std::string& s) {
    const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
    const char q = dq ? '"' : '\'';
    std::string out(1, q);
    for (unsigned char c : s) {
        if (c == '\\' || c == static_cast<unsigned char>(q)) {
            out += '\\';
            out += char(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f) {
            out += fmt::format("\\x{:02x}", c);
        } else {
            out += char(c);
        }
    }
    return out + q;
}

}  // namespace

std::string py_repr(const json& v) {
    if (is_markup(v)) return "Markup(" + repr_string(v.begin()->get<std::string>()) + ")";
    if (v.is_string()) return repr_string(v.get_ref<const std::string&>());
    if (v.is_array()) {
        std::string s = "[";
        for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + py_repr(v[i]);
        return s + "]";
    }
    if (v.is_object()) {
        std::string s = "{";
        bool first = true;
        for (const auto& [k, x] : v.items()) {
            s += (first ? "" : ", ") + repr_string(k) + ": " + py_repr(x);
            first = false;
        }
        return s + "}";
    }
    return to_str(v);
}

std::string to_str(const json& v) {
    if (is_undef(v)) return "";
    if (v.is_string()) return v.get<std::string>();
    if (is_markup(v)) return v.begin()->get<std::string>();
    if (v.is_null()) return "None";
    if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
    if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
    if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
    if (v.is_number()) return py_float(v.get<double>());
    if (is_macro(v)) return "<Macro>";
    return py_repr(v);
}

void py_json(const json& v, std::string& out, const JsonStyle& st, int depth, int line) {
    if (is_markup(v)) return py_json(v.begin().value(), out, st, depth, line);
    if (v.is_object() || v.is_array()) {
        if (depth > 200) fail(line, "tojson: value nested too deeply");
        const bool obj = v.is_object();
        if (v.empty()) {
            out += obj ? "{}" : "[]";
            return;
        }
        out += obj ? "{" : "[";
        std::vector<std::pair<std::string, const json*>> items;
        for (const auto& [k, x] : v.items()) items.emplace_back(k, &x);
        if (obj && st.sort_keys)
            std::stable_sort(items.begin(), items.end(),
                             [](auto& a, auto& b) { return a.first < b.first; });
        const bool nl = st.indent >= 0;
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += st.item_sep;
            if (nl) out += "\n" + std::string(size_t(st.indent) * size_t(depth + 1), ' ');
            if (obj) {
                out += json(items[i].first)
                           .dump(-1, ' ', st.ensure_ascii, json::error_handler_t::replace);
                out += st.key_sep;
            }
            py_json(*items[i].second, out, st, depth + 1, line);
        }
        if (nl) out += "\n" + std::string(size_t(st.indent) * size_t(depth), ' ');
        out += obj ? "}" : "]";
    } else if (is_undef(v) || is_macro(v)) {
        fail(line, fmt::format("Object of type {} is not JSON serializable", type_name(v)));
    } else if (v.is_number_float()) {
        const double d = v.get<double>();
        out += std::isnan(d)   ? "NaN"
               : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                               : py_float(d);
    } else {
        out += v.dump(-1, ' ', st.ensure_ascii, json::error_handler_t::replace);
    }
}

bool py_equal(const json& l_in, const json& r_in) {
    json lt, rt;
    const json& l = plain(l_in, lt);
    const json& r = plain(r_in, rt);
    if (is_undef(l) || is_undef(r)) return is_undef(l) && is_undef(r);
    if (l.is_number() && r.is_number()) {
        if (l.is_number_float() || r.is_number_float()) return l.get<double>() == r.get<double>();
        return l.get<int64_t>() == r.get<int64_t>();
    }
    if ((l.is_boolean() && r.is_number()) || (l.is_number() && r.is_boolean())) {
        return (l.is_boolean() ? double(l.get<bool>()) : l.get<double>()) ==
               (r.is_boolean() ? double(r.get<bool>()) : r.get<double>());
    }
    if (l.is_array() && r.is_array()) {
        if (l.size() != r.size()) return false;
        for (size_t i = 0; i < l.size(); ++i) {
            if (!py_equal(l[i], r[i])) return false;
        }
        return true;
    }
    if (l.is_object() && r.is_object()) {  // dicts compare regardless of order
        if (l.size() != r.size()) return false;
        for (const auto& [k, x] : l.items()) {
            auto it = r.find(k);
            if (it == r.end() || !py_equal(x, *it)) return false;
        }
        return true;
    }
    return l == r;
}

bool py_less(const json& l_in, const json& r_in, int line) {
    json lt, rt;
    const json& l = plain(l_in, lt);
    const json& r = plain(r_in, rt);
    if ((l.is_number() || l.is_boolean()) && (r.is_number() || r.is_boolean())) {
        auto num = [](const json& x) {
            return x.is_boolean() ? double(x.get<bool>()) : x.get<double>();
        };
        return num(l) < num(r);
    }
    if (l.is_string() && r.is_string()) return l.get<std::string>() < r.get<std::string>();
    if (l.is_array() && r.is_array()) {
        for (size_t i = 0; i < l.size() && i < r.size(); ++i) {
            if (py_less(l[i], r[i], line)) return true;
            if (py_less(r[i], l[i], line)) return false;
        }
        return l.size() < r.size();
    }
    fail(line, fmt::format("'<' not supported between instances of '{}' and '{}'", type_name(l),
                           type_name(r)));
}

namespace {

json repeat(const json& seq, int64_t n) {
    if (seq.is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq.get_ref<const std::string&>();
        return out;
    }
    json out = json::array();
    for (int64_t i = 0; i < n; ++i) {
        for (const auto& x : seq) out.push_back(x);
    }
    return out;
}

// Python's ints do not overflow; 64-bit ones do, and say so.
json int_arith(const std::string& op, int64_t a, int64_t b, int line) {
    int64_t r = 0;
    auto checked = [&](bool overflow) -> json {
        if (overflow) fail(line, fmt::format("integer overflow in {} {} {}", a, op, b));
        return r;
    };
    if (op == "+") return checked(__builtin_add_overflow(a, b, &r));
    if (op == "-") return checked(__builtin_sub_overflow(a, b, &r));
    if (op == "*") return checked(__builtin_mul_overflow(a, b, &r));
    if (op == "**") {
        if (b < 0) return std::pow(double(a), double(b));
        r = 1;
        for (int64_t i = 0; i < b; ++i) {
            if (__builtin_mul_overflow(r, a, &r)) return checked(true);
            if (r == 0 || r == 1) break;  // 0 ** n, 1 ** n
        }
        return r;
    }
    if (b == 0) fail(line, "division by zero");
    if (op == "/") return double(a) / double(b);
    if (a == INT64_MIN && b == -1) return checked(true);
    int64_t q = a / b, m = a % b;
    if (m != 0 && ((m < 0) != (b < 0))) {  // Python floors
        --q;
        m += b;
    }
    return op == "//" ? json(q) : json(m);
}

}  // namespace

json arith(const std::string& op, const json& l_in, const json& r_in, int line) {
    if (op == "+" && (is_markup(l_in) || is_markup(r_in)) &&
        (l_in.is_string() || is_markup(l_in)) && (r_in.is_string() || is_markup(r_in))) {
        auto side = [](const json& x) {  // Markup + str escapes the str
            return is_markup(x) ? to_str(x) : html_escape(x.get<std::string>());
        };
        return make_markup(side(l_in) + side(r_in));
    }
    json lt, rt;
    const json& l = plain(l_in, lt);
    const json& r = plain(r_in, rt);
    if (op == "+" && l.is_string() && r.is_string()) {
        check_size(l.get_ref<const std::string&>().size() + r.get_ref<const std::string&>().size(),
                   line);
        return l.get<std::string>() + r.get<std::string>();
    }
    if (op == "+" && l.is_array() && r.is_array()) {
        check_size(l.size() + r.size(), line);
        json out = l;
        for (const auto& x : r) out.push_back(x);
        return out;
    }
    if (op == "*" && (l.is_string() || l.is_array()) && r.is_number_integer()) {
        const int64_t n = r.get<int64_t>();
        const int64_t size =
            l.is_string() ? int64_t(l.get_ref<const std::string&>().size()) : int64_t(l.size());
        if (n > 0 && size > 0 && n > (int64_t(4) << 20) / size) {
            fail(line, "repetition would be larger than 4 MiB");
        }
        return repeat(l, n);
    }
    if (is_undef(l) || is_undef(r)) fail(line, fmt::format("'{}' on an undefined value", op));
    auto num = [](const json& x) { return x.is_number() || x.is_boolean(); };
    if (!num(l) || !num(r)) {
        fail(line, fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op,
                               type_name(l), type_name(r)));
    }
    auto as_int = [](const json& x) {
        return x.is_boolean() ? int64_t(x.get<bool>()) : x.get<int64_t>();
    };
    if (!l.is_number_float() && !r.is_number_float())
        return int_arith(op, as_int(l), as_int(r), line);
    const double a = l.is_boolean() ? double(l.get<bool>()) : l.get<double>();
    const double b = r.is_boolean() ? double(r.get<bool>()) : r.get<double>();
    if (op == "+") return a + b;
    if (op == "-") return a - b;
    if (op == "*") return a * b;
    if (op == "**") return std::pow(a, b);
    if (b == 0) fail(line, "float division by zero");
    if (op == "/") return a / b;
    if (op == "//") return std::floor(a / b);
    return a - b * std::floor(a / b);
}

bool contains(const json& c_in, const json& item_in, int line) {
    json ct, it;
    const json& c = plain(c_in, ct);
    const json& item = plain(item_in, it);
    if (c.is_string()) {
        if (!item.is_string()) {
            fail(line, fmt::format("'in <string>' requires string as left operand, not {}",
                                   type_name(item)));
        }
        return c.get_ref<const std::string&>().find(item.get_ref<const std::string&>()) !=
               std::string::npos;
    }
    if (c.is_array()) {
        return std::any_of(c.begin(), c.end(), [&](const json& x) { return py_equal(x, item); });
    }
    if (c.is_object()) return item.is_string() && c.contains(item.get<std::string>());
    if (is_undef(c)) return false;
    fail(line, fmt::format("argument of type '{}' is not iterable", type_name(c)));
}

std::vector<std::string> code_points(const std::string& s) {
    std::vector<std::string> out;
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        n = std::min(n, s.size() - i);
        out.push_back(s.substr(i, n));
        i += n;
    }
    return out;
}

int64_t py_len(const json& v_in, int line) {
    json t;
    const json& v = plain(v_in, t);
    if (v.is_string()) return int64_t(code_points(v.get_ref<const std::string&>()).size());
    if (v.is_array() || v.is_object()) return int64_t(v.size());
    if (is_undef(v)) return 0;
    fail(line, fmt::format("object of type '{}' has no len()", type_name(v)));
}

json item_of(const json& o_in, const json& k, int line) {
    json t;
    const json& o = plain(o_in, t);
    if (is_undef(o)) fail(line, fmt::format("cannot index an undefined value with {}", py_repr(k)));
    if (o.is_object() && k.is_string()) {
        auto it = o.find(k.get<std::string>());
        return it != o.end() ? *it : undefined();
    }
    if ((o.is_array() || o.is_string()) && k.is_number_integer()) {
        const int64_t n = py_len(o, line);
        int64_t i = k.get<int64_t>();
        if (i < 0) i += n;
        if (i < 0 || i >= n) return undefined();
        return o.is_array() ? o[size_t(i)]
                            : json(code_points(o.get_ref<const std::string&>())[size_t(i)]);
    }
    if (k.is_string()) return attr_of(o, k.get<std::string>(), line);
    return undefined();
}

json attr_of(const json& o, const std::string& name, int line) {
    if (is_undef(o)) fail(line, fmt::format("'{}' of an undefined value", name));
    if (o.is_object()) {
        auto it = o.find(name);
        if (it != o.end()) return *it;
    }
    return undefined();
}

json slice_of(const json& o_in, std::optional<int64_t> lo, std::optional<int64_t> hi,
              std::optional<int64_t> step_in, int line) {
    json t;
    const json& o = plain(o_in, t);
    if (!o.is_array() && !o.is_string()) fail(line, fmt::format("cannot slice a {}", type_name(o)));
    const int64_t step = step_in.value_or(1);
    if (step == 0) fail(line, "slice step cannot be zero");
    const std::vector<std::string> cps =
        o.is_string() ? code_points(o.get_ref<const std::string&>()) : std::vector<std::string>{};
    const int64_t n = o.is_string() ? int64_t(cps.size()) : int64_t(o.size());
    auto norm = [n, step](int64_t i) {
        if (i < 0) i += n;
        return step > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t b = lo ? norm(*lo) : (step > 0 ? 0 : n - 1);
    const int64_t e = hi ? norm(*hi) : (step > 0 ? n : -1);
    std::string str;
    json arr = json::array();
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step) {
        if (o.is_string()) {
            str += cps[size_t(i)];
        } else {
            arr.push_back(o[size_t(i)]);
        }
    }
    return o.is_string() ? json(str) : arr;
}

json iterate(const json& it_in, int line) {
    json t;
    const json& it = plain(it_in, t);
    if (it.is_array()) return it;
    json items = json::array();
    if (it.is_object()) {
        for (const auto& [k, v] : it.items()) items.push_back(k);
    } else if (it.is_string()) {
        for (auto& c : code_points(it.get_ref<const std::string&>())) items.push_back(c);
    } else if (!is_undef(it)) {
        fail(line, fmt::format("'{}' object is not iterable", type_name(it)));
    }
    return items;
}

json* Scope::find(const std::string& name) {
    for (size_t i = frames.size(); i > barrier; --i) {
        auto f = frames[i - 1].find(name);
        if (f != frames[i - 1].end()) return &f->second;
    }
    if (barrier > 0) {
        for (size_t i = std::min(macro_base, frames.size()); i > 0; --i) {
            auto f = frames[i - 1].find(name);
            if (f != frames[i - 1].end()) return &f->second;
        }
    }
    return nullptr;
}

std::vector<json> bind_args(const Args& a, const std::vector<std::string>& names,
                            const std::string& what, int line) {
    if (a.pos.size() > names.size()) {
        fail(line, fmt::format("{} takes at most {} arguments ({} given)", what, names.size(),
                               a.pos.size()));
    }
    std::vector<json> out(names.size(), undefined());
    for (size_t i = 0; i < a.pos.size(); ++i) out[i] = a.pos[i];
    for (const auto& [k, v] : a.kw.items()) {
        auto it = std::find(names.begin(), names.end(), k);
        if (it == names.end()) {
            std::string allowed;
            for (const auto& n : names) allowed += (allowed.empty() ? "" : ", ") + n;
            fail(line, fmt::format("{} got an unexpected keyword argument '{}' (allowed: {})", what,
                                   k, allowed.empty() ? "none" : allowed));
        }
        out[size_t(it - names.begin())] = v;
    }
    return out;
}

}  // namespace pagoda::jinja

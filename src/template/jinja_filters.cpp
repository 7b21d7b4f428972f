// Jinja2's filters and tests, with their signatures (positional and keyword arguments) and
// transformers' tojson.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "template/jinja_internal.h"

namespace pagoda::jinja {

namespace {

std::string lower(std::string s) {
    for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// `attribute` arguments: "a.b" walks dicts, digits index lists.
json get_path(const json& v, const json& path, int line) {
    if (path.is_number_integer()) return item_of(v, path, line);
    json cur = v;
    const std::string p = to_str(path);
    size_t b = 0;
    while (b <= p.size()) {
        const size_t e = std::min(p.find('.', b), p.size());
        const std::string part = p.substr(b, e - b);
        const bool digits =
            !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
        cur = is_undef(cur) ? cur
              : digits      ? item_of(cur, json(std::stoll(part)), line)
                            : item_of(cur, json(part), line);
        b = e + 1;
    }
    return cur;
}

json sort_key(const json& v, bool case_sensitive) {
    return v.is_string() && !case_sensitive ? json(lower(v.get<std::string>())) : v;
}

json sorted(json items, const json& attribute, bool case_sensitive, bool reverse, int line) {
    if (!items.is_array()) items = iterate(items, line);
    std::vector<json> v(items.begin(), items.end());
    std::stable_sort(v.begin(), v.end(), [&](const json& a, const json& b) {
        const json ka =
            sort_key(is_undef(attribute) ? a : get_path(a, attribute, line), case_sensitive);
        const json kb =
            sort_key(is_undef(attribute) ? b : get_path(b, attribute, line), case_sensitive);
        return reverse ? py_less(kb, ka, line) : py_less(ka, kb, line);
    });
    return json(v);
}

json indent(const json& v, const std::vector<json>& a) {
    const std::string pad =
        a[0].is_string()
            ? a[0].get<std::string>()
            : std::string(
                  size_t(std::clamp<int64_t>(is_undef(a[0]) ? 4 : a[0].get<int64_t>(), 0, 256)),
                  ' ');
    const bool first = truthy(a[1]), blank = truthy(a[2]);
    const std::string s = to_str(v);
    std::string out;
    size_t b = 0;
    for (bool head = true; b <= s.size(); head = false) {
        const size_t e = std::min(s.find('\n', b), s.size());
        const std::string ln = s.substr(b, e - b);
        if ((!head || first) && (blank || !ln.empty())) out += pad;
        out += ln;
        if (e < s.size()) out += '\n';
        b = e + 1;
    }
    return out;
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False).
json tojson(const json& v, const std::vector<json>& a, int line) {
    JsonStyle st;
    if (a[0].is_number_integer()) st.indent = int(std::clamp<int64_t>(a[0].get<int64_t>(), 0, 64));
    st.ensure_ascii = truthy(a[1]);
    st.item_sep = st.indent >= 0 ? "," : ", ";
    if (a[2].is_array() && a[2].size() == 2 && a[2][0].is_string() && a[2][1].is_string()) {
        st.item_sep = a[2][0].get<std::string>();
        st.key_sep = a[2][1].get<std::string>();
    } else if (!is_undef(a[2]) && !a[2].is_null()) {
        fail(line, "tojson: separators must be a pair of strings");
    }
    st.sort_keys = truthy(a[3]);
    std::string s;
    py_json(v, s, st, 0, line);
    return s;
}

json round_filter(const json& v, const std::vector<json>& a, int line) {
    if (!v.is_number()) fail(line, fmt::format("round: a number is needed, got {}", type_name(v)));
    const int64_t prec = a[0].is_number_integer() ? a[0].get<int64_t>() : 0;
    const std::string method = is_undef(a[1]) ? "common" : to_str(a[1]);
    if (method == "common" && v.is_number_integer()) return v;  // Python: round(int, n) is an int
    const double f = std::pow(10.0, double(prec)), x = v.get<double>() * f;
    double r;
    if (method == "common") {
        r = std::round(x);
    } else if (method == "ceil") {
        r = std::ceil(x);
    } else if (method == "floor") {
        r = std::floor(x);
    } else {
        fail(line, "round: method must be common, ceil or floor");
    }
    return r / f;
}

json int_filter(const json& v, const std::vector<json>& a) {
    const json def = is_undef(a[0]) ? json(0) : a[0];
    if (v.is_boolean()) return int64_t(v.get<bool>());
    if (v.is_number()) return int64_t(v.get<double>());
    const std::string s = to_str(v);
    try {
        size_t used = 0;
        const int base = a[1].is_number_integer() ? int(a[1].get<int64_t>()) : 10;
        const long long r = std::stoll(s, &used, base);
        if (used == s.size()) return int64_t(r);
        const double d = std::stod(s, &used);
        return used == s.size() ? json(int64_t(d)) : def;
    } catch (...) {
        return def;
    }
}

// select/reject(test, args...) and selectattr/rejectattr(attr, test, args...).
json select(Scope& s, const json& v, const Args& a, bool attr, bool keep, int line) {
    json out = json::array();
    const size_t t0 = attr ? 1 : 0;
    const std::string test = a.pos.size() > t0 ? to_str(a.pos[t0]) : "";
    Args targs;
    for (size_t i = t0 + 1; i < a.pos.size(); ++i) targs.pos.push_back(a.pos[i]);
    for (const auto& item : iterate(v.is_null() ? json::array() : v, line)) {  // `if seq` guard
        const json x = attr ? get_path(item, a.pos.empty() ? json("") : a.pos[0], line) : item;
        const bool pass = test.empty() ? truthy(x) : apply_test(s, test, x, targs, line);
        if (pass == keep) out.push_back(item);
    }
    return out;
}

json map_filter(Scope& s, const json& v_in, const Args& a, int line) {
    json out = json::array();
    const json v = v_in.is_null() ? json::array() : v_in;  // jinja2 guards with `if seq`
    if (a.kw.contains("attribute")) {
        const json def = a.kw.value("default", undefined());
        for (const auto& item : iterate(v, line)) {
            json x = get_path(item, a.kw["attribute"], line);
            out.push_back(is_undef(x) ? def : x);
        }
        return out;
    }
    if (a.pos.empty()) fail(line, "map: needs a filter name or attribute=");
    Args fargs{std::vector<json>(a.pos.begin() + 1, a.pos.end()), a.kw};
    for (const auto& item : iterate(v, line))
        out.push_back(apply_filter(s, to_str(a.pos[0]), item, fargs, line));
    return out;
}

json unique(const json& v, const std::vector<json>& a, int line) {
    json out = json::array();
    std::vector<json> seen;
    for (const auto& item : iterate(v, line)) {
        const json key = sort_key(is_undef(a[1]) ? item : get_path(item, a[1], line), truthy(a[0]));
        if (std::none_of(seen.begin(), seen.end(),
                         [&](const json& k) { return py_equal(k, key); })) {
            seen.push_back(key);
            out.push_back(item);
        }
    }
    return out;
}

json dictsort(const json& v, const std::vector<json>& a, int line) {
    if (!v.is_object()) fail(line, "dictsort: a dict is needed");
    const bool by_value = to_str(a[1]) == "value";
    json pairs = json::array();
    for (const auto& [k, x] : v.items()) pairs.push_back(json::array({k, x}));
    return sorted(pairs, json(by_value ? 1 : 0), truthy(a[0]), truthy(a[2]), line);
}

json min_max(const json& v, const std::vector<json>& a, bool max, int line) {
    const json items = iterate(v, line);
    if (items.empty()) return undefined();
    const json s = sorted(items, a[1], truthy(a[0]), max, line);
    return s[0];
}

json sum(const json& v, const std::vector<json>& a, int line) {
    json total = is_undef(a[1]) ? json(0) : a[1];
    for (const auto& item : iterate(v, line))
        total = arith("+", total, is_undef(a[0]) ? item : get_path(item, a[0], line), line);
    return total;
}

using Filter = std::function<json(Scope&, const json&, const Args&, int)>;
struct FilterDef {
    std::vector<std::string> params;  // empty and `raw`: the filter reads Args itself
    std::function<json(const json&, const std::vector<json>&, int)> fn;
    Filter raw;
};

using FilterTable = std::unordered_map<std::string, FilterDef>;
using V = std::vector<json>;

FilterTable filters_0() {
    return {
        {"abs",
         {{},
          [](const json& v, const V&, int l) {
              return py_less(v, json(0), l) ? arith("-", json(0), v, l) : v;
          },
          {}}},
        {"attr",
         {{"name"},
          // Python attributes only (getattr), never dict keys: nothing on JSON values.
          [](const json& v, const V&, int l) {
              if (is_undef(v)) fail(l, "attr of an undefined value");
              return undefined();
          },
          {}}},
        {"capitalize",
         {{},
          [](const json& v, const V&, int) {
              std::string s = lower(to_str(v));
              if (!s.empty()) s[0] = char(std::toupper(static_cast<unsigned char>(s[0])));
              return json(s);
          },
          {}}},
        {"center",
         {{"width"},
          [](const json& v, const V& a, int) {
              std::string s = to_str(v);
              const size_t w = a[0].is_number_integer()
                                   ? size_t(std::clamp<int64_t>(a[0].get<int64_t>(), 0, 1 << 16))
                                   : 80;
              if (s.size() >= w) return json(s);
              const size_t left = (w - s.size()) / 2;
              return json(std::string(left, ' ') + s + std::string(w - s.size() - left, ' '));
          },
          {}}},
        {"default",
         {{"default_value", "boolean"},
          [](const json& v, const V& a, int) {
              const bool use = is_undef(v) || (truthy(a[1]) && !truthy(v));
              return use ? (is_undef(a[0]) ? json("") : a[0]) : v;
          },
          {}}},
        {"dictsort", {{"case_sensitive", "by", "reverse"}, dictsort, {}}},
        {"escape",
         {{},
          [](const json& v, const V&, int) {
              return is_markup(v) ? v : make_markup(html_escape(to_str(v)));
          },
          {}}},
    };
}

FilterTable filters_1() {
    return {
        {"first",
         {{},
          [](const json& v, const V&, int l) {
              const json it = iterate(v, l);
              return it.empty() ? undefined() : it.front();
          },
          {}}},
        {"float",
         {{"default"},
          [](const json& v, const V& a, int) {
              if (v.is_number()) return json(v.get<double>());
              try {
                  return json(std::stod(to_str(v)));
              } catch (...) {
                  return is_undef(a[0]) ? json(0.0) : a[0];
              }
          },
          {}}},
        {"indent",
         {{"width", "first", "blank"},
          [](const json& v, const V& a, int) { return indent(v, a); },
          {}}},
        {"int",
         {{"default", "base"},
          [](const json& v, const V& a, int) { return int_filter(v, a); },
          {}}},
        {"items",
         {{},
          [](const json& v, const V&, int l) {
              if (is_undef(v)) return json::array();
              if (!v.is_object()) fail(l, "items: a dict is needed");
              json out = json::array();
              for (const auto& [k, x] : v.items()) out.push_back(json::array({k, x}));
              return out;
          },
          {}}},
    };
}

FilterTable filters_2() {
    return {
        {"join",
         {{"d", "attribute"},
          [](const json& v, const V& a, int l) {
              std::string s;
              const std::string sep = is_undef(a[0]) ? "" : to_str(a[0]);
              bool first = true;
              for (const auto& x : iterate(v, l)) {
                  s += (first ? "" : sep) + to_str(is_undef(a[1]) ? x : get_path(x, a[1], l));
                  first = false;
              }
              return json(s);
          },
          {}}},
        {"last",
         {{},
          [](const json& v, const V&, int l) {
              const json it = iterate(v, l);
              return it.empty() ? undefined() : it.back();
          },
          {}}},
        {"length", {{}, [](const json& v, const V&, int l) { return json(py_len(v, l)); }, {}}},
        {"list", {{}, [](const json& v, const V&, int l) { return iterate(v, l); }, {}}},
        {"lower", {{}, [](const json& v, const V&, int) { return json(lower(to_str(v))); }, {}}},
        {"map", {{}, {}, map_filter}},
        {"max",
         {{"case_sensitive", "attribute"},
          [](const json& v, const V& a, int l) { return min_max(v, a, true, l); },
          {}}},
        {"min",
         {{"case_sensitive", "attribute"},
          [](const json& v, const V& a, int l) { return min_max(v, a, false, l); },
          {}}},
        {"reject",
         {{},
          {},
          [](Scope& s, const json& v, const Args& a, int l) {
              return select(s, v, a, false, false, l);
          }}},
        {"rejectattr",
         {{},
          {},
          [](Scope& s, const json& v, const Args& a, int l) {
              return select(s, v, a, true, false, l);
          }}},
    };
}

FilterTable filters_3() {
    return {
        {"replace",
         {{"old", "new", "count"},
          [](const json& v, const V& a, int l) {
              Scope none;
              Args m{{a[0], a[1]}, json::object()};
              if (a[2].is_number_integer()) m.pos.push_back(a[2]);
              return call_method(none, nullptr, json(to_str(v)), "replace", m, l);
          },
          {}}},
        {"reverse",
         {{},
          [](const json& v, const V&, int l) {
              if (v.is_string()) return slice_of(v, std::nullopt, std::nullopt, -1, l);
              json it = iterate(v, l);
              std::reverse(it.begin(), it.end());
              return it;
          },
          {}}},
        {"round", {{"precision", "method"}, round_filter, {}}},
        {"safe",
         {{},
          [](const json& v, const V&, int) { return is_markup(v) ? v : make_markup(to_str(v)); },
          {}}},
        {"select",
         {{},
          {},
          [](Scope& s, const json& v, const Args& a, int l) {
              return select(s, v, a, false, true, l);
          }}},
        {"selectattr",
         {{},
          {},
          [](Scope& s, const json& v, const Args& a, int l) {
              return select(s, v, a, true, true, l);
          }}},
        {"sort",
         {{"reverse", "case_sensitive", "attribute"},
          [](const json& v, const V& a, int l) {
              return sorted(v, a[2], truthy(a[1]), truthy(a[0]), l);
          },
          {}}},
        {"string",
         {{}, [](const json& v, const V&, int) { return is_markup(v) ? v : json(to_str(v)); }, {}}},
        {"sum", {{"attribute", "start"}, sum, {}}},
    };
}

FilterTable filters_4() {
    return {
        {"title",
         {{},
          [](const json& v, const V&, int) {
              std::string s = to_str(v);
              bool start = true;
              for (auto& c : s) {
                  const auto u = static_cast<unsigned char>(c);
                  c = char(start ? std::toupper(u) : std::tolower(u));
                  start =
                      std::isspace(u) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
              }
              return json(s);
          },
          {}}},
        {"tojson", {{"indent", "ensure_ascii", "separators", "sort_keys"}, tojson, {}}},
        {"trim",
         {{"chars"},
          [](const json& v, const V& a, int l) {
              Scope none;
              Args m;
              if (!is_undef(a[0])) m.pos.push_back(a[0]);
              return call_method(none, nullptr, json(to_str(v)), "strip", m, l);
          },
          {}}},
        {"unique", {{"case_sensitive", "attribute"}, unique, {}}},
        {"upper",
         {{},
          [](const json& v, const V&, int) {
              std::string s = to_str(v);
              for (auto& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
              return json(s);
          },
          {}}},
        {"wordcount",
         {{},
          [](const json& v, const V&, int l) {
              Scope none;
              return json(call_method(none, nullptr, json(to_str(v)), "split", {}, l).size());
          },
          {}}},
    };
}

const FilterTable& filters() {
    static const FilterTable table = [] {
        FilterTable t;
        t.merge(filters_0());
        t.merge(filters_1());
        t.merge(filters_2());
        t.merge(filters_3());
        t.merge(filters_4());
        return t;
    }();
    return table;
}

const std::unordered_map<std::string, std::string>& filter_aliases() {
    static const std::unordered_map<std::string, std::string> a = {
        {"d", "default"}, {"e", "escape"}, {"count", "length"}};
    return a;
}

}  // namespace

json apply_filter(Scope& s, const std::string& name, const json& v_in, const Args& a, int line) {
    json t;  // Markup is a str to the filters, except those that keep it
    const bool keeps = name == "safe" || name == "string" || name == "escape" || name == "e" ||
                       name == "default" || name == "d";
    const json& v = keeps ? v_in : plain(v_in, t);
    auto al = filter_aliases().find(name);
    const std::string& f = al != filter_aliases().end() ? al->second : name;
    auto it = filters().find(f);
    if (it == filters().end()) fail(line, fmt::format("no filter named '{}'", name));
    if (it->second.raw) return it->second.raw(s, v, a, line);
    return it->second.fn(v, bind_args(a, it->second.params, fmt::format("filter '{}'", name), line),
                         line);
}

namespace {

bool is_lower(const std::string& s, bool upper) {
    bool cased = false;
    for (unsigned char c : s) {
        if (std::isalpha(c)) {
            cased = true;
            if ((upper && std::islower(c)) || (!upper && std::isupper(c))) return false;
        }
    }
    return cased;
}

using Test = std::function<bool(Scope&, const json&, const std::vector<json>&, int)>;

using TestTable = std::unordered_map<std::string, Test>;

const json& arg(const std::vector<json>& a, int l) {
    if (a.empty()) fail(l, "this test needs an argument");
    return a[0];
}

TestTable tests_0() {
    return {
        {"boolean", [](Scope&, const json& v, const V&, int) { return v.is_boolean(); }},
        {"callable", [](Scope&, const json& v, const V&, int) { return is_macro(v); }},
        {"defined", [](Scope&, const json& v, const V&, int) { return !is_undef(v); }},
        {"divisibleby", [](Scope&, const json& v, const V& a,
                           int l) { return py_equal(arith("%", v, arg(a, l), l), json(0)); }},
        {"eq", [](Scope&, const json& v, const V& a, int l) { return py_equal(v, arg(a, l)); }},
        {"escaped", [](Scope&, const json&, const V&, int) { return false; }},
        {"even", [](Scope&, const json& v, const V&,
                    int l) { return py_equal(arith("%", v, json(2), l), json(0)); }},
        {"false",
         [](Scope&, const json& v, const V&, int) { return v.is_boolean() && !v.get<bool>(); }},
        {"filter",
         [](Scope&, const json& v, const V&, int) {
             return v.is_string() && (filters().count(v.get<std::string>()) ||
                                      filter_aliases().count(v.get<std::string>()));
         }},
        {"float", [](Scope&, const json& v, const V&, int) { return v.is_number_float(); }},
        {"ge", [](Scope&, const json& v, const V& a, int l) { return !py_less(v, arg(a, l), l); }},
        {"gt", [](Scope&, const json& v, const V& a, int l) { return py_less(arg(a, l), v, l); }},
        {"in", [](Scope&, const json& v, const V& a, int l) { return contains(arg(a, l), v, l); }},
        {"integer", [](Scope&, const json& v, const V&, int) { return v.is_number_integer(); }},
        {"iterable", [](Scope&, const json& v, const V&,
                        int) { return v.is_array() || v.is_string() || v.is_object(); }},
    };
}

TestTable tests_1() {
    return {
        {"le", [](Scope&, const json& v, const V& a, int l) { return !py_less(arg(a, l), v, l); }},
        {"lower", [](Scope&, const json& v, const V&, int) { return is_lower(to_str(v), false); }},
        {"lt", [](Scope&, const json& v, const V& a, int l) { return py_less(v, arg(a, l), l); }},
        {"mapping",
         [](Scope&, const json& v, const V&, int) { return v.is_object() && !is_markup(v); }},
        {"ne", [](Scope&, const json& v, const V& a, int l) { return !py_equal(v, arg(a, l)); }},
        {"none", [](Scope&, const json& v, const V&, int) { return v.is_null(); }},
        {"number",
         [](Scope&, const json& v, const V&, int) { return v.is_number() || v.is_boolean(); }},
        {"odd", [](Scope&, const json& v, const V&,
                   int l) { return py_equal(arith("%", v, json(2), l), json(1)); }},
        {"sameas",
         [](Scope&, const json& v, const V& a, int l) {
             const json& o = arg(a, l);
             return v.type() == o.type() && py_equal(v, o) &&
                    (v.is_null() || v.is_boolean() || v.is_number() || v.is_string());
         }},
        {"sequence", [](Scope&, const json& v, const V&,
                        int) { return v.is_array() || v.is_string() || v.is_object(); }},
        {"string",
         [](Scope&, const json& v, const V&, int) { return v.is_string() || is_markup(v); }},
        {"test", [](Scope&, const json& v, const V&,
                    int) { return v.is_string() && has_test(v.get<std::string>()); }},
        {"true",
         [](Scope&, const json& v, const V&, int) { return v.is_boolean() && v.get<bool>(); }},
        {"undefined", [](Scope&, const json& v, const V&, int) { return is_undef(v); }},
        {"upper", [](Scope&, const json& v, const V&, int) { return is_lower(to_str(v), true); }},
    };
}

const TestTable& tests() {
    static const TestTable table = [] {
        TestTable t = tests_0();
        t.merge(tests_1());
        return t;
    }();
    return table;
}

const std::string& test_alias(const std::string& t) {
    static const std::unordered_map<std::string, std::string> a = {
        {"==", "eq"}, {"equalto", "eq"}, {"!=", "ne"},          {"<", "lt"}, {"lessthan", "lt"},
        {"<=", "le"}, {">", "gt"},       {"greaterthan", "gt"}, {">=", "ge"}};
    auto it = a.find(t);
    return it != a.end() ? it->second : t;
}

}  // namespace

bool has_test(const std::string& t) { return tests().count(test_alias(t)) > 0; }

bool apply_test(Scope& s, const std::string& t, const json& v, const Args& a, int line) {
    auto it = tests().find(test_alias(t));
    if (it == tests().end()) fail(line, fmt::format("no test named '{}'", t));
    if (!a.kw.empty()) fail(line, fmt::format("test '{}' takes no keyword arguments", t));
    return it->second(s, v, a.pos, line);
}

}  // namespace pagoda::jinja

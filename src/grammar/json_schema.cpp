// JSON Schema -> GBNF. One rule per schema node (named after its path), shared JSON
// primitives at the end, objects as a chain of rules so that optional properties keep
// their commas right: F_i is "the first property written is at index >= i", R_i "the
// properties after one already written, from index i".
#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <map>
#include <set>

namespace pagoda::grammar {

namespace {

using ojson = nlohmann::ordered_json;

struct SchemaError {
    std::string message;
};

const char* const kPrimitives = R"(
ws ::= ( " " | "\n" [ \t]{0,8} )?
value ::= object | array | string | number | boolean | null
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
string ::= "\"" char* "\""
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
integer ::= "-"? ( "0" | [1-9] [0-9]{0,18} )
boolean ::= "true" | "false"
null ::= "null"
)";

std::string literal(const std::string& text) { return gbnf_literal(text); }

// The JSON text of a value, as a grammar literal (enum and const).
std::string json_literal(const ojson& v) { return literal(v.dump()); }

class Converter {
  public:
    Converter(const ojson& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}
    // The rules without the primitives.
    std::string convert() {
        const std::string top = node(root_, "", 0);  // paths are JSON pointers
        std::string out =
            prefix_ + "root ::= ws " + top + "\n";  // a tokenizer may open with a space
        for (const auto& r : rules_) out += r + "\n";
        return out;
    }

  private:
    [[noreturn]] void fail(const std::string& path, const std::string& what) const {
        throw SchemaError{fmt::format("schema at {}: {}", path.empty() ? "/" : path, what)};
    }
    std::string add_rule(const std::string& path, const std::string& body) {
        std::string name = prefix_ + "n";
        for (char c : path) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
        name += "-" + std::to_string(rules_.size());
        rules_.push_back(name + " ::= " + body);
        return name;
    }
    std::string node(const ojson& s, const std::string& path, int depth);
    std::string typed(const ojson& s, const std::string& type, const std::string& path, int depth);
    std::string object(const ojson& s, const std::string& path, int depth);
    std::string array(const ojson& s, const std::string& path, int depth);
    std::string string_rule(const ojson& s, const std::string& path);
    std::string ref(const std::string& target, const std::string& path);
    void check_keywords(const ojson& s, const std::string& path) const;

    const ojson& root_;
    const std::string prefix_;
    std::vector<std::string> rules_;
    std::map<std::string, std::string> refs_;  // $ref target -> rule name
};

void Converter::check_keywords(const ojson& s, const std::string& path) const {
    static const std::set<std::string> known = {
        "type",     "enum",     "const",       "properties", "required",  "additionalProperties",
        "items",    "minItems", "maxItems",    "minLength",  "maxLength", "format",
        "anyOf",    "oneOf",    "allOf",       "$ref",       "$defs",     "definitions",
        "nullable", "title",    "description", "default",    "examples",  "$schema",
        "$id",      "$comment", "deprecated",  "readOnly",   "writeOnly", "strict"};
    for (const auto& [k, v] : s.items()) {
        if (!known.count(k)) {
            fail(path, fmt::format("keyword '{}' is not supported (supported: type, enum, const, "
                                   "properties, required, additionalProperties, items, minItems, "
                                   "maxItems, minLength, maxLength, format, anyOf, oneOf, allOf, "
                                   "$ref, $defs, nullable)",
                                   k));
        }
    }
}

std::string Converter::node(const ojson& s, const std::string& path, int depth) {
    if (depth > 64) fail(path, "nested more than 64 levels");
    if (s.is_boolean()) {
        if (!s.get<bool>()) fail(path, "the schema 'false' accepts nothing");
        return "value";
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    check_keywords(s, path);
    std::string body;
    if (s.contains("$ref")) {
        body = ref(s["$ref"].is_string() ? s["$ref"].get<std::string>() : "", path);
    } else if (s.contains("const")) {
        body = json_literal(s["const"]);
    } else if (s.contains("enum")) {
        if (!s["enum"].is_array() || s["enum"].empty()) fail(path, "enum must be a non-empty list");
        for (const auto& v : s["enum"]) body += (body.empty() ? "" : " | ") + json_literal(v);
    } else if (s.contains("anyOf") || s.contains("oneOf")) {
        const char* k = s.contains("anyOf") ? "anyOf" : "oneOf";
        if (!s[k].is_array() || s[k].empty())
            fail(path, fmt::format("{} must be a non-empty list", k));
        for (size_t i = 0; i < s[k].size(); ++i) {
            body +=
                (i ? " | " : "") + node(s[k][i], fmt::format("{}/{}/{}", path, k, i), depth + 1);
        }
    } else if (s.contains("allOf")) {
        if (!s["allOf"].is_array() || s["allOf"].size() != 1) {
            fail(path, "allOf is supported with one schema only");
        }
        body = node(s["allOf"][0], path + "/allOf/0", depth + 1);
    } else if (s.contains("type") && s["type"].is_array()) {
        for (size_t i = 0; i < s["type"].size(); ++i) {
            body += (i ? " | " : "") + typed(s, s["type"][i].get<std::string>(), path, depth);
        }
    } else if (s.contains("type")) {
        if (!s["type"].is_string()) fail(path, "type must be a string or a list of strings");
        body = typed(s, s["type"].get<std::string>(), path, depth);
    } else if (s.contains("properties")) {
        body = object(s, path, depth);
    } else {
        body = "value";
    }
    if (s.value("nullable", false)) body = "( " + body + " ) | null";
    return add_rule(path, body);
}

std::string Converter::typed(const ojson& s, const std::string& type, const std::string& path,
                             int depth) {
    if (type == "object") return object(s, path, depth);
    if (type == "array") return array(s, path, depth);
    if (type == "string") return string_rule(s, path);
    if (type == "number" || type == "integer" || type == "boolean" || type == "null") return type;
    fail(path, fmt::format("type '{}' is not a JSON Schema type (object, array, string, number, "
                           "integer, boolean, null)",
                           type));
}

std::string Converter::object(const ojson& s, const std::string& path, int depth) {
    if (!s.contains("properties") && !s.contains("additionalProperties")) return "object";
    std::vector<std::pair<std::string, bool>> props;  // (kv rule, required)
    std::set<std::string> required;
    if (s.contains("required")) {
        if (!s["required"].is_array()) fail(path, "required must be a list of names");
        for (const auto& r : s["required"]) {
            if (!r.is_string()) fail(path, "required must be a list of names");
            required.insert(r.get<std::string>());
        }
    }
    const ojson props_in = s.value("properties", ojson::object());
    if (!props_in.is_object()) fail(path, "properties must be an object");
    for (const auto& [k, sub] : props_in.items()) {
        const std::string v = node(sub, path + "/properties/" + k, depth + 1);
        props.emplace_back(add_rule(path + "/" + k, literal(ojson(k).dump()) + " ws \":\" ws " + v),
                           required.count(k) > 0);
    }
    for (const auto& r : required) {
        if (!props_in.contains(r))
            fail(path, fmt::format("required property '{}' has no schema", r));
    }
    const ojson extra = s.value("additionalProperties", ojson(false));
    if (!(extra.is_boolean() && !extra.get<bool>())) {  // any other key, after the named ones
        const std::string v =
            extra.is_object() ? node(extra, path + "/additionalProperties", depth + 1) : "value";
        props.emplace_back(add_rule(path + "/more", "( string ws \":\" ws " + v + " ws )"), false);
        const std::string rest =
            add_rule(path + "/more-rest", "( \",\" ws string ws \":\" ws " + v + " ws )*");
        props.back().first += " " + rest;
    }
    // R_i: after something was written; F_i: nothing written yet.
    std::string r_next = "\"\"", f_next = "\"\"";
    for (size_t i = props.size(); i > 0; --i) {
        const auto& [kv, req] = props[i - 1];
        const std::string take = "\",\" ws " + kv + " ws " + r_next;
        const std::string r = add_rule(path + "/r", req ? take : take + " | " + r_next);
        const std::string first = kv + " ws " + r_next;
        const std::string f = add_rule(path + "/f", req ? first : first + " | " + f_next);
        r_next = r;
        f_next = f;
    }
    return "\"{\" ws " + f_next + " \"}\"";
}

std::string Converter::array(const ojson& s, const std::string& path, int depth) {
    const std::string item =
        s.contains("items") ? node(s["items"], path + "/items", depth + 1) : "value";
    const int64_t lo = s.value("minItems", int64_t(0));
    const int64_t hi = s.value("maxItems", int64_t(-1));
    if (lo < 0 || (hi >= 0 && hi < lo))
        fail(path, "minItems/maxItems: need 0 <= minItems <= maxItems");
    if (lo > 1000 || hi > 1000) fail(path, "minItems/maxItems above 1000 are not supported");
    if (hi == 0) return "\"[\" ws \"]\"";
    const std::string more = hi < 0
                                 ? fmt::format("{{{},}}", std::max<int64_t>(lo - 1, 0))
                                 : fmt::format("{{{},{}}}", std::max<int64_t>(lo - 1, 0), hi - 1);
    const std::string items = item + " ws ( \",\" ws " + item + " ws )" + more;
    return lo == 0 ? "\"[\" ws ( " + items + " )? \"]\"" : "\"[\" ws " + items + " \"]\"";
}

std::string Converter::string_rule(const ojson& s, const std::string& path) {
    if (s.contains("format")) {
        const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
        const std::string d =
            "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" "
            "[01] )";
        const std::string t =
            "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} "
            ")? ( \"Z\" | [+-] [0-9]{2} \":\" [0-9]{2} )?";
        const std::string h = "[0-9a-fA-F]";
        if (f == "date") return "\"\\\"\" " + d + " \"\\\"\"";
        if (f == "time") return "\"\\\"\" " + t + " \"\\\"\"";
        if (f == "date-time") return "\"\\\"\" " + d + " \"T\" " + t + " \"\\\"\"";
        if (f == "uuid") {
            return fmt::format(
                "\"\\\"\" {0}{{8}} \"-\" {0}{{4}} \"-\" {0}{{4}} \"-\" {0}{{4}} \"-\" {0}{{12}} "
                "\"\\\"\"",
                h);
        }
        fail(path,
             fmt::format("string format '{}' is not supported (date, time, date-time, uuid)", f));
    }
    const int64_t lo = s.value("minLength", int64_t(0));
    const int64_t hi = s.value("maxLength", int64_t(-1));
    if (lo < 0 || (hi >= 0 && hi < lo))
        fail(path, "minLength/maxLength: need 0 <= minLength <= maxLength");
    if (lo > 1000 || hi > 1000) fail(path, "minLength/maxLength above 1000 are not supported");
    if (lo == 0 && hi < 0) return "string";
    return hi < 0 ? fmt::format("\"\\\"\" char{{{},}} \"\\\"\"", lo)
                  : fmt::format("\"\\\"\" char{{{},{}}} \"\\\"\"", lo, hi);
}

std::string Converter::ref(const std::string& target, const std::string& path) {
    auto it = refs_.find(target);
    if (it != refs_.end()) return it->second;
    std::string key;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
        if (target.rfind(prefix, 0) == 0) key = prefix;
    }
    if (key.empty()) fail(path, fmt::format("$ref '{}' is not supported (#/$defs/NAME)", target));
    const std::string name = target.substr(key.size());
    // find, not []: operator[] of a const json on a missing key is undefined behaviour.
    auto defs_it =
        root_.is_object() ? root_.find(key == "#/$defs/" ? "$defs" : "definitions") : root_.end();
    if (defs_it == root_.end() || !defs_it->is_object() || !defs_it->contains(name)) {
        fail(path, fmt::format("$ref '{}' is not defined", target));
    }
    const ojson& defs = *defs_it;
    // A placeholder rule first, so recursive references resolve to it.
    const std::string rule = add_rule("ref-" + name, "null");
    refs_[target] = rule;
    const std::string body = node(defs[name], target.substr(1), 1);
    for (auto& r : rules_) {
        if (r == rule + " ::= null") r = rule + " ::= " + body;
    }
    return rule;
}

}  // namespace

Result<std::string> json_schema_rules(const nlohmann::ordered_json& schema,
                                      const std::string& prefix) {
    try {
        return Converter(schema, prefix).convert();
    } catch (const SchemaError& e) {
        return make_error(ErrorCode::kInvalidArgument, "{}", e.message);
    } catch (const nlohmann::json::exception& e) {
        return make_error(ErrorCode::kInvalidArgument, "schema: {}", e.what());
    }
}

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
    PAGODA_ASSIGN_OR_RETURN(std::string rules, json_schema_rules(schema, ""));
    return rules + kPrimitives;
}

const char* json_primitives_gbnf() { return kPrimitives; }

Result<std::shared_ptr<const Grammar>> json_schema_grammar(const nlohmann::ordered_json& schema) {
    PAGODA_ASSIGN_OR_RETURN(std::string text, json_schema_to_gbnf(schema));
    auto g = parse_gbnf(text);
    if (!g.ok()) {
        return make_error(ErrorCode::kInvalidArgument, "schema: internal grammar error: {}",
                          g.error().message);
    }
    return g;
}

std::shared_ptr<const Grammar> json_object_grammar() {
    static const std::shared_ptr<const Grammar> g =
        *parse_gbnf(std::string("root ::= ws object\n") + kPrimitives);
    return g;
}

}  // namespace pagoda::grammar

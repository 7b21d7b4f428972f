// Reading what a request asks of its output's shape, and compiling it into a grammar.
#include "server/structured.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "server/request.h"

namespace pagoda::server {

namespace {

using ojson = nlohmann::ordered_json;

RequestError bad(const std::string& message, const std::string& param) {
    return RequestError{400, message, "invalid_request_error", param};
}

struct ShapeError {
    std::string message, param;
};

std::string schema_gbnf(const ojson& schema, const std::string& field) {
    if (!schema.is_object() && !schema.is_boolean()) {
        throw ShapeError{fmt::format("'{}' must be a JSON schema (an object), got {}", field,
                                     schema.type_name()),
                         field};
    }
    auto g = grammar::json_schema_to_gbnf(schema);
    if (!g.ok()) throw ShapeError{fmt::format("'{}': {}", field, g.error().message), field};
    return *g;
}

// response_format: {"type": "text" | "json_object" | "json_schema", "json_schema": {...}}.
void read_response_format(const ojson& rf, OutputShape& out) {
    const std::string f = "response_format";
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
        throw ShapeError{
            "'response_format' must be an object with a 'type' (text, json_object or "
            "json_schema)",
            f};
    }
    const std::string type = rf["type"].get<std::string>();
    if (type == "text") return;
    if (type == "json_object") {
        out.kind = "json_object";
        out.gbnf = std::string("root ::= ws object\n") + grammar::json_primitives_gbnf();
        return;
    }
    if (type != "json_schema") {
        throw ShapeError{fmt::format("response_format type '{}' is not supported (text, "
                                     "json_object or json_schema)",
                                     type),
                         f};
    }
    auto js = rf.find("json_schema");
    if (js == rf.end() || !js->is_object() || !js->contains("schema")) {
        throw ShapeError{
            "response_format json_schema needs 'json_schema': {\"name\": ..., "
            "\"schema\": {...}}",
            f};
    }
    out.kind = "json_schema";
    out.gbnf = schema_gbnf((*js)["schema"], "response_format.json_schema.schema");
}

void read_choice(const ojson& c, const std::string& field, OutputShape& out) {
    if (!c.is_array() || c.empty()) {
        throw ShapeError{fmt::format("'{}' must be a non-empty list of strings", field), field};
    }
    std::string g = "root ::=";
    for (size_t i = 0; i < c.size(); ++i) {
        if (!c[i].is_string())
            throw ShapeError{fmt::format("'{}' must hold strings", field), field};
        g += (i ? " | " : " ") + grammar::gbnf_literal(c[i].get<std::string>());
    }
    out.kind = "choice";
    out.gbnf = g + "\n";
}

void read_regex(const ojson& r, const std::string& field, OutputShape& out) {
    if (!r.is_string()) throw ShapeError{fmt::format("'{}' must be a string", field), field};
    auto g = grammar::regex_to_gbnf(r.get<std::string>());
    if (!g.ok()) throw ShapeError{fmt::format("'{}': {}", field, g.error().message), field};
    out.kind = "regex";
    out.gbnf = *g;
}

void read_json(const ojson& v, const std::string& field, OutputShape& out) {
    ojson schema = v;
    if (v.is_string()) {  // vLLM accepts the schema as a JSON string too
        schema = ojson::parse(v.get<std::string>(), nullptr, false);
        if (schema.is_discarded()) {
            throw ShapeError{fmt::format("'{}' is a string that is not JSON", field), field};
        }
    }
    out.kind = "json_schema";
    out.gbnf = schema_gbnf(schema, field);
}

void read_grammar(const ojson& g, const std::string& field, OutputShape& out) {
    if (!g.is_string()) throw ShapeError{fmt::format("'{}' must be GBNF text", field), field};
    out.kind = "grammar";
    out.gbnf = g.get<std::string>();
}

// vLLM's structured_outputs: {"json" | "regex" | "choice" | "grammar" | "json_object": ...}.
void read_structured_outputs(const ojson& so, OutputShape& out) {
    const std::string f = "structured_outputs";
    if (!so.is_object() || so.size() != 1) {
        throw ShapeError{
            "'structured_outputs' must be an object with exactly one of json, "
            "regex, choice, grammar, json_object",
            f};
    }
    const auto first = so.begin();  // not items(): its proxy would not outlive the statement
    const std::string k = first.key();
    const ojson& v = first.value();
    const std::string field = f + "." + k;
    if (k == "json") return read_json(v, field, out);
    if (k == "regex") return read_regex(v, field, out);
    if (k == "choice") return read_choice(v, field, out);
    if (k == "grammar") return read_grammar(v, field, out);
    if (k == "json_object" && v.is_boolean() && v.get<bool>()) {
        out.kind = "json_object";
        out.gbnf = std::string("root ::= ws object\n") + grammar::json_primitives_gbnf();
        return;
    }
    throw ShapeError{fmt::format("structured_outputs key '{}' is not supported (json, regex, "
                                 "choice, grammar, json_object)",
                                 k),
                     f};
}

// The tools' names and parameter schemas, checked.
std::vector<std::pair<std::string, ojson>> read_tools(const ojson& tools) {
    if (!tools.is_array()) throw ShapeError{"'tools' must be a list", "tools"};
    auto good_name = [](const std::string& n) {
        return !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
        });
    };
    std::vector<std::pair<std::string, ojson>> out;
    std::set<std::string> seen;
    for (size_t i = 0; i < tools.size(); ++i) {
        const ojson& t = tools[i];
        const std::string where = fmt::format("tools[{}]", i);
        if (!t.is_object() || !t.contains("type") || t["type"] != "function" ||
            !t.contains("function") || !t["function"].is_object()) {
            throw ShapeError{where + " must be {\"type\": \"function\", \"function\": {...}}",
                             "tools"};
        }
        const ojson& fn = t["function"];
        if (!fn.contains("name") || !fn["name"].is_string() ||
            !good_name(fn["name"].get<std::string>())) {
            throw ShapeError{where + ".function needs a 'name' of 1-64 letters, digits, '_' or '-'",
                             "tools"};
        }
        const std::string name = fn["name"].get<std::string>();
        if (!seen.insert(name).second) {
            throw ShapeError{fmt::format("{}: the function name '{}' is used twice", where, name),
                             "tools"};
        }
        ojson params = ojson{{"type", "object"}};
        if (fn.contains("parameters") && !fn["parameters"].is_null()) params = fn["parameters"];
        if (!params.is_object() || (params.contains("type") && params["type"] != "object")) {
            throw ShapeError{where + ".function.parameters must be a JSON schema of an object",
                             "tools"};
        }
        out.emplace_back(name, params);
    }
    return out;
}

// tool_choice "required" or named: the grammar of the calls.
std::string tools_gbnf(const std::vector<std::pair<std::string, ojson>>& tools,
                       const ToolRequest& t) {
    std::string rules, alts;
    for (size_t i = 0; i < tools.size(); ++i) {
        const auto& [name, params] = tools[i];
        if (t.choice == ToolChoice::kNamed && name != t.named) continue;
        const std::string prefix = fmt::format("t{}-", i);
        auto r = grammar::json_schema_rules(params, prefix);
        if (!r.ok()) {
            throw ShapeError{
                fmt::format("tools: function '{}': parameters: {}", name, r.error().message),
                "tools"};
        }
        rules += *r;
        if (t.choice == ToolChoice::kNamed) {
            return "root ::= " + prefix + "root\n" + rules + grammar::json_primitives_gbnf();
        }
        alts += (alts.empty() ? " " : " | ") +
                grammar::gbnf_literal("{\"name\": \"" + name + "\", \"parameters\": ") + " " +
                prefix + "root \"}\"";
    }
    // Parallel calls: at most kMaxParallelToolCalls in one answer (a model that never
    // closes the list would otherwise write calls until max_tokens cuts one in half).
    const std::string more =
        t.parallel ? fmt::format(" ( \", \" call ){{0,{}}}", kMaxParallelToolCalls - 1) : "";
    return "root ::= \"[\" call" + more + " \"]\"\ncall ::=" + alts + "\n" + rules +
           grammar::json_primitives_gbnf();
}

void read_tool_choice(const ojson& body, OutputShape& out) {
    const bool has_tools = body.contains("tools") && !body["tools"].is_null();
    std::vector<std::pair<std::string, ojson>> tools;
    if (has_tools) tools = read_tools(body["tools"]);
    ToolRequest& t = out.tools;
    t.choice = tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
    if (auto it = body.find("parallel_tool_calls"); it != body.end() && !it->is_null()) {
        if (!it->is_boolean())
            throw ShapeError{"'parallel_tool_calls' must be a boolean", "parallel_tool_calls"};
        t.parallel = it->get<bool>();
    }
    auto tc = body.find("tool_choice");
    if (tc != body.end() && !tc->is_null()) {
        const std::string s = tc->is_string() ? tc->get<std::string>() : "";
        if (s == "none") {
            t.choice = ToolChoice::kNone;
        } else if (s == "auto" || s == "required") {
            t.choice = s == "auto" ? ToolChoice::kAuto : ToolChoice::kRequired;
        } else if (tc->is_object() && tc->contains("function") && (*tc)["function"].is_object() &&
                   (*tc)["function"].contains("name") && (*tc)["function"]["name"].is_string()) {
            t.choice = ToolChoice::kNamed;
            t.named = (*tc)["function"]["name"].get<std::string>();
            const bool known = std::any_of(tools.begin(), tools.end(),
                                           [&](const auto& x) { return x.first == t.named; });
            if (!known) {
                throw ShapeError{fmt::format("tool_choice names the function '{}', which is not "
                                             "in 'tools'",
                                             t.named),
                                 "tool_choice"};
            }
        } else {
            throw ShapeError{
                "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                "{\"type\": \"function\", \"function\": {\"name\": ...}}",
                "tool_choice"};
        }
        if (t.choice != ToolChoice::kNone && tools.empty()) {
            throw ShapeError{"tool_choice other than \"none\" needs a non-empty 'tools'",
                             "tool_choice"};
        }
    }
    if (t.choice == ToolChoice::kRequired || t.choice == ToolChoice::kNamed) {
        if (!out.kind.empty()) {
            throw ShapeError{fmt::format("'{}' cannot be combined with a tool_choice that forces a "
                                         "tool call",
                                         out.field),
                             out.field};
        }
        out.kind = "tool";
        out.field = "tools";
        out.gbnf = tools_gbnf(tools, t);
    }
}

}  // namespace

using ShapeReader = void (*)(const ojson&, const std::string&, OutputShape&);
// The fields that constrain the output, each with its reader.
const std::pair<const char*, ShapeReader> kShapeFields[] = {
    {"response_format",
     [](const ojson& v, const std::string&, OutputShape& o) { read_response_format(v, o); }},
    {"guided_json", read_json},
    {"guided_regex", read_regex},
    {"guided_choice", read_choice},
    {"guided_grammar", read_grammar},
    {"structured_outputs",
     [](const ojson& v, const std::string&, OutputShape& o) { read_structured_outputs(v, o); }},
};

bool shapes_output(const nlohmann::json& body) {
    if (!body.is_object()) return false;
    for (const auto& [name, reader] : kShapeFields) {
        if (body.contains(name)) return true;
    }
    return body.contains("tools") || body.contains("tool_choice") ||
           body.contains("parallel_tool_calls");
}

std::variant<OutputShape, RequestError> read_output_shape(const ojson& body, bool chat,
                                                          ToolParser parser) {
    OutputShape out;
    out.tools.parser = parser;
    try {
        for (const auto& [name, reader] : kShapeFields) {
            auto it = body.find(name);
            if (it == body.end() || it->is_null()) continue;
            if (!out.field.empty()) {
                throw ShapeError{fmt::format("'{}' and '{}' both constrain the output; send one",
                                             out.field, name),
                                 name};
            }
            OutputShape one;
            reader(*it, name, one);
            if (one.kind.empty()) continue;  // response_format text
            out.kind = one.kind;
            out.gbnf = std::move(one.gbnf);
            out.field = name;
        }
        if (chat) read_tool_choice(body, out);
    } catch (const ShapeError& e) {
        return bad(e.message, e.param);
    }
    return out;
}

Result<std::shared_ptr<const engine::Constraint>> compile_constraint(const OutputShape& shape) {
    auto g = grammar::parse_gbnf(shape.gbnf);
    if (!g.ok()) {
        return make_error(ErrorCode::kInvalidArgument, "'{}': the grammar does not parse: {}",
                          shape.field, g.error().message);
    }
    if (!grammar::accepts_something(**g)) {
        return make_error(ErrorCode::kInvalidArgument, "'{}': the grammar accepts nothing",
                          shape.field);
    }
    auto c = std::make_shared<engine::Constraint>();
    c->grammar = std::move(*g);
    c->masks = std::make_shared<grammar::MaskCache>();
    c->kind = shape.kind;
    return std::shared_ptr<const engine::Constraint>(std::move(c));
}

Result<std::shared_ptr<const engine::Constraint>> ConstraintCache::get(const OutputShape& shape) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = by_text_.find(shape.kind + "\n" + shape.gbnf);
        if (it != by_text_.end()) {
            it->second.second = ++tick_;
            return it->second.first;
        }
    }
    PAGODA_ASSIGN_OR_RETURN(auto c, compile_constraint(shape));  // outside the lock: can be slow
    std::lock_guard<std::mutex> lock(mu_);
    while (by_text_.size() >= capacity_ && !by_text_.empty()) {
        auto oldest = std::min_element(
            by_text_.begin(), by_text_.end(),
            [](const auto& a, const auto& b) { return a.second.second < b.second.second; });
        by_text_.erase(oldest);
    }
    by_text_[shape.kind + "\n" + shape.gbnf] = {c, ++tick_};
    return c;
}

size_t ConstraintCache::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return by_text_.size();
}

Result<ToolParser> tool_parser_from_name(std::string_view name) {
    if (name == "llama3_json") return ToolParser::kLlama3Json;
    if (name == "hermes") return ToolParser::kHermes;
    if (name == "mistral") return ToolParser::kMistral;
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown tool-call parser '{}' (llama3_json, hermes, mistral)", name);
}

const char* tool_parser_name(ToolParser p) {
    switch (p) {
        case ToolParser::kLlama3Json: return "llama3_json";
        case ToolParser::kHermes: return "hermes";
        case ToolParser::kMistral: return "mistral";
    }
    return "?";
}

ToolParser detect_tool_parser(std::string_view chat_template) {
    if (chat_template.find("<tool_call>") != std::string_view::npos) return ToolParser::kHermes;
    if (chat_template.find("[TOOL_CALLS]") != std::string_view::npos) return ToolParser::kMistral;
    return ToolParser::kLlama3Json;
}

}  // namespace pagoda::server

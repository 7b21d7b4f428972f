#pragma once
// Structured outputs and tool calls. A request may ask for the shape of its output in one
// of these ways (vLLM's names): response_format {json_object | json_schema (+strict)},
// guided_json, guided_regex, guided_choice, guided_grammar, structured_outputs {json,
// regex, choice, grammar, json_object}; or, on chat, tools with tool_choice "required" or
// a named function. Each becomes a grammar (src/grammar/), compiled once per distinct text
// and cached with its token masks (ConstraintCache), and the engine samples only tokens
// that keep the output inside it.
//
// Tool calls: "required" constrains the output to a JSON array of calls,
// [{"name": "f", "parameters": {...}}, ...] (one call when parallel_tool_calls is false),
// "named" to the function's parameters; "auto" leaves the output free and parses what the
// model wrote in its own family's format (ToolParser). ToolCallStream turns the output,
// as it grows, into content and OpenAI tool_calls deltas; the non-streaming answer is the
// same stream run to its end, so both agree.

#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "base/result.h"
#include "engine/sampler.h"

namespace pagoda::server {

struct RequestError;

// The formats models write tool calls in (vLLM's --tool-call-parser names).
enum class ToolParser {
    kLlama3Json,  // {"name": ..., "parameters": {...}} (optionally after <|python_tag|>),
                  // ';'-separated
    kHermes,      // <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Hermes, Qwen)
    kMistral,     // [TOOL_CALLS] [{"name": ..., "arguments": {...}}]
};
Result<ToolParser> tool_parser_from_name(std::string_view name);  // llama3_json, hermes, mistral
const char* tool_parser_name(ToolParser p);
// The family a chat template writes (its tool-call markers); Llama 3 JSON otherwise.
ToolParser detect_tool_parser(std::string_view chat_template);

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };
inline constexpr int kMaxParallelToolCalls = 8;  // per answer, when tool calls are forced

struct ToolRequest {
    ToolChoice choice = ToolChoice::kNone;
    std::string named;  // kNamed: the function
    bool parallel = true;
    ToolParser parser = ToolParser::kLlama3Json;
};

// What a request asks of its output.
struct OutputShape {
    std::string kind;   // empty: free text; json_object, json_schema, regex, choice, grammar, tool
    std::string gbnf;   // the grammar's text when kind is set
    std::string field;  // the request field it came from (for errors)
    ToolRequest tools;
};

// Whether the body has a field read_output_shape reads (structured outputs, tools): a body
// without one shapes nothing and need not be read in key order.
bool shapes_output(const nlohmann::json& body);

// Reads the fields above (the body as ordered JSON, so schema properties keep their
// order); errors are 400s naming the field and the reason.
std::variant<OutputShape, RequestError> read_output_shape(const nlohmann::ordered_json& body,
                                                          bool chat, ToolParser parser);

// Compiled grammars by their text (bounded; the least recently used dropped), each with
// the mask cache its requests share. Thread-safe.
class ConstraintCache {
  public:
    explicit ConstraintCache(size_t capacity = 16) : capacity_(capacity) {}
    // Parses (or finds) the grammar; a grammar that accepts nothing is an error.
    Result<std::shared_ptr<const engine::Constraint>> get(const OutputShape& shape);
    size_t size() const;

  private:
    size_t capacity_;
    mutable std::mutex mu_;
    uint64_t tick_ = 0;
    std::unordered_map<std::string, std::pair<std::shared_ptr<const engine::Constraint>, uint64_t>>
        by_text_;
};
Result<std::shared_ptr<const engine::Constraint>> compile_constraint(const OutputShape& shape);

// One choice's output as content and tool calls, fed as it grows (tool_calls.cpp).
class ToolCallStream {
  public:
    explicit ToolCallStream(const ToolRequest& t);
    struct Delta {
        std::string content;
        nlohmann::json tool_calls = nlohmann::json::array();  // OpenAI's delta entries
    };
    Delta push(std::string_view text);
    Delta finish();  // the end of the output: what was held back
    bool made_calls() const { return !calls_.empty(); }
    // The whole answer (non-streaming): content and the calls (with required, only those
    // written to the end: a call max_tokens cut in half is left out).
    const std::string& content() const { return content_; }
    nlohmann::json calls() const;

  private:
    void constrained(std::string_view text, Delta& d);
    void auto_parse(bool end, Delta& d);
    void add_call(const std::string& name, const std::string& arguments, Delta& d);
    void start_call(const std::string& name, Delta& d);
    void add_arguments(std::string_view text, Delta& d);

    ToolRequest t_;
    std::string content_;
    struct Call {
        std::string id, name, arguments;
    };
    std::vector<Call> calls_;
    // required/named: a scanner over the constrained output.
    enum class Scan { kPrefix, kName, kArgs, kAfter, kDone } scan_ = Scan::kPrefix;
    std::string want_;     // kPrefix: the text that ends it
    std::string pending_;  // kPrefix, kName: bytes read
    int depth_ = 0;
    size_t complete_ = 0;  // required: calls whose arguments are complete
    bool in_string_ = false, escaped_ = false;
    // auto: text held back since a tool-call marker may have begun.
    std::string held_;
    bool holding_ = false;
};

}  // namespace pagoda::server

// ToolCallStream: a choice's output as content and OpenAI tool_calls, fed as it grows.
//
// required / named: the output is constrained (structured.cpp), so a small scanner follows
// it: [{"name": "NAME", "parameters": ARGS}, ...] or ARGS alone; each call's header is sent
// when its name is complete, its arguments as they are written.
// auto: content is passed on until a tool-call marker of the model's family may begin
// (<tool_call>, [TOOL_CALLS], or a JSON object or <|python_tag|> at the start for Llama 3);
// from there the text is held and parsed at the end: calls if it parses, content if not.
#include <fmt/format.h>

#include <random>

#include "server/structured.h"

namespace pagoda::server {

namespace {

using json = nlohmann::json;

std::string call_id() {
    static thread_local std::mt19937_64 rng(std::random_device{}());
    return fmt::format("call_{:016x}", rng());
}

std::string_view lstrip(std::string_view s) {
    while (!s.empty() && (s[0] == ' ' || s[0] == '\n' || s[0] == '\t' || s[0] == '\r'))
        s.remove_prefix(1);
    return s;
}

// The arguments of a parsed call as JSON text: objects are written compactly, strings
// (some models write the arguments as a JSON string) as they are.
std::optional<std::pair<std::string, std::string>> call_of(const json& j, const char* args_key) {
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
    const char* key = j.contains(args_key) ? args_key : "arguments";
    if (!j.contains(key)) key = "parameters";
    std::string args = "{}";
    if (j.contains(key)) args = j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
    return std::make_pair(j["name"].get<std::string>(), args);
}

// Where `s` ends in a proper prefix of `marker` (text that may still become it).
size_t partial_marker(std::string_view s, std::string_view marker) {
    for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n) {
        if (s.substr(s.size() - n) == marker.substr(0, n)) return s.size() - n;
    }
    return s.size();
}

using Calls = std::vector<std::pair<std::string, std::string>>;

// The calls in held text of each family; nullopt when it is not (only) calls.
std::optional<Calls> parse_hermes(std::string_view s, std::string& rest) {
    Calls out;
    size_t pos = 0;
    while ((pos = s.find("<tool_call>", pos)) != std::string_view::npos) {
        const size_t start = pos + 11;
        size_t end = s.find("</tool_call>", start);
        const std::string_view body =
            s.substr(start, end == std::string_view::npos ? end : end - start);
        auto c = call_of(json::parse(body, nullptr, false), "arguments");
        if (!c) return std::nullopt;
        out.push_back(*c);
        if (end == std::string_view::npos) break;
        pos = end + 12;
        const size_t next = s.find("<tool_call>", pos);
        rest +=
            std::string(lstrip(s.substr(pos, next == std::string_view::npos ? next : next - pos)));
    }
    if (out.empty()) return std::nullopt;
    return out;
}

std::optional<Calls> parse_array_or_object(std::string_view s, const char* args_key) {
    const json j = json::parse(s, nullptr, false);
    Calls out;
    if (j.is_array()) {
        for (const json& e : j) {
            auto c = call_of(e, args_key);
            if (!c) return std::nullopt;
            out.push_back(*c);
        }
    } else if (auto c = call_of(j, args_key)) {
        out.push_back(*c);
    }
    if (out.empty()) return std::nullopt;
    return out;
}

std::optional<Calls> parse_llama3(std::string_view s) {
    if (s.substr(0, 14) == "<|python_tag|>") s.remove_prefix(14);
    if (auto whole = parse_array_or_object(s, "parameters")) return whole;
    Calls out;  // several objects separated by ';'
    size_t start = 0;
    while (start < s.size()) {
        size_t end = s.find(';', start);
        auto c = parse_array_or_object(
            s.substr(start, end == std::string_view::npos ? end : end - start), "parameters");
        if (!c || c->size() != 1) return std::nullopt;
        out.push_back(c->front());
        if (end == std::string_view::npos) break;
        start = end + 1;
    }
    if (out.empty()) return std::nullopt;
    return out;
}

}  // namespace

ToolCallStream::ToolCallStream(const ToolRequest& t) : t_(t) {
    if (t_.choice == ToolChoice::kNamed) scan_ = Scan::kArgs;
    if (t_.choice == ToolChoice::kRequired) want_ = "\"name\": \"";
}

ToolCallStream::Delta ToolCallStream::push(std::string_view text) {
    Delta d;
    if (t_.choice == ToolChoice::kRequired || t_.choice == ToolChoice::kNamed) {
        constrained(text, d);
    } else if (t_.choice == ToolChoice::kAuto) {
        held_ += text;
        auto_parse(false, d);
    } else {
        content_ += text;
        d.content = std::string(text);
    }
    return d;
}

ToolCallStream::Delta ToolCallStream::finish() {
    Delta d;
    if (t_.choice == ToolChoice::kAuto) auto_parse(true, d);
    return d;
}

void ToolCallStream::start_call(const std::string& name, Delta& d) {
    calls_.push_back({call_id(), name, ""});
    d.tool_calls.push_back({{"index", calls_.size() - 1},
                            {"id", calls_.back().id},
                            {"type", "function"},
                            {"function", {{"name", name}, {"arguments", ""}}}});
}

void ToolCallStream::add_arguments(std::string_view text, Delta& d) {
    if (text.empty()) return;
    calls_.back().arguments += text;
    const size_t index = calls_.size() - 1;
    if (!d.tool_calls.empty() && d.tool_calls.back()["index"] == index) {
        auto& a = d.tool_calls.back()["function"]["arguments"];
        a = a.get<std::string>() + std::string(text);
        return;
    }
    d.tool_calls.push_back({{"index", index}, {"function", {{"arguments", std::string(text)}}}});
}

void ToolCallStream::add_call(const std::string& name, const std::string& arguments, Delta& d) {
    start_call(name, d);
    add_arguments(arguments, d);
}

void ToolCallStream::constrained(std::string_view text, Delta& d) {
    std::string args;  // this push's argument text for the current call
    for (char ch : text) {
        switch (scan_) {
            case Scan::kPrefix:
                pending_ += ch;
                if (pending_.size() >= want_.size() &&
                    pending_.compare(pending_.size() - want_.size(), want_.size(), want_) == 0) {
                    pending_.clear();
                    scan_ = want_ == "\"name\": \"" ? Scan::kName : Scan::kArgs;
                }
                break;
            case Scan::kName:
                if (ch != '"') {
                    pending_ += ch;
                    break;
                }
                start_call(pending_, d);
                pending_.clear();
                want_ = "\"parameters\": ";
                scan_ = Scan::kPrefix;
                break;
            case Scan::kArgs:
                if (depth_ == 0 && (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r')) break;
                if (calls_.empty()) start_call(t_.named, d);  // named: no header in the output
                args += ch;
                if (in_string_) {
                    if (escaped_)
                        escaped_ = false;
                    else if (ch == '\\')
                        escaped_ = true;
                    else if (ch == '"')
                        in_string_ = false;
                } else if (ch == '"') {
                    in_string_ = true;
                } else if (ch == '{' || ch == '[') {
                    ++depth_;
                } else if (ch == '}' || ch == ']') {
                    --depth_;
                }
                if (depth_ == 0 && !in_string_) {
                    add_arguments(args, d);
                    args.clear();
                    ++complete_;
                    scan_ = t_.choice == ToolChoice::kNamed ? Scan::kDone : Scan::kAfter;
                }
                break;
            case Scan::kAfter:  // "}" then ", " (another call) or "]"
                if (ch == ',') {
                    want_ = "\"name\": \"";
                    scan_ = Scan::kPrefix;
                } else if (ch == ']') {
                    scan_ = Scan::kDone;
                }
                break;
            case Scan::kDone: break;
        }
    }
    add_arguments(args, d);
}

void ToolCallStream::auto_parse(bool end, Delta& d) {
    const bool anchored = t_.parser == ToolParser::kLlama3Json || t_.parser == ToolParser::kMistral;
    if (!holding_ && anchored && content_.empty()) {
        const std::string_view t = lstrip(held_);
        const std::string_view tag =
            t_.parser == ToolParser::kMistral ? "[TOOL_CALLS]" : "<|python_tag|>";
        const char open = t_.parser == ToolParser::kMistral ? '[' : '{';
        if (t.empty() && !end) return;  // only whitespace so far: wait
        if (!t.empty() && (t[0] == open || tag.substr(0, std::min(t.size(), tag.size())) ==
                                               t.substr(0, std::min(t.size(), tag.size())))) {
            holding_ = true;
        }
    }
    if (!holding_) {
        const std::string_view marker =
            t_.parser == ToolParser::kHermes ? "<tool_call>" : "[TOOL_CALLS]";
        const size_t at = held_.find(marker);
        const size_t cut = at != std::string::npos ? at
                           : end                   ? held_.size()
                                                   : partial_marker(held_, marker);
        d.content += held_.substr(0, cut);
        content_ += held_.substr(0, cut);
        held_.erase(0, cut);
        holding_ = at != std::string::npos;
    }
    if (!holding_ || !end) return;
    std::string rest;
    std::optional<Calls> calls;
    const std::string_view h = lstrip(held_);
    if (t_.parser == ToolParser::kHermes) {
        calls = parse_hermes(h, rest);
    } else if (t_.parser == ToolParser::kMistral) {
        calls = parse_array_or_object(lstrip(h.substr(0, 12) == "[TOOL_CALLS]" ? h.substr(12) : h),
                                      "arguments");
    } else {
        calls = parse_llama3(h);
    }
    if (!calls) {  // not calls after all: it was content
        d.content += held_;
        content_ += held_;
    } else {
        for (const auto& [name, args] : *calls) add_call(name, args, d);
        d.content += rest;
        content_ += rest;
    }
    held_.clear();
    holding_ = false;
}

nlohmann::json ToolCallStream::calls() const {
    json out = json::array();
    const size_t n = t_.choice == ToolChoice::kRequired ? complete_ : calls_.size();
    for (size_t i = 0; i < n; ++i) {
        const Call& c = calls_[i];
        out.push_back({{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    return out;
}

}  // namespace pagoda::server

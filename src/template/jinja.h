#pragma once
// Jinja for chat templates, with the semantics of Hugging Face transformers'
// apply_chat_template: Jinja2's sandboxed environment with trim_blocks and lstrip_blocks,
// the loop-control extension (break, continue), transformers' tojson and the globals
// raise_exception and strftime_now. Statements: if/elif/else, for (loop.*, else, `if`
// filters, unpacking), set (also ns.attr, tuples and block set with filters), macro, call,
// filter blocks, break, continue, generation. Expressions follow Jinja2's grammar and
// Python's value semantics (str(), repr(), json.dumps, floor division, code-point strings).
// The files: jinja_lexer, jinja_expr, jinja_parse, jinja (evaluator), jinja_value,
// jinja_filters, jinja_methods; errors name the line, the column and the tag.

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/result.h"

namespace pagoda::jinja {

struct RenderOptions {
    std::optional<std::time_t> now;  // strftime_now's time; unset: the real local time
};

class Template {
  public:
    // A template that does not parse is an error naming the line, column and construct.
    static Result<Template> parse(const std::string& source);
    // Renders with `context` (an object of top-level variables; dicts keep their order).
    Result<std::string> render(const nlohmann::ordered_json& context,
                               const RenderOptions& opts = {}) const;
    Result<std::string> render(const nlohmann::json& context, const RenderOptions& opts = {}) const;

    Template(Template&&) noexcept;
    Template& operator=(Template&&) noexcept;
    ~Template();

    struct Impl;

  private:
    Template();
    std::shared_ptr<const Impl> impl_;
};

}  // namespace pagoda::jinja

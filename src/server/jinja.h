#pragma once
// A small Jinja subset for chat templates (no C++ Jinja engine is packaged): text,
// {{ expressions }}, {% if/elif/else %}, {% for x in xs %} (with loop.index, index0,
// first, last, length and else), {% set %} (including namespace attributes), comments,
// whitespace control ({%- -%}) and Hugging Face's trim_blocks + lstrip_blocks. Values are
// JSON values. Expressions: literals, variables, attributes, subscripts and slices,
// calls (raise_exception, namespace, range), filters (trim, length, tojson, upper, lower,
// string, first, last, default, join, int, capitalize, items, safe), tests (is defined,
// none, string, mapping, number, sequence, ...), string methods (strip, startswith,
// endswith, split, replace, upper, lower, title), dict methods (items, keys, values,
// get), arithmetic, ~ concatenation, comparisons, in, and/or/not, and `a if c else b`.
// Errors name the template line and what was not understood.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"

namespace pagoda::server::jinja {

class Template {
  public:
    static Result<Template> parse(const std::string& source);
    // Renders with `context` (a JSON object of top-level variables).
    Result<std::string> render(const nlohmann::json& context) const;

    Template(Template&&) noexcept;
    Template& operator=(Template&&) noexcept;
    ~Template();

    struct Node;

  private:
    Template();
    std::shared_ptr<const Node> root_;
};

}  // namespace pagoda::server::jinja

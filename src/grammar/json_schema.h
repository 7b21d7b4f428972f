#pragma once
// JSON Schema to grammar (GBNF text, then parse_gbnf): what a model may write so that the
// output is a JSON document valid against the schema.
//
// Supported: type (one or a list), enum, const, object (properties in their order,
// required, additionalProperties false/true/a schema; absent means none, as generation
// should not invent keys), array (items, minItems, maxItems), string (minLength,
// maxLength, format date, time, date-time, uuid), number, integer, boolean, null,
// anyOf, oneOf (as anyOf), allOf of one schema, $ref to #/$defs/... or
// #/definitions/..., nullable. Annotations (title, description, default, examples,
// $schema, $id, $comment, deprecated, readOnly, writeOnly) are ignored. Any other keyword
// (pattern, minimum, maximum, multipleOf, ...) is an error that names it: a constraint
// the output would not keep is refused, not dropped.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"
#include "grammar/grammar.h"

namespace pagoda::grammar {

// The GBNF text of `schema` (rule `root`).
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema);
// The rules of `schema` alone, to combine several schemas in one grammar: the top rule is
// `<prefix>root`, every other name starts with the prefix; add json_primitives_gbnf() once.
Result<std::string> json_schema_rules(const nlohmann::ordered_json& schema,
                                      const std::string& prefix);
const char* json_primitives_gbnf();  // ws, value, object, array, string, number, ...
// Parsed and checked.
Result<std::shared_ptr<const Grammar>> json_schema_grammar(const nlohmann::ordered_json& schema);
// response_format json_object: any JSON object.
std::shared_ptr<const Grammar> json_object_grammar();

}  // namespace pagoda::grammar

#pragma once
// Request bodies parsed in one pass. nlohmann's parser keeps every byte twice as it reads
// (the value and the token text for its error messages), ~20 ns a byte: a completion's
// 1.5 KB body took 30 us of the HTTP thread. This parser gives the same value as
// nlohmann::json::parse, or nothing where it does not decide: anything that is not valid
// JSON, integers that do not fit 64 bits, nesting deeper than 256, a byte-order mark. The
// caller then parses with nlohmann, which gives its value or its error message; so the
// results, errors included, are nlohmann's.

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace pagoda::server {

std::optional<nlohmann::json> parse_json_fast(std::string_view text);

}  // namespace pagoda::server

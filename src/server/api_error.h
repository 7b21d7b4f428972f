#pragma once
// JSON replies and errors in OpenAI's shape, shared by every route. Pure; thread-safe.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "http/server.h"

namespace pagoda::server {

using json = nlohmann::json;

http::Response json_response(int status, const json& j);
// {"error": {"message", "type", "param", "code"}}; `code` carries the HTTP status as vLLM does.
http::Response api_error(int status, const std::string& message, const std::string& type,
                         const std::string& param = "");
inline http::Reply reply(http::Response r) { return http::Reply{std::move(r), {}}; }
// A 400 invalid_request_error.
inline http::Reply bad_request(const std::string& message, const std::string& param = "") {
    return reply(api_error(400, message, "invalid_request_error", param));
}
// The body as a JSON object; on failure fills `err` with the 400 to send.
std::optional<json> parse_body(const http::Request& req, http::Response& err);

}  // namespace pagoda::server

// The implementation of server/api_error.h (the contract is there).
#include "server/api_error.h"

#include <fmt/core.h>

#include "server/json_body.h"

namespace pagoda::server {

http::Response json_response(int status, const json& j) {
    http::Response r;
    r.status = status;
    r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
    return r;
}

http::Response api_error(int status, const std::string& message, const std::string& type,
                         const std::string& param) {
    json e = {{"message", message},
              {"type", type},
              {"param", param.empty() ? json(nullptr) : json(param)},
              {"code", status}};
    return json_response(status, json{{"error", e}});
}

std::optional<json> parse_body(const http::Request& req, http::Response& err) {
    try {
        // The one-pass parser decides valid bodies; nlohmann the rest (and says what is wrong).
        std::optional<json> fast = parse_json_fast(req.body);
        json j = fast ? std::move(*fast) : json::parse(req.body);
        if (!j.is_object()) {
            err = api_error(400, "the request body must be a JSON object", "invalid_request_error");
            return std::nullopt;
        }
        return j;
    } catch (const json::parse_error& e) {
        err = api_error(400, fmt::format("the request body is not valid JSON: {}", e.what()),
                        "invalid_request_error");
        return std::nullopt;
    }
}

}  // namespace pagoda::server

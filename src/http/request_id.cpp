// Request ids (the contract is in http/server.h): the client's X-Request-Id when it is a
// plain token, else a new one.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <random>

#include "http/server.h"

namespace pagoda::http {

std::string request_id(const Request& req) {
    const std::string_view h = req.header("x-request-id");
    const bool plain = !h.empty() && h.size() <= 128 && std::all_of(h.begin(), h.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
               c == ':';
    });
    if (plain) return std::string(h);
    static thread_local std::mt19937_64 rng(std::random_device{}());
    return fmt::format("req-{:016x}{:08x}", rng(), uint32_t(rng()));
}

}  // namespace pagoda::http

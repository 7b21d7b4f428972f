// A request's headers by name, and request ids (the contract is in http/server.h): the
// client's X-Request-Id when it is a plain token, else a new one.
#include <algorithm>
#include <cctype>
#include <random>

#include "http/server.h"

namespace pagoda::http {

std::string_view Request::header(std::string_view lower_name) const {
    for (const auto& [k, v] : headers) {
        if (k == lower_name) return v;
    }
    return {};
}

std::string request_id(const Request& req) {
    const std::string_view h = req.header("x-request-id");
    const bool plain = !h.empty() && h.size() <= 128 && std::all_of(h.begin(), h.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
               c == ':';
    });
    if (plain) return std::string(h);
    return random_id("req-");
}

std::string random_id(std::string_view prefix) {
    static thread_local std::mt19937_64 rng(std::random_device{}());
    constexpr char kHex[] = "0123456789abcdef";
    std::string id(prefix);
    const uint64_t hi = rng(), lo = rng();
    for (int shift = 60; shift >= 0; shift -= 4) id += kHex[(hi >> shift) & 15];
    for (int shift = 28; shift >= 0; shift -= 4) id += kHex[(lo >> shift) & 15];
    return id;
}

}  // namespace pagoda::http

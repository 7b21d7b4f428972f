// parse_url (client.h), apart from the Beast client so that parsers of configuration files
// (and their fuzz targets) can use it without Asio.
#include <fmt/format.h>

#include "http/client.h"

namespace pagoda::http {

Result<Url> parse_url(std::string_view url) {
    Url u;
    std::string_view rest = url;
    if (rest.starts_with("https://")) {
        return make_error(ErrorCode::kUnsupported,
                          "'{}': https is not supported; use http:// (TLS belongs in a proxy)",
                          url);
    }
    if (!rest.starts_with("http://")) {
        return make_error(ErrorCode::kInvalidArgument,
                          "'{}' is not a URL of the form http://host[:port][/path]", url);
    }
    rest.remove_prefix(7);
    size_t slash = rest.find('/');
    std::string_view authority = rest.substr(0, slash);
    std::string_view path =
        slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    if (authority.empty()) {
        return make_error(ErrorCode::kInvalidArgument, "'{}' has no host", url);
    }
    size_t colon = authority.rfind(':');
    if (colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos) {
        u.host = std::string(authority.substr(0, colon));
        u.port = std::string(authority.substr(colon + 1));
        if (u.port.empty() || u.port.find_first_not_of("0123456789") != std::string::npos ||
            u.port.size() > 5 || std::stoi(u.port) > 65535 || std::stoi(u.port) == 0) {
            return make_error(ErrorCode::kInvalidArgument,
                              "'{}': port must be a number from 1 to 65535", url);
        }
    } else {
        u.host = std::string(authority);
        u.port = "80";
    }
    if (u.host.size() > 2 && u.host.front() == '[' && u.host.back() == ']')
        u.host = u.host.substr(1, u.host.size() - 2);
    if (u.host.empty()) return make_error(ErrorCode::kInvalidArgument, "'{}' has no host", url);
    u.base_path = std::string(path);
    return u;
}

// The state of one request shared with its PendingCall; touched on the I/O thread only.

}  // namespace pagoda::http

// The console's files for the HTTP servers (the contract is in ui/ui.h).
#include "ui/ui.h"

#include <string>

namespace pagoda::ui {
namespace detail {
struct Asset {
    std::string_view name, data;
};
extern const Asset kAssets[];
extern const size_t kAssetCount;
}  // namespace detail

namespace {

std::string_view content_type(std::string_view name) {
    if (name.ends_with(".html")) return "text/html; charset=utf-8";
    if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
    if (name.ends_with(".css")) return "text/css; charset=utf-8";
    return "application/octet-stream";
}

std::optional<std::string_view> find(std::string_view name) {
    for (size_t i = 0; i < detail::kAssetCount; ++i) {
        if (detail::kAssets[i].name == name) return detail::kAssets[i].data;
    }
    return std::nullopt;
}

http::Response redirect() {
    http::Response r;
    r.status = 302;
    r.content_type = "text/plain; charset=utf-8";
    r.body = "the console is at /ui/\n";
    r.headers.emplace_back("Location", "/ui/");
    return r;
}

}  // namespace

std::optional<http::Response> serve(std::string_view path, Kind kind) {
    if (path == "/" || path == "/ui") return redirect();
    if (!path.starts_with("/ui/")) return std::nullopt;
    std::string_view name = path.substr(4);
    if (name.empty()) name = "index.html";
    http::Response r;
    r.headers.emplace_back("Cache-Control", "no-cache");
    const auto data = find(name);
    if (!data || name.find('/') != std::string_view::npos) {
        r.status = 404;
        r.content_type = "text/plain; charset=utf-8";
        r.body = "no console file " + std::string(name) + "\n";
        return r;
    }
    r.content_type = std::string(content_type(name));
    r.body = std::string(*data);
    if (name == "index.html") {
        const std::string mark = "data-kind=\"replica\"";
        if (const size_t at = r.body.find(mark); at != std::string::npos && kind == Kind::kRouter) {
            r.body.replace(at, mark.size(), "data-kind=\"router\"");
        }
    }
    return r;
}

}  // namespace pagoda::ui

#include "apps/cli_common.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "http/client.h"

namespace pagoda::app {

std::string default_model_path() {
    // Installed next to the binary's source tree; override with -m.
    return PAGODA_DEFAULT_MODEL;
}

Result<int64_t> parse_duration_ms(const std::string& s) {
    size_t end = 0;
    double v = -1;
    try {
        v = std::stod(s, &end);
    } catch (...) {
    }
    const std::string unit = v >= 0 ? s.substr(end) : "";
    const double mult = unit == "ms"                  ? 1
                        : unit.empty() || unit == "s" ? 1e3
                        : unit == "m"                 ? 60e3
                        : unit == "h"                 ? 3600e3
                        : unit == "d"                 ? 86400e3
                                                      : -1;
    if (v < 0 || mult < 0) {
        return make_error(ErrorCode::kInvalidArgument,
                          "duration '{}' is not a number of seconds or a number with a unit "
                          "(examples: 90, 90s, 500ms, 5m, 24h, 1d)",
                          s);
    }
    return int64_t(v * mult);
}

int fail(const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.message.c_str());
    return 1;
}

void progress_bar(const char* what, size_t done, size_t total) {
    if (!isatty(STDERR_FILENO) || total == 0) return;
    const int width = 40;
    const int filled = int(double(done) / double(total) * width);
    std::fprintf(stderr, "\r%s [%.*s%*s] %5.1f%% (%.2f / %.2f GB)", what, filled,
                 "########################################", width - filled, "",
                 100.0 * double(done) / double(total), double(done) / 1e9, double(total) / 1e9);
    if (done >= total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
}

std::vector<int32_t> synthetic_prompt(const tokenizer::Vocab& v, int len, int index) {
    std::vector<int32_t> p;
    uint64_t x = 88172645463325252ull + 0x9e3779b97f4a7c15ull * uint64_t(index);
    if (v.bos >= 0) p.push_back(v.bos);
    while (int(p.size()) < len) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const int32_t id = int32_t(x % uint64_t(v.size()));
        if (!v.is_control(id)) p.push_back(id);
    }
    return p;
}

int admin_request(const AdminTarget& t, const std::string& method, const std::string& path,
                  const std::string& body, int64_t if_match) {
    using json = nlohmann::json;
    http::ClientOptions o;
    std::string key = t.admin_key;
    if (key.empty()) {
        if (const char* k = std::getenv("PAGODA_ADMIN_API_KEY")) key = k;
    }
    if (!key.empty()) o.headers.emplace_back("Authorization", "Bearer " + key);
    auto client = http::Client::create(t.url, o);
    if (!client.ok()) return fail(client.error());
    http::ClientRequest r;
    r.method = method;
    r.path = path;
    r.body = body;
    if (if_match > 0) r.headers.emplace_back("If-Match", std::to_string(if_match));
    auto resp = (*client)->fetch(r);
    if (!resp.ok()) return fail(resp.error());
    const json j = json::parse(resp->body, nullptr, false);
    if (resp->status != 200) {
        const std::string msg = !j.is_discarded() && j.contains("error")
                                    ? j["error"].value("message", resp->body)
                                    : resp->body;
        std::fprintf(stderr, "error: %s %s: HTTP %d: %s\n", method.c_str(), path.c_str(),
                     resp->status, msg.c_str());
        return 1;
    }
    std::printf("%s\n", j.is_discarded() ? resp->body.c_str() : j.dump(2).c_str());
    return 0;
}

}  // namespace pagoda::app

// libFuzzer target: the router's parsers of untrusted input. The first byte picks one:
// a backend's SSE stream split at arbitrary points (network input), a router/fleet TOML
// file ([router], [[router.pools]], [schedule]), or schedule lines with a time zone.
// Errors are fine; crashes, hangs and unbounded memory are not.
#include <toml++/toml.h>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "router/router_config.h"
#include "router/schedule.h"
#include "router/sse.h"

namespace {

void sse(const std::string& text, size_t piece) {
    pagoda::router::SseSplitter s;
    for (size_t i = 0; i < text.size(); i += piece) {
        s.feed(std::string_view(text).substr(i, piece));
        while (s.next()) {
        }
    }
}

void router_toml(const std::string& text) {
    toml::table t;
    try {
        t = toml::parse(text);
    } catch (const toml::parse_error&) {
        return;
    }
    pagoda::router::RouterConfig c;
    if (const toml::table* r = t["router"].as_table()) {
        (void)pagoda::router::read_router_table(*r, "fuzz", c);
    }
    if (const toml::table* s = t["schedule"].as_table()) {
        (void)pagoda::router::read_schedule_table(*s, "fuzz", c);
    }
}

void schedule(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line) && lines.size() < 64) lines.push_back(line);
    auto s = pagoda::router::parse_schedule(lines.size() % 2 ? "Europe/Paris" : "UTC", lines);
    if (s.ok()) (void)pagoda::router::due(*s, 1796000000, 1796000000 + 3 * 86400);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 3) {
        case 0: sse(text, 1 + data[0] / 3 % 17); break;
        case 1: router_toml(text); break;
        default: schedule(text); break;
    }
    return 0;
}

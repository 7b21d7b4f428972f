// libFuzzer target: arbitrary bytes as a `pagoda bench` scenario file (TOML) and as one
// acceptance criterion. Errors are fine; crashes, hangs and unbounded memory are not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "bench/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    auto s = pagoda::bench::parse_scenario(text, "fuzz.toml");
    if (s.ok()) {
        (void)s->hash();
        s->scale(0.5);
        (void)s->validate();
    }
    (void)pagoda::bench::parse_criterion(text);
    (void)pagoda::bench::parse_duration(text);
    return 0;
}

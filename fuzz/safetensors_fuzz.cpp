// libFuzzer target: the safetensors reader (a Hugging Face checkpoint's shards) must reject
// or accept any byte string without reading out of bounds, and every tensor it accepts
// must be readable end to end: its type decided (or refused by name), its last byte read.
#include <cstddef>
#include <cstdint>
#include <span>

#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto f = pagoda::formats::SafetensorsFile::parse(std::span<const uint8_t>(data, size), "fuzz");
    if (!f.ok()) return 0;
    for (const auto& [name, t] : f->tensors()) {
        (void)t.type("fuzz");
        volatile uint8_t sink = t.data.empty() ? 0 : t.data[t.data.size() - 1];
        (void)sink;
    }
    return 0;
}

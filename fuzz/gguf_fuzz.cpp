// libFuzzer target: the GGUF parser must reject or accept any byte string without
// reading out of bounds, and whatever it accepts must be readable (metadata printing,
// tokenizer construction).
#include <cstddef>
#include <cstdint>
#include <span>

#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto g = pagoda::formats::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz");
    if (!g.ok()) return 0;
    for (const auto& [k, v] : g->metadata()) (void)v.to_string();
    for (const auto& t : g->tensors()) {
        volatile uint8_t sink = t.data.empty() ? 0 : t.data[t.data.size() - 1];
        (void)sink;
    }
    auto tok = pagoda::tokenizer::Tokenizer::from_gguf(*g);
    if (tok.ok()) (void)tok->encode("Hello world 123 é");
    return 0;
}

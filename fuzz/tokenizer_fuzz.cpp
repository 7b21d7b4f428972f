// libFuzzer target: encode arbitrary bytes with a SentencePiece and a byte-level BPE
// vocabulary, decode arbitrary ids, stream them through the incremental detokenizer, and
// split the bytes with every pre-tokenizer in the table. Valid UTF-8 must round-trip;
// streamed text must always be valid UTF-8; pre-tokenizer pieces are non-empty and
// concatenate to the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "formats/gguf.h"
#include "fuzz/fuzz_common.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using pagoda_fuzz::load;

void check(const pagoda::tokenizer::Tokenizer& tok, const uint8_t* data, size_t size) {
    using namespace pagoda::tokenizer;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto ids =
        tok.encode(text, {.add_special = AddSpecial::kNo, .parse_special = ParseSpecial::kYes});
    const auto plain = tok.encode(text, {.add_special = AddSpecial::kYes});
    if (is_valid_utf8(text) && text.find("\xe2\x96\x81") == std::string_view::npos &&
        tok.vocab().kind == TokenizerKind::kBpe && tok.decode(plain) != text) {
        std::abort();  // byte-level BPE round-trips every valid UTF-8 string
    }
    // Arbitrary ids from the input bytes, streamed.
    IncrementalDetokenizer d(tok, IncrementalDetokenizer::Position::kStart);
    std::string streamed;
    for (size_t i = 0; i + 1 < size; i += 2) {
        const int32_t id = int32_t((data[i] | (data[i + 1] << 8)) % uint32_t(tok.vocab().size()));
        streamed += d.push(id);
    }
    streamed += d.flush();
    if (!is_valid_utf8(streamed)) std::abort();
    (void)ids;
}

// Every pre-tokenizer of the table, compiled once.
void check_pre_tokenizers(const uint8_t* data, size_t size) {
    using pagoda::tokenizer::PreTokenizer;
    static const std::vector<PreTokenizer> all = [] {
        std::vector<PreTokenizer> v;
        for (const std::string& name : PreTokenizer::known_names()) {
            auto p = PreTokenizer::create(name);
            if (!p.ok()) std::abort();  // every table entry must compile
            v.push_back(std::move(p).value());
        }
        return v;
    }();
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    for (const PreTokenizer& p : all) {
        size_t at = 0;
        for (std::string_view piece : p.split(text)) {
            if (piece.empty() || piece.data() != text.data() + at) std::abort();
            at += piece.size();
        }
        if (at != text.size()) std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static auto spm = load(PAGODA_SOURCE_DIR "/models/stories260K.gguf");
    static auto bpe = load(PAGODA_SOURCE_DIR "/testdata/tokenizer-vectors/ggml-vocab-gpt-2.gguf");
    check(*spm->tok, data, size);
    check(*bpe->tok, data, size);
    check_pre_tokenizers(data, size);
    return 0;
}

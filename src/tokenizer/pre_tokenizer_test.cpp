// Every pre-tokenizer in the table: its regexes compile, and it splits a vector text into the
// pieces its published regexes define (derived by hand, regex by regex, in the comments of
// kVectors) and encodes it with a writer-made byte-level BPE vocabulary that names it in
// `tokenizer.ggml.pre`. Also: user-defined tokens match before pre-tokenization.
#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace pagoda::tokenizer {
namespace {

using Pieces = std::vector<std::string>;

// One text through every family: contractions in both cases, digits, brackets, a double
// space and a blank line.
const std::string kText = "Hello world's I'VE 12345 (ok)  go\n\nend";

struct Vector {
    std::vector<std::string> names;  // pre-tokenizer names sharing these regexes
    std::string text;
    Pieces pieces;
};

const std::vector<Vector>& vectors() {
    static const std::vector<Vector> v = {
        // GPT-2: ' ?\p{L}+' keeps the space on words; "'VE" is not a (lowercase) contraction;
        // '\s+(?!\S)' leaves the last space of a run to the next word; a lone "\n" before a
        // letter matches nothing and stays as a gap piece.
        {{"gpt-2", "mpt", "olmo", "jais"},
         kText,
         {"Hello", " world", "'s", " I", "'", "VE", " 12345", " (", "ok", ")", " ", " go", "\n",
          "\n", "end"}},
        // Llama 3: case-insensitive contractions, digits in threes, punctuation may take one
        // leading space, newline runs together.
        {{"llama3", "llama-bpe", "llama-v3", "dbrx", "smaug-bpe"},
         kText,
         {"Hello", " world", "'s", " I", "'VE", " ", "123", "45", " (", "ok", ")", " ", " go",
          "\n\n", "end"}},
        // Qwen2: as Llama 3 with single digits.
        {{"qwen2", "stablelm2", "deepseek-r1-qwen"},
         kText,
         {"Hello", " world", "'s", " I", "'VE", " ", "1", "2", "3", "4", "5", " (", "ok", ")", " ",
          " go", "\n\n", "end"}},
        // DeepSeek LLM: [\r\n] alone; cased-letter runs with one optional space; ASCII and
        // full-width punctuation runs (":-~" also spans ASCII letters); trailing space; CJK
        // runs; digit runs.
        {{"deepseek-llm"},
         kText,
         {"Hello", " world", "'", "s", " I", "'", "VE", " ", "12345", " (", "ok", ")", " ", " go",
          "\n", "\n", "end"}},
        // The cased-letter class holds U+1FD3 and U+1FDB (which NFC would turn into U+0390 and
        // U+038A, out of range order: written as \x{..} so no editor can do that again). The
        // CJK regex's range U+0800..U+4E00 also covers them, so it splits them from "é".
        // (One such letter a case: the vocabulary's merge chains cannot share a lead byte.)
        {{"deepseek-llm"}, "\u1FD3\u00E9 \u4E2D\u6587", {"\u1FD3", "\u00E9", " ", "\u4E2D\u6587"}},
        {{"deepseek-llm"}, "\u00E9\u1FDB", {"\u00E9", "\u1FDB"}},
        // DeepSeek Coder: letters, punctuation (\p{P}), CJK, single digits.
        {{"deepseek-coder"}, kText, {"Hello", " world", "'", "s",   " I", "'",  "VE",
                                     " ",     "1",      "2", "3",   "4",  "5",  " (",
                                     "ok",    ")",      " ", " go", "\n", "\n", "end"}},
        // Falcon: punctuation runs first, then GPT-2, then digits in threes.
        {{"falcon"},
         kText,
         {"Hello", " world", "'", "s", " I", "'", "VE", " ", "123", "45", " ", "(", "ok", ")", " ",
          " go", "\n", "\n", "end"}},
        // The default (no `tokenizer.ggml.pre`): punctuation runs, GPT-2, digit runs, threes.
        {{"default"},
         kText,
         {"Hello", " world", "'", "s", " I", "'", "VE", " ", "123", "45", " ", "(", "ok", ")", " ",
          " go", "\n", "\n", "end"}},
        // StarCoder family: every digit alone, then GPT-2.
        {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
         kText,
         {"Hello", " world", "'s", " I", "'", "VE", " ",   "1",  "2",  "3",
          "4",     "5",      " (", "ok", ")", " ",  " go", "\n", "\n", "end"}},
        // BLOOM / Poro: one optional space and a run of anything but space and the listed
        // punctuation.
        {{"poro-chat", "bloom", "gpt3-finnish"},
         kText,
         {"Hello", " world's", " I'VE", " 12345", " (", "ok", ") ", " go", "\n\n", "end"}},
        // Viking: Poro, then every digit alone.
        {{"viking"},
         kText,
         {"Hello", " world's", " I'VE", " ", "1", "2", "3", "4", "5", " (", "ok", ") ", " go",
          "\n\n", "end"}},
        // Tekken: case-aware words ("'s" and "'VE" take their apostrophe), single digits.
        {{"tekken"},
         kText,
         {"Hello", " world", "'s", " I", "'VE", " ", "1", "2", "3", "4", "5", " (", "ok", ")", " ",
          " go", "\n\n", "end"}},
        {{"tekken"}, "HelloWorld", {"Hello", "World"}},
    };
    return v;
}

// A byte-level BPE vocabulary for one vector: the 256 byte characters, a chain of merges
// that builds every expected piece into one token, and "join" merges (ranked last) that
// would fuse any two neighbouring pieces. A split that is too coarse ends in a join token;
// one that is too fine cannot build the piece's token. Either way the ids differ.
struct BuiltVocab {
    std::vector<uint8_t> bytes;
    std::map<std::string, int32_t> id;  // by BPE-character text
};

BuiltVocab build_vocab(const std::string& pre, const Pieces& pieces,
                       const std::vector<std::string>& user_defined = {}) {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<std::string> merges;
    BuiltVocab b;
    auto add = [&](const std::string& t, int32_t type) {
        if (b.id.emplace(t, int32_t(tokens.size())).second) {
            tokens.push_back(t);
            types.push_back(type);
        }
    };
    for (int c = 0; c < 256; ++c) add(bytes_to_bpe_chars(std::string(1, char(c))), 1);
    auto chain = [&](const std::vector<std::string>& parts) {
        std::string acc = parts[0];
        for (size_t k = 1; k < parts.size(); ++k) {
            merges.push_back(acc + " " + parts[k]);
            acc += parts[k];
            add(acc, 1);
        }
    };
    for (const std::string& p : pieces) {
        std::vector<std::string> chars;
        const std::string s = bytes_to_bpe_chars(p);
        for (size_t i = 0; i < s.size();) {
            const size_t n = utf8_lead_len(uint8_t(s[i]));
            chars.push_back(s.substr(i, n));
            i += n;
        }
        chain(chars);
    }
    for (size_t k = 0; k + 1 < pieces.size(); ++k) {
        chain({bytes_to_bpe_chars(pieces[k]), bytes_to_bpe_chars(pieces[k + 1])});
    }
    for (const std::string& u : user_defined) add(u, 4);
    formats::GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", pre);
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_i32_array("tokenizer.ggml.token_type", types);
    w.add_string_array("tokenizer.ggml.merges", merges);
    w.add_u32("tokenizer.ggml.bos_token_id", 0);
    w.add_u32("tokenizer.ggml.eos_token_id", 0);
    b.bytes = w.serialize();
    return b;
}

Tokenizer load(const BuiltVocab& b, const std::string& name) {
    auto g = formats::GgufFile::parse(b.bytes, name);
    EXPECT_TRUE(g.ok()) << g.error().message;
    auto t = Tokenizer::from_gguf(*g);
    EXPECT_TRUE(t.ok()) << t.error().message;
    return std::move(t).value();
}

std::string show(const Pieces& p) {
    std::string s;
    for (const auto& x : p) s += "[" + x + "]";
    return s;
}

TEST(PreTokenizer, EveryTableEntryCompilesAndKeepsEveryByte) {
    const std::string sample =
        "Hello, World! it's 2024: \xC3\xA9t\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 "
        "\xF0\x9F\x98\x80\n\n\tx";
    for (const std::string& name : PreTokenizer::known_names()) {
        auto p = PreTokenizer::create(name);
        ASSERT_TRUE(p.ok()) << name << ": " << p.error().message;
        std::string joined;
        for (auto piece : p->split(sample)) {
            EXPECT_FALSE(piece.empty()) << name;
            joined += piece;
        }
        EXPECT_EQ(joined, sample) << name;
    }
}

TEST(PreTokenizer, EveryNameHasAVector) {
    std::set<std::string> covered;
    for (const auto& v : vectors()) covered.insert(v.names.begin(), v.names.end());
    for (const std::string& name : PreTokenizer::known_names()) {
        EXPECT_TRUE(covered.count(name))
            << "pre-tokenizer '" << name << "' has no vector in pre_tokenizer_test.cpp";
    }
}

TEST(PreTokenizer, VectorsSplitAsPublished) {
    for (const auto& v : vectors()) {
        for (const std::string& name : v.names) {
            auto p = PreTokenizer::create(name);
            ASSERT_TRUE(p.ok()) << name;
            Pieces got;
            for (auto piece : p->split(v.text)) got.emplace_back(piece);
            EXPECT_EQ(show(got), show(v.pieces)) << name;
        }
    }
}

TEST(PreTokenizer, VectorsEncodeWithAVocabularyNamingThePreTokenizer) {
    for (const auto& v : vectors()) {
        for (const std::string& name : v.names) {
            const BuiltVocab b = build_vocab(name, v.pieces);
            const Tokenizer tok = load(b, name);
            EXPECT_EQ(tok.vocab().pre, name);
            std::vector<TokenId> want;
            for (const auto& piece : v.pieces) want.push_back(b.id.at(bytes_to_bpe_chars(piece)));
            EXPECT_EQ(tok.encode(v.text, {.add_special = AddSpecial::kNo}), want)
                << name << " on " << v.text;
            EXPECT_EQ(tok.decode(want), v.text) << name;
        }
    }
}

// GPT-NeoX/MPT-style vocabularies add runs of spaces as user-defined tokens (type 4): they
// match whole in the input before pre-tokenization, with or without special-token parsing.
TEST(Tokenizer, UserDefinedTokensMatchBeforePreTokenization) {
    const std::vector<std::string> user = {"  ", "   ", "<|pad|>"};
    const Pieces words = {"a", "b", "c", " d"};
    const BuiltVocab b = build_vocab("mpt", words, user);
    const Tokenizer tok = load(b, "mpt");
    const std::string text = "a  b   c d<|pad|>";
    const std::vector<TokenId> want = {b.id.at("a"),      b.id.at("  "),
                                       b.id.at("b"),      b.id.at("   "),
                                       b.id.at("c"),      b.id.at(bytes_to_bpe_chars(" d")),
                                       b.id.at("<|pad|>")};
    EXPECT_EQ(tok.encode(text, {.add_special = AddSpecial::kNo}), want);
    EXPECT_EQ(
        tok.encode(text, {.add_special = AddSpecial::kNo, .parse_special = ParseSpecial::kYes}),
        want);
    EXPECT_EQ(tok.decode(want), text);
}

}  // namespace
}  // namespace pagoda::tokenizer

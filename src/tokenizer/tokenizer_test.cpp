#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <fstream>
#include <sstream>

#include "base/mapped_file.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/unicode.h"

namespace pagoda::tokenizer {
namespace {

const std::string kVectors = PAGODA_SOURCE_DIR "/testdata/tokenizer-vectors/";

std::string read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// .inp: cases separated by "\n__ggml_vocab_test__\n"; .out: one line of ids per case.
std::vector<std::string> read_cases(const std::string& path) {
    const std::string all = read_all(path);
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> cases;
    size_t pos = 0;
    while (true) {
        const size_t at = all.find(sep, pos);
        if (at == std::string::npos) {
            if (pos < all.size()) cases.push_back(all.substr(pos));
            break;
        }
        cases.push_back(all.substr(pos, at - pos));
        pos = at + sep.size();
    }
    return cases;
}

std::vector<std::vector<TokenId>> read_expected(const std::string& path) {
    std::ifstream f(path);
    std::vector<std::vector<TokenId>> out;
    std::string line;
    while (std::getline(f, line)) {
        std::istringstream is(line);
        std::vector<TokenId> ids;
        TokenId id;
        while (is >> id) ids.push_back(id);
        out.push_back(ids);
    }
    return out;
}

struct Loaded {
    MappedFile file;
    std::optional<formats::GgufFile> gguf;
    std::optional<Tokenizer> tok;
};

// Vocab files live in testdata/tokenizer-vectors/, except the bundled model's.
std::string vocab_path(const std::string& name) {
    if (name == "stories260K.gguf") return PAGODA_SOURCE_DIR "/models/stories260K.gguf";
    return kVectors + name;
}

std::unique_ptr<Loaded> load(const std::string& path) {
    auto l = std::make_unique<Loaded>();
    auto f = MappedFile::open(path);
    EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().message);
    if (!f.ok()) return nullptr;
    l->file = std::move(f).value();
    auto g = formats::GgufFile::parse(l->file.bytes(), path);
    EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
    if (!g.ok()) return nullptr;
    l->gguf.emplace(std::move(g).value());
    auto t = Tokenizer::from_gguf(*l->gguf);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
    if (!t.ok()) return nullptr;
    l->tok.emplace(std::move(t).value());
    return l;
}

class VocabVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectors, EveryCaseMatches) {
    const std::string base = kVectors + GetParam();
    auto l = load(vocab_path(GetParam()));
    ASSERT_NE(l, nullptr);
    const auto cases = read_cases(base + ".inp");
    const auto expected = read_expected(base + ".out");
    ASSERT_EQ(cases.size(), expected.size());
    int failures = 0;
    for (size_t k = 0; k < cases.size(); ++k) {
        const auto got = l->tok->encode(cases[k], {.add_special = AddSpecial::kNo});
        if (got != expected[k]) {
            ++failures;
            std::string g, e;
            for (auto id : got) g += " " + std::to_string(id);
            for (auto id : expected[k]) e += " " + std::to_string(id);
            ADD_FAILURE() << "case " << k << " '" << cases[k] << "'\n got:" << g << "\nwant:" << e;
        }
    }
    EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(All, VocabVectors,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf",
                                           "ggml-vocab-gpt-2.gguf", "ggml-vocab-falcon.gguf",
                                           "ggml-vocab-deepseek-coder.gguf",
                                           "ggml-vocab-starcoder.gguf", "stories260K.gguf"),
                         [](const auto& info) {
                             std::string n = info.param;
                             for (char& c : n) {
                                 if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                             }
                             return n;
                         });

TEST(Tokenizer, BundledModelPromptIds) {
    auto l = load(PAGODA_SOURCE_DIR "/models/stories260K.gguf");
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->tok->encode("Once upon a time"), (std::vector<TokenId>{1, 403, 407, 261, 378}));
}

TEST(Tokenizer, SpecialTokensOnlyWhenAsked) {
    auto l = load(kVectors + "ggml-vocab-phi-3.gguf");
    ASSERT_NE(l, nullptr);
    const TokenId user = l->tok->vocab().token_to_id.at("<|user|>");
    auto plain = l->tok->encode("<|user|>hi", {.add_special = AddSpecial::kNo});
    EXPECT_EQ(std::count(plain.begin(), plain.end(), user), 0);
    auto parsed = l->tok->encode(
        "<|user|>hi", {.add_special = AddSpecial::kNo, .parse_special = ParseSpecial::kYes});
    ASSERT_FALSE(parsed.empty());
    EXPECT_EQ(parsed[0], user);
}

TEST(Tokenizer, UnknownPreTokenizerIsAnError) {
    auto p = PreTokenizer::create("no-such-pre");
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message.find("'no-such-pre' is not supported"), std::string::npos);
}

// Pre-tokenizers without a vocab file here (Llama 3, Qwen2 vocabularies are 4 MiB+):
// their splits follow from the published regexes.
TEST(PreTokenizer, Llama3AndQwen2Splits) {
    auto split = [](const std::string& pre, std::string_view text) {
        auto p = PreTokenizer::create(pre);
        EXPECT_TRUE(p.ok());
        std::vector<std::string> out;
        for (auto piece : p->split(text)) out.emplace_back(piece);
        return out;
    };
    const std::string text = "Hello world's 12345 test\n\n";
    EXPECT_EQ(split("llama3", text), (std::vector<std::string>{"Hello", " world", "'s", " ", "123",
                                                               "45", " test", "\n\n"}));
    EXPECT_EQ(split("qwen2", text),
              (std::vector<std::string>{"Hello", " world", "'s", " ", "1", "2", "3", "4", "5",
                                        " test", "\n\n"}));
    EXPECT_EQ(split("gpt-2", "I'm  here!!"),
              (std::vector<std::string>{"I", "'m", " ", " here", "!!"}));
    EXPECT_TRUE(PreTokenizer::create("llama-bpe")->ignore_merges());
    EXPECT_FALSE(PreTokenizer::create("qwen2")->ignore_merges());
}

TEST(Detokenizer, HoldsBackSplitCharactersAndReplacesInvalidBytes) {
    auto l = load(PAGODA_SOURCE_DIR "/models/stories260K.gguf");
    ASSERT_NE(l, nullptr);
    const auto& v = l->tok->vocab();
    IncrementalDetokenizer d(*l->tok, IncrementalDetokenizer::Position::kContinuation);
    // "é" = C3 A9 as two byte tokens: nothing until the second arrives.
    EXPECT_EQ(d.push(v.byte_tokens[0xC3]), "");
    EXPECT_EQ(d.push(v.byte_tokens[0xA9]), "\xc3\xa9");
    // A lone continuation byte can never be valid: replaced at once.
    EXPECT_EQ(d.push(v.byte_tokens[0x80]), "\xef\xbf\xbd");
    // A lead byte followed by ASCII: the lead becomes U+FFFD, the ASCII goes through.
    EXPECT_EQ(d.push(v.byte_tokens[0xE2]), "");
    EXPECT_EQ(d.push(v.byte_tokens['a']),
              "\xef\xbf\xbd"
              "a");
    EXPECT_EQ(d.push(v.byte_tokens[0xF0]), "");
    EXPECT_EQ(d.flush(), "\xef\xbf\xbd");
}

// Valid UTF-8 strings from arbitrary code points (no surrogates; no U+2581, which
// SentencePiece uses for space and cannot round-trip).
rc::Gen<std::string> utf8_strings() {
    return rc::gen::map(
        rc::gen::container<std::vector<uint32_t>>(rc::gen::oneOf(
            rc::gen::inRange<uint32_t>(0x20, 0x7f), rc::gen::element<uint32_t>(' ', '\n', '\t'),
            rc::gen::inRange<uint32_t>(0x80, 0xd800),
            rc::gen::inRange<uint32_t>(0xe000, 0x110000))),
        [](const std::vector<uint32_t>& cps) {
            std::string s;
            for (uint32_t cp : cps) {
                if (cp != 0x2581) append_utf8(s, cp);
            }
            return s;
        });
}

// SPM looks candidate merges up by the two tokens' ids (a table built at load); by text,
// the tokens must be the same.
TEST(Tokenizer, SpmPairTableAndWordSplitGiveTheTokensWholeTextLookupsGive) {
    for (const char* name :
         {"stories260K.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"}) {
        auto fast = load(vocab_path(name)), slow = load(vocab_path(name));
        ASSERT_NE(fast, nullptr);
        ASSERT_NE(slow, nullptr);
        EXPECT_TRUE(fast->tok->spm_word_split()) << name;
        slow->tok->drop_spm_pairs();
        const bool ok = rc::check(std::string("pair table == text lookups for ") + name, [&]() {
            const std::string s = *utf8_strings();
            RC_ASSERT(fast->tok->encode(s) == slow->tok->encode(s));
        });
        EXPECT_TRUE(ok) << name;
        const std::string story =
            "Once upon a time, there was a little girl named Lily. She "
            "loved to play outside in the sunshine.";
        EXPECT_EQ(fast->tok->encode(story), slow->tok->encode(story));
        // Runs of spaces (tokens of several U+2581), spaces at both ends, words of one letter.
        for (const std::string spaced : {"  a  b   c    d     e", " x ", "a b c d e f g",
                                         "\n  if (x)   {\n    return  y;\n  }\n"}) {
            EXPECT_EQ(fast->tok->encode(spaced), slow->tok->encode(spaced)) << name;
        }
        // Bytes that are no character: overlong (of "a"), cut short, stray continuation bytes.
        for (const std::string odd : {"\xC1\xA1"
                                      "a b",
                                      "x\xE2\x96", "\x80\x80 \xE0\x80\x80 z",
                                      "\xF0\x9F\x98\x80 \xE2\x96\x81\xE2\x96\x81"}) {
            EXPECT_EQ(fast->tok->encode(odd), slow->tok->encode(odd)) << name;
        }
    }
}

TEST(Tokenizer, RoundTripProperty) {
    for (const char* name : {"stories260K.gguf", "ggml-vocab-llama-spm.gguf",
                             "ggml-vocab-gpt-2.gguf", "ggml-vocab-deepseek-coder.gguf"}) {
        auto l = load(vocab_path(name));
        ASSERT_NE(l, nullptr);
        const Tokenizer& tok = *l->tok;
        const bool ok = rc::check(std::string("decode(encode(s)) == s for ") + name, [&]() {
            const std::string s = *utf8_strings();
            const auto ids = tok.encode(s);
            RC_ASSERT(tok.decode(ids) == s);
            // Streaming decode gives the same text.
            IncrementalDetokenizer d(tok, IncrementalDetokenizer::Position::kStart);
            std::string streamed;
            for (TokenId id : ids) streamed += d.push(id);
            streamed += d.flush();
            RC_ASSERT(streamed == s);
        });
        EXPECT_TRUE(ok) << name;
    }
}

}  // namespace
}  // namespace pagoda::tokenizer

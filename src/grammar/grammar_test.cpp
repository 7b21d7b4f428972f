// The grammar language, the matcher, and token masks checked against brute force on the
// bundled model's vocabulary: every allowed token keeps the text a valid prefix, every
// refused one breaks it.
#include "grammar/grammar.h"

#include <gtest/gtest.h>

#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::grammar {
namespace {

std::shared_ptr<const Grammar> ok(const char* text) {
    auto g = parse_gbnf(text);
    EXPECT_TRUE(g.ok()) << text << ": " << (g.ok() ? "" : g.error().message);
    return g.ok() ? *g : nullptr;
}

std::string error_of(const char* text) {
    auto g = parse_gbnf(text);
    return g.ok() ? std::string("(parsed)") : g.error().message;
}

// Whether `text` is a complete match (full) or a valid prefix.
bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text, bool full) {
    Matcher m(g);
    return m.accept(text) && (!full || m.can_end());
}

TEST(Grammar, ParsesRulesLiteralsClassesGroupsAndRepetitions) {
    auto g = ok(R"(
        # a comment
        root   ::= greeting " " number ("!" | "?")?
        greeting ::= "hi" | "hello"
        number ::= [1-9] [0-9]* | "0"
    )");
    EXPECT_TRUE(matches(g, "hi 42!", true));
    EXPECT_TRUE(matches(g, "hello 0", true));
    EXPECT_TRUE(matches(g, "hello 0?", true));
    EXPECT_FALSE(matches(g, "hello 01", false));
    EXPECT_TRUE(matches(g, "hel", false));
    EXPECT_FALSE(matches(g, "hel", true));
    EXPECT_FALSE(matches(g, "hey", false));
    auto counts = ok(R"(root ::= "a"{2} "b"{1,3} "c"{2,} [^x]+)");
    EXPECT_TRUE(matches(counts, "aabccy", true));
    EXPECT_TRUE(matches(counts, "aabbbcccz", true));
    EXPECT_FALSE(matches(counts, "abcc", false));
    EXPECT_FALSE(matches(counts, "aabbbb", false));
    EXPECT_FALSE(matches(counts, "aabccx", false));
    auto multi = ok(R"(root ::= ("ab")+ "\n" [\x41-\x43] . "\"")");
    EXPECT_TRUE(matches(multi, "ababab\nBz\"", true));
    EXPECT_FALSE(matches(multi, "aba\n", false));
}

TEST(Grammar, UnicodeClassesAcrossSplitBytes) {
    auto g = ok(R"(root ::= [α-ω]+ "✓")");
    Matcher m(g);
    const std::string alpha = "α";  // two bytes, fed one at a time
    EXPECT_TRUE(m.accept(alpha.substr(0, 1)));
    EXPECT_FALSE(m.can_end());
    EXPECT_TRUE(m.accept(alpha.substr(1)));
    EXPECT_TRUE(m.accept("β✓"));
    EXPECT_TRUE(m.can_end());
    Matcher n(g);
    EXPECT_FALSE(n.accept("\xC3"));  // the start of Latin-1 letters: no Greek follows
    EXPECT_FALSE(n.accept("a"));
    EXPECT_FALSE(n.accept("\xFF"));  // never valid UTF-8
}

TEST(Grammar, ErrorsSayWhatIsWrong) {
    EXPECT_NE(error_of("root ::= missing").find("rule 'missing' is used but not defined"),
              std::string::npos);
    EXPECT_NE(error_of("start ::= \"a\"").find("no 'root' rule"), std::string::npos);
    EXPECT_NE(error_of("root ::= \"abc").find("line 1: unterminated string literal"),
              std::string::npos);
    EXPECT_NE(error_of("root ::= root \"a\"").find("rule 'root' is left-recursive"),
              std::string::npos);
    EXPECT_NE(error_of("root ::= x \"a\"\nx ::= \"\" | root").find("left-recursive"),
              std::string::npos);
    EXPECT_NE(error_of("root ::= (\"a\"?)*").find("can match the empty string"), std::string::npos);
    EXPECT_NE(error_of("root ::= x{0,50}\nx ::= [a]*").find("line 1: a repetition of something"),
              std::string::npos);
    EXPECT_NE(error_of("root ::= [z-a]").find("runs backwards"), std::string::npos);
    EXPECT_NE(error_of("root ::= \"a\"{3,2}").find("m <= n"), std::string::npos);
    EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
    EXPECT_NE(error_of("root ::= \"a\"\n  \n  oops").find("rule 'oops' is used but not defined"),
              std::string::npos);
    EXPECT_NE(error_of("# a grammar\n\nroot \"b\"").find("line 3: expected '::=' after 'root'"),
              std::string::npos)
        << error_of("# a grammar\n\nroot \"b\"");
}

class GrammarVocab : public ::testing::Test {
  protected:
    void SetUp() override {
        auto g = model::open_gguf(std::string(PAGODA_SOURCE_DIR) + "/models/stories260K.gguf");
        ASSERT_TRUE(g.ok()) << g.error().message;
        auto tok = tokenizer::Tokenizer::from_gguf(*g->gguf);
        ASSERT_TRUE(tok.ok()) << tok.error().message;
        for (int32_t t = 0; t < tok->vocab().size(); ++t) bytes_.push_back(tok->token_bytes(t));
    }
    std::vector<std::string> bytes_;
};

// mask[t] == (the matcher accepts token t's bytes), for several states of a JSON-like
// grammar and of one with non-ASCII text.
TEST_F(GrammarVocab, MaskEqualsBruteForceOnTheBundledVocabulary) {
    const TokenTrie trie(bytes_);
    auto json_like = ok(R"(
        root  ::= "{" ws "\"name\"" ws ":" ws str ws "," ws "\"age\"" ws ":" ws num ws "}"
        str   ::= "\"" [^"\\]* "\""
        num   ::= [0-9]+
        ws    ::= [ \n]*
    )");
    auto story = ok(R"(root ::= ("Once" | "Lily" | "Tim") (" " [a-z]+){1,6} "." )");
    int allowed_total = 0, states = 0;
    for (const auto& [g, prefixes] :
         std::vector<std::pair<std::shared_ptr<const Grammar>, std::vector<std::string>>>{
             {json_like, {"", "{", "{ \"name\": \"Li", "{\"name\":\"Lily\", \"age\": 3"}},
             {story, {"", "On", "Once upon", "Lily saw a"}}}) {
        for (const auto& prefix : prefixes) {
            Matcher m(g);
            ASSERT_TRUE(m.accept(prefix)) << prefix;
            std::vector<uint8_t> mask;
            m.fill_mask(trie, mask);
            ASSERT_EQ(mask.size(), bytes_.size());
            for (size_t t = 0; t < bytes_.size(); ++t) {
                Matcher copy = m;
                const bool brute = !bytes_[t].empty() && copy.accept(bytes_[t]);
                EXPECT_EQ(bool(mask[t]), brute)
                    << "prefix '" << prefix << "' token " << t << " '" << bytes_[t] << "'";
                allowed_total += mask[t];
            }
            ++states;
        }
    }
    EXPECT_EQ(states, 8);
    EXPECT_GT(allowed_total, 8);  // the masks are not all empty
}

// A cached mask is the mask: walking a text token by token, the cache answers the
// positions it has seen (every character inside a string) with what the walk computes.
TEST_F(GrammarVocab, CachedMasksEqualComputedOnes) {
    const TokenTrie trie(bytes_);
    auto g = ok(R"(root ::= "{\"text\": \"" [a-z ]* "\"}")");
    MaskCache cache(64);
    Matcher m(g);
    const std::string doc = "{\"text\": \"once upon a time there was a cat\"}";
    std::vector<uint8_t> cached, fresh;
    for (char c : doc) {
        m.fill_mask(trie, cached, &cache);
        m.fill_mask(trie, fresh);
        ASSERT_EQ(cached, fresh) << "at '" << c << "'";
        ASSERT_TRUE(m.accept(std::string(1, c)));
    }
    EXPECT_TRUE(m.can_end());
    EXPECT_GT(cache.hits(), 20u);  // the string's characters share one position
    EXPECT_LE(cache.size(), 64u);
    MaskCache tiny(2);  // capacity holds
    Matcher n(g);
    for (char c : doc) {
        n.fill_mask(trie, cached, &tiny);
        ASSERT_TRUE(n.accept(std::string(1, c)));
    }
    EXPECT_LE(tiny.size(), 2u);
    MaskCache small_bytes(100, 300);  // the byte budget holds
    Matcher k(g);
    for (char c : doc) {
        k.fill_mask(trie, cached, &small_bytes);
        k.fill_mask(trie, fresh);
        ASSERT_EQ(cached, fresh);
        ASSERT_TRUE(k.accept(std::string(1, c)));
    }
    EXPECT_LE(small_bytes.bytes(), 300u);
    EXPECT_GE(small_bytes.size(), 1u);
    EXPECT_LT(small_bytes.size(), cache.size());
}

}  // namespace
}  // namespace pagoda::grammar

namespace pagoda::grammar {
namespace {

// A character is its shortest UTF-8 encoding only: an overlong '{' (F0 80 81 BB) is not a
// '{', and surrogates or values above U+10FFFF are no characters at all.
TEST(Matcher, OnlyValidUtf8Matches) {
    const auto brace = *parse_gbnf("root ::= \"{\"");
    for (const char* bad : {"\xF0\x80\x81\xBB", "\xE0\x81\xBB", "\xC1\xBB", "\xF0\x80"}) {
        Matcher m(brace);
        EXPECT_FALSE(m.accept(bad)) << bad;
    }
    const auto other = *parse_gbnf("root ::= [^a]");
    for (const char* bad : {"\xED\xA0\x80", "\xED\xA0", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80"}) {
        Matcher m(other);
        EXPECT_FALSE(m.accept(bad)) << bad;
    }
    for (const char* good :
         {"\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xED\x9F\xBF", "\xF4\x8F\xBF\xBF"}) {
        Matcher m(other);
        EXPECT_TRUE(m.accept(good) && m.can_end()) << good;
    }
}

}  // namespace
}  // namespace pagoda::grammar

// pagoda tune's search: the space, the strategies, the ranking and the config file.
#include "bench/tune.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pagoda::bench {
namespace {

TEST(Tune, SearchSpecsAndErrors) {
    auto k = parse_search("max_num_seqs,block-size=32:16:32,tensor_parallel_size=2:4");
    ASSERT_TRUE(k.ok()) << k.error().message;
    ASSERT_EQ(k->size(), 3u);
    EXPECT_EQ((*k)[0].flag, "--max-num-seqs");
    EXPECT_EQ((*k)[0].start, 256) << "the serve default when it is searched";
    EXPECT_EQ((*k)[1].values, (std::vector<int64_t>{32, 16})) << "duplicates dropped";
    EXPECT_EQ((*k)[1].start, 16);
    EXPECT_EQ((*k)[2].start, 2) << "the first value when the default is not among them";
    EXPECT_NE(parse_search("max_num_seq").error().message.find("searchable: max_num_seqs"),
              std::string::npos);
    EXPECT_NE(parse_search("block_size=16:x").error().message.find("'x'"), std::string::npos);
    EXPECT_NE(parse_search("block_size,block_size").error().message.find("twice"),
              std::string::npos);
    EXPECT_FALSE(parse_search("").ok());
    EXPECT_EQ(grid(*k).size(), 6u * 2 * 2);
}

// A synthetic response surface: goodput peaks at max_num_seqs 64 and TP 2; the SLO fails
// at TP 1.
Trial surface(const TuneConfig& c, int index) {
    Trial t;
    t.index = index;
    t.config = c;
    const int64_t seqs = c.at("max_num_seqs"), tp = c.at("tensor_parallel_size");
    t.gpus = int(tp);
    t.meets_slo = tp >= 2;
    t.goodput_rps = 100 - std::abs(std::log2(double(seqs) / 64)) * 10 - (tp == 2 ? 0 : 5);
    t.goodput_per_gpu = t.goodput_rps / double(tp);
    t.p99_ttft_ms = 100;
    return t;
}

TEST(Tune, CoordinateSearchFindsTheBestWithFewerTrialsThanTheGrid) {
    auto knobs = *parse_search("max_num_seqs,tensor_parallel_size");
    int calls = 0;
    auto trials = coordinate_search(
        knobs, [&](const TuneConfig& c) { return surface(c, ++calls); }, 100);
    const int best = best_trial(trials);
    ASSERT_GE(best, 0);
    EXPECT_EQ(trials[size_t(best)].config.at("max_num_seqs"), 64);
    EXPECT_EQ(trials[size_t(best)].config.at("tensor_parallel_size"), 2);
    EXPECT_LT(trials.size(), grid(knobs).size());
    EXPECT_EQ(size_t(calls), trials.size()) << "each configuration runs once";
    // The trial budget holds.
    EXPECT_EQ(coordinate_search(
                  knobs, [&](const TuneConfig& c) { return surface(c, 0); }, 3)
                  .size(),
              3u);
}

TEST(Tune, RankingPutsTheSloFirstThenGoodputThenGpus) {
    Trial a, b;
    a.meets_slo = false;
    a.goodput_rps = 50;
    b.meets_slo = true;
    b.goodput_rps = 10;
    EXPECT_TRUE(better(b, a));
    a.meets_slo = true;
    EXPECT_TRUE(better(a, b));
    // Equal goodput (within 2%): the one that needs fewer GPUs.
    b.goodput_rps = 49.5;
    a.gpus = 4;
    a.goodput_per_gpu = 50.0 / 4;
    b.gpus = 2;
    b.goodput_per_gpu = 49.5 / 2;
    EXPECT_TRUE(better(b, a));
    Trial broken = b;
    broken.error = "the replica exited";
    EXPECT_TRUE(better(a, broken));
    EXPECT_EQ(best_trial({broken}), -1);
}

TEST(Tune, ConfigFileAndReports) {
    auto knobs = *parse_search("max_num_seqs,block_size");
    const std::string toml =
        config_toml({{"backend", "sim"},
                     {"sim-speed", "2"},
                     {"enable-prefix-caching", ""},
                     {"block-size", "8"}},
                    knobs, {{"max_num_seqs", 64}, {"block_size", 32}}, "tuned\nsecond line");
    EXPECT_EQ(toml,
              "# tuned\n# second line\nbackend = \"sim\"\nsim-speed = 2\n"
              "enable-prefix-caching = true\nmax-num-seqs = 64\nblock-size = 32\n");
    std::vector<Trial> trials = {surface({{"max_num_seqs", 64}, {"tensor_parallel_size", 2}}, 1)};
    trials[0].mean_batch = 12;
    const std::string table = trials_table(trials, 0);
    EXPECT_NE(table.find("<- best"), std::string::npos) << table;
    EXPECT_NE(table.find("6.00"), std::string::npos) << "batch / TP: " << table;
    EXPECT_EQ(trials_json(trials, 0)["best"], 1);
    EXPECT_NE(trials_html(trials, 0, "t<x>").find("t&lt;x&gt;"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::bench

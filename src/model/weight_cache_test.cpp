// The weight cache: a warm start maps every matrix and computes bit for bit what packing
// computes; a changed, damaged, stale or foreign cache file is never used; the parser
// rejects what it cannot trust.
#include "model/weight_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "kernels/cpu/ops.h"
#include "model/model.h"
#include "model/test_model.h"
#include "model/weight_cache_internal.h"
#include "testdata/stories260k_golden.h"

namespace pagoda::model {
namespace {

namespace fs = std::filesystem;
using State = WeightCacheReport::State;

std::string write_model(const std::string& shape, formats::TensorType type, uint64_t seed,
                        const std::string& path) {
    auto s = find_shape(shape);
    EXPECT_TRUE(s.ok());
    auto st = write_test_model({.shape = *s,
                                .dtype = type,
                                .seed = seed,
                                .vocab_path = testdata::kStoriesPath,
                                .output_path = path});
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    return path;
}

std::string fresh_dir(const std::string& name) {
    const std::string d = ::testing::TempDir() + "/pagoda_wc_" + name;
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

// The logits of an 8-token prefill's last row.
std::vector<float> logits_of(Model& m) {
    const ModelConfig& c = m.config();
    auto pool = kvcache::KvPool::create({.block_size = 16, .num_blocks = 4}, c.num_layers,
                                        c.num_kv_heads, c.head_dim);
    EXPECT_TRUE(pool.ok());
    const std::vector<int32_t> ids = {1, 5, 9, 200, 300, 17, 44, 81};
    const kvcache::BlockTable table = {0};
    ForwardBatch b{ids, {{0, 8, 0, table}}, {7}, {}, {}};
    std::vector<float> logits;
    const Status st = m.forward(b, kvcache::KvView(*pool), logits);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    return logits;
}

std::unique_ptr<Model> load(const std::string& path, const std::string& dir,
                            WeightCache::Use use = WeightCache::Use::kAuto) {
    LoadOptions o;
    o.weight_cache_dir = dir;
    o.weight_cache_use = use;
    auto m = Model::load(path, o);
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
    return m.ok() ? std::move(*m) : nullptr;
}

int packed_files(const std::string& dir) {
    int n = 0;
    for (const auto& f : fs::directory_iterator(dir)) n += f.path().extension() == ".packed";
    return n;
}

// Q8_0 (VNNI panels), BF16 (pair panels, tied embeddings), F32 (oneDNN's layout) and a
// Q4_K_M file (K-quant panels, or dense f32 where there is no VNNI).
TEST(WeightCache, WarmStartMapsEveryMatrixAndComputesTheSame) {
    const std::string models = fresh_dir("models");
    const std::vector<std::string> paths = {
        write_model("tiny-gqa", formats::TensorType::kQ8_0, 3, models + "/q8.gguf"),
        write_model("tiny-qwen2", formats::TensorType::kBF16, 3, models + "/bf16.gguf"),
        write_model("tiny-gqa", formats::TensorType::kF32, 3, models + "/f32.gguf"),
        PAGODA_SOURCE_DIR "/testdata/models/stories260k-256-q4_k_m.gguf"};
    for (const std::string& path : paths) {
        SCOPED_TRACE(path);
        const std::string dir = fresh_dir("warm");
        auto plain = load(path, "");
        ASSERT_TRUE(plain);
        EXPECT_EQ(plain->weight_cache_report().state, State::kOff);
        const std::vector<float> want = logits_of(*plain);

        auto cold = load(path, dir);
        ASSERT_TRUE(cold);
        WeightCacheReport r = cold->weight_cache_report();
        // Not used: packed again and being written (or, for this small file, already
        // written by the time the report is read).
        EXPECT_TRUE(r.state == State::kWriting || r.state == State::kWritten) << int(r.state);
        EXPECT_EQ(r.note, "no cache file yet");
        EXPECT_EQ(r.adopted, 0);
        EXPECT_GT(r.packed, 0);
        const int matrices = r.packed;
        EXPECT_EQ(logits_of(*cold), want);
        cold->wait_weight_cache();
        EXPECT_EQ(cold->weight_cache_report().state, State::kWritten);
        EXPECT_TRUE(fs::exists(r.path));
        EXPECT_EQ(fs::path(r.path).parent_path(), fs::path(dir));

        for (auto use : {WeightCache::Use::kAuto, WeightCache::Use::kCopy}) {
            auto warm = load(path, dir, use);
            ASSERT_TRUE(warm);
            r = warm->weight_cache_report();
            EXPECT_EQ(r.state, State::kHit) << r.note;
            EXPECT_EQ(r.adopted, matrices);
            EXPECT_EQ(r.packed, 0);
            EXPECT_EQ(r.copied, use == WeightCache::Use::kCopy);
            EXPECT_EQ(logits_of(*warm), want);
        }
    }
}

// A rewritten model file (same path and size, other weights) has another key: packed
// again, and the old file of that model name is deleted once the new one is written.
TEST(WeightCache, ChangedModelFileIsPackedAgainAndTheStaleFileRemoved) {
    const std::string dir = fresh_dir("changed"), models = fresh_dir("changed_models");
    const std::string path = models + "/m.gguf";
    write_model("tiny-gqa", formats::TensorType::kQ8_0, 1, path);
    auto first = load(path, dir);
    ASSERT_TRUE(first);
    first->wait_weight_cache();
    const std::string old_file = first->weight_cache_report().path;
    first.reset();

    write_model("tiny-gqa", formats::TensorType::kQ8_0, 2, path);
    auto plain = load(path, "");
    ASSERT_TRUE(plain);
    auto second = load(path, dir);
    ASSERT_TRUE(second);
    EXPECT_EQ(second->weight_cache_report().state, State::kWriting);
    EXPECT_NE(second->weight_cache_report().path, old_file);
    EXPECT_EQ(logits_of(*second), logits_of(*plain));
    second->wait_weight_cache();
    EXPECT_FALSE(fs::exists(old_file));
    EXPECT_EQ(packed_files(dir), 1);
    auto third = load(path, dir);
    ASSERT_TRUE(third);
    EXPECT_EQ(third->weight_cache_report().state, State::kHit);
}

void overwrite(const std::string& path, const std::function<void(std::string&)>& change) {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    in.close();
    change(bytes);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A damaged, cut-short, foreign or stale file at the cache's path: the load says why in
// the report's note, packs, computes the right logits, and writes a good file again.
TEST(WeightCache, DamagedOrStaleFileIsNotUsed) {
    const std::string dir = fresh_dir("damaged"), models = fresh_dir("damaged_models");
    const std::string path =
        write_model("tiny-gqa", formats::TensorType::kQ8_0, 4, models + "/m.gguf");
    auto m = load(path, dir);
    ASSERT_TRUE(m);
    m->wait_weight_cache();
    const std::string file = m->weight_cache_report().path;
    const std::vector<float> want = logits_of(*m);
    m.reset();
    struct Case {
        const char* what;
        std::function<void(std::string&)> change;
        const char* note;
    };
    const std::vector<Case> cases = {
        {"header byte flipped", [](std::string& b) { b[40] ^= 1; }, "hash does not match"},
        {"cut short", [](std::string& b) { b.resize(b.size() / 2); }, "lies outside the data"},
        {"not a cache", [](std::string& b) { b = "hello"; }, "no PAGODAWC magic"},
        {"other key",
         [](std::string& b) {
             std::vector<PackedEntry> none;
             const auto h = weight_cache_header("another model", none);
             b.assign(h.begin(), h.end());
         },
         "is stale"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        overwrite(file, c.change);
        auto again = load(path, dir);
        ASSERT_TRUE(again);
        const WeightCacheReport r = again->weight_cache_report();
        // Not used: packed again and being written (or, for this small file, already
        // written by the time the report is read).
        EXPECT_TRUE(r.state == State::kWriting || r.state == State::kWritten) << int(r.state);
        EXPECT_NE(r.note.find(c.note), std::string::npos) << r.note;
        EXPECT_EQ(logits_of(*again), want);
        again->wait_weight_cache();
        auto hit = load(path, dir);
        ASSERT_TRUE(hit);
        EXPECT_EQ(hit->weight_cache_report().state, State::kHit);
    }
}

// A header for two entries, with the file bytes after it (4 KiB-aligned data).
std::vector<uint8_t> two_entry_file(std::vector<PackedEntry>& entries) {
    entries = {{"a", PackedKind::kQuant, formats::TensorType::kQ8_0, 32, 64, 0, 100},
               {"b", PackedKind::kDense, formats::TensorType::kF32, 2, 3, 0, 24}};
    std::vector<uint8_t> f = weight_cache_header("key", entries);
    f.resize(entries[1].offset + entries[1].size, 7);
    return f;
}

// Rewrites entry i's offset in place and fixes the header hash, as a writer with a bug
// (or an attacker) would.
void set_offset(std::vector<uint8_t>& f, int i, uint64_t offset) {
    size_t pos = 32 + 4 + 3;  // fixed fields, key length, "key"
    for (int k = 0; k < i; ++k) pos += 4 + 1 + 4 + 4 + 8 * 4;
    pos += 4 + 1 + 4 + 4 + 8 + 8;  // name length, name, kind, type, rows, cols
    std::memcpy(f.data() + pos, &offset, 8);
    uint64_t header;
    std::memcpy(&header, f.data() + 16, 8);
    const uint64_t h =
        weight_cache_hash(std::span(f).subspan(32, size_t(header) - 32), kWeightCacheVersion);
    std::memcpy(f.data() + 24, &h, 8);
}

TEST(WeightCache, ParserReadsWhatTheWriterWritesAndRejectsTheRest) {
    std::vector<PackedEntry> entries;
    std::vector<uint8_t> f = two_entry_file(entries);
    auto h = parse_weight_cache(f);
    ASSERT_TRUE(h.ok()) << h.error().message;
    EXPECT_EQ(h->key, "key");
    ASSERT_EQ(h->entries.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(h->entries[i].name, entries[i].name);
        EXPECT_EQ(h->entries[i].type, entries[i].type);
        EXPECT_EQ(h->entries[i].rows, entries[i].rows);
        EXPECT_EQ(h->entries[i].offset % 4096, 0u);
        EXPECT_EQ(h->entries[i].size, entries[i].size);
    }
    auto rejects = [](std::vector<uint8_t> bytes, const std::string& why) {
        auto r = parse_weight_cache(bytes);
        ASSERT_FALSE(r.ok()) << why;
        EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
    };
    std::vector<uint8_t> g = f;
    g[8] = 9;  // version
    rejects(g, "version 9; this build reads 1");
    g = f;
    set_offset(g, 1, entries[1].offset + 8);
    rejects(g, "is not 4096-byte aligned");
    g = f;
    set_offset(g, 1, uint64_t(1) << 62);
    rejects(g, "lies outside the data");
    g = f;
    set_offset(g, 0, 0);  // inside the header
    rejects(g, "lies outside the data");
    g = f;
    g.resize(f.size() - 1);
    rejects(g, "lies outside the data");
    std::vector<PackedEntry> twice = {entries[0], entries[0]};
    g = weight_cache_header("k", twice);
    g.resize(twice[1].offset + twice[1].size);
    rejects(g, "entry 'a' twice");
    rejects({}, "no PAGODAWC magic");
}

// The key follows the file's content and modification time and this CPU's layouts.
TEST(WeightCache, KeyFollowsContentTimeAndKernelLayout) {
    const std::string models = fresh_dir("key");
    const std::string path =
        write_model("tiny-gqa", formats::TensorType::kQ8_0, 1, models + "/m.gguf");
    auto key_of = [&] {
        auto f = MappedFile::open(path);
        EXPECT_TRUE(f.ok());
        return weight_cache_key(*f, 4096);
    };
    const std::string k1 = key_of();
    EXPECT_EQ(key_of(), k1);
    EXPECT_NE(k1.find(kernels::cpu::packed_layout_key()), std::string::npos) << k1;
    kernels::cpu::set_force_portable_kernels(true);
    EXPECT_NE(key_of(), k1);
    kernels::cpu::set_force_portable_kernels(false);
    const auto t = fs::last_write_time(path);
    fs::last_write_time(path, t + std::chrono::seconds(1));
    const std::string k2 = key_of();
    EXPECT_NE(k2, k1);
    write_model("tiny-gqa", formats::TensorType::kQ8_0, 2, path);  // same size, other weights
    fs::last_write_time(path, t + std::chrono::seconds(1));
    EXPECT_NE(key_of(), k2);
}

}  // namespace
}  // namespace pagoda::model

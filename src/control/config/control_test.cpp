// Live configuration: settings patches and their errors, the version store in a real SQLite
// file, and the manager over a real engine (changes, conflicts, stable marking, rollback,
// restart).
#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/check.h"
#include "control/config/config_manager.h"
#include "control/control_test_util.h"
#include "testdata/stories260k_golden.h"

namespace pagoda::control {
namespace {

using test_util::fresh_dir;
using test_util::stories;

std::string patch_error(const json& patch) {
    auto r = apply_patch(EngineSettings{}, patch);
    return r.ok() ? "ok" : r.error().message;
}

TEST(EngineSettings, PatchValidatesWholeAndNamesKeyValueAndRange) {
    EXPECT_EQ(patch_error({{"max_num_seqs", 8}}), "ok");
    EXPECT_EQ(patch_error({{"max_num_seqs", 0}}), "'max_num_seqs' = 0 is out of range [1, 65536]");
    EXPECT_EQ(patch_error({{"max_num_seqs", "8"}}), "'max_num_seqs' must be an integer, got \"8\"");
    EXPECT_NE(patch_error({{"max_num_sequences", 8}}).find("unknown setting 'max_num_sequences'"),
              std::string::npos);
    EXPECT_NE(patch_error({{"block_size", 24}}).find("block size 24 is not allowed"),
              std::string::npos);
    EXPECT_NE(patch_error({{"kv_cache_dtype", "f8"}}).find("'kv_cache_dtype'"), std::string::npos);
    EXPECT_NE(patch_error(json::array()).find("must be a JSON object"), std::string::npos);
    // One bad key and the whole patch is refused.
    EXPECT_NE(patch_error({{"max_num_seqs", 8}, {"block_size", 7}}), "ok");
}

TEST(EngineSettings, KvCacheMemoryTakesTheFlagsUnits) {
    // As --kv-cache-memory: `pagoda config set kv_cache_memory=128MiB` sends a string.
    auto a = apply_patch(EngineSettings{}, {{"kv_cache_memory", "128MiB"}});
    ASSERT_TRUE(a.ok()) << a.error().message;
    EXPECT_EQ(a->layout.kv_cache_memory_bytes, int64_t(128) << 20);
    EXPECT_EQ(
        apply_patch(EngineSettings{}, {{"kv_cache_memory", 1 << 27}})->layout.kv_cache_memory_bytes,
        int64_t(128) << 20);
    EXPECT_NE(patch_error({{"kv_cache_memory", "128 parsecs"}}).find("allowed: K, KiB, M, MiB"),
              std::string::npos);
    EXPECT_NE(patch_error({{"kv_cache_memory", true}}).find("or a size such as \"4GiB\""),
              std::string::npos);
}

TEST(EngineSettings, JsonRoundTripAndDiff) {
    EngineSettings a;
    auto b = apply_patch(a, {{"max_num_seqs", 8}, {"kv_cache_dtype", "bf16"}});
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(apply_patch(EngineSettings{}, b->to_json()).value(), *b);
    const json d = diff(a, *b);
    EXPECT_EQ(d.size(), 2u);
    EXPECT_EQ(d["max_num_seqs"]["from"], 256);
    EXPECT_EQ(d["max_num_seqs"]["to"], 8);
    EXPECT_EQ(d["kv_cache_dtype"]["to"], "bf16");
}

TEST(ConfigStore, VersionsRoundTripStableMarksAndRollbackTarget) {
    const std::string dir = fresh_dir("store");
    {
        auto db = StateDb::open(dir);
        ASSERT_TRUE(db.ok()) << db.error().message;
        ConfigStore s(**db, "");
        EngineSettings v1;
        auto v2 = apply_patch(v1, {{"max_num_seqs", 8}}).value();
        auto v3 = apply_patch(v2, {{"max_num_batched_tokens", 512}}).value();
        EXPECT_EQ(s.append(v1, "startup", "first", 1000)->id, 1);
        EXPECT_EQ(s.append(v2, "admin_api", "smaller batch", 2000)->id, 2);
        EXPECT_EQ(s.append(v3, "admin_api", "token cap", 3000)->id, 3);
        ASSERT_TRUE(s.mark_stable(1, 1500).ok());
        ASSERT_TRUE(s.mark_stable(2, 2500).ok());
        EXPECT_EQ((*s.last_stable(3))->id, 2);
        EXPECT_EQ((*s.last_stable(2))->id, 1) << "never the running version itself";
    }
    // Reopened: everything is still there.
    auto db = StateDb::open(dir);
    ASSERT_TRUE(db.ok());
    ConfigStore s(**db, "");
    auto h = s.history(10);
    ASSERT_TRUE(h.ok());
    ASSERT_EQ(h->size(), 3u);
    EXPECT_EQ((*h)[0].id, 3);
    EXPECT_EQ((*h)[0].reason, "token cap");
    EXPECT_EQ((*h)[0].diff["max_num_batched_tokens"]["to"], 512);
    EXPECT_FALSE((*h)[0].stable_at_ms.has_value());
    EXPECT_EQ((*h)[1].stable_at_ms.value_or(0), 2500);
    EXPECT_EQ((*h)[2].value, EngineSettings{});
    EXPECT_FALSE(s.get(9)->has_value());
}

TEST(StateDb, OneProcessADirectoryAndTheSecondIsToldWhoHoldsIt) {
    const std::string dir = fresh_dir("locked");
    auto first = StateDb::open(dir);
    ASSERT_TRUE(first.ok()) << first.error().message;
    // A second opener (here the same process; another process gets the same answer).
    auto second = StateDb::open(dir);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.error().code, ErrorCode::kConflict);
    const std::string& m = second.error().message;
    EXPECT_NE(m.find(dir + " is in use by pid " + std::to_string(::getpid())), std::string::npos)
        << m;
    EXPECT_NE(m.find("--state-dir"), std::string::npos) << m;
    // Released with its holder: the next one opens it.
    first->reset();
    EXPECT_TRUE(StateDb::open(dir).ok());
}

TEST(StateDb, CorruptFileIsAClearError) {
    const std::string dir = fresh_dir("corrupt");
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/pagoda.db") << std::string(4096, 'x');
    auto db = StateDb::open(dir);
    ASSERT_FALSE(db.ok());
    EXPECT_NE(db.error().message.find(dir + "/pagoda.db"), std::string::npos);
    EXPECT_NE(db.error().message.find("not a valid state database"), std::string::npos)
        << db.error().message;
}

std::unique_ptr<engine::Engine> small_engine() {
    engine::EngineConfig c;
    c.kv.num_blocks = 64;
    auto e = engine::Engine::create(stories(), c);
    PAGODA_CHECK(e.ok()) << e.error().message;
    return std::move(e).value();
}

ChangeRequest req(json patch, std::optional<int64_t> base = std::nullopt, std::string reason = "") {
    ChangeRequest r;
    r.patch = std::move(patch);
    r.base_version = base;
    r.reason = std::move(reason);
    return r;
}

TEST(ConfigManager, ChangesApplyRecordConflictAndRollBack) {
    const std::string dir = fresh_dir("manager");
    auto eng = small_engine();
    auto m = ConfigManager::open(*eng, {.state_dir = dir,
                                        .stable_window = std::chrono::seconds(10),
                                        .deployment = "",
                                        .origin = ""});
    ASSERT_TRUE(m.ok()) << m.error().message;
    ConfigManager& cm = **m;
    const int64_t v1 = cm.current().id;
    EXPECT_EQ(cm.current().source, "startup");

    auto v2 = cm.change(req({{"max_num_seqs", 8}}, std::nullopt, "smaller batch"));
    ASSERT_TRUE(v2.ok()) << v2.error().message;
    EXPECT_EQ(eng->knobs().max_num_seqs, 8);
    // A change based on an old version loses; a bad one changes nothing.
    auto stale = cm.change(req({{"max_num_seqs", 4}}, v1));
    ASSERT_FALSE(stale.ok());
    EXPECT_EQ(stale.error().code, ErrorCode::kConflict);
    EXPECT_FALSE(cm.change(req({{"max_num_seqs", -1}})).ok());
    EXPECT_EQ(cm.current().id, v2->id);
    // The same settings again: no new version.
    EXPECT_EQ(cm.change(req({{"max_num_seqs", 8}}))->id, v2->id);
    EXPECT_EQ(eng->knobs().max_num_seqs, 8);

    // Nothing stable yet: rollback needs a target.
    EXPECT_EQ(cm.rollback(std::nullopt, "").error().code, ErrorCode::kNotFound);
    // Stable after the window; then a bad change rolls back to it.
    ASSERT_TRUE(cm.tick(v2->created_at_ms + 5000).ok());
    EXPECT_FALSE(cm.current().stable_at_ms.has_value());
    // An OOM-risk event starts the stable window again.
    cm.note_risk(v2->created_at_ms + 8000);
    ASSERT_TRUE(cm.tick(v2->created_at_ms + 10000).ok());
    EXPECT_FALSE(cm.current().stable_at_ms.has_value());
    ASSERT_TRUE(cm.tick(v2->created_at_ms + 18000).ok());
    EXPECT_TRUE(cm.current().stable_at_ms.has_value());
    ASSERT_TRUE(cm.change(req({{"max_num_seqs", 2}})).ok());
    auto back = cm.rollback(std::nullopt, "p99");
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->source, "rollback");
    EXPECT_EQ(back->value.knobs.max_num_seqs, 8);
    EXPECT_EQ(eng->knobs().max_num_seqs, 8);
    EXPECT_EQ(cm.rollback(int64_t(99), "").error().code, ErrorCode::kNotFound);
    auto to_v1 = cm.rollback(v1, "");
    ASSERT_TRUE(to_v1.ok());
    EXPECT_EQ(eng->knobs().max_num_seqs, 256);
    const std::string text = cm.metrics_text("m");
    EXPECT_NE(text.find("pagoda_config_version{model_name=\"m\"} " + std::to_string(to_v1->id)),
              std::string::npos)
        << text;
    // Free-text reasons stay out of the labels: admin rollbacks count as "manual".
    EXPECT_NE(text.find("pagoda_config_rollbacks_total{model_name=\"m\",reason=\"manual\"} 2"),
              std::string::npos)
        << text;

    // A restart with the same settings continues the history; other settings add a version.
    m->reset();
    auto again = ConfigManager::open(*eng, {.state_dir = dir,
                                            .stable_window = std::chrono::seconds(600),
                                            .deployment = "",
                                            .origin = ""});
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)->current().id, to_v1->id);
    auto h = (*again)->history(100);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h->size(), 5u);  // startup, two changes, two rollbacks
    EXPECT_TRUE((*h)[3].stable_at_ms.has_value()) << "stable marks survive";
    again->reset();

    // Another deployment sharing the state directory (another model, card or TP) starts its
    // own line: the stable versions above are never its rollback targets.
    auto other = ConfigManager::open(*eng, {.state_dir = dir,
                                            .stable_window = std::chrono::seconds(10),
                                            .deployment = "sim tp=2",
                                            .origin = ""});
    ASSERT_TRUE(other.ok());
    EXPECT_NE((*other)->current().id, to_v1->id) << "a new startup version";
    EXPECT_EQ((*other)->current().deployment, "sim tp=2");
    auto none = (*other)->last_stable();
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value()) << (*none)->id;
    auto cross = (*other)->rollback(v2->id, "");
    ASSERT_FALSE(cross.ok());
    EXPECT_NE(cross.error().message.find("another deployment"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::control

// Alerting over a real engine and state database, with the metrics text set by the test
// and the clock passed in: knob steps (bounds, cooldown, at most N steps, undo after the
// alert resolved), dry-run, the audit log, Alertmanager payload errors; hooks (exit
// status, stdin and environment, a hook that hangs killed at its timeout) and a webhook
// that is down (bounded retries).
#include "control/alerting/alerting.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/check.h"
#include "control/control_test_util.h"
#include "testdata/stories260k_golden.h"

namespace pagoda::control {
namespace {

using test_util::fresh_dir;
using test_util::stories;

// An engine, its config manager, and Alerting over a metrics text the test sets.
struct Rig {
    std::unique_ptr<engine::Engine> engine;
    std::unique_ptr<ConfigManager> cm;
    std::unique_ptr<Alerting> alerting;
    std::string text;  // what "/metrics" returns
    Automation mode = Automation::kOn;
    std::string rules_path;

    Rig(const std::string& name, const std::string& rules_toml) {
        engine::EngineConfig c;
        c.kv.num_blocks = 64;
        c.sched.knobs.max_num_seqs = 10;
        engine = std::move(engine::Engine::create(stories(), c).value());
        const std::string dir = fresh_dir(name);
        cm = std::move(ConfigManager::open(*engine, {.state_dir = dir,
                                                     .stable_window = std::chrono::seconds(600),
                                                     .deployment = "",
                                                     .origin = ""})
                           .value());
        std::filesystem::create_directories(dir);
        rules_path = dir + "/rules.toml";
        std::ofstream(rules_path) << rules_toml;
        AlertingWiring w;
        w.metrics_text = [this] { return text; };
        w.automation = [this] { return mode; };
        AlertingOptions o;
        o.rules_file = rules_path;
        o.reports_dir = dir + "/reports";
        auto a = Alerting::create(*engine, *cm, o, w);
        PAGODA_CHECK(a.ok()) << a.error().message;
        alerting = std::move(a).value();
    }
    int seqs() { return engine->knobs().max_num_seqs; }
    void at(int64_t s, double waiting) {
        text = fmt::format("pagoda_num_requests_waiting{{model_name=\"m\"}} {}\n", waiting);
        alerting->tick(s * 1000);
        alerting->wait_idle();
    }
    std::vector<std::string> actions() {
        auto ev = cm->with_db([](StateDb& db) { return db.events("alert_action", 100); });
        std::vector<std::string> out;
        for (const auto& e : *ev) {
            out.insert(out.begin(), e["detail"]["action"].get<std::string>() + ":" +
                                        e["detail"]["result"].get<std::string>());
        }
        return out;
    }
};

constexpr const char* kKnobRule = R"(
[[rule]]
name = "Queue"
expr = "num_requests_waiting > 5"
keep_firing_for = "0s"
actions = ["knob_step"]
[rule.knob_step]
knob = "max_num_seqs"
direction = "down"
max_steps = 3
cooldown = "10s"
undo_after = "20s"
min = 8
)";

TEST(Alerting, KnobStepsWithinBoundsAfterCooldownAndUndoneAfterResolution) {
    Rig r("knob", kKnobRule);
    r.at(0, 9);  // fires: 10 -> 9
    EXPECT_EQ(r.seqs(), 9);
    r.at(5, 9);  // cooldown
    EXPECT_EQ(r.seqs(), 9);
    r.at(10, 9);  // 9 * 0.9 = 8.1 -> 8
    EXPECT_EQ(r.seqs(), 8);
    r.at(20, 9);  // 8 * 0.9 = 7.2, below min 8: at the bound, no change, no more steps
    EXPECT_EQ(r.seqs(), 8);
    r.at(30, 9);
    EXPECT_EQ(r.seqs(), 8);
    r.at(40, 1);  // resolved
    r.at(55, 1);  // undo_after (20 s) not yet
    EXPECT_EQ(r.seqs(), 8);
    r.at(60, 1);  // undo one step
    EXPECT_EQ(r.seqs(), 9);
    r.at(65, 1);  // cooldown between undo steps
    EXPECT_EQ(r.seqs(), 9);
    r.at(70, 1);
    EXPECT_EQ(r.seqs(), 10);
    r.at(100, 1);  // nothing left to undo
    EXPECT_EQ(r.seqs(), 10);
    EXPECT_EQ(r.actions(),
              (std::vector<std::string>{"knob_step:ok", "knob_step:ok", "knob_step:at_bound",
                                        "knob_undo:ok", "knob_undo:ok"}));
    // Each step and undo is a config version from the alert.
    EXPECT_EQ(r.cm->current().source, "alert:Queue");
    EXPECT_EQ(r.cm->current().id, 5);
}

TEST(Alerting, MaxStepsBoundsAnEpisode) {
    Rig r("max", kKnobRule);
    ASSERT_TRUE(r.cm->change({.patch = {{"max_num_seqs", 100}},
                              .source = "test",
                              .reason = "",
                              .base_version = std::nullopt})
                    .ok());
    for (int64_t t = 0; t <= 60; t += 10) r.at(t, 9);
    EXPECT_EQ(r.seqs(), 73);  // 100 -> 90 -> 81 -> 73, then max_steps (3)
}

TEST(Alerting, DryRunAndPausedChangeNothingAndAuditEverything) {
    Rig r("dry", kKnobRule);
    r.mode = Automation::kDryRun;
    r.at(0, 9);
    r.at(10, 9);
    EXPECT_EQ(r.seqs(), 10);
    EXPECT_EQ(r.cm->current().id, 1);
    EXPECT_EQ(r.actions(), (std::vector<std::string>{"knob_step:dry_run"}));
    r.at(20, 1);  // resolved
    r.mode = Automation::kPaused;
    r.at(30, 9);
    EXPECT_EQ(r.seqs(), 10);
    EXPECT_EQ(r.actions().back(), "knob_step:paused");
}

TEST(Alerting, AlertmanagerPayloadErrorsSayWhatIsExpected) {
    Rig r("am", kKnobRule);
    const auto err = [&](const nlohmann::json& j) {
        auto x = r.alerting->alertmanager(j, 0);
        return x.ok() ? std::string("(accepted)") : x.error().message;
    };
    EXPECT_NE(err(nlohmann::json::array()).find("not a JSON object"), std::string::npos);
    EXPECT_NE(err({{"version", "3"}, {"alerts", nlohmann::json::array()}}).find("version"),
              std::string::npos);
    EXPECT_NE(err({{"version", "4"}, {"alerts", {{{"status", "firing"}}}}}).find("without labels"),
              std::string::npos);
    auto ok = r.alerting->alertmanager(
        {{"version", "4"},
         {"alerts", {{{"status", "firing"}, {"labels", {{"alertname", "Queue"}}}}}}},
        0);
    ASSERT_TRUE(ok.ok());
    EXPECT_EQ((*ok)["alerts"][0]["result"], "firing");
    EXPECT_EQ(r.seqs(), 9) << "the mapped rule's knob step ran";
}

TEST(AlertActions, HooksGetTheAlertAndAreBoundedInTime) {
    const std::string dir = fresh_dir("hooks");
    std::filesystem::create_directories(dir);
    const nlohmann::json alert = {{"rule", "X"}, {"severity", "severe"}};
    auto r = run_hook("cat > " + dir + "/in.json; echo \"$PAGODA_ALERT_NAME\" > " + dir + "/env",
                      alert, {{"PAGODA_ALERT_NAME", "X"}}, 5'000);
    EXPECT_TRUE(r.ok) << r.detail;
    EXPECT_EQ(r.detail, "exit 0");
    std::stringstream in, env;
    in << std::ifstream(dir + "/in.json").rdbuf();
    env << std::ifstream(dir + "/env").rdbuf();
    EXPECT_EQ(nlohmann::json::parse(in.str()), alert);
    EXPECT_EQ(env.str(), "X\n");
    r = run_hook("exit 3", alert, {}, 5'000);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.detail, "exit 3");
    const auto t0 = std::chrono::steady_clock::now();
    r = run_hook("sleep 30", alert, {}, 300);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.detail, "killed after 0.3 s (--hook-timeout)");
    EXPECT_LT(s, 5.0);
}

TEST(AlertActions, AWebhookThatIsDownFailsAfterBoundedRetries) {
    // A port nothing listens on (bound, then closed).
    const auto t0 = std::chrono::steady_clock::now();
    const HookResult r = post_json("http://127.0.0.1:9/alerts", {{"a", 1}}, 3, 1'000);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_FALSE(r.ok);
    EXPECT_GE(s, 1.4);  // backoff 0.5 s + 1 s
    EXPECT_LT(s, 10.0);
}

}  // namespace
}  // namespace pagoda::control

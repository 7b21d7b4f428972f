// Histogram counting and the Prometheus text exposition the writer produces.
#include "metrics/metrics.h"

#include <gtest/gtest.h>

#include <thread>

namespace pagoda::metrics {
namespace {

TEST(Histogram, BucketsAreCumulativeWithInclusiveUpperBounds) {
    Histogram h({1.0, 2.0, 5.0});
    for (double v : {0.5, 1.0, 3.0, 10.0}) h.observe(v);
    const auto s = h.snapshot();
    EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 2, 3, 4}));  // le=1, 2, 5, +Inf
    EXPECT_EQ(s.count, 4u);
    EXPECT_NEAR(s.sum, 14.5, 1e-6);
}

TEST(Histogram, ObservingAllCountsAsObservingEach) {
    const std::vector<double> vs = {0.5, 1.0, 3.0, 10.0, -1.0, 2.0, 2.0000001, 0.0};
    Histogram each({1.0, 2.0, 5.0}), all({1.0, 2.0, 5.0});
    for (double v : vs) each.observe(v);
    all.observe_all(vs);
    all.observe_all({});
    const auto a = all.snapshot(), e = each.snapshot();
    EXPECT_EQ(a.cumulative, e.cumulative);
    EXPECT_EQ(a.cumulative, (std::vector<uint64_t>{4, 5, 7, 8}));
    EXPECT_EQ(a.count, e.count);
    EXPECT_DOUBLE_EQ(a.sum, e.sum);
}

TEST(Histogram, ConcurrentObservationsAreAllCounted) {
    Histogram h({0.5});
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&h, t] {
            for (int i = 0; i < 10000; ++i) h.observe(t % 2 == 0 ? 0.25 : 1.0);
        });
    }
    for (auto& t : threads) t.join();
    const auto s = h.snapshot();
    EXPECT_EQ(s.count, 40000u);
    EXPECT_EQ(s.cumulative[0], 20000u);
    EXPECT_NEAR(s.sum, 20000 * 0.25 + 20000 * 1.0, 1e-3);
}

TEST(TextWriter, FamiliesSamplesAndLabels) {
    TextWriter w;
    w.family("pagoda_x_total", "counter", "Things counted.");
    w.sample("pagoda_x_total", {{"model_name", "m"}, {"code", "2xx"}}, 3);
    w.sample("pagoda_x_total", {}, 0.5);
    EXPECT_EQ(w.text(),
              "# HELP pagoda_x_total Things counted.\n"
              "# TYPE pagoda_x_total counter\n"
              "pagoda_x_total{model_name=\"m\",code=\"2xx\"} 3\n"
              "pagoda_x_total 0.5\n");
}

TEST(TextWriter, HistogramHasBucketsInfSumAndCount) {
    Histogram h({0.1, 1.0});
    h.observe(0.05);
    h.observe(2.0);
    TextWriter w;
    w.family("pagoda_t_seconds", "histogram", "Times.");
    w.histogram("pagoda_t_seconds", {{"model_name", "m"}}, h);
    EXPECT_EQ(w.text(),
              "# HELP pagoda_t_seconds Times.\n"
              "# TYPE pagoda_t_seconds histogram\n"
              "pagoda_t_seconds_bucket{model_name=\"m\",le=\"0.1\"} 1\n"
              "pagoda_t_seconds_bucket{model_name=\"m\",le=\"1\"} 1\n"
              "pagoda_t_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 2\n"
              "pagoda_t_seconds_sum{model_name=\"m\"} 2.05\n"
              "pagoda_t_seconds_count{model_name=\"m\"} 2\n");
}

TEST(TextWriter, LabelValuesAreEscaped) {
    EXPECT_EQ(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    TextWriter w;
    w.sample("x", {{"model_name", "my \"model\"\n"}}, 1);
    EXPECT_EQ(w.text(), "x{model_name=\"my \\\"model\\\"\\n\"} 1\n");
}

}  // namespace
}  // namespace pagoda::metrics

// Calibration of the simulated GPU: the shipped efficiency factors against published vLLM
// step times, the fit recovering known factors, and clear errors for bad measurement files.
#include "model/sim/calibrate.h"

#include <gtest/gtest.h>

namespace pagoda::model::sim {
namespace {

std::vector<SetModel> models_of(const std::vector<MeasurementSet>& sets) {
    std::vector<SetModel> out;
    for (const MeasurementSet& s : sets) {
        auto g = find_gpu(s.gpu);
        auto shape = find_shape(s.model);
        EXPECT_TRUE(g.ok() && shape.ok()) << s.gpu << " " << s.model;
        out.push_back({*g, SimShape::of(*shape)});
    }
    return out;
}

TEST(Calibrate, ShippedFactorsReproducePublishedVllmStepTimesWithin15Percent) {
    auto sets = parse_measurements(published_measurements(), "published.toml");
    ASSERT_TRUE(sets.ok()) << sets.error().message;
    ASSERT_GE(sets->size(), 2u);
    for (const MeasurementSet& s : *sets) EXPECT_FALSE(s.source.empty());
    const auto models = models_of(*sets);
    for (size_t i = 0; i < sets->size(); ++i) {
        // Every card with its own table factors: the ones `pagoda serve --sim-gpu` uses.
        auto r = evaluate({(*sets)[i]}, {models[i]}, models[i].gpu.efficiency);
        ASSERT_TRUE(r.ok()) << r.error().message;
        for (const FitRow& row : r->rows) {
            EXPECT_LT(std::abs(row.rel_error()), 0.15)
                << (*sets)[i].gpu << " row " << row.row << ": measured " << row.measured_ms
                << " ms, predicted " << row.predicted_ms << " ms";
        }
    }
}

MeasurementSet rows_of(const PerfModel& pm) {
    MeasurementSet s;
    s.gpu = pm.gpu().name;
    s.model = "llama-3-8b";
    s.source = "synthetic";
    // Decodes (memory-bound) and prefill chunks (compute-bound) pin both factors and the
    // overhead.
    for (auto [seqs, tokens, ctx] : {std::tuple{1, 1, 100},
                                     {8, 1, 2000},
                                     {64, 1, 500},
                                     {1, 512, 0},
                                     {1, 2048, 0},
                                     {1, 64, 0},
                                     {16, 1, 100}}) {
        StepMeasurement m;
        m.seqs = seqs;
        m.new_tokens = tokens;
        m.context = ctx;
        m.ms = pm.step(m.batch()).total_s * 1000;
        s.steps.push_back(m);
    }
    return s;
}

TEST(Calibrate, FitRecoversTheOverlapOfACpuLikeDevice) {
    const GpuSpec g = *find_gpu("l4");
    const SimShape shape = SimShape::of(*find_shape("llama-3-8b"));
    const Efficiency truth{0.3, 0.8, 0.6, 9.0, 0.2, 1.0, 0.0};  // engine steps: no serving API
    PerfModel pm =
        *PerfModel::create(g, shape, 1, WeightType::kQ8_0, kernels::KvDtype::kF32, truth);
    MeasurementSet s = rows_of(pm);
    s.weights = WeightType::kQ8_0;
    s.kv = kernels::KvDtype::kF32;
    FitFactors all;
    all.overlap = true;
    auto r = fit({s}, {{g, shape}}, Efficiency{}, all);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_NEAR(r->efficiency.overlap, truth.overlap, 0.02);
    EXPECT_NEAR(r->efficiency.compute, truth.compute, 0.01);
    EXPECT_LT(r->max_abs_rel_error, 0.01);
    // Without the overlap the roofline cannot follow the rows.
    auto roofline = fit({s}, {{g, shape}}, Efficiency{}, FitFactors{});
    ASSERT_TRUE(roofline.ok());
    EXPECT_GT(roofline->max_abs_rel_error, 0.05);
}

TEST(Calibrate, FitRecoversTheFactorsThatMadeTheRows) {
    const GpuSpec g = *find_gpu("a100-80g");
    const SimShape shape = SimShape::of(*find_shape("llama-3-8b"));
    const Efficiency truth{0.42, 0.63, 0.6, 2.5, 1.0, 1.0, 0.0};
    PerfModel pm =
        *PerfModel::create(g, shape, 1, WeightType::kBf16, kernels::KvDtype::kBF16, truth);
    MeasurementSet s = rows_of(pm);
    auto r = fit({s}, {{g, shape}}, Efficiency{}, FitFactors{});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_NEAR(r->efficiency.compute, truth.compute, 0.01);
    EXPECT_NEAR(r->efficiency.memory, truth.memory, 0.01);
    EXPECT_NEAR(r->efficiency.step_overhead_ms, truth.step_overhead_ms, 0.05);
    EXPECT_LT(r->max_abs_rel_error, 0.005);
    // The network factor was not fitted: it keeps its start value.
    EXPECT_DOUBLE_EQ(r->efficiency.network, Efficiency{}.network);

    // What measurements_toml writes parses back to the same rows.
    auto again = parse_measurements(measurements_toml({s}), "round trip");
    ASSERT_TRUE(again.ok()) << again.error().message << "\n" << measurements_toml({s});
    ASSERT_EQ((*again)[0].steps.size(), s.steps.size());
    EXPECT_NEAR((*again)[0].steps[3].ms, s.steps[3].ms, 1e-3);
    EXPECT_EQ((*again)[0].steps[3].new_tokens, 512);
}

TEST(Calibrate, BadFilesSayWhatIsWrong) {
    auto err = [](const char* text) {
        auto r = parse_measurements(text, "m.toml");
        return r.ok() ? std::string("(parsed)") : r.error().message;
    };
    EXPECT_NE(err("x = 1").find("no [[set]]"), std::string::npos);
    const std::string head =
        "[[set]]\ngpu = \"a100-80g\"\nmodel = \"llama-3-8b\"\nsource = \"s\"\n";
    EXPECT_NE(err((head + "steps = [{seqs = 1}]").c_str()).find("steps[0] needs 'ms'"),
              std::string::npos)
        << err((head + "steps = [{seqs = 1}]").c_str());
    EXPECT_NE(err((head + "steps = [{ms = 1, size = 2}]").c_str()).find("unknown key 'size'"),
              std::string::npos);
    EXPECT_NE(err((head + "steps = [{ms = 1, batch = [[1, 2]]}]").c_str())
                  .find("batch[0] must be [new_tokens >= 1, context >= 0, logits 0|1]"),
              std::string::npos);
    // A mixed batch row and a step trace line.
    auto mixed =
        parse_measurements(head + "steps = [{ms = 3, batch = [[1, 10, 1], [64, 0, 0]]}]", "m.toml");
    ASSERT_TRUE(mixed.ok()) << mixed.error().message;
    ASSERT_EQ((*mixed)[0].steps[0].batch().size(), 2u);
    EXPECT_EQ((*mixed)[0].steps[0].batch()[1].new_tokens, 64);
    EXPECT_FALSE((*mixed)[0].steps[0].batch()[1].logits);
    auto trace = parse_step_trace(
        "{\"batch\": [[1, 5, 1]], \"ms\": 2}\n\n{\"batch\": [[8, 0, 1]], \"ms\": 4}\n", "t", 1);
    ASSERT_TRUE(trace.ok()) << trace.error().message;
    EXPECT_EQ(trace->size(), 1u) << "at most max_rows";
    EXPECT_NE(parse_step_trace("{\"batch\": []}", "t.jsonl", 10).error().message.find("line 1"),
              std::string::npos);
    EXPECT_NE(err((head + "weight_dtype = \"int3\"\nsteps = [{ms = 1}]").c_str()).find("int3"),
              std::string::npos);
    EXPECT_NE(err("[[set]]\nmodel = \"m\"\nsource = \"s\"\nsteps = [{ms = 1}]").find("'gpu'"),
              std::string::npos);
    EXPECT_NE(err((head + "steps = []").c_str()).find("non-empty array 'steps'"),
              std::string::npos);
}

}  // namespace
}  // namespace pagoda::model::sim

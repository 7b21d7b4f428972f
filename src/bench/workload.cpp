// From a scenario to concrete requests: the implementation (the contract is in bench/workload.h).
#include "bench/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "bench/trace_formats.h"

namespace pagoda::bench {

using json = nlohmann::json;

int64_t sample_length(const LengthDist& d, std::mt19937_64& rng) {
    double v = 0;
    switch (d.kind) {
        case LengthDist::Kind::kFixed: v = d.value; break;
        case LengthDist::Kind::kUniform:
            v = std::uniform_real_distribution<double>(d.low, d.high + 1)(rng);
            v = std::floor(v);
            break;
        case LengthDist::Kind::kNormal:
            v = std::normal_distribution<double>(d.mean, d.stddev)(rng);
            break;
        case LengthDist::Kind::kLogNormal: {
            // Parameters of the underlying normal from the length's own mean and stddev.
            double m = d.mean, sd = d.stddev;
            double sigma2 = std::log(1 + (sd * sd) / (m * m));
            double mu = std::log(m) - sigma2 / 2;
            v = std::lognormal_distribution<double>(mu, std::sqrt(sigma2))(rng);
            break;
        }
        case LengthDist::Kind::kEmpirical:
            v = double(
                d.values[std::uniform_int_distribution<size_t>(0, d.values.size() - 1)(rng)]);
            break;
    }
    int64_t n = int64_t(std::llround(v));
    return std::clamp<int64_t>(n, std::max<int64_t>(1, d.min), d.max);
}

std::vector<double> arrival_times(const std::vector<Phase>& phases, double horizon_s,
                                  int64_t max_count, uint64_t seed) {
    std::vector<double> out;
    std::mt19937_64 rng(seed);
    double start = 0;
    for (size_t i = 0; i < phases.size(); ++i) {
        const Phase& p = phases[i];
        double end = p.duration_s > 0 ? start + p.duration_s : horizon_s;
        if (horizon_s > 0) end = std::min(end, horizon_s);
        if (!(end > start) && !(horizon_s <= 0 && p.duration_s <= 0)) {
            start = end;
            continue;
        }
        const bool unbounded = !(end > start);  // no horizon and no duration: count-limited
        double t = start;
        std::exponential_distribution<double> expo(p.rate);
        std::gamma_distribution<double> gam(p.burstiness, 1.0 / (p.rate * p.burstiness));
        // The first arrival of a constant process is at the phase start; random ones wait a gap.
        bool first = true;
        while (max_count <= 0 || int64_t(out.size()) < max_count) {
            double gap = p.process == Phase::Process::kConstant  ? (first ? 0 : 1.0 / p.rate)
                         : p.process == Phase::Process::kPoisson ? expo(rng)
                                                                 : gam(rng);
            first = false;
            t += gap;
            if (!unbounded && t >= end) break;
            out.push_back(t);
        }
        if (max_count > 0 && int64_t(out.size()) >= max_count) break;
        start = end;
    }
    return out;
}

namespace {

Result<std::vector<PlannedRequest>> read_trace(const Scenario& s) {
    const Arrival& a = s.arrival;
    PAGODA_ASSIGN_OR_RETURN(Trace t, read_trace_file(a.trace, TraceReadOptions{a.trace_model}));
    std::vector<PlannedRequest> plan;
    const double t0 = t.records.front().ts_s;
    auto scaled = [k = a.trace_length_scale](int64_t n) {
        return k == 1 ? n : std::max<int64_t>(1, std::llround(double(n) * k));
    };
    for (TraceRecord& rec : t.records) {
        if (rec.ts_s - t0 < a.trace_window_from_s) continue;
        if (a.trace_window_to_s > 0 && rec.ts_s - t0 >= a.trace_window_to_s) break;
        PlannedRequest r;
        r.at_s = (rec.ts_s - t0 - a.trace_window_from_s) / (a.trace_speed * a.trace_rate_scale);
        r.output_len = scaled(rec.output_len);
        r.input_len = rec.input_len > 0 ? scaled(rec.input_len) : 0;
        // A prompt given as text stays, unless the lengths are scaled: then one of the
        // scaled length is synthesised.
        r.has_prompt = rec.has_prompt && (a.trace_length_scale == 1 || rec.input_len == 0);
        if (r.has_prompt) r.prompt = std::move(rec.prompt);
        r.prefix_blocks = std::move(rec.hash_ids);
        r.block_tokens = scaled(t.block_tokens);
        if (!rec.klass.empty()) {
            auto it = std::find_if(s.classes.begin(), s.classes.end(),
                                   [&](const auto& c) { return c.name == rec.klass; });
            if (it == s.classes.end()) {
                return make_error(ErrorCode::kInvalidFile,
                                  "{}:{}: class '{}' is not defined in the scenario", a.trace,
                                  rec.line, rec.klass);
            }
            r.klass = int(it - s.classes.begin());
        }
        plan.push_back(std::move(r));
        if (s.requests > 0 && int64_t(plan.size()) >= s.requests) break;
        if (s.duration_s > 0 && plan.back().at_s >= s.duration_s) {
            plan.pop_back();
            break;
        }
    }
    if (plan.empty()) {
        return make_error(
            ErrorCode::kInvalidFile, "{}: no requests in the trace{}", a.trace,
            a.trace_window_from_s > 0 || a.trace_window_to_s > 0 ? " within --time-window" : "");
    }
    return plan;
}

}  // namespace

Result<std::vector<PlannedRequest>> make_plan(const Scenario& s, int64_t closed_pool) {
    PAGODA_TRY(s.validate());
    if (s.arrival.kind == Arrival::Kind::kTrace) return read_trace(s);
    std::vector<PlannedRequest> plan;
    if (s.arrival.kind == Arrival::Kind::kClosed) {
        // A loop limited by time as well as by count builds at most the pool, as one limited
        // by time alone: most of a large count is never sent before the time is up, and
        // building its prompts first (a /tokenize call or three each) delayed the run by
        // seconds.
        const int64_t n = s.requests <= 0    ? closed_pool
                          : s.duration_s > 0 ? std::min(s.requests, closed_pool)
                                             : s.requests;
        plan.resize(size_t(n));
    } else {
        auto times = arrival_times(s.arrival.phases, s.duration_s, s.requests, s.seed);
        plan.resize(times.size());
        for (size_t i = 0; i < times.size(); ++i) plan[i].at_s = times[i];
    }
    std::mt19937_64 rng(s.seed ^ 0x9e3779b97f4a7c15ull);
    std::vector<double> weights;
    for (const auto& c : s.classes) weights.push_back(c.weight);
    std::discrete_distribution<int> pick(weights.begin(), weights.end());
    for (auto& r : plan) {
        r.klass = pick(rng);
        const RequestClass& c = s.classes[size_t(r.klass)];
        r.input_len = sample_length(c.input, rng);
        r.output_len = sample_length(c.output, rng);
    }
    return plan;
}

Result<std::vector<DatasetEntry>> load_dataset(const std::string& path) {
    std::ifstream in(path);
    if (!in) return make_error(ErrorCode::kNotFound, "cannot open dataset file '{}'", path);
    std::vector<DatasetEntry> out;
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
        ++lineno;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        json j = json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("prompt") ||
            !j["prompt"].is_string()) {
            return make_error(ErrorCode::kInvalidFile,
                              "{}:{}: expected a JSON object with \"prompt\" as a string", path,
                              lineno);
        }
        DatasetEntry e;
        e.prompt = j["prompt"].get<std::string>();
        if (j.contains("output_len")) {
            if (!j["output_len"].is_number_integer() || j["output_len"].get<int64_t>() < 1) {
                return make_error(ErrorCode::kInvalidFile,
                                  "{}:{}: \"output_len\" must be an integer >= 1", path, lineno);
            }
            e.output_len = j["output_len"].get<int64_t>();
        }
        out.push_back(std::move(e));
    }
    if (out.empty()) return make_error(ErrorCode::kInvalidFile, "{}: no prompts", path);
    return out;
}

// ---------------------------------------------------------------- prompt synthesis

namespace {

const char* const kWords[] = {
    "the",    "a",      "little", "girl",   "boy",  "dog",   "cat",    "sun",   "tree",  "house",
    "ran",    "saw",    "was",    "happy",  "big",  "small", "red",    "blue",  "green", "went",
    "to",     "park",   "and",    "played", "with", "ball",  "friend", "mom",   "dad",   "said",
    "she",    "he",     "they",   "day",    "one",  "time",  "there",  "bird",  "flew",  "sky",
    "water",  "fish",   "swim",   "good",   "very", "it",    "in",     "on",    "of",    "for",
    "is",     "had",    "liked",  "found",  "box",  "toy",   "car",    "road",  "hill",  "rain",
    "snow",   "cold",   "warm",   "food",   "cake", "ate",   "jump",   "smile", "laugh", "look",
    "book",   "read",   "sleep",  "night",  "moon", "star",  "light",  "door",  "open",  "walk",
    "garden", "flower", "bee",    "help",   "kind", "funny",
};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

std::string words_text(uint64_t variant, size_t n) {
    std::mt19937_64 rng(variant * 0x9e3779b97f4a7c15ull + 12345);
    std::uniform_int_distribution<size_t> pick(0, kNumWords - 1);
    std::string out;
    for (size_t i = 0; i < n; ++i) {
        const char* w = kWords[pick(rng)];
        if (i) out += ' ';
        out += w;
        if (i % 12 == 11) out += '.';
    }
    return out;
}

}  // namespace

Result<int64_t> PromptBuilder::count(const std::string& text) {
    ++calls_;
    return counter_(text);
}

Result<PromptBuilder::Built> PromptBuilder::build(int64_t target, uint64_t variant) {
    // Word counts bracket the target: lo has fewer tokens, hi more. Secant steps, then bisection.
    int64_t lo = 0, hi = -1;
    if (!empty_count_) {
        PAGODA_ASSIGN_OR_RETURN(int64_t empty, count(""));
        empty_count_ = empty;
    }
    int64_t c_lo = *empty_count_;
    if (c_lo >= target) return Built{"", c_lo};
    auto known = words_for_.find(target);
    int64_t n = known != words_for_.end()
                    ? known->second
                    : std::max<int64_t>(1, int64_t(double(target - c_lo) / tokens_per_word_));
    for (int iter = 0; iter < 40; ++iter) {
        std::string text = words_text(variant, size_t(n));
        PAGODA_ASSIGN_OR_RETURN(int64_t c, count(text));
        if (n > 0 && c > 1) tokens_per_word_ = std::clamp(double(c - 1) / double(n), 0.2, 20.0);
        if (c == target) {
            words_for_[target] = n;
            return Built{std::move(text), c};
        }
        if (c < target) {
            lo = n;
            c_lo = c;
        } else {
            hi = n;
        }
        if (hi >= 0 && hi - lo <= 1) break;
        int64_t next = lo + std::max<int64_t>(
                                1, int64_t(std::llround(double(target - c_lo) / tokens_per_word_)));
        if (hi >= 0 && next >= hi) next = lo + (hi - lo) / 2;
        if (next <= lo) next = lo + 1;
        n = next;
    }
    // No word count gives the exact length: pad the shorter text with short pieces.
    std::string text = words_text(variant, size_t(lo));
    int64_t c = c_lo;
    for (int i = 0; i < 64 && c < target; ++i) {
        bool grew = false;
        for (const char* pad : {" a", ".", " I", "!"}) {
            std::string t = text + pad;
            PAGODA_ASSIGN_OR_RETURN(int64_t ct, count(t));
            if (ct == c + 1 || (ct > c && ct <= target)) {
                text = std::move(t);
                c = ct;
                grew = true;
                break;
            }
        }
        if (!grew) break;
    }
    return Built{std::move(text), c};
}

namespace {

// A prompt made of one text per prefix block (the same id, the same text, so requests that
// share blocks share a prefix), the last block cut to what the input length leaves.
Status build_prefixed(PlannedRequest& r, PromptBuilder& builder,
                      std::map<int64_t, std::string>& block_text) {
    std::string text;
    int64_t left = r.input_len;
    for (size_t b = 0; b < r.prefix_blocks.size() && left > 0; ++b) {
        const int64_t id = r.prefix_blocks[b];
        const int64_t want = std::min(left, r.block_tokens);
        if (want == r.block_tokens) {
            auto it = block_text.find(id);
            if (it == block_text.end()) {
                PAGODA_ASSIGN_OR_RETURN(
                    auto built, builder.build(r.block_tokens, 0x6d6f6f6eull + uint64_t(id)));
                it = block_text.emplace(id, std::move(built.text)).first;
            }
            text += it->second + " ";
        } else {
            PAGODA_ASSIGN_OR_RETURN(auto built, builder.build(want, 0x7461696cull + uint64_t(id)));
            text += built.text;
        }
        left -= want;
    }
    r.prompt = std::move(text);
    r.has_prompt = true;
    return ok_status();
}

}  // namespace

Status fill_prompts(const Scenario& s, std::vector<PlannedRequest>& plan, PromptBuilder& builder,
                    const std::function<void(size_t, size_t)>& progress, int64_t* exact_count,
                    uint64_t variant_base) {
    std::vector<std::vector<DatasetEntry>> datasets(s.classes.size());
    for (size_t i = 0; i < s.classes.size(); ++i) {
        if (!s.classes[i].dataset.empty()) {
            PAGODA_ASSIGN_OR_RETURN(datasets[i], load_dataset(s.classes[i].dataset));
        }
    }
    std::mt19937_64 rng(s.seed ^ 0xda7a5e7ull);
    std::map<int64_t, std::string> block_text;  // Mooncake: one text per hash id
    int64_t exact = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
        PlannedRequest& r = plan[i];
        const auto& ds = datasets[size_t(r.klass)];
        if (!r.has_prompt && !ds.empty()) {
            const auto& e = ds[std::uniform_int_distribution<size_t>(0, ds.size() - 1)(rng)];
            r.prompt = e.prompt;
            r.has_prompt = true;
            r.input_len = 0;  // unknown until the server reports usage
            if (e.output_len > 0) r.output_len = e.output_len;
        }
        if (!r.has_prompt && !r.prefix_blocks.empty()) {
            PAGODA_TRY(build_prefixed(r, builder, block_text));
            if (r.input_len > 0) ++exact;
        }
        if (!r.has_prompt) {
            PAGODA_ASSIGN_OR_RETURN(
                auto built, builder.build(r.input_len, (s.seed + variant_base) * 1000003 + i));
            if (built.tokens == r.input_len) ++exact;
            r.prompt = std::move(built.text);
            r.input_len = built.tokens;
            r.has_prompt = true;
        }
        if (progress) progress(i + 1, plan.size());
    }
    if (exact_count) *exact_count = exact;
    return ok_status();
}

}  // namespace pagoda::bench

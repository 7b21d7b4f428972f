// The virtual-clock fleet (fleet_sim.h): replicas, routing and holding, sizing ticks,
// faults, and the per-hour accounting of one arm.
#include "rehearse/fleet_sim.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <memory>
#include <unordered_map>

#include "kvcache/block_manager.h"
#include "router/balancer.h"
#include "scheduler/scheduler.h"

namespace pagoda::rehearse {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

struct Req {
    Arrival a;
    int64_t generated = 0;
    double first = -1, done = -1;
    int replica = -1;  // the replica serving it; -1 held or refused
    bool refused = false;
    int resumes = 0;
    double held_since = -1;
};

scheduler::SchedulerConfig scheduler_config(const ReplicaConfig& c, int max_model_len) {
    scheduler::SchedulerConfig s;
    s.knobs.max_num_seqs = c.max_num_seqs;
    s.knobs.max_num_batched_tokens = c.max_num_batched_tokens;
    s.max_model_len = max_model_len;
    s.enable_chunked_prefill = c.chunked_prefill;
    return s;
}

// One simulated replica: the engine's scheduler and block manager; steps take the perf
// model's time.
struct Replica {
    Replica(int id_, const ReplicaConfig& c, int64_t blocks_, int max_model_len, double start,
            double ready)
        : id(id_),
          steps(std::max(1, c.scheduler_steps)),
          blocks(blocks_, c.block_size, false),
          sched(scheduler_config(c, max_model_len), blocks),
          started(start),
          ready_at(ready) {}
    int id;
    int steps;  // scheduler steps per decode round
    kvcache::BlockManager blocks;
    scheduler::Scheduler sched;
    double started, ready_at, stopped_at = -1;
    bool leaving = false;
    double busy_until = kNever;  // the step in flight ends then
    scheduler::BatchPlan plan;
    std::unordered_map<int64_t, size_t> req_of;  // sequence id -> request index
    // A multi-step round's tokens, delivered at its end: request -> finished in the round.
    std::vector<std::pair<size_t, bool>> round;
    bool ready(double t) const { return stopped_at < 0 && t >= ready_at; }
    bool live() const { return stopped_at < 0; }
};

std::string clock_text(double day_s) {
    const int m = int(day_s / 60);
    return fmt::format("{:02d}:{:02d}", (m / 60) % 24, m % 60);
}

double p99(std::vector<float>& v) {
    if (v.empty()) return 0;
    const size_t k = std::min(v.size() - 1, size_t(std::ceil(0.99 * double(v.size()))) - 1);
    std::nth_element(v.begin(), v.begin() + long(k), v.end());
    return v[k];
}

class FleetSim {
  public:
    FleetSim(const model::sim::PerfModel& perf, int max_model_len,
             const std::vector<Arrival>& arrivals, const DayShape& day, const ArmPlan& arm,
             const Slo& slo, const std::vector<Fault>& faults)
        : perf_(perf),
          max_model_len_(max_model_len),
          day_(day),
          arm_(arm),
          slo_(slo),
          faults_(faults),
          sizer_(arm.sizer),
          end_s_(day.day_s / day.compress) {
        reqs_.reserve(arrivals.size());
        for (const Arrival& a : arrivals) reqs_.push_back({a});
        std::sort(faults_.begin(), faults_.end(),
                  [](const Fault& a, const Fault& b) { return a.at_day_s < b.at_day_s; });
        res_.name = arm.name;
        res_.replica = arm.replica;
        res_.hours.resize(size_t(std::ceil(day.day_s / 3600)));
        res_.curve.resize(size_t(std::ceil(day.day_s / 900)));
    }

    Result<ArmResult> run();

  private:
    Bucket& hour(double t) { return at(res_.hours, t, 3600); }
    Bucket& quarter(double t) { return at(res_.curve, t, 900); }
    Bucket& at(std::vector<Bucket>& b, double t, double len) {
        const double d = t * day_.compress;
        return b[std::min(b.size() - 1, size_t(std::max(0.0, d / len)))];
    }
    void start_replica(double t, double ready_at);
    void route(size_t i, double t);
    bool submit(Replica& r, size_t i, double t);
    void start_step(Replica& r, double t);
    double run_round(Replica& r, double t);  // a multi-step decode round; its duration
    double step_cost(const scheduler::BatchPlan& plan, double t) const;
    void finish_step(Replica& r, double t);
    void stop(Replica& r, double t);
    void kill(double t);
    void dispatch_held(double t);
    void tick(double t);
    void apply(const control::SizingDecision& d, double t);
    void note(double t, const std::string& what) {
        res_.events.push_back(clock_text(t * day_.compress) + " " + what);
    }
    int current() const {
        int n = 0;
        for (const auto& r : replicas_) n += r->live() && !r->leaving;
        return n;
    }
    double next_event(size_t next_arrival, double next_tick, size_t next_fault) const;
    void account();

    const model::sim::PerfModel& perf_;
    const int max_model_len_;
    const DayShape day_;
    const ArmPlan& arm_;
    const Slo slo_;
    std::vector<Fault> faults_;
    control::PoolSizer sizer_;
    const double end_s_;  // the end of the compressed day, simulated seconds
    int64_t num_blocks_ = 0;
    std::vector<Req> reqs_;
    std::vector<std::unique_ptr<Replica>> replicas_;
    std::deque<size_t> held_;
    std::deque<double> recent_arrivals_;
    std::deque<std::pair<double, float>> recent_ttfts_;
    double last_arrival_ = -1e18;
    double now_ = -1;  // the last event's time
    double slow_ = 1, slow_until_ = -1;
    int64_t next_seq_ = 1;
    ArmResult res_;
};

void FleetSim::start_replica(double t, double ready_at) {
    replicas_.push_back(std::make_unique<Replica>(int(replicas_.size()), arm_.replica, num_blocks_,
                                                  max_model_len_, t, ready_at));
}

bool FleetSim::submit(Replica& r, size_t i, double t) {
    Req& q = reqs_[i];
    auto seq = std::make_unique<scheduler::Sequence>();
    seq->id = kvcache::SeqId(next_seq_++);
    // A resumed stream's prompt is its prompt and the tokens it already has (the router's
    // resumption from token ids).
    seq->tokens.assign(size_t(q.a.prompt + q.generated), 0);
    seq->max_total_tokens = q.a.prompt + q.a.output;
    const int64_t id = seq->id.value();
    if (!r.sched.add(std::move(seq)).ok()) return false;
    r.req_of[id] = i;
    q.replica = r.id;
    if (r.busy_until == kNever) start_step(r, t);
    return true;
}

void FleetSim::route(size_t i, double t) {
    std::vector<router::Candidate> cs;
    std::vector<Replica*> by;
    for (auto& r : replicas_) {
        if (!r->ready(t) || r->leaving) continue;
        router::Candidate c;
        c.id_hash = router::mix64(uint64_t(r->id) + 1);
        c.outstanding = int64_t(r->req_of.size());
        c.waiting = double(r->sched.waiting().size());
        c.kv_usage = 1 - double(r->blocks.num_available()) / double(r->blocks.num_total());
        cs.push_back(c);
        by.push_back(r.get());
    }
    while (!cs.empty()) {
        const int k = router::pick_backend(cs, router::RouteKey{}, 1.5, 4);
        if (k < 0) break;
        if (submit(*by[size_t(k)], i, t)) return;
        cs[size_t(k)].excluded = true;  // it answered 429: try the next one
    }
    Req& q = reqs_[i];
    if (cs.empty() && int(held_.size()) < arm_.hold_limit) {  // none ready: hold it
        q.held_since = t;
        held_.push_back(i);
        return;
    }
    q.refused = true;
}

void FleetSim::start_step(Replica& r, double t) {
    r.plan = r.sched.schedule(scheduler::Clock::time_point(
        std::chrono::duration_cast<scheduler::Clock::duration>(std::chrono::duration<double>(t))));
    hour(t).preemptions += int64_t(r.plan.preempted.size());
    res_.preemptions += int64_t(r.plan.preempted.size());
    if (r.plan.empty()) {
        r.busy_until = kNever;
        return;
    }
    const bool decode_only = r.plan.num_prefill_tokens == 0;
    r.busy_until = t + (r.steps > 1 && decode_only ? run_round(r, t) : step_cost(r.plan, t));
}

double FleetSim::step_cost(const scheduler::BatchPlan& plan, double t) const {
    std::vector<model::sim::SeqWork> work;
    work.reserve(plan.seqs.size());
    for (const auto& s : plan.seqs) work.push_back({s.num_tokens, s.pos_start, s.sample});
    const double factor = t < slow_until_ ? slow_ : 1;
    return perf_.step(work).total_s * factor;
}

// The scheduler's steps of one round run now (admissions held off by capping the sequence
// count at the running ones); their tokens are delivered when the round ends.
double FleetSim::run_round(Replica& r, double t) {
    const scheduler::RuntimeKnobs knobs = r.sched.knobs();
    scheduler::RuntimeKnobs capped = knobs;
    capped.max_num_seqs = std::max<int>(1, int(r.sched.running().size()));
    (void)r.sched.set_knobs(capped);
    double d = 0;
    for (int k = 0; k < r.steps && !r.plan.empty(); ++k) {
        if (k > 0) r.plan = r.sched.schedule(scheduler::Clock::time_point{});
        if (r.plan.empty()) break;
        d += step_cost(r.plan, t);
        r.sched.on_step_done(r.plan);
        for (const auto& s : r.plan.seqs) {
            if (!s.sample) continue;
            const size_t i = r.req_of.at(s.id.value());
            r.sched.append_token(s.id, 0);
            const bool done = ++reqs_[i].generated >= reqs_[i].a.output;
            r.round.emplace_back(i, done);
            if (done) {
                r.sched.finish(s.id);
                r.req_of.erase(s.id.value());
            }
        }
    }
    (void)r.sched.set_knobs(knobs);
    r.plan = {};
    return d;
}

void FleetSim::finish_step(Replica& r, double t) {
    r.busy_until = kNever;
    for (const auto& [i, done] : r.round) {  // a multi-step round's tokens arrive now
        Req& q = reqs_[i];
        if (q.first < 0) {
            q.first = t;
            recent_ttfts_.emplace_back(t, float(t - q.a.t_s));
        }
        if (done) q.done = t;
    }
    r.round.clear();
    r.sched.on_step_done(r.plan);
    for (const auto& s : r.plan.seqs) {
        if (!s.sample) continue;
        const int64_t id = s.id.value();
        Req& q = reqs_[r.req_of.at(id)];
        r.sched.append_token(s.id, 0);
        ++q.generated;
        if (q.first < 0) {
            q.first = t;
            recent_ttfts_.emplace_back(t, float(t - q.a.t_s));
        }
        if (q.generated >= q.a.output) {
            q.done = t;
            r.sched.finish(s.id);
            r.req_of.erase(id);
        }
    }
    if (r.leaving && r.req_of.empty()) {
        stop(r, t);
        return;
    }
    if (!r.req_of.empty()) start_step(r, t);
}

void FleetSim::stop(Replica& r, double t) {
    r.stopped_at = t;
    r.busy_until = kNever;
}

// The busiest replica dies: its streams resume on the others from their tokens (or wait in
// the hold queue); the supervisor restarts it after a cold start.
void FleetSim::kill(double t) {
    Replica* victim = nullptr;
    for (auto& r : replicas_) {
        if (r->ready(t) && (!victim || r->req_of.size() > victim->req_of.size())) victim = r.get();
    }
    if (!victim) return;
    std::vector<size_t> moved;
    for (const auto& [id, i] : victim->req_of) moved.push_back(i);
    std::sort(moved.begin(), moved.end());
    victim->req_of.clear();
    stop(*victim, t);
    note(t, fmt::format("fault kill replica {} ({} streams resume elsewhere)", victim->id,
                        moved.size()));
    if (!victim->leaving) start_replica(t, t + arm_.cold_start_day_s / day_.compress);
    for (size_t i : moved) {
        ++reqs_[i].resumes;
        ++res_.resumed;
        reqs_[i].replica = -1;
        route(i, t);
    }
}

void FleetSim::dispatch_held(double t) {
    while (!held_.empty()) {
        const size_t i = held_.front();
        if (t - reqs_[i].held_since >= arm_.hold_timeout_day_s / day_.compress) {
            reqs_[i].refused = true;  // 503 with Retry-After: the pool did not wake in time
            held_.pop_front();
            continue;
        }
        bool any = false;
        for (auto& r : replicas_) any = any || (r->ready(t) && !r->leaving);
        if (!any) return;
        held_.pop_front();
        route(i, t);
    }
}

void FleetSim::tick(double t) {
    // The signal window: a minute of the day, but at least 20 simulated seconds, so a
    // compressed night still averages tens of requests (a real minute of it would).
    const double minute = std::max(60 / day_.compress, 20.0);
    while (!recent_arrivals_.empty() && recent_arrivals_.front() <= t - minute) {
        recent_arrivals_.pop_front();
    }
    while (!recent_ttfts_.empty() && recent_ttfts_.front().first <= t - minute) {
        recent_ttfts_.pop_front();
    }
    control::PoolSignals s;
    s.now_s = t * day_.compress;
    s.current = current();
    s.rate_rps = double(recent_arrivals_.size()) / minute;
    s.waiting = double(held_.size());
    for (auto& r : replicas_) {
        if (r->live()) s.waiting += double(r->sched.waiting().size());
    }
    std::vector<float> tt;
    for (const auto& [when, v] : recent_ttfts_) tt.push_back(v);
    s.p99_ttft_s = tt.empty() ? -1 : p99(tt);
    s.since_request_s = (t - last_arrival_) * day_.compress;
    const size_t m = size_t(s.now_s / 60);
    if (m < arm_.forecast_per_min.size()) {
        s.forecast_rps.assign(arm_.forecast_per_min.begin() + long(m), arm_.forecast_per_min.end());
    }
    const control::SizingDecision d = sizer_.decide(s);
    if (d.changed()) {
        apply(d, t);
        sizer_.applied(d, s.now_s);
    }
}

// Up: leaving replicas come back first, then new ones start. Down: a starting replica is
// cancelled first, else the least busy ready one leaves routing and stops when drained.
void FleetSim::apply(const control::SizingDecision& d, double t) {
    ++res_.actions;
    ++hour(t).actions;
    note(t, fmt::format("{} -> {} ({})", d.current, d.desired, d.reason));
    for (int n = d.current; n < d.desired; ++n) {
        auto back = std::find_if(replicas_.begin(), replicas_.end(),
                                 [](const auto& r) { return r->live() && r->leaving; });
        if (back != replicas_.end()) {
            (*back)->leaving = false;
        } else {
            start_replica(t, t + arm_.cold_start_day_s / day_.compress);
        }
    }
    for (int n = d.current; n > d.desired; --n) {
        Replica* pick = nullptr;
        for (auto& r : replicas_) {
            if (!r->live() || r->leaving) continue;
            if (!r->ready(t)) {  // still starting: cancel it
                pick = r.get();
                break;
            }
            if (!pick || r->req_of.size() < pick->req_of.size()) pick = r.get();
        }
        if (!pick) break;
        pick->leaving = true;
        if (pick->req_of.empty()) stop(*pick, t);
    }
}

double FleetSim::next_event(size_t next_arrival, double next_tick, size_t next_fault) const {
    double t = next_tick;
    if (next_arrival < reqs_.size()) t = std::min(t, reqs_[next_arrival].a.t_s);
    if (next_fault < faults_.size()) t = std::min(t, faults_[next_fault].at_day_s / day_.compress);
    for (const auto& r : replicas_) {
        t = std::min(t, r->busy_until);
        if (r->live() && r->ready_at > now_ && !held_.empty()) t = std::min(t, r->ready_at);
    }
    if (!held_.empty()) {
        t = std::min(t, reqs_[held_.front()].held_since + arm_.hold_timeout_day_s / day_.compress);
    }
    return t;
}

Result<ArmResult> FleetSim::run() {
    PAGODA_ASSIGN_OR_RETURN(
        model::sim::MemoryPlan mem,
        perf_.memory(arm_.replica.gpu_memory_utilization, arm_.replica.max_num_batched_tokens));
    num_blocks_ = mem.num_blocks(arm_.replica.block_size);
    if (num_blocks_ <= 0) {
        return make_error(ErrorCode::kInvalidArgument, "{}: the card holds no KV block",
                          arm_.replica.label());
    }
    for (int i = 0; i < arm_.replicas; ++i) start_replica(0, 0);  // warm at the start
    size_t next = 0, fault = 0;
    const double tick_s = arm_.tick_day_s / day_.compress;
    double next_tick = arm_.sizing ? 0 : kNever;
    for (;;) {
        const double t = next_event(next, next_tick, fault);
        if (t == kNever) break;
        const bool work_left = next < reqs_.size() || !held_.empty() ||
                               std::any_of(replicas_.begin(), replicas_.end(),
                                           [](const auto& r) { return r->busy_until != kNever; });
        if (!work_left && t >= end_s_) break;
        now_ = t;
        for (auto& r : replicas_) {
            if (r->busy_until <= t) finish_step(*r, t);
        }
        while (fault < faults_.size() && faults_[fault].at_day_s / day_.compress <= t) {
            const Fault& f = faults_[fault++];
            if (f.kind == Fault::Kind::kKill) {
                kill(t);
            } else {
                slow_ = f.factor;
                slow_until_ = t + f.duration_day_s / day_.compress;
                note(t,
                     fmt::format("fault slow steps x{} for {:.0f} s", f.factor, f.duration_day_s));
            }
        }
        dispatch_held(t);
        while (next < reqs_.size() && reqs_[next].a.t_s <= t) {
            recent_arrivals_.push_back(t);
            last_arrival_ = t;
            route(next++, t);
        }
        if (t >= next_tick) {
            tick(t);
            next_tick = t + tick_s;
            dispatch_held(t);
        }
    }
    account();
    return res_;
}

// Per request by its arrival's hour; replica-seconds per hour over each replica's life.
void FleetSim::account() {
    const double end = end_s_;
    std::vector<float> ttft, tpot;
    for (const Req& q : reqs_) {
        Bucket& h = hour(q.a.t_s);
        Bucket& c = quarter(q.a.t_s);
        ++h.requests, ++c.requests, ++res_.requests;
        if (q.refused) {
            ++h.refused, ++c.refused, ++res_.refused;
            continue;
        }
        if (q.done < 0) {  // accepted, never finished
            ++h.lost, ++c.lost, ++res_.lost;
            continue;
        }
        const float f = float(q.first - q.a.t_s);
        const float p = q.a.output > 1 ? float((q.done - q.first) / double(q.a.output - 1)) : 0;
        h.ttfts.push_back(f);
        c.ttfts.push_back(f);
        ttft.push_back(f);
        tpot.push_back(p);
        res_.last_done_s = std::max(res_.last_done_s, q.done);
        if (f <= slo_.ttft_s && p <= slo_.tpot_s) ++h.good, ++c.good, ++res_.good;
    }
    for (auto* buckets : {&res_.hours, &res_.curve}) {
        const double len = (buckets == &res_.hours ? 3600 : 900) / day_.compress;
        for (auto& r : replicas_) {
            const double a = r->started, b = r->stopped_at < 0 ? end : std::min(end, r->stopped_at);
            for (size_t k = size_t(a / len); k < buckets->size() && double(k) * len < b; ++k) {
                (*buckets)[k].replica_s +=
                    std::min(b, double(k + 1) * len) - std::max(a, double(k) * len);
            }
        }
        for (Bucket& bk : *buckets) {
            bk.rate_rps = double(bk.requests) / len;
            bk.goodput_rps = double(bk.good) / len;
            bk.mean_replicas = bk.replica_s / len;
            bk.p99_ttft_s = p99(bk.ttfts);
            bk.ttfts.clear();
            bk.ttfts.shrink_to_fit();
        }
    }
    for (const auto& r : replicas_) {
        const double b = r->stopped_at < 0 ? end : std::min(end, r->stopped_at);
        res_.replica_s += std::max(0.0, b - r->started);
    }
    for (const Bucket& h : res_.hours)
        res_.max_replicas = std::max(res_.max_replicas, int(std::ceil(h.mean_replicas - 1e-9)));
    res_.sim_s = end;
    res_.goodput_rps = double(res_.good) / end;
    res_.slo_attainment = res_.requests ? double(res_.good) / double(res_.requests) : 0;
    res_.replica_hours = res_.replica_s * day_.compress / 3600;
    res_.goodput_per_replica_hour =
        res_.replica_s > 0 ? double(res_.good) / res_.replica_s * 3600 : 0;
    auto median = [](std::vector<float> v) {
        if (v.empty()) return 0.0;
        std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
        return double(v[v.size() / 2]);
    };
    res_.p50_ttft_s = median(ttft);
    res_.p50_tpot_s = median(tpot);
    res_.p99_ttft_s = p99(ttft);
    res_.p99_tpot_s = p99(tpot);
}

}  // namespace

const char* fault_kind_name(Fault::Kind k) { return k == Fault::Kind::kKill ? "kill" : "slow"; }

std::string ReplicaConfig::label() const {
    return fmt::format("seqs {}, tokens {}, block {}", max_num_seqs, max_num_batched_tokens,
                       block_size);
}

Result<ArmResult> simulate(const model::sim::PerfModel& perf, int max_model_len,
                           const std::vector<Arrival>& arrivals, const DayShape& day,
                           const ArmPlan& arm, const Slo& slo, const std::vector<Fault>& faults) {
    if (arm.sizing) PAGODA_TRY(arm.sizer.validate());
    FleetSim sim(perf, max_model_len, arrivals, day, arm, slo, faults);
    return sim.run();
}

}  // namespace pagoda::rehearse

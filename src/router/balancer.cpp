// The implementation of router/balancer.h (the contract is there).
#include "router/balancer.h"

#include <algorithm>
#include <numeric>

#include "base/hash.h"

namespace pagoda::router {

double load_of(const Candidate& c, double kv_weight) {
    return double(c.outstanding) + c.waiting + kv_weight * c.kv_usage;
}

uint64_t mix64(uint64_t x) { return splitmix64(x); }

uint64_t hash64(std::string_view s) {
    uint64_t h = 1469598103934665603ULL;
    for (unsigned char ch : s) {
        h ^= ch;
        h *= 1099511628211ULL;
    }
    return mix64(h);
}

namespace {

bool usable(const Candidate& c) { return c.healthy && !c.saturated && !c.excluded; }

// Usable backends in rendezvous order for `key` (highest mixed hash first).
std::vector<int> rendezvous(const std::vector<Candidate>& cs, uint64_t key) {
    std::vector<int> idx;
    for (int i = 0; i < int(cs.size()); ++i) {
        if (usable(cs[size_t(i)])) idx.push_back(i);
    }
    std::sort(idx.begin(), idx.end(), [&](int a, int b) {
        return mix64(key ^ cs[size_t(a)].id_hash) > mix64(key ^ cs[size_t(b)].id_hash);
    });
    return idx;
}

int least_loaded(const std::vector<Candidate>& cs, double kv_weight, uint64_t tiebreak) {
    int best = -1;
    double best_load = 0;
    const size_t n = cs.size();
    for (size_t k = 0; k < n; ++k) {
        const size_t i = (k + tiebreak) % n;  // rotate the start so ties spread
        if (!usable(cs[i])) continue;
        const double l = load_of(cs[i], kv_weight);
        if (best < 0 || l < best_load) {
            best = int(i);
            best_load = l;
        }
    }
    return best;
}

}  // namespace

int pick_backend(const std::vector<Candidate>& cs, const RouteKey& key, double load_factor,
                 double kv_weight) {
    if (key.session != 0) {
        auto order = rendezvous(cs, key.session);
        return order.empty() ? -1 : order.front();
    }
    if (key.prefix != 0) {
        auto order = rendezvous(cs, key.prefix);
        if (order.empty()) return -1;
        double sum = 0;
        for (int i : order) sum += load_of(cs[size_t(i)], kv_weight);
        const double bound = load_factor * sum / double(order.size()) + 1;
        for (int i : order) {
            if (load_of(cs[size_t(i)], kv_weight) <= bound) return i;
        }
    }
    return least_loaded(cs, kv_weight, uint64_t(key.draw * 1e9));
}

namespace {

bool any_saturated(const PoolView& p) {
    return std::any_of(p.backends.begin(), p.backends.end(),
                       [](const Candidate& c) { return c.healthy && c.saturated && !c.excluded; });
}

// Primary pools in the order they should be tried: the one the draw lands on, then the
// other weighted ones by weight.
std::vector<int> primary_order(const std::vector<PoolView>& pools, double draw) {
    std::vector<int> weighted;
    double total = 0;
    for (int i = 0; i < int(pools.size()); ++i) {
        const PoolView& p = pools[size_t(i)];
        if (p.role == PoolRole::kPrimary && p.weight > 0) {
            weighted.push_back(i);
            total += p.weight;
        }
    }
    if (weighted.empty()) return {};
    double x = draw * total;
    int first = weighted.back();
    for (int i : weighted) {
        if (x < pools[size_t(i)].weight) {
            first = i;
            break;
        }
        x -= pools[size_t(i)].weight;
    }
    std::stable_sort(weighted.begin(), weighted.end(), [&](int a, int b) {
        return pools[size_t(a)].weight > pools[size_t(b)].weight;
    });
    weighted.erase(std::find(weighted.begin(), weighted.end(), first));
    weighted.insert(weighted.begin(), first);
    return weighted;
}

}  // namespace

Choice choose(const std::vector<PoolView>& pools, const RouteKey& key, bool dr_forced,
              double load_factor, double kv_weight) {
    Choice out;
    auto try_pool = [&](int p, const char* reason) {
        const int b = pick_backend(pools[size_t(p)].backends, key, load_factor, kv_weight);
        if (b < 0) {
            out.saturated = out.saturated || any_saturated(pools[size_t(p)]);
            return false;
        }
        out.pool = p;
        out.backend = b;
        out.reason = reason;
        return true;
    };
    auto try_role = [&](PoolRole role, const char* reason) {
        for (int p = 0; p < int(pools.size()); ++p) {
            if (pools[size_t(p)].role == role && try_pool(p, reason)) return true;
        }
        return false;
    };
    if (dr_forced && try_role(PoolRole::kDr, "dr_forced")) return out;
    for (int p : primary_order(pools, key.draw)) {
        if (try_pool(p, "weighted")) return out;
    }
    if (try_role(PoolRole::kStandby, "standby")) return out;
    if (!dr_forced && try_role(PoolRole::kDr, "dr")) return out;
    out.pool = out.backend = -1;
    return out;
}

}  // namespace pagoda::router

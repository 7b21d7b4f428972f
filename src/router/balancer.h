#pragma once
// Balancing decisions as pure functions over a snapshot of the pools, so every rule is
// unit-tested without sockets:
// - pool: DR when forced; else a primary pool drawn by weight; a primary pool with no
//   available backend passes its share to the other weighted primaries, then to standby,
//   then to DR pools;
// - backend in a pool: a session key sticks to one backend (rendezvous hashing); a prompt
//   prefix goes to its rendezvous-first backend while that backend's load stays within
//   factor x mean load + 1 (bounded-load affinity, so prefix caches stay useful without
//   hot spots); otherwise the least-loaded backend.
// Load = outstanding requests through this router + the backend's published waiting queue
// + weight x its KV-cache use.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "router/router_config.h"

namespace pagoda::router {

struct Candidate {
    uint64_t id_hash = 0;  // of the backend's URL (rendezvous hashing)
    int64_t outstanding = 0;
    double waiting = 0, kv_usage = 0;
    bool healthy = true;     // up, ready, not shedding, not ejected
    bool saturated = false;  // healthy but at its outstanding or waiting bound
    bool excluded = false;   // already tried by this request
};

struct PoolView {
    std::string name;
    PoolRole role = PoolRole::kPrimary;
    double weight = 0;  // primary pools: current share (any scale)
    std::vector<Candidate> backends;
};

struct RouteKey {
    uint64_t session = 0;  // hash of the session header; 0 = none
    uint64_t prefix = 0;   // hash of the prompt's first characters; 0 = no affinity
    double draw = 0;       // in [0, 1): picks the primary pool by weight
};

struct Choice {
    int pool = -1, backend = -1;  // -1: none
    bool saturated = false;       // none available, and some only because they are full
    std::string reason;           // "weighted", "standby", "dr", "dr_forced"
};

double load_of(const Candidate& c, double kv_weight);
uint64_t hash64(std::string_view s);  // FNV-1a then a 64-bit mix
uint64_t mix64(uint64_t x);

// The backend of one pool, or -1 when none is available.
int pick_backend(const std::vector<Candidate>& cs, const RouteKey& key, double load_factor,
                 double kv_weight);
Choice choose(const std::vector<PoolView>& pools, const RouteKey& key, bool dr_forced,
              double load_factor, double kv_weight);

}  // namespace pagoda::router

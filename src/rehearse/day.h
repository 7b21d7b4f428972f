#pragma once
// The days `pagoda rehearse` replays: the built-in production day (night trough, morning
// rise, lunch dip, afternoon plateau, evening fall, random bursts; 70% short / 30% long
// requests) and trace files in any format the bench reads, compressed N times by playing
// each stretch at its own rate for 1/N of its length (a trace keeps every N-th request).

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "rehearse/fleet_sim.h"

namespace pagoda::rehearse {

struct Day {
    std::string name;  // "builtin" or the trace file
    DayShape shape;
    std::vector<Arrival> arrivals;     // sorted by time
    std::vector<double> rate_per_min;  // the day's arrival rate per minute (requests/s)
    double peak_hour_rps = 0;
};

struct BuiltinDayOptions {
    double peak_rps = 20;  // the plateau's rate; bursts go 1.6x above it
    double compress = 48;
    uint64_t seed = 1;
    int bursts = 3;
    int max_model_len = 8192;
};

// The built-in day's rate at a time of day, relative to the peak (no bursts).
double builtin_shape(double day_s);
Day builtin_day(const BuiltinDayOptions& o);

// The built-in mix, for capacity probes: Poisson arrivals at `rps` for `seconds`. With
// `mix`, each request's lengths are drawn from it instead (a day's own requests).
std::vector<Arrival> steady_load(double rps, double seconds, uint64_t seed, int max_model_len,
                                 const std::vector<Arrival>* mix = nullptr);

// A trace file; `hours` > 0 keeps that many hours from its start. Errors: the reader's.
Result<Day> trace_day(const std::string& path, double compress, double hours, int max_model_len);

// The per-minute rates of a day, averaged over `window` minutes (the forecast: yesterday's
// rates seen through a moving mean, the seasonal-naive forecaster).
std::vector<double> smooth(const std::vector<double>& per_min, int window);

}  // namespace pagoda::rehearse

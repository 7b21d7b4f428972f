#pragma once
// The process's own resource use from /proc/self (resident memory, CPU time, threads), for
// the resource layer of /metrics. Thread-safe.

#include <cstdint>

namespace pagoda::server {

struct ProcessStats {
    int64_t rss_bytes = 0, threads = 0;
    double cpu_seconds = 0;
};

// Zeros where /proc cannot be read.
ProcessStats read_process_stats();

// Physical memory (sysconf); 0 when unknown.
int64_t physical_memory_bytes();

}  // namespace pagoda::server

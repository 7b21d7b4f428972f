// The implementation of server/process_stats.h (the contract is there).
#include "server/process_stats.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace pagoda::server {

// From /proc/self/stat (utime, stime, num_threads) and /proc/self/statm (resident pages).
ProcessStats read_process_stats() {
    ProcessStats ps;
    const long page = sysconf(_SC_PAGESIZE), tick = sysconf(_SC_CLK_TCK);
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
        long size = 0, resident = 0;
        if (std::fscanf(f, "%ld %ld", &size, &resident) == 2)
            ps.rss_bytes = int64_t(resident) * page;
        std::fclose(f);
    }
    if (FILE* f = std::fopen("/proc/self/stat", "r")) {
        char buf[2048];
        const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
        std::fclose(f);
        buf[n] = 0;
        // Fields after the command name (which may hold spaces) start after the last ')'.
        const char* p = std::strrchr(buf, ')');
        if (p != nullptr) {
            unsigned long utime = 0, stime = 0;
            long threads = 0;
            // state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
            // cutime cstime priority nice num_threads
            if (std::sscanf(
                    p + 2,
                    "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %ld",
                    &utime, &stime, &threads) == 3) {
                ps.cpu_seconds = double(utime + stime) / double(tick);
                ps.threads = threads;
            }
        }
    }
    return ps;
}

int64_t physical_memory_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? int64_t(pages) * page : 0;
}

}  // namespace pagoda::server

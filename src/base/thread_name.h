#pragma once
// Names the calling thread as `top -H`, `ps -L`, perf and gdb show it ("pagoda-engine",
// "pagoda-http"): at most 15 characters (the kernel's limit; longer names are cut).

#include <pthread.h>

#include <string>

namespace pagoda {

inline void set_thread_name(const char* name) {
    const std::string n = std::string(name).substr(0, 15);
    (void)pthread_setname_np(pthread_self(), n.c_str());
}

}  // namespace pagoda

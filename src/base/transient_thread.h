#pragma once
// Runs f() on a new thread that exits when f returns, and returns f's result.
//
// Why: an OpenMP (libgomp) worker pool belongs to the thread that opened the parallel
// region and lives as long as that thread. Load-time parallel work (packing weights,
// oneDNN reorders) run on the main thread would leave a second, idle pool beside the
// engine thread's; libgomp then counts more threads than CPUs, throttles its spin-wait,
// and every parallel region of a decode step pays futex sleeps and wake-ups (and with
// OMP_WAIT_POLICY=active the idle pool spins on a CPU the engine needs). Measured on
// TinyLlama-shape q8_0, 2 threads: decode 22 -> 41 tok/s under OMP_WAIT_POLICY=active.

#include <optional>
#include <thread>
#include <utility>

namespace pagoda {

template <typename F>
auto run_on_transient_thread(F&& f) -> decltype(f()) {
    std::optional<decltype(f())> result;
    std::thread([&] { result.emplace(f()); }).join();
    return std::move(*result);
}

}  // namespace pagoda

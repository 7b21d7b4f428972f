#!/usr/bin/env bash
# Runs the kernel micro-benchmarks (Google Benchmark) on 2 threads.
set -euo pipefail
cd "$(dirname "$0")/.."
OMP_NUM_THREADS=${THREADS:-2} build/bench/micro/kernels_bench "$@"

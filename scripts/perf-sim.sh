#!/usr/bin/env bash
# The simulated GPU against the CPU engine and at full scale, for docs/performance.md
# (issue 13). Usage: scripts/perf-sim.sh cpu|scale [DURATION]
#  cpu:   acceptance 4. A random-weight model of TinyLlama-1.1B's shape (q8_0) served by the
#         CPU engine with --step-trace, `pagoda sim calibrate --measure-cpu` on it (isolated
#         steps plus the served ones), then the sim with that card, then both again:
#         `pagoda bench --preset mix-70-30 --scale 0.1 --duration DURATION` (default 120s)
#         against each, interleaved, TTFT / TPOT / throughput side by side.
#  scale: acceptance 3. --preset 500rps, 32k (llama-3.1-8b: 128k context) and burst at full
#         scale against `--backend sim --sim-gpu a100-80g`, then 500rps on an H100 TP 8
#         replica that keeps up; the client's send lag and the server's CPU per request.
set -euo pipefail
cd "$(dirname "$0")/.."
P=build/apps/pagoda
DIR=${PERF_DIR:-/tmp/pagoda-perf}
mkdir -p "$DIR"
PORT=${PORT:-18330}

run() {  # name bench-args -- serve-args...
    local name=$1 bench=$2
    shift 3
    rm -rf "$DIR/st-$name"
    $P serve "$@" --port "$PORT" --state-dir "$DIR/st-$name" --block-size-policy static \
        >"$DIR/$name.log" 2>&1 &
    local pid=$!
    for _ in $(seq 1 240); do curl -sf "localhost:$PORT/ready" >/dev/null && break; sleep 0.5; done
    # shellcheck disable=SC2086
    $P bench --url "http://127.0.0.1:$PORT" $bench --no-progress --no-record \
        --json "$DIR/$name.json" >"$DIR/$name.bench" 2>&1 || true
    kill "$pid"
    wait "$pid" || true
    python3 - "$DIR/$name.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); c = d["client"]
cpu = d.get("server_cpu_ms_per_request")
print(f"{sys.argv[2]:<12} sent {d['requests']['sent']:>6} ok {d['requests']['completed']:>6} "
      f"TTFT mean {d['ttft_ms']['mean']:8.1f} p50 {d['ttft_ms']['p50']:8.1f} p99 {d['ttft_ms']['p99']:8.1f} "
      f"TPOT mean {d['tpot_ms']['mean']:6.1f} out tok/s {d['output_tokens_per_s']:8.1f} "
      f"send lag p99 {c['send_lag_p99_ms']:7.2f} ms server CPU {cpu if cpu is None else round(cpu, 3)} ms/req")
PY
}

case "${1:-}" in
cpu)
    DUR=${2:-120s}
    M="$DIR/tinyllama-q8_0.gguf"
    [ -f "$M" ] || $P model make-test --shape tinyllama-1.1b --dtype q8_0 --seed 1 -o "$M"
    B="--preset mix-70-30 --scale 0.1 --duration $DUR"
    SIM=(--backend sim --sim-gpu-table "$DIR/host-cpu.toml" --sim-gpu host-cpu --sim-model "$M"
        --sim-weight-dtype q8_0 --kv-cache-dtype f32)
    run realA "$B" -- -m "$M" --kv-cache-memory 1GiB --step-trace "$DIR/steps.jsonl"
    $P sim calibrate --measure-cpu "$M" --step-trace "$DIR/steps.jsonl" -o "$DIR/host-cpu.toml" \
        --save-measurements "$DIR/host-cpu-measurements.toml" | tail -3
    run simA "$B" -- "${SIM[@]}"
    run realB "$B" -- -m "$M" --kv-cache-memory 1GiB
    run simB "$B" -- "${SIM[@]}"
    ;;
scale)
    A100=(--backend sim --sim-gpu a100-80g)
    run 500rps "--preset 500rps" -- "${A100[@]}" --sim-model llama-3-8b
    run 32k "--preset 32k" -- "${A100[@]}" --sim-model llama-3.1-8b
    run 32k-tp2 "--preset 32k" -- "${A100[@]}" --sim-model llama-3.1-8b --tensor-parallel-size 2
    run burst "--preset burst" -- "${A100[@]}" --sim-model llama-3-8b
    run 500rps-h100 "--preset 500rps" -- --backend sim --sim-gpu h100-sxm --sim-model llama-3-8b \
        --tensor-parallel-size 8
    ;;
*)
    echo "usage: scripts/perf-sim.sh cpu|scale [DURATION]" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Pagoda against llama.cpp on the same GGUF file, side by side (issue 20): batch-1 decode,
# decode at depth, prefill, and (with --serving) 1/4/16-stream serving. Runs alternate
# (Pagoda, llama.cpp, Pagoda, ...: PAIRS pairs per measure, the first of each pair swapped
# every other pair) so the host's noise, which moves memory bandwidth by 2x here, falls on
# both; it reports each run and the median of the per-pair ratios (Pagoda / llama.cpp,
# higher is better for Pagoda).
#
#   scripts/perf-vs-llamacpp.sh MODEL.gguf [PAIRS] [--measures LIST] [--serving] [--threads N]
#
# MODEL: any GGUF both load, e.g. `build/apps/pagoda model make-test --shape tinyllama-1.1b
# --dtype q8_0 --vocab testdata/tokenizer-vectors/ggml-vocab-llama-spm.gguf -o /tmp/tl-q8.gguf`.
# PAIRS: default 5. Measures (comma list, default all but serving): tg128 (batch-1 decode,
# 128 tokens), pp512, pp2048, pp8192 (prefill tokens/s), tg32@4096, tg32@8192 (decode of 32
# tokens after that many tokens of context). --serving adds s1, s4, s16, s32, s64: `pagoda bench`
# with that many concurrent streams (256 tokens in, 128 out) against `pagoda serve` and
# against `llama-server --parallel max(16, N)`, output tokens/s (the p99 TTFT is printed
# beside); REQS_PER_STREAM requests per stream (default 4), closed loop. oN@R (not in the
# defaults): open loop, Poisson arrivals at R requests/s, N x REQS_PER_STREAM requests, against
# the same servers sized for N streams (e.g. o16@0.6).
# llama.cpp: the binaries of ../shared/anchors/llama.cpp/bin (LLAMACPP_BIN overrides).
# PAGODA_FLAGS: extra flags for `pagoda generate` (e.g. "--kv-cache-dtype f16"); LLAMA_FLAGS:
# extra flags for llama-bench and llama-server (e.g. "-ctk q8_0 -ctv q8_0 -fa 1").
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/apps/pagoda
LLAMA=${LLAMACPP_BIN:-$(cd .. && pwd)/shared/anchors/llama.cpp/bin}
MODEL=""
PAIRS=5
THREADS=2
MEASURES="tg128,pp512,pp2048,pp8192,tg32@4096,tg32@8192"
SERVING=0
while [ $# -gt 0 ]; do
    case "$1" in
        --measures) MEASURES=$2; shift 2 ;;
        --serving) SERVING=1; shift ;;
        --threads) THREADS=$2; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) if [ -z "$MODEL" ]; then MODEL=$1; else PAIRS=$1; fi; shift ;;
    esac
done
[ -n "$MODEL" ] || { echo "usage: $0 MODEL.gguf [PAIRS] [--measures LIST] [--serving] [--threads N]" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "$MODEL: no such file" >&2; exit 2; }
[ -x "$LLAMA/llama-bench" ] || { echo "no llama-bench in $LLAMA (set LLAMACPP_BIN)" >&2; exit 2; }
[ -x "$BIN" ] || { echo "$BIN is not built (cmake --build build)" >&2; exit 2; }
if [ "$SERVING" = 1 ]; then MEASURES="$MEASURES,s1,s4,s16,s32,s64"; fi
OUT=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$OUT"' EXIT
. scripts/llamacpp-lib.sh
llamacpp_copy "$LLAMA" "$OUT/llama"
LLAMA=$OUT/llama

# measure NAME -> prints "prompt gen depth" for the bench-style measures.
shape() {
    case "$1" in
        tg*@*) local n=${1%@*}; echo "0 ${n#tg} ${1#*@}" ;;
        tg*) echo "0 ${1#tg} 0" ;;
        pp*) echo "${1#pp} 0 0" ;;
        *) echo "unknown measure '$1' (tgN, ppN, tgN@DEPTH, s1, s4, s16, s32, s64, oN@RATE)" >&2; exit 2 ;;
    esac
}

# The KV pool of `pagoda generate` (default 256 MiB, ~5.8k tokens of f32 TinyLlama KV):
# enough for 8k contexts.
KVMEM=${KVMEM:-1GiB}

# Pagoda, one run of a bench-style measure: tokens/s on stdout.
pagoda_run() {  # PROMPT GEN DEPTH
    local p=$1 g=$2 d=$3 ctx
    ctx=$(( (p > d ? p : d) + g + 64 ))
    if [ "$p" -gt 0 ]; then  # prefill: prompt tokens over the time to the first token
        "$BIN" generate -m "$MODEL" -t "$THREADS" --prompt-tokens "$p" -n 1 --max-model-len "$ctx" \
            --kv-cache-memory "$KVMEM" ${PAGODA_FLAGS:-} --json 2>/dev/null | python3 -c '
import json, sys
r = [json.loads(l) for l in sys.stdin if l.strip()]
q = [x for x in r if not x.get("summary")][0]
print(q["prompt_tokens"] / q["ttft_s"])'
    else  # decode after DEPTH tokens (at least one prompt token)
        "$BIN" generate -m "$MODEL" -t "$THREADS" --prompt-tokens "$(( d > 0 ? d : 1 ))" -n "$g" \
            --ignore-eos --max-model-len "$ctx" --kv-cache-memory "$KVMEM" ${PAGODA_FLAGS:-} --json 2>/dev/null | python3 -c '
import json, sys
r = [json.loads(l) for l in sys.stdin if l.strip()]
print([x for x in r if x.get("summary")][0]["decode_tokens_per_s"])'
    fi
}

llama_run() {  # PROMPT GEN DEPTH
    "$LLAMA/llama-bench" -m "$MODEL" -t "$THREADS" -p "$1" -n "$2" -d "$3" -r 1 ${LLAMA_FLAGS:-} -o json 2>/dev/null |
        python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["avg_ts"])'
}

# Serving: `pagoda bench` against a server at PORT; prints "output_tok/s p99_ttft_ms".
serve_bench() {  # PORT STREAMS [RATE]
    local n=$(( $2 * ${REQS_PER_STREAM:-4} )) load=(--concurrency "$2")
    [ -n "${3:-}" ] && load=(--rate "$3")
    "$BIN" bench --url "http://127.0.0.1:$1" "${load[@]}" --requests "$n" --input-len 256 \
        --output-len 128 --no-record --no-progress --json "$OUT/b.json" >/dev/null 2>&1 || true
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d["output_tokens_per_s"], d["ttft_ms"]["p99"])' "$OUT/b.json"
}
wait_port() {  # PORT PID
    for _ in $(seq 600); do
        curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.2
    done
    return 1
}
pagoda_serving() {  # STREAMS [RATE]
    "$BIN" serve -m "$MODEL" -t "$THREADS" --port 18611 --max-num-seqs $(( $1 > 16 ? $1 : 16 )) \
        --kv-cache-memory "$KVMEM" --state-dir "$OUT/state" ${PAGODA_FLAGS:-} \
        --no-dynamic-warmup 2>"$OUT/pagoda.log" &
    local pid=$!
    wait_port 18611 "$pid" && until curl -sf http://127.0.0.1:18611/ready >/dev/null; do sleep 0.2; done
    serve_bench 18611 "$1" "${2:-}"
    kill "$pid"; wait "$pid" 2>/dev/null || true
}
llama_serving() {  # STREAMS [RATE]
    local par=$(( $1 > 16 ? $1 : 16 ))
    "$LLAMA/llama-server" -m "$MODEL" -t "$THREADS" --parallel "$par" -c $(( par * 1024 )) --port 18612 ${LLAMA_FLAGS:-} \
        >"$OUT/llama.log" 2>&1 &
    local pid=$!
    wait_port 18612 "$pid"
    serve_bench 18612 "$1" "${2:-}"
    kill "$pid"; wait "$pid" 2>/dev/null || true
}

one() {  # WHO MEASURE -> "tok/s [p99]"
    case "$2" in
        s*) "${1}_serving" "${2#s}" ;;
        o*@*) local o=${2#o}; "${1}_serving" "${o%@*}" "${o#*@}" ;;
        *) read -r p g d < <(shape "$2"); "${1}_run" "$p" "$g" "$d" ;;
    esac
}

printf '%-10s %4s %14s %14s %8s\n' measure pair pagoda llama.cpp ratio
IFS=, read -r -a LIST <<<"$MEASURES"
for m in "${LIST[@]}"; do
    case "${m:0:1}" in s|o) ;; *) shape "$m" >/dev/null ;; esac
    : >"$OUT/ratios"
    for i in $(seq "$PAIRS"); do
        if [ $((i % 2)) = 1 ]; then a=$(one pagoda "$m"); b=$(one llama "$m")
        else b=$(one llama "$m"); a=$(one pagoda "$m"); fi
        r=$(python3 -c 'import sys; print(float(sys.argv[1].split()[0]) / float(sys.argv[2].split()[0]))' "$a" "$b")
        echo "$r" >>"$OUT/ratios"
        printf '%-10s %4s %14s %14s %8.2f\n' "$m" "$i" "$(echo "$a" | awk '{printf "%.1f", $1}')" \
            "$(echo "$b" | awk '{printf "%.1f", $1}')" "$r"
        case "${m:0:1}" in s|o) echo "           p99 TTFT ms: pagoda $(echo "$a" | awk '{printf "%.0f", $2}'), llama.cpp $(echo "$b" | awk '{printf "%.0f", $2}')" ;; esac
    done
    python3 -c '
import statistics, sys
r = [float(x) for x in open(sys.argv[2])]
print(f"{sys.argv[1]:<10} median of {len(r)} per-pair ratios: {statistics.median(r):.2f}x")' "$m" "$OUT/ratios"
done

#!/usr/bin/env bash
# End-to-end tests of the simulated GPU backend (issue 13): `pagoda serve --backend sim`
# answers the same API with the same engine, sizes its KV cache as vLLM would on the card,
# publishes pagoda_sim_* metrics (promtool when installed), gives the same greedy text for
# the same seed, refuses bad settings with exit 2, and takes a short `pagoda bench` run with
# no errors; `pagoda sim calibrate` and `sim predict` answer, and `pagoda tune` runs two
# trials on the sim and writes a config file `pagoda serve --config` loads.
# Usage: sim_test.sh PAGODA_BIN SOURCE_DIR
set -uo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/e2e_lib.sh"

# 1. Bad settings: exit 2 with what is wrong and what is allowed.
"$BIN" serve --backend sim --sim-gpu a100 2>"$TMP/e.log"
expect_eq "unknown GPU exits 2" "$?" "2"
expect_in "lists the known cards" "unknown GPU 'a100' (known: .*a100-80g" "$TMP/e.log"
"$BIN" serve --backend sim --sim-model llama-9b 2>"$TMP/e.log"
expect_eq "unknown shape exits 2" "$?" "2"
expect_in "lists the known shapes" "unknown shape 'llama-9b' (known: .*llama-3-8b" "$TMP/e.log"
"$BIN" serve --backend sim --tensor-parallel-size 3 2>"$TMP/e.log"
expect_eq "TP 3 exits 2" "$?" "2"
expect_in "TP must divide the heads" "must divide the 32 attention heads" "$TMP/e.log"
"$BIN" serve --backend sim --sim-gpu l4 --gpu-memory-utilization 0.5 2>"$TMP/e.log"
expect_eq "a model that does not fit exits 2" "$?" "2"
expect_in "says what it needs and what there is" "needs 15.0 GiB per GPU for weights.*leaves 11.2 GiB of 22.5" "$TMP/e.log"
printf '[bad]\nbf16_tflops = 100\nfp8_tflops = 0\nmemory_mib = 1000\nmemory_tbps = 1\nlink_gbps = 1\nlink_latency_us = 1\nefficiency_memory = 1.5\nsource = "s"\n' >"$TMP/gpus.toml"
"$BIN" serve --backend sim --sim-gpu-table "$TMP/gpus.toml" --sim-gpu bad 2>"$TMP/e.log"
expect_eq "a nonsensical efficiency factor exits 2" "$?" "2"
expect_in "and names the card and the factor" "\[bad\]: efficiency factor memory = 1.5 must be in (0, 1\]" "$TMP/e.log"

# 2. Llama-3-8B on an A100-80G: vLLM's sizing, the same API.
start_server "$TMP/s.log" --backend sim --sim-gpu a100-80g --sim-model llama-3-8b --sim-speed 10 || exit 1
expect_in "the card and the KV size are logged" "sim gpu=a100-80g model=llama-3-8b tp=1 weights_gib=15.0" "$TMP/s.log"
expect_eq "/v1/models names the simulated model" "$(curl -s "$(URL /v1/models)" | jq_ 'd["data"][0]["id"]')" "llama-3-8b"
body='{"prompt": "Once upon a time", "max_tokens": 20, "temperature": 0, "ignore_eos": true}'
curl -s "$(URL /v1/completions)" -H 'Content-Type: application/json' -d "$body" >"$TMP/c1"
curl -s "$(URL /v1/completions)" -H 'Content-Type: application/json' -d "$body" >"$TMP/c2"
expect_eq "a completion of 20 tokens" "$(jq_ 'd["usage"]["completion_tokens"]' <"$TMP/c1")" "20"
expect_eq "greedy text repeats" "$(jq_ 'd["choices"][0]["text"]' <"$TMP/c1")" "$(jq_ 'd["choices"][0]["text"]' <"$TMP/c2")"
curl -s "$(URL /metrics)" >"$TMP/metrics"
expect_in "28,787 KV blocks of 16 (vLLM's formula)" 'pagoda_cache_config_info{block_size="16",num_gpu_blocks="28787"' "$TMP/metrics"
expect_in "modelled GPU time" 'pagoda_sim_busy_seconds_total{model_name="llama-3-8b"}' "$TMP/metrics"
expect_in "modelled GPU memory" 'pagoda_sim_gpu_memory_bytes{model_name="llama-3-8b",kind="total"} 85899345920' "$TMP/metrics"
if command -v promtool >/dev/null; then
    grep -v '^vllm:\|^# [A-Z]* vllm:' "$TMP/metrics" >"$TMP/metrics.native"
    promtool check metrics <"$TMP/metrics.native" >"$TMP/promtool.out" 2>&1 && ok "promtool passes the sim families" || bad "promtool" "$(head -5 "$TMP/promtool.out")"
fi

# 3. Load: a short open-loop run with no errors.
"$BIN" bench --url "$(URL '')" --rate 40 --duration 5s --input-len 128 --output-len 32 --json "$TMP/bench.json" >"$TMP/bench.out" 2>&1
expect_eq "bench against the sim: no errors" "$(jq_ '(d["errors"], d["requests"]["completed"] > 150)' <"$TMP/bench.json")" "({}, True)"
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null

# 4. Another seed, other text.
start_server "$TMP/s2.log" --backend sim --sim-seed 9 --sim-speed 10 || exit 1
curl -s "$(URL /v1/completions)" -H 'Content-Type: application/json' -d "$body" >"$TMP/c3"
[ "$(jq_ 'd["choices"][0]["text"]' <"$TMP/c3")" != "$(jq_ 'd["choices"][0]["text"]' <"$TMP/c1")" ] && ok "another --sim-seed, other text" || bad "sim seed" "same text"
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null

# 4b. Socket writes at --stream-interval 16: a 128-token stream is at most 9 (the head with
# the first token, seven of 16, the last 15 with the stream's end; fewer where a slow
# reader's pump took two steps at once), never the last tokens and the end apart (10).
start_server "$TMP/s4.log" --backend sim --stream-interval 16 || exit 1
w0=$(curl -s "$(URL /metrics)" | awk '/^pagoda_http_stream_writes_total/ {print $2}')
curl -sN "$(URL /v1/completions)" -d '{"prompt": "Once", "max_tokens": 128, "ignore_eos": true, "stream": true}' >"$TMP/st16"
w1=$(curl -s "$(URL /metrics)" | awk '/^pagoda_http_stream_writes_total/ {print $2}')
expect_eq "--stream-interval 16: a 128-token stream in 2-9 socket writes" "$(((w1 - w0) >= 2 && (w1 - w0) <= 9)) $(tail -c 14 "$TMP/st16" | head -c 12)" "1 data: [DONE]"
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null

# 5. Calibration, prediction, tune.
"$BIN" sim calibrate --no-fit >"$TMP/cal.out" 2>&1
expect_eq "sim calibrate against the published table exits 0" "$?" "0"
expect_in "the shipped factors fit it within 1%" "error: rms error 0.[0-9]%, max 0.[0-9]%" "$TMP/cal.out"
printf '[[set]]\ngpu = "a100-80g"\nmodel = "llama-3-8b"\nsource = "s"\nsteps = [{seqs = 1}]\n' >"$TMP/bad.toml"
"$BIN" sim calibrate --measurements "$TMP/bad.toml" 2>"$TMP/e.log"
expect_eq "a bad measurement file exits 2" "$?" "2"
expect_in "says which row lacks what" "steps\[0\] needs 'ms'" "$TMP/e.log"
"$BIN" sim predict --point 16:8 --point 12:6 >"$TMP/pred.out" 2>&1
expect_in "predict: batch 16 on TP 8" "^    16    8   2.00" "$TMP/pred.out"
expect_in "predict: TP 6 cannot split 32 heads" "12    6  cannot run: --tensor-parallel-size 6 must divide the 32" "$TMP/pred.out"
"$BIN" tune --preset mix-70-30 --slo "p99_ttft_ms<5000" --search batch 2>"$TMP/e.log"
expect_eq "tune: unknown knob exits 2" "$?" "2"
expect_in "and lists the searchable ones" "searchable: max_num_seqs, max_num_batched_tokens" "$TMP/e.log"
"$BIN" tune --preset mix-70-30 --scale 0.05 --duration 3s --slo "error_rate<0.01" --search max_num_seqs=4:8 \
    --strategy grid --port 0 --work-dir "$TMP/tune" --json "$TMP/tune.json" -o "$TMP/tuned.toml" \
    -- --backend sim --sim-speed 10 >"$TMP/tune.out" 2>"$TMP/tune.err"
expect_eq "tune on the sim exits 0" "$?" "0"
expect_eq "two trials, both run" "$(jq_ '[t["error"] for t in d["trials"]]' <"$TMP/tune.json")" "[None, None]"
expect_in "the config file has the winner" "^max-num-seqs = [48]$" "$TMP/tuned.toml"
expect_in "and the base flags" '^backend = "sim"$' "$TMP/tuned.toml"
start_server "$TMP/s3.log" --config "$TMP/tuned.toml" || exit 1
expect_in "pagoda serve --config loads it" "max_num_seqs=$(grep -o '^max-num-seqs = [0-9]*' "$TMP/tuned.toml" | grep -o '[0-9]*$') " "$TMP/s3.log"
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

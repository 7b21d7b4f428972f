#!/usr/bin/env bash
# End-to-end tests of `pagoda bench` against `pagoda serve` on the bundled model (loopback,
# ephemeral ports): a scaled 70/30 scenario checked request by request, the burst preset's
# rate step, TOML errors with file and line, an unreachable server, verdict exit codes, the
# SQLite baseline store (save, compare, history), canary comparison of two endpoints, a
# capacity sweep, closed loop, chat, trace replay, error counting with the stop condition, API
# keys, --tokenizer and dataset prompts.
# Usage: bench_e2e_test.sh PAGODA_BIN SOURCE_DIR
set -uo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/e2e_lib.sh"
start_server "$TMP/s1.log" || exit 1
URL=http://127.0.0.1:$PORT
DB=$TMP/bench.db
B() { "$BIN" bench --url "$URL" --db "$DB" --no-progress "$@"; }

# 1. A scaled 70/30 mix: counts per class follow the schedule, TTFT <= E2E for every request,
#    token counts equal the server's usage and its /metrics counters, prompts have their
#    exact lengths.
# Criteria that timing cannot decide (the preset's latency SLOs would, on a busy machine).
B --preset mix-70-30 --scale 0.05 --rate 12 --duration 15s --json "$TMP/mix.json" --html "$TMP/mix.html" \
    --criteria "error_rate < 0.01" --criteria "short: completed >= 1" --criteria "long: completed >= 1" \
    --save-requests "$TMP/mix.jsonl" >"$TMP/mix.out" 2>&1
expect_eq "mix: exit 0 (criteria pass)" "$?" "0"
python3 - "$TMP/mix.json" "$TMP/mix.jsonl" >"$TMP/mix.check" 2>&1 <<'PY'
import json, math, sys
rep = json.load(open(sys.argv[1]))
reqs = [json.loads(l) for l in open(sys.argv[2])]
errs = []
def check(cond, msg):
    if not cond: errs.append(msg)
w0, w1 = rep["window"]["begin_s"], rep["window"]["end_s"]
counted = [r for r in reqs if w0 <= r["scheduled_s"] < w1]
n = rep["requests"]["sent"]
check(n == len(counted), f"sent {n} != requests in the window {len(counted)}")
expected = 12 * (w1 - w0)          # Poisson count over the window
check(abs(n - expected) <= 4 * math.sqrt(expected), f"sent {n}, expected {expected:.0f} +- {4*math.sqrt(expected):.0f}")
short = next(c for c in rep["classes"] if c["name"] == "short")["requests"]["sent"]
long_ = next(c for c in rep["classes"] if c["name"] == "long")["requests"]["sent"]
check(short + long_ == n, "class counts do not add up")
sd = math.sqrt(0.7 * 0.3 / n)
check(abs(short / n - 0.7) <= 4 * sd, f"short share {short/n:.3f}, expected 0.7 +- {4*sd:.3f}")
check(rep["requests"]["failed"] == 0, "failures")
for r in reqs:
    check(r["error_kind"] is None, f"request failed: {r['error']}")
    check(r["ttft_ms"] is not None and 0 < r["ttft_ms"] <= r["e2e_ms"], f"ttft {r['ttft_ms']} > e2e {r['e2e_ms']}")
    check(r["completion_tokens"] == r["target_output_tokens"],
          f"tokens: usage {r['completion_tokens']}, asked {r['target_output_tokens']}")
    # A server may skip a chunk for a token with no printable text yet; never more chunks than tokens.
    check(1 <= r["token_chunks"] <= r["completion_tokens"], f"chunks {r['token_chunks']} vs usage {r['completion_tokens']}")
    check(r["prompt_tokens"] == r["target_input_tokens"], f"prompt tokens {r['prompt_tokens']} != {r['target_input_tokens']}")
# The client's token counts equal the server's own counters over the run (scraped /metrics).
sm = rep["server_metrics"]
def counter(name):
    return sum(v for k, v in sm.items() if k.split("{")[0] == name)
check(counter("vllm:generation_tokens_total") == sum(r["completion_tokens"] for r in reqs),
      f"server generated {counter('vllm:generation_tokens_total')}, client saw {sum(r['completion_tokens'] for r in reqs)}")
check(counter("vllm:prompt_tokens_total") == sum(r["prompt_tokens"] for r in reqs),
      f"server prompt tokens {counter('vllm:prompt_tokens_total')}, client {sum(r['prompt_tokens'] for r in reqs)}")
check(sum(c["requests"]["completed"] for c in rep["classes"]) == rep["requests"]["completed"], "class sums")
check(rep["output_tokens"] == sum(r["completion_tokens"] for r in counted), "report output tokens != counted usage")
check(rep["prompts"]["exact_length"] == rep["prompts"]["synthesised"], "prompts not exact")
check(rep["ttft_ms"]["p50"] <= rep["e2e_ms"]["p50"], "p50 ttft > p50 e2e")
check(rep["verdict"] == "pass" and len(rep["criteria"]) == 3, "verdict/criteria")
check(any(k.startswith("vllm:request_queue_time_seconds") for k in sm), "no server-side queue time from /metrics")
print("errors:", len(errs)); print("\n".join(errs[:10]))
PY
expect_eq "mix: report checks" "$(head -1 "$TMP/mix.check")" "errors: 0"
[ "$(head -1 "$TMP/mix.check")" == "errors: 0" ] || cat "$TMP/mix.check"
expect_in "mix: HTML report has charts" "<svg" "$TMP/mix.html"
expect_in "mix: HTML verdict table" "short: completed &gt;= 1" "$TMP/mix.html"
expect_in "mix: terminal summary" "verdict: pass" "$TMP/mix.out"

# 2. The burst preset: the rate step shows in the per-second series.
B --preset burst --scale 0.1 --duration 12s --criteria "error_rate < 0.01" --json "$TMP/burst.json" >"$TMP/burst.out" 2>&1
expect_eq "burst: exit 0" "$?" "0"
step=$(python3 - "$TMP/burst.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["series"]
low = sum(b["sent"] for b in s if b["t"] < 3) / 3          # 5 requests/s for 3 s
high = sum(b["sent"] for b in s if 3 <= b["t"] < 9) / 6    # 30 requests/s for 6 s
print("step" if high > 3 * low and 20 < high < 40 else f"no step: {low:.1f} -> {high:.1f}")
PY
)
expect_eq "burst: per-second series shows 5 -> 30 requests/s" "$step" "step"

# 3. Bad scenario files: file, line and reason; exit 2.
bad_toml() {  # NAME CONTENT WANT
    printf '%s\n' "$2" >"$TMP/$1.toml"
    B --scenario "$TMP/$1.toml" >"$TMP/$1.out" 2>&1
    local rc=$?
    if [ $rc -eq 2 ] && grep -q -- "$3" "$TMP/$1.out"; then ok "bad scenario: $1"; else bad "bad scenario: $1" "rc=$rc" "$(cat "$TMP/$1.out")"; fi
}
bad_toml unknown_key $'duration = "5s"\n[arrival]\nrate = 5\nrtae = 3\n[[class]]\ninput = 8\noutput = 4' "unknown_key.toml:4:[0-9]*: arrival.rtae: unknown key"
bad_toml wrong_type $'duration = "5s"\n[arrival]\nrate = 5\n[[class]]\ninput = "long"\noutput = 4' "wrong_type.toml:5:.*class\[0\].input: expected a number of tokens"
bad_toml negative_rate $'duration = "5s"\n[arrival]\nrate = -2\n[[class]]\ninput = 8\noutput = 4' "negative_rate.toml:3:.*arrival.rate: -2 is out of range"
bad_toml syntax $'duration = "5s"\n[arrival\nrate = 2' "syntax.toml:2:"
B --scenario "$TMP/missing.toml" >"$TMP/missing.out" 2>&1
expect_eq "missing scenario file: exit 2" "$?" "2"
expect_in "missing scenario file: says so" "cannot open scenario file" "$TMP/missing.out"

# 4. An unreachable server is reported, not a crash.
"$BIN" bench --url http://127.0.0.1:1 --rate 5 --requests 3 --db "$DB" --no-progress >"$TMP/unreach.out" 2>&1
expect_eq "unreachable: exit 2" "$?" "2"
expect_in "unreachable: says so" "cannot reach the server at http://127.0.0.1:1" "$TMP/unreach.out"
"$BIN" bench --url https://x --rate 5 --requests 3 --no-record >"$TMP/https.out" 2>&1
expect_eq "https URL refused: exit 2" "$?" "2"

# 5. Verdicts drive the exit status.
B --rate 20 --requests 10 --input-len 8 --output-len 4 --criteria "p99_ttft_ms < 0.001" --json "$TMP/fail.json" >"$TMP/fail.out" 2>&1
expect_eq "failing criterion: exit 1" "$?" "1"
expect_eq "failing criterion: verdict in JSON" "$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["verdict"], j["criteria"][0]["pass"])' "$TMP/fail.json")" "fail False"
B --rate 20 --requests 10 --input-len 8 --output-len 4 --criteria "p99_bogus_ms < 1" >"$TMP/badcrit.out" 2>&1
expect_eq "unknown criterion metric: exit 2" "$?" "2"

# 6. Baselines: save (3 repeats), compare, history.
B --rate 20 --requests 20 --input-len 16 --output-len 8 --repeat 3 --save-baseline e2e >"$TMP/save.out" 2>&1
expect_eq "save baseline: exit 0" "$?" "0"
expect_in "save baseline: 3 runs" "saved baseline 'e2e' (3 runs)" "$TMP/save.out"
B --rate 20 --requests 20 --input-len 16 --output-len 8 --compare e2e --json "$TMP/cmp.json" >"$TMP/cmp.out" 2>&1
rc=$?
if [ $rc -eq 0 ] || [ $rc -eq 1 ]; then ok "compare: ran (exit $rc)"; else bad "compare: ran" "rc=$rc" "$(cat "$TMP/cmp.out")"; fi
expect_in "compare: delta table" "regression verdict:" "$TMP/cmp.out"
expect_eq "compare: JSON comparison" "$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["comparison"]["baseline"], len(j["comparison"]["metrics"]) > 5)' "$TMP/cmp.json")" "e2e True"
B --rate 20 --requests 5 --input-len 16 --output-len 8 --compare nosuch >"$TMP/nosuch.out" 2>&1
expect_eq "compare with a missing baseline: exit 2" "$?" "2"
expect_in "compare with a missing baseline: lists saved ones" "saved baselines: e2e" "$TMP/nosuch.out"
"$BIN" bench history --db "$DB" >"$TMP/hist.out" 2>&1
expect_eq "history: exit 0" "$?" "0"
expect_in "history: lists the baseline runs" " e2e " "$TMP/hist.out"
expect_eq "history: one row per recorded run" "$(grep -c 'stories260K' "$TMP/hist.out")" "$(sqlite3 "$DB" 'select count(*) from runs' 2>/dev/null || python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from runs').fetchone()[0])" "$DB")"

# 7. Canary: the same workload interleaved over two endpoints, with a significance test.
start_server "$TMP/s2.log" || exit 1
URL2=http://127.0.0.1:$PORT
"$BIN" bench --compare-endpoints "$URL" "$URL2" --rate 20 --requests 40 --input-len 16 --output-len 8 --no-record \
    --no-progress --json "$TMP/ab.json" >"$TMP/ab.out" 2>&1
rc=$?
if [ $rc -eq 0 ] || [ $rc -eq 1 ]; then ok "compare-endpoints: ran (exit $rc)"; else bad "compare-endpoints: ran" "rc=$rc" "$(cat "$TMP/ab.out")"; fi
expect_eq "compare-endpoints: 20 requests each, p-values" "$(python3 -c '
import json,sys; j=json.load(open(sys.argv[1]))
print(j["a"]["requests"]["sent"], j["b"]["requests"]["sent"], all(0 <= c["p_value"] <= 1 for c in j["comparison"]), len(j["comparison"]))' "$TMP/ab.json")" "20 20 True 3"

# 8. Sweep: capacity at SLO.
"$BIN" bench sweep --url "$URL" --rates 4,8 --duration 3s --input-len 16 --output-len 8 --no-progress \
    --criteria "error_rate < 0.01" --json "$TMP/sweep.json" >"$TMP/sweep.out" 2>&1
expect_eq "sweep: exit 0" "$?" "0"
expect_in "sweep: capacity line" "capacity at SLO: 8 requests/s" "$TMP/sweep.out"

# 9. Closed loop, chat endpoint, trace replay.
B --concurrency 4 --requests 16 --input-len 16 --output-len 8 --json "$TMP/closed.json" >"$TMP/closed.out" 2>&1
expect_eq "closed loop: 16 completed" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"]["completed"])' "$TMP/closed.json")" "16"
# Token chunks counted by the client's quick scan equal the server's usage (the finish chunk
# with empty text is not a token), the server CPU per streamed token is reported, and so are
# its socket writes: at most one a token (the last token goes out with the stream's end).
expect_eq "closed loop: token chunks match usage, CPU and writes per token reported" "$(python3 -c '
import json,sys; j=json.load(open(sys.argv[1]))
print(j["usage_mismatches"], j["server_cpu_us_per_token"] > 0, 0 < j["server_stream_writes_per_token"] <= 1)' "$TMP/closed.json")" "0 True True"
B --rate 20 --requests 6 --input-len 16 --output-len 8 --endpoint chat --json "$TMP/chat.json" --save-requests "$TMP/chat.jsonl" >"$TMP/chat.out" 2>&1
expect_eq "chat endpoint: 6 completed, 8 tokens each" "$(python3 -c '
import json,sys; j=json.load(open(sys.argv[1])); r=[json.loads(l) for l in open(sys.argv[2])]
print(j["requests"]["completed"], set(x["completion_tokens"] for x in r), all(1 <= x["token_chunks"] <= 8 for x in r))' "$TMP/chat.json" "$TMP/chat.jsonl")" "6 {8} True"
printf '%s\n' '{"timestamp": 100.0, "input_len": 20, "output_len": 5}' '{"timestamp": 100.5, "input_len": 30, "output_len": 6}' \
    '{"timestamp": 101.0, "prompt": "Once upon a time", "output_len": 7}' >"$TMP/trace.jsonl"
printf '[arrival]\nprocess = "trace"\ntrace = "%s"\n' "$TMP/trace.jsonl" >"$TMP/trace.toml"
B --scenario "$TMP/trace.toml" --save-requests "$TMP/trace.out.jsonl" >"$TMP/trace.out" 2>&1
expect_eq "trace replay: exit 0" "$?" "0"
expect_eq "trace replay: lengths and timing" "$(python3 -c '
import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]
print([x["completion_tokens"] for x in r], [x["prompt_tokens"] for x in r][:2], [round(x["scheduled_s"],1) for x in r])' "$TMP/trace.out.jsonl")" "[5, 6, 7] [20, 30] [0.0, 0.5, 1.0]"

# 10. Errors are counted by kind, and the stop condition aborts the run: a server that admits
#     one request and queues one refuses most of a burst with 429.
start_server "$TMP/s3.log" --max-num-seqs 1 --max-waiting-requests 1 || exit 1
URL3=http://127.0.0.1:$PORT
printf '%s\n' 'requests = 200' '[arrival]' 'process = "constant"' 'rate = 400' '[[class]]' 'input = 8' 'output = 200' \
    '[stop]' 'error_rate = 0.3' >"$TMP/overload.toml"
"$BIN" bench --url "$URL3" --scenario "$TMP/overload.toml" --no-record --no-progress --json "$TMP/overload.json" \
    >"$TMP/overload.out" 2>&1
rc=$?
expect_eq "overload: aborted run is a fail (exit 1)" "$rc" "1"
expect_eq "overload: 429s counted as http_4xx, run aborted by the stop condition" "$(python3 -c '
import json,sys; j=json.load(open(sys.argv[1]))
print(j["errors"].get("http_4xx", 0) > 0, j["error_rate"] > 0.3, j["aborted"] is not None and "stop bound" in j["aborted"], j["requests"]["sent"] < 200)' "$TMP/overload.json")" "True True True True"
expect_in "overload: terminal says why it stopped" "ABORTED: error rate" "$TMP/overload.out"

# 10b. --timeout bounds the silence a request meets, queueing included: on a slow simulated
#      card serving one sequence at a time, the second of two requests waits ~0.8 s.
start_server "$TMP/s5.log" --backend sim --sim-speed 0.05 --max-num-seqs 1 --warmup off || exit 1
"$BIN" bench --url "$(URL "")" --concurrency 2 --requests 2 --input-len 8 --output-len 4 --timeout 0.5s \
    --no-record --no-progress --json "$TMP/to.json" >"$TMP/to.out" 2>&1
expect_eq "--timeout 0.5s: the queued request counts as a timeout" \
    "$(jq_ 'd["requests"]["completed"], d["errors"]' <"$TMP/to.json")" "(1, {'timeout': 1})"
"$BIN" bench --url "$(URL "")" --concurrency 2 --requests 2 --input-len 8 --output-len 4 \
    --no-record --no-progress --json "$TMP/to2.json" >"$TMP/to2.out" 2>&1
expect_eq "default timeout: both served" "$(jq_ 'd["requests"]["completed"], d["errors"]' <"$TMP/to2.json")" "(2, {})"

# 11. API keys, the model's own tokenizer (--tokenizer) and a dataset class.
start_server "$TMP/s4.log" --api-key sekrit || exit 1
URL4=http://127.0.0.1:$PORT
"$BIN" bench --url "$URL4" --rate 20 --requests 3 --input-len 8 --output-len 2 --no-record --no-progress >"$TMP/nokey.out" 2>&1
expect_eq "API key missing: exit 2" "$?" "2"
expect_in "API key missing: says what to do" "pass the right --api-key" "$TMP/nokey.out"
printf '%s\n' '{"prompt": "Once upon a time there was a dog", "output_len": 3}' '{"prompt": "The sun was warm"}' >"$TMP/prompts.jsonl"
printf '%s\n' 'requests = 12' '[arrival]' 'rate = 30' '[[class]]' 'name = "synth"' 'input = 24' 'output = 4' \
    '[[class]]' 'name = "data"' "dataset = \"$TMP/prompts.jsonl\"" 'output = 5' >"$TMP/data.toml"
"$BIN" bench --url "$URL4" --api-key sekrit --scenario "$TMP/data.toml" --tokenizer "$MODEL" --no-record --no-progress \
    --save-requests "$TMP/data.jsonl" --json "$TMP/data.json" >"$TMP/data.out" 2>&1
expect_eq "API key, --tokenizer, dataset: exit 0" "$?" "0"
expect_eq "--tokenizer lengths exact; dataset prompts and output_len used" "$(python3 -c '
import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]
s=[x for x in r if x["class"]=="synth"]; d=[x for x in r if x["class"]=="data"]
print(len(s)+len(d), all(x["prompt_tokens"]==24 for x in s), all((x["prompt_tokens"], x["completion_tokens"]) in ((10, 3), (8, 5)) for x in d) if d else "no data rows")' "$TMP/data.jsonl")" "12 True True"

# Trace replay: lengths up to 14k tokens against the bundled model's 2048-token context.
python3 -c '
import json, random
random.seed(1); t = 0.0
with open("'"$TMP"'/trace.jsonl", "w") as f:
    for i in range(40):
        t += random.expovariate(20)
        f.write(json.dumps({"timestamp": round(t, 4), "input_len": random.randint(100, 14000), "output_len": random.randint(20, 240)}) + "\n")
'
start_server "$TMP/s5.log" || exit 1
URL5=http://127.0.0.1:$PORT
"$BIN" bench --url "$URL5" --trace "$TMP/trace.jsonl" --no-record --no-progress >"$TMP/tr0.out" 2>&1
expect_eq "trace over the context: exit 2" "$?" "2"
expect_in "says how many and which flag fixes it" "of 40 trace requests ask for more than the server's max_model_len 2048.*--length-scale 0.1" "$TMP/tr0.out"
"$BIN" bench --url "$URL5" --trace "$TMP/trace.jsonl" --length-scale 0.1 --speed 2 --no-record --no-progress --json "$TMP/tr1.json" >"$TMP/tr1.out" 2>&1
expect_eq "--length-scale 0.1 --speed 2: every request served" "$(jq_ '(d["requests"]["sent"], d["requests"]["failed"], d["trace"]["length_scale"], d["trace"]["speed"])' <"$TMP/tr1.json")" "(40, 0, 0.1, 2.0)"
"$BIN" bench --url "$URL5" --trace "$TMP/trace.jsonl" --on-overlong skip --no-record --no-progress --json "$TMP/tr2.json" >"$TMP/tr2.out" 2>&1
expect_eq "--on-overlong skip: the rest served, the count reported" "$(jq_ '(d["requests"]["sent"] + d["trace"]["skipped"], d["requests"]["failed"], d["trace"]["skipped"] > 0)' <"$TMP/tr2.json")" "(40, 0, True)"
"$BIN" bench --url "$URL5" --preset 1k --speed 2 --no-record >"$TMP/tr3.out" 2>&1
expect_eq "--speed on a non-trace run: exit 2" "$?" "2"
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null

echo "bench e2e: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

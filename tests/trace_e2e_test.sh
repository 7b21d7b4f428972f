#!/usr/bin/env bash
# End-to-end tests of trace replay (issue 17): a 1,000-request Azure-format trace with
# prompts up to 14k tokens replayed against the bundled model with --length-scale 0.1 and
# --speed 10 (zero failures, a tenth of the span), then with lengths that do not fit and
# --on-overlong skip (the count reported); BurstGPT and Mooncake files replayed; a bad
# trace refused with file, line and exit 2; trace-stats on a generated day reproducing
# its rate curve.
# Usage: trace_e2e_test.sh PAGODA_BIN SOURCE_DIR
set -uo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/e2e_lib.sh"

python3 - "$TMP" <<'PY'
import math, random, sys
d = sys.argv[1]
rng = random.Random(3)
# Azure: 1000 requests over 100 s, prompts log-normal up to 14k tokens.
with open(f"{d}/azure.csv", "w") as f:
    f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    for i in range(1000):
        inp = 14000 if i == 500 else min(14000, max(1, int(rng.lognormvariate(math.log(1500), 1.0))))
        s = i * 0.1
        f.write(f"2024-05-10 00:{int(s // 60):02d}:{s % 60:010.7f},{inp},{rng.randint(1, 120)}\n")
with open(f"{d}/burst.csv", "w") as f:
    f.write("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
    for i in range(60):
        model = "ChatGPT" if i % 3 else "GPT-4"
        out = 0 if i % 10 == 7 else rng.randint(1, 40)
        inp = rng.randint(1, 300)
        f.write(f"{i * 0.05:.2f},{model},{inp},{out},{inp + out},Conversation log\n")
with open(f"{d}/mooncake.jsonl", "w") as f:
    for i in range(40):
        ids = [1, 2] + [100 + i] if i % 2 else [3, 200 + i]
        f.write('{"timestamp": %d, "input_length": %d, "output_length": 8, "hash_ids": %s}\n'
                % (i * 50, 512 * len(ids), ids))
PY

start_server "$TMP/s.log" || exit 1
"$BIN" bench --url "$(URL "")" --trace "$TMP/azure.csv" --length-scale 0.1 --speed 10 \
    --no-progress --json "$TMP/a.json" >"$TMP/a.log" 2>&1
expect_eq "1,000 Azure requests up to 14k tokens at --length-scale 0.1 replay" "$?" "0"
expect_eq "with zero failures" "$(jq_ 'd["requests"]["failed"], d["requests"]["completed"], d["errors"]' <"$TMP/a.json")" "(0, 1000, {})"
expect_eq "--speed 10 sends the 100 s span in a tenth (the last send in second 10, on time)" \
    "$(jq_ 'max(i for i, s in enumerate(d["series"]) if s["sent"] > 0) < 10 + d["client"]["send_lag_max_ms"] / 1000 and d["trace"]["speed"] == 10' <"$TMP/a.json")" "True"
"$BIN" bench --url "$(URL "")" --trace "$TMP/azure.csv" --length-scale 0.2 --speed 20 \
    --no-progress --json "$TMP/o.json" >"$TMP/o.log" 2>&1
expect_eq "too long at --length-scale 0.2: refused (exit 2)" "$?" "2"
expect_in "saying which flag fixes it" "length-scale\|on-overlong" "$TMP/o.log"
"$BIN" bench --url "$(URL "")" --trace "$TMP/azure.csv" --length-scale 0.2 --speed 5 \
    --on-overlong skip --no-progress --json "$TMP/k.json" >"$TMP/k.log" 2>&1 # (20 s)
expect_eq "--on-overlong skip replays the rest" "$?" "0"
expect_eq "the skipped count is reported, zero failures" \
    "$(jq_ 'd["trace"]["skipped"] > 0, d["requests"]["failed"], d["requests"]["sent"] + d["trace"]["skipped"], d["errors"]' <"$TMP/k.json")" "(True, 0, 1000, {})"

"$BIN" bench --url "$(URL "")" --trace "$TMP/burst.csv" --trace-model ChatGPT --no-progress \
    --json "$TMP/b.json" >"$TMP/b.log" 2>&1
expect_eq "BurstGPT: ChatGPT rows only, failed (0-token) rows skipped" \
    "$(jq_ 'd["requests"]["sent"], d["requests"]["failed"]' <"$TMP/b.json")" "(36, 0)"
"$BIN" bench --url "$(URL "")" --trace "$TMP/mooncake.jsonl" --length-scale 0.1 --no-progress \
    --json "$TMP/m.json" >"$TMP/m.log" 2>&1
expect_eq "Mooncake: replayed" "$(jq_ 'd["requests"]["completed"]' <"$TMP/m.json")" "40"
"$BIN" bench trace-stats "$TMP/mooncake.jsonl" --json >"$TMP/ms.json"
expect_eq "trace-stats: Mooncake prefix sharing" \
    "$(jq_ 'd["prefix_sharing"]["requests_sharing_a_prefix"], d["prefix_sharing"]["distinct_blocks"]' <"$TMP/ms.json")" "(38, 43)"

printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:01,10,5\n2024-05-10 00:00:00,10,5\n' >"$TMP/unsorted.csv"
"$BIN" bench --url "$(URL "")" --trace "$TMP/unsorted.csv" --no-progress >"$TMP/u.log" 2>&1
expect_eq "an unsorted trace: exit 2" "$?" "2"
expect_in "one line naming file, line and problem" "unsorted.csv:3: timestamps must be in order" "$TMP/u.log"
"$BIN" bench --url "$(URL "")" --trace "$TMP/azure.csv" --time-window 5m-6m --no-progress >"$TMP/w.log" 2>&1
expect_eq "an empty --time-window: exit 2" "$?" "2"
expect_in "saying so" "no requests in the trace within --time-window" "$TMP/w.log"

python3 "$SRC/scripts/gen-daynight-trace.py" --days 1 --noise 0 --bursts-per-day 0 \
    --out "$TMP/day.jsonl" 2>/dev/null
"$BIN" bench trace-stats "$TMP/day.jsonl" --json >"$TMP/ds.json"
# The curve: 0.1 req/s on the afternoon plateau, 0.01 at night (Poisson around them).
expect_eq "trace-stats reproduces the generated rate curve" \
    "$(jq_ 'r = d["rps_per_minute"]; (abs(sum(r[840:960]) / 120 - 0.1) < 0.015, abs(sum(r[60:300]) / 240 - 0.01) < 0.004)' <"$TMP/ds.json" 2>/dev/null || python3 -c "
import json; d = json.load(open('$TMP/ds.json')); r = d['rps_per_minute']
print((abs(sum(r[840:960]) / 120 - 0.1) < 0.015, abs(sum(r[60:300]) / 240 - 0.01) < 0.004))")" "(True, True)"

echo "trace_e2e_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

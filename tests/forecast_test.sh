#!/usr/bin/env bash
# End-to-end test of the predictive warmup tier (issue 15): a generated 9-day day/night
# trace, its first 8 days and 5 hours imported as rate history, the forecasters' backtest
# (per-model errors, the choice), then the Tuesday-morning rise replayed at 120x against a
# replica whose forecast clock runs at the same speed: the pre-warm must start before the
# replica itself observes the rise, and the bench HTML report must chart rate, forecast and
# warm level. Bad flags and a corrupt history are refused with a reason.
# Usage: forecast_test.sh PAGODA_BIN SOURCE_DIR
set -uo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/e2e_lib.sh"
# sql DB STATEMENT: the first value of the answer (python's sqlite3: no sqlite3 CLI needed).
sql() { python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2]).fetchall(); c.commit(); print(r[0][0] if r else "")' "$1" "$2"; }

python3 "$SRC/scripts/gen-daynight-trace.py" --days 9 --out "$TMP/dn.jsonl" 2>"$TMP/gen.log"
expect_in "the generator writes nine days" "over 9 days" "$TMP/gen.log"
"$BIN" forecast backtest "$TMP/dn.jsonl" --until "$(date -ud 2026-12-01T05:00:00Z +%s)" --json >"$TMP/bt.json"
expect_eq "backtest: an error for each of the four models" \
    "$(jq_ 'sorted(m["model"] for m in d["models"] if m["mae_rps"] is not None)' <"$TMP/bt.json")" \
    "['holt_winters_1440m', 'lstm', 'seasonal_naive_10080m', 'seasonal_naive_1440m']"
expect_eq "and the lowest error is chosen" \
    "$(jq_ 'd["chosen"] == min((m for m in d["models"] if m["mae_rps"] is not None), key=lambda m: m["mae_rps"])["model"]' <"$TMP/bt.json")" "True"
expect_eq "the LSTM's training loss fell" "$(jq_ 'd["lstm_loss"]["last"] < d["lstm_loss"]["first"]' <"$TMP/bt.json")" "True"
echo '{"timestamp": "noon", "input_len": 5, "output_len": 5}' >"$TMP/badtrace.jsonl"
"$BIN" forecast import "$TMP/badtrace.jsonl" --state-dir "$TMP/bad" 2>"$TMP/bad.log"
expect_eq "a trace without numeric timestamps is refused" "$?" "1"
expect_in "naming file and line" "badtrace.jsonl:1:" "$TMP/bad.log"
"$BIN" serve -m "$MODEL" --port 0 --prewarm-rise 0.5 2>"$TMP/bad.log"
expect_in "a rise factor of at most 1 is refused" "must be in (1, 100]" "$TMP/bad.log"
"$BIN" serve -m "$MODEL" --port 0 --forecast-clock-start yesterday 2>"$TMP/bad.log"
expect_in "so is a clock start that is not a time" "neither unix seconds nor a UTC time" "$TMP/bad.log"

START=$(date -ud 2026-12-01T05:00:00Z +%s)
"$BIN" forecast import "$TMP/dn.jsonl" --until "$START" --state-dir "$TMP/fc" >"$TMP/import.log"
expect_in "import: the history up to the replay" "imported 11818 minutes" "$TMP/import.log"
mkdir -p "$TMP/corrupt" && cp -r "$TMP/fc/." "$TMP/corrupt/"
sql "$TMP/corrupt/pagoda.db" "UPDATE rate_history SET requests = -3 WHERE minute = 29923300" >/dev/null
"$BIN" serve -m "$MODEL" --port 0 --state-dir "$TMP/corrupt" 2>"$TMP/bad.log"
expect_in "a corrupt history stops the start, naming the row" "minute 29923300 holds a negative count" "$TMP/bad.log"

start_server "$TMP/s.log" --state-dir "$TMP/fc" --forecast-clock-scale 120 \
    --forecast-clock-start 2026-12-01T05:00:00Z || exit 1
for _ in $(seq 100); do
    curl -s "$(URL /admin/forecast)" >"$TMP/f.json"
    [ "$(jq_ 'd["model"] is not None' <"$TMP/f.json")" == "True" ] && break
    sleep 0.1
done
expect_eq "GET /admin/forecast: a model is chosen from the stored history" "$(jq_ 'd["mode"]' <"$TMP/f.json")" "predictive"
expect_eq "with each model's backtest error" "$(jq_ 'len([m for m in d["backtest"]["models"] if m["mae_rps"] is not None])' <"$TMP/f.json")" "4"
expect_eq "and 30 minutes forecast" "$(jq_ 'len(d["forecast"])' <"$TMP/f.json")" "30"
curl -s "$(URL /metrics)" >"$TMP/m.txt"
expect_in "pagoda_forecast_requests_per_second{horizon}" 'pagoda_forecast_requests_per_second{.*horizon="15m"' "$TMP/m.txt"
expect_in "pagoda_forecast_recommended_replicas" '^pagoda_forecast_recommended_replicas{' "$TMP/m.txt"
if command -v promtool >/dev/null; then
    promtool check metrics <"$TMP/m.txt" >"$TMP/promtool.log" 2>&1
    expect_eq "promtool accepts the forecast metrics" \
        "$(grep -c 'forecast' "$TMP/promtool.log")" "0"
fi

# 05:00 to 07:30 of the Tuesday at 120x: 75 s. The trace's rate starts to rise at 06:00.
"$BIN" bench --url "$(URL "")" --trace "$TMP/dn.jsonl" --time-window 8d5h-8d7h30m --speed 120 \
    --length-scale 0.1 --no-progress --json "$TMP/r.json" --html "$TMP/r.html" >"$TMP/bench.log" 2>&1
expect_eq "the replay ran" "$?" "0"
curl -s "$(URL '/admin/events?kind=warm_level&limit=200')" >"$TMP/ev.json"
expect_eq "a predictive warm level, audited with the forecast as reason" \
    "$(jq_ 'any(e["detail"]["tier"] == "predictive" and e["detail"]["reason"].startswith("forecast: ") for e in d["events"])' <"$TMP/ev.json")" "True"
# From the bench's server timeline: the first second the level was up, and the first second
# the replica's own observed rate (last 10 minutes) passed the rise threshold.
jq_ '[(s["t"], s.get("warm_level", 0), s.get("observed_rps", 0)) for s in d["server_timeline"]]' \
    <"$TMP/r.json" >"$TMP/tl.txt"
THR=$(jq_ '[e["detail"]["reason"] for e in d["events"] if e["detail"]["tier"] == "predictive"][-1].split("rise at ")[1].rstrip(")")' <"$TMP/ev.json")
expect_eq "pre-warm starts before the rise is observed" "$(python3 -c "
tl = $(cat "$TMP/tl.txt")
warm = next((t for t, w, o in tl if w >= 1), None)
rise = next((t for t, w, o in tl if o >= $THR), None)
print(warm is not None and rise is not None and warm < rise, warm, rise)" | cut -d' ' -f1)" "True"
expect_in "the HTML report charts rate and forecast" "Offered rate and forecast" "$TMP/r.html"
expect_in "and the warm level" "warm level (0 off - 4 full)" "$TMP/r.html"
expect_eq "the history grew by the replayed minutes" \
    "$(sql "$TMP/fc/pagoda.db" 'select count(*) > 11818 + 100 from rate_history')" "1"
expect_eq "warm seconds of the predictive tier" \
    "$(curl -s "$(URL /metrics)" | grep -c '^pagoda_warmup_seconds_total{.*tier="predictive"')" "1"

echo "forecast_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

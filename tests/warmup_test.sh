#!/usr/bin/env bash
# End-to-end tests of the warmup tiers (issue 15, first part): --warmup off|minimal|full,
# bad warm flags refused at start, GET/POST /admin/warmup, the dynamic tier raising the warm
# level under a queue within one control tick and decaying after its window, the warm
# metrics, the level's idle spin (pagoda_warmup_cpu_seconds_total grows only while warm) and
# warm passes at high.
# Usage: warmup_test.sh PAGODA_BIN SOURCE_DIR
set -uo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/e2e_lib.sh"
req() {  # METHOD PATH [BODY]: body to $TMP/body, prints the status
    curl -s -o "$TMP/body" -w '%{http_code}' -X "$1" "$(URL "$2")" \
        -H 'Content-Type: application/json' ${3:+-d "$3"}
}
metric() { curl -s "$(URL /metrics)" | grep "^$1" | awk '{print $2}' | head -1; }

"$BIN" serve -m "$MODEL" --port 0 --warm-thresholds 5,5,20 2>"$TMP/bad.log"
expect_eq "thresholds that do not increase stop the start" "$?" "1"
expect_in "saying what is allowed" "must be increasing" "$TMP/bad.log"
"$BIN" serve -m "$MODEL" --port 0 --warm-spin-ms 0,100 2>"$TMP/bad.log"
expect_in "a spin list of the wrong length is refused" "has 2 values, expected 4" "$TMP/bad.log"

start_server "$TMP/off.log" --warmup off || exit 1
expect_in "--warmup off skips the startup warmup" 'warmup="off"' "$TMP/off.log"
expect_eq "and serves" "$(curl -s -o /dev/null -w '%{http_code}' "$(URL /v1/completions)" -d '{"prompt":"Once","max_tokens":2}')" "200"
start_server "$TMP/full.log" --warmup full || exit 1
expect_in "--warmup full faults in the KV pool" "KV pool faulted in" "$TMP/full.log"
# The weight cache (issue 20): the first start packs and writes it in the state directory,
# the next one maps it; --no-weight-cache does neither.
start_server "$TMP/wc1.log" --warmup off --state-dir "$TMP/wc" || exit 1
expect_in "the first start writes the weight cache" "weight_cache=writing path=$TMP/wc/weight-cache/stories260K.gguf." "$TMP/wc1.log"
start_server "$TMP/wc2.log" --warmup off --state-dir "$TMP/wc2" --weight-cache-dir "$TMP/wc/weight-cache" || exit 1
expect_in "the next start maps it" "weight_cache=hit path=$TMP/wc/weight-cache/stories260K.gguf." "$TMP/wc2.log"
start_server "$TMP/nocache.log" --warmup off --no-weight-cache || exit 1
expect_in "--no-weight-cache packs" "weight_cache=off" "$TMP/nocache.log"

start_server "$TMP/s.log" --max-num-seqs 2 --warm-seconds-per-request 0.05 || exit 1
expect_eq "cold at start" "$(metric pagoda_warm_level)" "0"
expect_eq "a bad level is a 400" "$(req POST /admin/warmup '{"level": "warm"}')" "400"
expect_in "naming the levels" "off, low, medium, high, full" "$TMP/body"
expect_eq "a manual level" "$(req POST /admin/warmup '{"level": "low", "duration": "4s"}'; jq_ 'd["level"]' <"$TMP/body")" "200low"
# Idle, the engine spins once per wake-up, each spin bounded by low's 100 ms: once per 1 s
# wait, and once after each request that wakes it (the four reads below). A 2.5 s window
# holds at most four periodic spins and three from the reads: at most 0.7 s of spin, so at
# most 1.4 CPU-s on the two pool threads, where high would take about 5 CPU-s. Measured in
# CPU, not wall time: on a loaded host the spinners (SCHED_IDLE) are rarely scheduled, so
# a 100 ms spin can last longer in wall time while taking almost no CPU.
wall() { req GET /admin/warmup >/dev/null; jq_ 'd["idle_spin_seconds_total"]' <"$TMP/body"; }
sleep 1.2  # the window starts once the engine's idle loop has gone round at the new level
spin0=$(metric pagoda_warmup_cpu_seconds_total); wall0=$(wall)
sleep 2.5
spin1=$(metric pagoda_warmup_cpu_seconds_total); wall1=$(wall)
expect_eq "low spins when idle" "$(python3 -c "print($wall1 - $wall0 > 0)")" "True"
expect_eq "each spin bounded by low's 100 ms" \
    "$(python3 -c "c = $spin1 - $spin0; print(True if c <= 1.5 else f'{c:.2f} CPU-s, {$wall1 - $wall0:.2f} s spun')")" "True"
for _ in $(seq 50); do [ "$(req GET /admin/warmup >/dev/null; jq_ 'd["level"]' <"$TMP/body")" == off ] && break; sleep 0.1; done
expect_eq "the manual level ends after its duration" "$(req GET /admin/warmup >/dev/null; jq_ 'd["level"]' <"$TMP/body")" "off"
spin2=$(metric pagoda_warmup_cpu_seconds_total)
sleep 1
expect_eq "off costs no CPU idle" "$(metric pagoda_warmup_cpu_seconds_total)" "$spin2"
# Warm passes: none below high; at high the idle engine runs its own small forward passes
# (one per 100 ms of spin), and a request during them is served as usual.
passes() { curl -s "$(URL /metrics)" | grep "^pagoda_warm_passes_total{.*outcome=\"$1\"" | awk '{print $2}'; }
expect_eq "no warm passes below high" "$(passes completed)" "0"
req POST /admin/warmup '{"level": "high", "duration": "20s"}' >/dev/null
complete() { curl -s "$(URL /v1/completions)" -d '{"prompt":"Once upon a time","max_tokens":8,"temperature":0}' | jq_ 'd["choices"][0]["text"]'; }
golden=$(complete)  # the spin (and its passes) starts when the engine next runs out of work
for _ in $(seq 150); do python3 -c "import sys; sys.exit(float('$(passes completed)') < 3)" && break; sleep 0.2; done
expect_eq "high runs warm passes while idle" "$(python3 -c "print(float('$(passes completed)') >= 3)")" "True"
expect_eq "a request among the passes gets the same greedy text" "$(complete)" "$golden"
expect_eq "back to off" "$(req POST /admin/warmup '{"level": "off"}')" "200"
# Level full (the fleet's pre-warm): accepted at once, the full warmup (kernels of every
# batch bucket, engine rounds, the KV pool faulted in) on its own thread, then level full;
# the outcome is audited and counted.
expect_eq "full is accepted (202)" "$(req POST /admin/warmup '{"level": "full", "duration": "30s"}')" "202"
for _ in $(seq 100); do [ "$(req GET /admin/warmup >/dev/null; jq_ 'd["full_warmup"]["state"]' <"$TMP/body")" == done ] && break; sleep 0.1; done
expect_eq "then reports level full, its warmup done" "$(req GET /admin/warmup >/dev/null; jq_ '(d["level"], d["full_warmup"]["state"], "KV pool faulted in" in d["full_warmup"]["detail"])' <"$TMP/body")" "('full', 'done', True)"
expect_eq "pagoda_warm_level 4, one full warmup ok" "$(metric pagoda_warm_level),$(curl -s "$(URL /metrics)" | grep '^pagoda_warmup_full_total{.*outcome="ok"' | awk '{print $2}')" "4,1"
expect_eq "audited with its outcome" "$(req GET '/admin/audit?kind=warm_full' >/dev/null; jq_ '[e["detail"]["outcome"] for e in d["events"]]' <"$TMP/body")" "['ok', 'started']"
expect_eq "a request at level full gets the same greedy text" "$(complete)" "$golden"
req POST /admin/warmup '{"level": "off"}' >/dev/null
# The burst preset (50 -> 300 -> 50 requests/s, scaled by 0.3 and stretched to 12 s) against
# two sequences at a time: the queue passes 5 within the second phase.
"$BIN" bench --url "$(URL "")" --preset burst --scale 0.3 --duration 12s --no-progress \
    >"$TMP/bench.log" 2>&1 &
LOAD=$!
python3 - "$(URL /metrics)" >"$TMP/rise.txt" <<'PY'
import sys, time, urllib.request
url, samples, t0 = sys.argv[1], [], time.time()
def gauge(text, name):
    return next((float(l.split()[-1]) for l in text.splitlines() if l.startswith(name)), 0.0)
while time.time() - t0 < 14:
    text = urllib.request.urlopen(url).read().decode()
    samples.append((time.time(), gauge(text, "vllm:num_requests_waiting"), gauge(text, "pagoda_warm_level")))
    if samples[-1][2] > 0: break
    time.sleep(0.05)
t_warm = samples[-1][0] if samples[-1][2] > 0 else None
# The tick reads the queue once a second: the level must be up before the queue has stayed
# above 5 for a whole tick (plus scrape slack) without it.
deep_since, late = None, False
for t, waiting, level in samples:
    if level > 0: break
    deep_since = (deep_since or t) if waiting > 5 else None
    if deep_since is not None and t - deep_since > 1.2: late = True
print("yes" if t_warm else "no", "late" if late else "within")
PY
expect_eq "the burst preset raises the level" "$(cut -d' ' -f1 "$TMP/rise.txt")" "yes"
expect_eq "within one evaluation period (the 1 s tick) of a deep queue" "$(cut -d' ' -f2 "$TMP/rise.txt")" "within"
wait "$LOAD"
for _ in $(seq 300); do [ "$(metric pagoda_warm_level)" == "0" ] && break; sleep 0.1; done
expect_eq "it decays after its window" "$(metric pagoda_warm_level)" "0"
curl -s "$(URL '/admin/events?kind=warm_level&limit=50')" >"$TMP/ev"
expect_eq "level changes are audited with their reason" "$(jq_ 'any(e["detail"]["reason"].startswith("queue ") for e in d["events"]) and any(e["detail"]["reason"] == "window ended" for e in d["events"])' <"$TMP/ev")" "True"
expect_eq "warm seconds by tier" "$(curl -s "$(URL /metrics)" | grep -c '^pagoda_warmup_seconds_total{.*tier=')" "4"
expect_eq "the idle wake-up penalty histogram is published" "$(curl -s "$(URL /metrics)" | grep -c '^pagoda_idle_wakeup_seconds_count')" "1"

echo "warmup_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

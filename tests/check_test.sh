#!/usr/bin/env bash
# `pagoda check`, the pre-deployment checklist: on a freshly started replica it names what
# is missing (exit 1, each miss with its fix; --json says the same); on a fleet prepared as
# docs/operations.md ("Before going live") says, all six items pass: sizing (a recorded
# baseline), block size decided from observed lengths, warmup, monitoring (a real Prometheus
# scraping the fleet with the exported rules), fallback (stable versions, a standby pool),
# and the newest bench run within the baseline's tolerance.
# Usage: check_test.sh PAGODA_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/e2e_lib.sh"
export XDG_DATA_HOME="$TMP/data"  # the bench baseline store
command -v prometheus >/dev/null || { echo "FAIL prometheus is missing: run scripts/install-deps.sh"; exit 1; }

# 1. A freshly started replica: what is missing, named.
start_server "$TMP/fresh.log" || exit 1
"$BIN" check --url "$(URL "")" >"$TMP/fresh.out" 2>&1
expect_eq "a fresh replica fails the check" "$?" "1"
cat "$TMP/fresh.out"
for item in sizing block_size monitoring fallback baseline; do
    expect_in "names $item as missing" "^MISS $item" "$TMP/fresh.out"
done
expect_in "the warmup before ready passes" "^ok   warmup .*4/4 API requests" "$TMP/fresh.out"
expect_in "a miss says what to do" "fix: serve representative traffic, then POST /admin/block-size/decide" "$TMP/fresh.out"
"$BIN" check --url "$(URL "")" --json >"$TMP/fresh.json"
expect_eq "--json: the same verdicts" "$(jq_ '[(i["name"], i["ok"]) for i in d["items"]], d["ok"]' <"$TMP/fresh.json")" \
    "([('sizing', False), ('block_size', False), ('warmup', True), ('monitoring', False), ('fallback', False), ('baseline', False)], False)"
expect_eq "an unreachable replica exits 2" "$("$BIN" check --url http://127.0.0.1:1 >/dev/null 2>&1; echo $?)" "2"

# 2. A fleet prepared as docs/operations.md says (sim replicas: their step times are
# modelled, so two bench runs compare on the fleet, not on this machine's other load).
BASE=$((31000 + ($$ % 300) * 10))
RPORT=$((BASE + 9))
PPORT=$((BASE + 8))
cat >"$TMP/prod.toml" <<TOML
[fleet]
name = "prod"
base_port = $BASE
state_dir = "$TMP/state-prod"
prometheus_url = "http://127.0.0.1:$PPORT"

[profiles.gpu]
backend = "sim"
sim-gpu = "a100-80g"
sim-model = "llama-3.1-8b"
stable-window = "2s"
block-size-policy = "seed"

[router]
port = $RPORT
health_interval_s = 0.2

[[router.pools]]
name = "main"
profile = "gpu"
replicas = 2

[[router.pools]]
name = "standby"
role = "standby"
profile = "gpu"
replicas = 1
TOML
"$BIN" fleet up "$TMP/prod.toml" 2>"$TMP/fleet.log" &
PIDS+=($!)
R="http://127.0.0.1:$RPORT"
for _ in $(seq 300); do
    [ "$(curl -s "$R/admin/pools" | jq_ 'sum(1 for p in d["pools"] for b in p["backends"] if b["ready"])' 2>/dev/null)" == "3" ] && break
    sleep 0.1
done
"$BIN" check --fleet "$TMP/prod.toml" >"$TMP/before.out" 2>&1
expect_eq "the fleet before preparation fails" "$?" "1"
# Monitoring: Prometheus scraping every replica and the router, the exported rules loaded.
"$BIN" rules export -o "$TMP/pagoda-rules.yml" 2>/dev/null
{
    printf 'global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [pagoda-rules.yml]\n'
    printf 'scrape_configs:\n  - job_name: pagoda\n    static_configs:\n      - targets: ['
    curl -s "$R/admin/pools" | jq_ '", ".join(chr(34) + b["url"][7:] + chr(34) for p in d["pools"] for b in p["backends"])'
    printf ']\n  - job_name: pagoda-router\n    static_configs:\n      - targets: ["127.0.0.1:%s"]\n' "$RPORT"
} >"$TMP/prometheus.yml"
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
    --web.listen-address="127.0.0.1:$PPORT" >"$TMP/prom.log" 2>&1 &
PIDS+=($!)
# Sizing and the baseline: a bench run saved as the baseline, then one compared with it.
"$BIN" bench --url "$R" --rate 40 --duration 8s --input-len 32 --output-len 16 --save-baseline prod >"$TMP/bench1.out" 2>&1
"$BIN" bench --url "$R" --rate 40 --duration 8s --input-len 32 --output-len 16 --compare prod --tolerance 0.5 >"$TMP/bench2.out" 2>&1
# Block size: the policy decides from the lengths it observed.
for u in $(curl -s "$R/admin/pools" | jq_ '" ".join(b["url"] for p in d["pools"] for b in p["backends"])'); do
    curl -s -X POST "$u/admin/block-size/decide" -d '{}' >/dev/null
done
# The standby saw no traffic: give it representative requests too, then decide.
S=$(curl -s "$R/admin/pools" | jq_ '[b["url"] for p in d["pools"] if p["role"] == "standby" for b in p["backends"]][0]')
"$BIN" bench --url "$S" --rate 60 --duration 3s --input-len 32 --output-len 8 --no-record >/dev/null 2>&1
curl -s -X POST "$S/admin/block-size/decide" -d '{}' >/dev/null
sleep 4  # versions become stable (stable-window 2s), Prometheus has scraped
"$BIN" check --fleet "$TMP/prod.toml" --tolerance 0.5 >"$TMP/prepared.out" 2>&1
code=$?
cat "$TMP/prepared.out"
expect_eq "the prepared fleet passes all six items" "$code $(tail -1 "$TMP/prepared.out")" "0 6/6 items pass"
expect_in "sizing rests on the recorded baseline" "^ok   sizing .*a recorded baseline" "$TMP/prepared.out"
expect_in "monitoring saw Prometheus scrape all four targets" "Prometheus scrapes 4/4 targets, Pagoda's rules loaded" "$TMP/prepared.out"
expect_in "fallback: stable versions and a standby pool" "3/3 replicas have a stable version to roll back to; a standby or DR pool" "$TMP/prepared.out"
expect_in "baseline: the compared run within tolerance" "against baseline 'prod': within 50%" "$TMP/prepared.out"
echo "check_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

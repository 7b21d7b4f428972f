#!/usr/bin/env bash
# End-to-end test of `pagoda rehearse` (issue 37): the built-in day at 96x prints the three
# arms and their ratios, writes the JSON (the fields scripts read) and the HTML report; a
# fault schedule is taken; bad input is refused with what is allowed.
# Usage: rehearse_test.sh PAGODA_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/e2e_lib.sh"

printf '[[fault]]\nkind = "kill"\nat = "10:30"\n\n[[fault]]\nkind = "slow"\nat = "14:00"\nduration = "20m"\nfactor = 2\n' >"$TMP/faults.toml"
"$BIN" rehearse -q --compress 96 --faults "$TMP/faults.toml" --slo "p99_ttft_ms<800,p99_tpot_ms<100" \
    --json "$TMP/r.json" --html "$TMP/r.html" >"$TMP/r.txt" 2>"$TMP/r.err"
expect_eq "rehearse exits 0" "$?" "0"
expect_in "the defaults arm" "^defaults " "$TMP/r.txt"
expect_in "the best_static arm" "^best_static " "$TMP/r.txt"
expect_in "the control arm" "^control " "$TMP/r.txt"
expect_in "the ratios" "goodput per replica-hour: control / best_static = " "$TMP/r.txt"
expect_in "24 hours" "^23:00" "$TMP/r.txt"
expect_eq "the JSON has every arm's fields" "$(jq_ 'all(isinstance(d["arms"][a][k], (int, float)) for a in ("defaults", "best_static", "control") for k in ("goodput_rps", "slo_attainment", "replica_hours", "goodput_per_replica_hour", "lost_accepted"))' <"$TMP/r.json")" "True"
expect_eq "no accepted request lost in any arm, through the kill" "$(jq_ '[d["arms"][a]["lost_accepted"] for a in ("defaults", "best_static", "control")]' <"$TMP/r.json")" "[0, 0, 0]"
expect_eq "the kill's streams resumed" "$(jq_ 'd["arms"]["control"]["resumed"] > 0' <"$TMP/r.json")" "True"
expect_eq "the control arm sized the pool (audited events)" "$(jq_ 'd["arms"]["control"]["actions"] > 0 and len(d["arms"]["control"]["events"]) > 0' <"$TMP/r.json")" "True"
expect_in "the HTML report draws the curves" "<polyline" "$TMP/r.html"
expect_in "a bad SLO says what is allowed" "allowed: p99_ttft_ms, p99_tpot_ms" <("$BIN" rehearse --slo "p50<3" 2>&1)
printf '[[fault]]\nkind = "melt"\nat = "10:30"\n' >"$TMP/bad.toml"
expect_in "a bad fault kind names the line and the kinds" "bad.toml:2:fault\[0\].kind: 'melt' is not a fault kind (allowed: kill, slow)" <("$BIN" rehearse --faults "$TMP/bad.toml" 2>&1)
# --fleet: the pool's sim card, model and sizing drive the control arm.
cat >"$TMP/fleet.toml" <<TOML
[profiles.sim]
backend = "sim"
sim-gpu = "h100-sxm"
sim-model = "llama-3-8b"

[router]
port = 9999

[[router.pools]]
name = "main"
profile = "sim"
min_replicas = 1
max_replicas = 3
cold_start_s = 120
TOML
"$BIN" rehearse -q --fleet "$TMP/fleet.toml" --compress 192 --json "$TMP/f.json" >"$TMP/f.txt" 2>&1
expect_eq "--fleet: the pool's card and the control arm within its max_replicas" "$(jq_ '(d["setup"]["gpu"], d["setup"]["cold_start_s"], max(h["mean_replicas"] for h in d["arms"]["control"]["hours"]) <= 3)' <"$TMP/f.json")" "('h100-sxm', 120.0, True)"

# The sim under load against the published vLLM figures: the fit and its errors.
"$BIN" sim loaded --fit >"$TMP/loaded.txt" 2>&1
expect_in "sim loaded: the fitted overhead per sequence" "overhead per sequence per step 0.13 ms" "$TMP/loaded.txt"
expect_eq "sim loaded: fit points within 20%, held-out within 30%" "$(python3 -c '
import re,sys
worst = {"fit": 0.0, "held out": 0.0}
for line in open(sys.argv[1]):
    role = "held out" if line.rstrip().endswith("held out") else "fit" if line.rstrip().endswith("fit") else None
    if role:
        for e in re.findall(r"([+-][0-9.]+)%", line):
            worst[role] = max(worst[role], abs(float(e)))
print(worst["fit"] < 20, worst["held out"] < 30)' "$TMP/loaded.txt")" "True True"
echo "rehearse_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

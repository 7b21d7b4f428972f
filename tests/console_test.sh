#!/usr/bin/env bash
# The operator's console (/ui) in Debian's headless Chromium (playwright-core from npm):
# on a replica under load the charts hold points that match /metrics (the requests/s chart
# integrates to the counter's increase; the tiles and the memory chart equal a scrape by
# curl once the load is over); a rollback clicked without the admin key is refused and
# leaves /admin/config as it was, with the key it changes it; on a router with two replicas
# the per-pool chart and the pools table show both. Screenshots (desktop and phone-sized)
# are left in $OUT for a person to look at.
# Usage: console_test.sh PAGODA_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/e2e_lib.sh"
OUT=${CONSOLE_TEST_OUTPUT:-$PWD/console_test_output}
mkdir -p "$OUT"
CHECK="$SRC/tests/e2e/console_check.mjs"
if ! [ -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
    echo "FAIL chromium is missing: run scripts/install-deps.sh"
    exit 1
fi
metric() {  # URL NAME: the sum of NAME's samples in one scrape
    curl -s "$1/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 { s += $NF } END { printf "%.6f\n", s }'
}
load() {  # URL N: N requests, 5 a second, 96 tokens each
    for _ in $(seq "$2"); do
        curl -s "$1/v1/completions" -d '{"prompt": "Once upon a time", "max_tokens": 96}' >/dev/null &
        sleep 0.2
    done
    wait
}

# 1. A replica under load.
start_server "$TMP/replica.log" --admin-api-key adm --admin-read-open || exit 1
R=$(URL "")
# The load starts once the console has scraped (watch writes .ready), and ends (6 s of
# arrivals) well inside the 14 s it watches.
watch_under_load() {  # URL PREFIX SECONDS OUT
    rm -f "$2.ready"
    node "$CHECK" watch "$1" "$2" "$3" >"$4" &
    local watcher=$!
    for _ in $(seq 600); do [ -f "$2.ready" ] && break; sleep 0.1; done
    (load "$1" 30)  # a subshell: load's wait is for its own curls only
    wait "$watcher"
}
watch_under_load "$R" "$OUT/replica" 14 "$TMP/replica.json"
echo "replica: $(head -c 400 "$TMP/replica.json")"
after=$(metric "$R" pagoda_requests_total)
mem=$(metric "$R" pagoda_memory_usage_perc)
python3 - "$TMP/replica.json" "$after" "$mem" <<'EOF' >"$TMP/replica.verdicts"
import json, sys
s = json.load(open(sys.argv[1])); after = float(sys.argv[2]); mem = float(sys.argv[3])
ch = s.get("charts", {})
def say(name, ok, detail=""): print(("ok   " if ok else "FAIL ") + name + ("" if ok else "  " + detail))
say("no page errors", not s.get("page_errors") and "error" not in s, str(s.get("page_errors") or s.get("error")))
say("six charts drawn", len(ch) == 6 and all(c["drawn"] for c in ch.values()) and s.get("canvases", 0) >= 6, str(list(ch)))
say("charts hold points", all(len(c["t"]) >= 4 for c in ch.values()), str({k: len(c["t"]) for k, c in ch.items()}))
rps = ch["traffic"]["series"]["requests/s"]
say("the load shows: requests/s and compute busy above 0", max(v or 0 for v in rps) > 0 and max(v or 0 for v in ch["resources"]["series"]["compute busy"]) > 0, str(rps))
say("the stages and SLO charts have values", any(v for v in ch["stages"]["series"]["decode"]) and any(v for v in ch["slo"]["series"]["TTFT p99"]))
say("the requests tile equals /metrics after the load", abs(float(s["tiles"]["requests"]) - after) < 1e-9, f'{s["tiles"]["requests"]} vs {after}')
say("the last memory point equals /metrics x 100", abs(ch["resources"]["series"]["memory"][-1] - 100 * mem) < 1e-3, f'{ch["resources"]["series"]["memory"][-1]} vs {100 * mem}')
say("the config, alerts, block-size and warm tables are filled", all(s["tables"][k] >= 2 for k in ("alerts", "config", "blocksize", "warm")), str(s["tables"]))
say("fits a phone-sized window (no sideways scroll)", s["phone_overflow_px"] <= 0, str(s["phone_overflow_px"]))
EOF
cat "$TMP/replica.verdicts"
passed=$((passed + $(grep -c '^ok' "$TMP/replica.verdicts")))
failed=$((failed + $(grep -c '^FAIL' "$TMP/replica.verdicts")))
# The requests/s chart integrates to the counter's increase between the console's first and
# last scrape: point i is the rate over (t[i-1], t[i]], point 0 over (first scrape, t[0]].
python3 - "$TMP/replica.json" <<'EOF' >"$TMP/area"
import json, sys
s = json.load(open(sys.argv[1])); c = s["charts"]["traffic"]; y = c["series"]["requests/s"]
t = [s["first_t"]] + c["t"]
print(f'{sum((v or 0) * (t[i + 1] - t[i]) / 1000 for i, v in enumerate(y)):.6f} {s["last_requests"] - s["first_requests"]}')
EOF
read -r area counted <"$TMP/area"
echo "     requests/s chart integrates to $area; the counter rose by $counted"
python3 -c "import sys; a,c=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if c > 0 and abs(a-c) < 1e-3 else 1)" "$area" "$counted" &&
    ok "the requests/s chart integrates to the counter's increase" ||
    bad "the requests/s chart integrates to the counter's increase" "area $area, counter $counted"

# 2. Rollback through the console: refused without the key, done with it.
curl -s -X PUT "$R/admin/config" -H 'Authorization: Bearer adm' -d '{"max_num_seqs": 8, "reason": "test"}' >/dev/null
node "$CHECK" rollback "$R" "$OUT/replica" 1 >"$TMP/nokey.json"
expect_in "without the key the rollback is refused (401)" 'refused, HTTP 401' "$TMP/nokey.json"
expect_eq "and /admin/config is unchanged" "$(curl -s "$R/admin/config" | jq_ 'd["value"]["max_num_seqs"]')" "8"
node "$CHECK" rollback "$R" "$OUT/replica" 1 adm >"$TMP/key.json"
expect_in "with the key the rollback is done" 'Roll back to v1: done' "$TMP/key.json"
curl -s "$R/admin/config" >"$TMP/config.json"
expect_eq "and /admin/config is back at v1's value" "$(jq_ 'd["value"]["max_num_seqs"]' <"$TMP/config.json")" \
    "$(curl -s "$R/admin/config/history" | jq_ '[v for v in d["versions"] if v["id"] == 1][0]["value"]["max_num_seqs"]')"
expect_eq "as a new version" "$(jq_ 'd["id"]' <"$TMP/config.json")" "3"
expect_eq "GET /admin/* without the key answers (--admin-read-open)" \
    "$(curl -s -o /dev/null -w '%{http_code}' "$R/admin/config")" "200"

# 3. A router with two replicas.
start_server "$TMP/b1.log" || exit 1
B1=$(URL "")
start_server "$TMP/b2.log" || exit 1
B2=$(URL "")
start_router_on "$TMP/router.log" --backend "$B1" --backend "$B2" || exit 1
RT=$RURL
expect_eq "GET / on the router redirects to the console" "$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' "$RT/")" "302 $RT/ui/"
watch_under_load "$RT" "$OUT/router" 12 "$TMP/router.json"
sleep 2.5
echo "router: $(head -c 400 "$TMP/router.json")"
rafter=$(metric "$RT" pagoda_router_requests_total)
python3 - "$TMP/router.json" "$rafter" <<'EOF' >"$TMP/router.verdicts"
import json, sys
s = json.load(open(sys.argv[1])); after = float(sys.argv[2])
ch = s.get("charts", {})
def say(name, ok, detail=""): print(("ok   " if ok else "FAIL ") + name + ("" if ok else "  " + detail))
say("router: no page errors", not s.get("page_errors") and "error" not in s, str(s.get("page_errors") or s.get("error")))
say("router: the page says router", s.get("kind") == "router")
say("router: both backends up in the tile", s["tiles"].get("backends up") == "2 / 2", str(s["tiles"]))
prim = ch.get("traffic", {}).get("series", {}).get("primary", [])
say("router: the per-pool chart shows the load", max((v or 0) for v in prim) > 0 if prim else False, str(ch.get("traffic")))
say("router: the pools table lists both replicas", s["tables"]["pools"] >= 3, str(s["tables"]))
say("router: the requests tile never passes /metrics", float(s["tiles"]["requests"]) <= after and float(s["tiles"]["requests"]) > 0, f'{s["tiles"]["requests"]} vs {after}')
EOF
cat "$TMP/router.verdicts"
passed=$((passed + $(grep -c '^ok' "$TMP/router.verdicts")))
failed=$((failed + $(grep -c '^FAIL' "$TMP/router.verdicts")))
ls "$OUT"/*.png | sed 's/^/     screenshot: /'
echo "console_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

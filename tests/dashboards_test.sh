#!/usr/bin/env bash
# The monitoring kit in deploy/ against the real tools: the Grafana dashboards are what
# Grafana's SDK builds (tests/e2e/grafana_dashboards.mjs), and every panel's query, run by a
# real Prometheus (Debian's) scraping two replicas and a router under load, returns data;
# the Prometheus and Alertmanager examples pass promtool and amtool, with the exported rules
# loaded.
# Usage: dashboards_test.sh PAGODA_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/e2e_lib.sh"
D="$SRC/deploy"
for tool in prometheus promtool amtool; do
    command -v $tool >/dev/null || { echo "FAIL $tool is missing: run scripts/install-deps.sh"; exit 1; }
done

if node "$SRC/tests/e2e/grafana_dashboards.mjs" check "$D/grafana" >"$TMP/check.out"; then
    ok "deploy/grafana is what the SDK builds"
else bad "deploy/grafana is what the SDK builds" "$(cat "$TMP/check.out")"; fi
if promtool check config "$D/prometheus/prometheus.yml" >"$TMP/pc.out" 2>&1; then ok "promtool check config (with the exported rules)"
else bad "promtool check config" "$(cat "$TMP/pc.out")"; fi
if amtool check-config "$D/alertmanager/alertmanager.yml" >"$TMP/am.out" 2>&1; then ok "amtool check-config"
else bad "amtool check-config" "$(cat "$TMP/am.out")"; fi

start_server "$TMP/a.log" || exit 1
A="127.0.0.1:$PORT"
start_server "$TMP/b.log" || exit 1
B="127.0.0.1:$PORT"
start_router_on "$TMP/router.log" --backend "http://$A" --backend "http://$B" || exit 1
RT=${RURL#http://}
PPORT=$((19000 + ($$ % 500)))
cp "$D/prometheus/pagoda-rules.yml" "$TMP/"
cat >"$TMP/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [pagoda-rules.yml]
scrape_configs:
  - job_name: pagoda
    static_configs:
      - targets: ["$A", "$B"]
        labels: {pool: primary}
  - job_name: pagoda-router
    static_configs:
      - targets: ["$RT"]
YAML
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
    --web.listen-address="127.0.0.1:$PPORT" >"$TMP/prom.log" 2>&1 &
PIDS+=($!)
# Load through the router for the whole test: streamed and whole requests.
(
    while true; do
        curl -s "http://$RT/v1/completions" -d '{"prompt": "Once upon a time", "max_tokens": 48}' >/dev/null &
        curl -s "http://$RT/v1/completions" -d '{"prompt": "The cat", "max_tokens": 32, "stream": true}' >/dev/null
        sleep 0.1
    done
) &
PIDS+=($!)
sleep 12
up=$(curl -s "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode 'query=sum(up)' | jq_ 'd["data"]["result"][0]["value"][1]')
expect_eq "Prometheus scrapes the two replicas and the router" "$up" "3"
rules=$(curl -s "http://127.0.0.1:$PPORT/api/v1/rules" | jq_ 'sum(len(g["rules"]) for g in d["data"]["groups"])')
expect_eq "the exported rules are loaded" "$([ "${rules:-0}" -ge 8 ] && echo yes)" "yes"

# Every panel's query as Grafana sends it: $__rate_interval over 1 s scrapes is 4 s, take
# 10 s; the variables select everything.
node "$SRC/tests/e2e/grafana_dashboards.mjs" queries "$D/grafana" >"$TMP/queries.tsv"
n=0 empty=0
while IFS=$'\t' read -r file panel expr; do
    n=$((n + 1))
    e=${expr//\$__rate_interval/10s}
    e=${e//\$instance/.*}
    e=${e//\$pool/.*}
    res=$(curl -s "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$e" | jq_ 'd["status"] + " " + str(len(d["data"]["result"])) if d["status"] == "success" else "error " + d["error"]')
    case "$res" in
    "success 0" | error*)
        empty=$((empty + 1))
        bad "$file: $panel returns data" "$e" "$res"
        ;;
    esac
done <"$TMP/queries.tsv"
expect_eq "every panel query ($n) returns data" "$empty" "0"
echo "dashboards_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

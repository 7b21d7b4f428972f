#!/usr/bin/env bash
# The alert rules for Prometheus (issue 14): `pagoda rules export --format prometheus`
# writes exactly deploy/prometheus/pagoda-rules.yml; promtool check rules accepts it and
# promtool test rules passes its unit tests (a firing and a quiet case per default rule);
# `pagoda rules check` reads a file and names file:line:key on errors; --format toml
# writes the built-in rules as a file `pagoda serve --rules` takes.
# Usage: rules_test.sh PAGODA_BIN SOURCE_DIR
set -uo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/e2e_lib.sh"
D="$SRC/deploy/prometheus"

"$BIN" rules export --format prometheus -o "$TMP/rules.yml" 2>/dev/null
if diff -q "$TMP/rules.yml" "$D/pagoda-rules.yml" >/dev/null; then
    ok "the exported rules match deploy/prometheus/pagoda-rules.yml"
else bad "export matches the shipped file (regenerate: pagoda rules export -o $D/pagoda-rules.yml)" "$(diff "$TMP/rules.yml" "$D/pagoda-rules.yml" | head -20)"; fi
if promtool check rules "$TMP/rules.yml" >"$TMP/check.log" 2>&1; then ok "promtool check rules"; else bad "promtool check rules" "$(cat "$TMP/check.log")"; fi
cp "$D/pagoda-rules.test.yml" "$TMP/"
cp "$TMP/rules.yml" "$TMP/pagoda-rules.yml"  # the tests read the exported rules
if (cd "$TMP" && promtool test rules pagoda-rules.test.yml >"$TMP/test.log" 2>&1); then ok "promtool test rules"; else bad "promtool test rules" "$(tail -30 "$TMP/test.log")"; fi
expect_eq "a unit test per default rule" \
    "$(grep -o 'alertname: [A-Za-z]*' "$D/pagoda-rules.test.yml" | awk '{print $2}' | sort -u | tr '\n' ' ')" \
    "$(grep -o -- '- alert: [A-Za-z]*' "$D/pagoda-rules.yml" | awk '{print $3}' | sort -u | tr '\n' ' ')"
"$BIN" rules export --format toml -o "$TMP/mine.toml" 2>/dev/null
"$BIN" rules check "$TMP/mine.toml" >"$TMP/check.out"
expect_eq "the built-in rules as a TOML file check out" "$?" "0"
expect_in "listing each rule" "TTFTHigh" "$TMP/check.out"
sed 's/for = "5m"/for = "5 minutes"/' "$TMP/mine.toml" >"$TMP/bad.toml"
"$BIN" rules check "$TMP/bad.toml" 2>"$TMP/bad.log"
expect_eq "a bad duration exits 2" "$?" "2"
expect_in "with file:line:key and the allowed form" "bad.toml:[0-9]*:rule\[0\].for: bad duration '5 minutes'" "$TMP/bad.log"
"$BIN" rules export --rules "$TMP/mine.toml" -o "$TMP/mine.yml" 2>/dev/null
expect_eq "a rule file exports the same as the built-in rules" "$(diff <(grep -v '^#' "$TMP/mine.yml") <(grep -v '^#' "$D/pagoda-rules.yml") && echo same)" "same"

echo "rules_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

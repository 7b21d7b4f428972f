#!/usr/bin/env bash
# tokenizer.json as Pagoda reads it against @huggingface/tokenizers (npm, pure JS) on real
# published tokenizer.json files of four families (testdata/tokenizers, provenance in
# testdata/README.md): GPT-2 (byte-level, GPT-2 regex), Phi-3 (Llama 2's SentencePiece BPE
# with byte fallback, added tokens that strip whitespace), Whisper (byte-level, 1600 added
# tokens) and OLMo 2 (byte-level, cl100k's regex as Llama 3's). Every case of
# testdata/tokenizer-vectors/*.inp and 300 seeded fuzzed texts must encode to the same ids.
# Usage: tokenizer_json_test.sh PAGODA_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/e2e_lib.sh"
dirs=()
for d in "$SRC"/testdata/tokenizers/*/; do
    name=$(basename "$d")
    mkdir -p "$TMP/$name"
    gunzip -c "$d/tokenizer.json.gz" > "$TMP/$name/tokenizer.json"
    [ -f "$d/tokenizer_config.json" ] && cp "$d/tokenizer_config.json" "$TMP/$name/"
    dirs+=("$TMP/$name")
done
expect_eq "four tokenizer families" "${#dirs[@]}" "4"
if (cd "$SRC/tests/e2e" && node tokenizer_json_check.mjs "$BIN" "$SRC/testdata/tokenizer-vectors" 300 "${dirs[@]}") > "$TMP/check.txt" 2>&1; then
    while read -r line; do ok "$line"; done < <(grep "texts encode" "$TMP/check.txt")
else
    bad "Pagoda and @huggingface/tokenizers differ" "$(head -c 3000 "$TMP/check.txt")"
fi
echo "tokenizer_json_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

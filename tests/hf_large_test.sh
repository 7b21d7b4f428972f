#!/usr/bin/env bash
# The larger shapes of hf_test (label slow, run by hand): random-weight Hugging Face
# directories of hidden size 512 and 4 layers (8 heads of 64, 2 KV heads) for Llama (BF16),
# Mixtral, Qwen3-MoE (BF16) and OLMoE, through `pagoda generate -m DIR`, against the numpy
# forward of tests/hf/hf_forward.py: 32 greedy tokens each, within 1e-2 of its argmax.
# Usage: hf_large_test.sh PAGODA_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/e2e_lib.sh"
cd "$SRC"
export XDG_CACHE_HOME=$TMP/cache
PROMPT=79,110,99,101,269,259
BAN='{"'$(seq -s '":-100,"' 128 255)'":-100}'
for spec in "llama bf16" "mixtral f32" "qwen3moe bf16" "olmoe f32"; do
    read -r arch dtype <<< "$spec"
    /usr/bin/python3 tests/hf/make_hf_dir.py "$arch" "$TMP/$arch" --seed 11 --dtype "$dtype" --hidden 512 --layers 4
    printf '{"prompt_token_ids":[%s],"max_tokens":32,"temperature":0,"ignore_eos":true,"logit_bias":%s}\n' \
        "$PROMPT" "$BAN" > "$TMP/p.jsonl"
    got=$("$BIN" generate -m "$TMP/$arch" --prompts "$TMP/p.jsonl" --json 2> "$TMP/gen.log" | head -1 |
        python3 -c 'import json,sys; print(",".join(map(str, json.load(sys.stdin)["token_ids"])))')
    if /usr/bin/python3 tests/hf/hf_forward.py "$TMP/$arch" --check "$PROMPT" "$got" --tie 1e-2 --ban 128-255 > "$TMP/np.txt"; then
        ok "$arch ($dtype, hidden 512, 4 layers): $(tail -1 "$TMP/np.txt")"
    else
        bad "$arch ($dtype, hidden 512, 4 layers)" "$(cat "$TMP/np.txt" "$TMP/gen.log" | tail -8)"
    fi
done
echo "hf_large_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

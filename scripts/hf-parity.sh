#!/usr/bin/env bash
# `pagoda model convert`'s GGUF against llama.cpp (issue 39). For each architecture,
# tests/hf/make_hf_dir.py writes a random-weight Hugging Face directory (fixed seed: the
# test writes the same one again), `pagoda model convert` writes its GGUF, and the shared
# llama-server's greedy continuation (16 tokens, one streamed request per token) of a
# fixed prompt is recorded in testdata/hf_llamacpp.txt, which tests/hf_test.sh checks
# Pagoda's own greedy tokens on the directory against. Ids 128-255 (the fixture's bytes
# 0x80-0xFF) are banned on both sides: a random model emits lone UTF-8 bytes, whose text
# llama-server's parser refuses.
#
#   scripts/hf-parity.sh
#
# Needs build/apps/pagoda, Debian's python3-numpy and ../shared/anchors/llama.cpp/bin
# (LLAMACPP_BIN overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/llamacpp-lib.sh
llamacpp_parity_setup
PORT=${PORT:-8393}
PROMPT=79,110,99,101,269,259
N=16
T=testdata/hf_llamacpp.txt
{
    echo "# Written by scripts/hf-parity.sh: llama.cpp's greedy continuation ($N tokens, llama-server"
    echo "# temperature 0) of prompt ids $PROMPT on \`pagoda model convert\` of the directory that"
    echo "# tests/hf/make_hf_dir.py ARCH --seed 5 --dtype DTYPE writes, ids 128-255 banned."
    echo "# Fields: arch dtype tokens."
} > "$T"
for spec in "llama bf16" "qwen2 f32" "qwen3 bf16" "mixtral f32" "qwen3moe bf16" "olmoe f32" "granitemoe f32"; do
    read -r arch dtype <<< "$spec"
    /usr/bin/python3 tests/hf/make_hf_dir.py "$arch" "$OUT/$arch" --seed 5 --dtype "$dtype"
    "$BIN" model convert "$OUT/$arch" -o "$OUT/$arch.gguf" 2> /dev/null
    "$OUT/llama/llama-server" -m "$OUT/$arch.gguf" -t 2 -c 512 --port "$PORT" > "$OUT/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 60); do curl -sf "localhost:$PORT/health" > /dev/null && break; sleep 0.5; done
    got=$(python3 scripts/llamacpp_greedy.py "$PORT" "$N" "$PROMPT" --ban 128-255)
    kill "$pid"; wait "$pid" 2>/dev/null || true
    echo "$arch $dtype: $got"
    echo "$arch $dtype $got" >> "$T"
done
echo "wrote $T"

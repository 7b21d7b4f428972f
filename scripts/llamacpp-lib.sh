# Sourced by the scripts that measure against llama.cpp. llamacpp_copy SRC DST copies the
# binaries of SRC (default ../shared/anchors/llama.cpp/bin) to DST: a copied tree can
# hold the libraries' symlinks as small files naming their target (the loader then fails
# with "file too short"), so those are made links again.
llamacpp_copy() {
    local src=$1 dst=$2 f t
    mkdir -p "$dst"
    for f in "$src"/*; do
        t=$(basename "$f")
        if [ ! -L "$f" ] && [ "$(stat -c %s "$f")" -lt 256 ] && [ -f "$src/$(head -c 255 "$f")" ]; then
            ln -s "$(head -c 255 "$f")" "$dst/$t"
        else
            cp -p "$f" "$dst/$t"
        fi
    done
}

# llamacpp_parity_setup: the preamble of the parity scripts (kquant-, moe-, hf-parity.sh),
# run from the repository root: BIN (Pagoda), LLAMA (the anchors, LLAMACPP_BIN overrides),
# both checked; OUT a temporary folder removed at exit (background jobs killed) holding a
# copy of llama.cpp's binaries in $OUT/llama.
llamacpp_parity_setup() {
    BIN=build/apps/pagoda
    LLAMA=${LLAMACPP_BIN:-$(cd .. && pwd)/shared/anchors/llama.cpp/bin}
    [ -x "$LLAMA/llama-server" ] || { echo "no llama-server in $LLAMA (set LLAMACPP_BIN)" >&2; exit 2; }
    [ -x "$BIN" ] || { echo "$BIN is not built (cmake --build build)" >&2; exit 2; }
    OUT=$(mktemp -d)
    trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$OUT"' EXIT
    llamacpp_copy "$LLAMA" "$OUT/llama"
}

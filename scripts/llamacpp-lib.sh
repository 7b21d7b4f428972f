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

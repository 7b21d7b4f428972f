#!/usr/bin/env bash
# clang-tidy (clang-tidy-14, .clang-tidy: bugprone-*, use-after-move, narrowing) on the C++
# source files changed since BASE (default: the commit before HEAD), using the compile
# database of build/ (make build writes it). Exits non-zero on any finding.
#   scripts/tidy.sh            files changed by the last commit
#   scripts/tidy.sh main~5     files changed since main~5 (and uncommitted ones)
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:-HEAD~1}
BUILD=${BUILD:-build}
CT=$(command -v clang-tidy-14 || command -v clang-tidy || true)
if [ -z "$CT" ]; then
  echo "tidy: clang-tidy-14 is not installed (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
if [ ! -f "$BUILD/compile_commands.json" ]; then
  echo "tidy: $BUILD/compile_commands.json is missing; run 'make build' first" >&2
  exit 2
fi
if ! git rev-parse -q --verify "$BASE^{commit}" >/dev/null; then
  echo "tidy: base '$BASE' is not a commit here; nothing to compare with" >&2
  exit 0
fi
mapfile -t files < <({ git diff --name-only --diff-filter=d "$BASE" -- '*.cpp';
                       git ls-files --others --exclude-standard -- '*.cpp'; } |
                     grep -E '^(src|apps)/' | sort -u)
# Only files the compile database knows (fuzz targets and scripts are not in it).
targets=()
for f in "${files[@]}"; do
  if grep -q "\"file\": \"$(pwd)/$f\"" "$BUILD/compile_commands.json"; then targets+=("$f"); fi
done
if [ ${#targets[@]} -eq 0 ]; then
  echo "tidy: no changed C++ source files since $BASE"
  exit 0
fi
echo "tidy: ${#targets[@]} changed file(s) since $BASE"
status=0
for f in "${targets[@]}"; do
  if ! "$CT" -p "$BUILD" --quiet --extra-arg=-Wno-unknown-warning-option "$f" 2>/tmp/tidy.$$ >/tmp/tidy.out.$$; then
    cat /tmp/tidy.out.$$
    status=1
  fi
done
rm -f /tmp/tidy.$$ /tmp/tidy.out.$$
[ $status -eq 0 ] && echo "tidy: clean"
exit $status

#!/usr/bin/env bash
# Installs the Debian packages Pagoda builds and tests with (see docs/dependencies in
# ../shared/DEPENDENCIES.md). Idempotent: quiet and fast when everything is present.
set -euo pipefail

PKGS=(
  g++ cmake ninja-build pkg-config make ccache
  libboost1.81-dev nlohmann-json3-dev libcli11-dev libtomlplusplus-dev
  libfmt-dev libdnnl-dev ocl-icd-opencl-dev libhwy-dev
  libpcre2-dev libsqlite3-dev libsqlitecpp-dev
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev
  clang-14 libclang-rt-14-dev clang-format-14 clang-tidy-14
  curl python3 python3-jinja2 python3-numpy prometheus prometheus-alertmanager chromium
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# Node.js and npm run the e2e client; a machine may have them from elsewhere than Debian.
if ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
  fi
  echo "install-deps: installing ${#missing[@]} package(s): ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: done"
fi

# The console's chart library (uPlot), vendored into the binary at build time (src/ui).
UI="$(cd "$(dirname "$0")/.." && pwd)/src/ui"
if [ ! -f "$UI/node_modules/.package-lock.json" ] || ! cmp -s "$UI/package-lock.json" "$UI/node_modules/.package-lock.json.src" 2>/dev/null; then
  echo "install-deps: npm ci in src/ui"
  (cd "$UI" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$UI/package-lock.json" "$UI/node_modules/.package-lock.json.src"
fi

# Test clients from npm (the official `openai` package), exactly as pinned in the lockfile.
E2E="$(cd "$(dirname "$0")/.." && pwd)/tests/e2e"
if [ ! -f "$E2E/node_modules/.package-lock.json" ] || ! cmp -s "$E2E/package-lock.json" "$E2E/node_modules/.package-lock.json.src" 2>/dev/null; then
  echo "install-deps: npm ci in tests/e2e"
  (cd "$E2E" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$E2E/package-lock.json" "$E2E/node_modules/.package-lock.json.src"
fi

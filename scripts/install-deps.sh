#!/usr/bin/env bash
# Installs everything toolwarden's build and test suite need, from Debian's archive and npm only.
# Idempotent: re-running on a prepared machine is quick.
set -euo pipefail
cd "$(dirname "$0")/.."

build_pkgs=(build-essential cmake ninja-build pkg-config
  libboost1.81-dev libboost-json1.81-dev libssl-dev libsqlitecpp-dev libsqlite3-dev
  libgtest-dev libgmock-dev libseccomp-dev libre2-dev)
test_pkgs=(sqlite3 nginx-light wrk util-linux curl python3 nodejs npm procps clang-format)

want=("${build_pkgs[@]}")
if [[ "${1:-}" == "--test" ]]; then want+=("${test_pkgs[@]}"); fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [[ "${1:-}" == "--test" ]]; then
  (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
fi

#!/usr/bin/env bash
# Installs what toolwarden needs, from Debian's archive and npm only. Idempotent.
#   scripts/install-deps.sh          build dependencies
#   scripts/install-deps.sh --test   plus what the test suite and benchmarks use
set -euo pipefail
cd "$(dirname "$0")/.."

# dpkg-dev: dpkg-shlibdeps, which computes the Debian package's Depends (cpack).
pkgs=(build-essential cmake ninja-build pkg-config dpkg-dev
  libboost1.81-dev libboost-json1.81-dev libssl-dev libsqlitecpp-dev libsqlite3-dev
  libgtest-dev libgmock-dev libseccomp-dev libre2-dev)
if [[ "${1:-}" == "--test" ]]; then
  pkgs+=(sqlite3 nginx-light wrk ripgrep util-linux procps curl clang-format bubblewrap socat)
  # Packaging tests: systemd-analyze and systemd-socket-activate (systemd), man and groff
  # (man-db, groff-base) for the generated man page.
  pkgs+=(systemd man-db groff-base)
  # Fuzzing: clang and libFuzzer with the sanitizer runtimes.
  pkgs+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo=sudo
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ "${1:-}" == "--test" ]]; then
  command -v node >/dev/null || { echo "Node.js (20 or later) is required for the end-to-end tests" >&2; exit 1; }
  # The MCP SDK, the conformance suite, the MCP Inspector and Node 22 (which the conformance
  # suite and the Inspector need).
  (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
  (cd tests/bench && npm ci --no-audit --no-fund --loglevel=error)
fi

#!/usr/bin/env bash
# Builds toolwarden and starts the daemon in the foreground with the embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target toolwarden
bin="$PWD/build/daemon/toolwarden"

"$bin" serve "$@" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid' INT TERM
# The runtime dir as `serve` resolves it by default (SPEC §2).
runtime=${TOOLWARDEN_RUNTIME_DIR:-${XDG_RUNTIME_DIR:+$XDG_RUNTIME_DIR/toolwarden}}
runtime=${runtime:-/tmp/toolwarden-$(id -u)}
for _ in $(seq 1 100); do
  [[ -n "$runtime" && -f "$runtime/endpoint.json" ]] && break
  kill -0 $pid 2>/dev/null || { wait $pid; exit $?; }
  sleep 0.1
done
cat <<MSG

toolwarden is running (pid $pid).
  endpoint file: $runtime/endpoint.json
  $(cat "$runtime/endpoint.json")
Create a job for a worktree and hand its token to your MCP client:
  $bin job create --worktree /path/to/repo [--access write]
Stop with Ctrl-C.
MSG
wait $pid

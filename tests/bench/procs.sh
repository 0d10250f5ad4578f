# Process bookkeeping shared by the benchmark scripts (sourced, not run). The caller sets $tmp
# to its temp dir first. Every background process is recorded in $tmp/pids; whatever is still
# running at exit is ended by its pid (TERM, then KILL after a grace period), and $tmp removed.
# shellcheck shell=bash
touch "$tmp/pids"

# running PID: the process exists and is not a zombie (an orphaned zombie is not ours to reap).
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}
kill_pids() {
  local p alive=()
  for p in "$@"; do kill -TERM "$p" 2>/dev/null && alive+=("$p"); done
  ((${#alive[@]})) || return 0
  for _ in $(seq 1 50); do
    local left=()
    for p in "${alive[@]}"; do running "$p" && left+=("$p"); done
    ((${#left[@]})) || return 0
    sleep 0.1
  done
  for p in "${alive[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
}
cleanup() {
  local pids=()
  mapfile -t pids <"$tmp/pids" 2>/dev/null || true
  ((${#pids[@]})) && kill_pids "${pids[@]}"
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
track() { echo "$1" >>"$tmp/pids"; }
# tracked CMD...: runs CMD as a recorded child and waits for it, so that a TERM/INT to the
# script (whose trap runs only once `wait` returns) also ends long commands such as wrk.
tracked() {
  "$@" &
  local p=$!
  track "$p"
  wait "$p"
}

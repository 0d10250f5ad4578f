#!/usr/bin/env bash
# toolwarden benchmarks. Every figure is printed next to a baseline measured in the same run on
# the same machine; targets are printed, never asserted. Exit status is non-zero only when a
# benchmark could not run at all (a tool is missing, the daemon did not start, a request failed).
#
#   tests/bench/run.sh [--quick]
#
#   1 spine        wrk, 16 connections, 2 threads: POST /mcp JSON-RPC ping with a bearer token
#                  vs nginx serving a static 100-byte file               target ≥ 50% of nginx
#   2 rss          daemon VmRSS idle, and with 1,000 idle keep-alive connections that each
#                  completed one authenticated ping                      targets ≤ 16 / ≤ 64 MiB
#   3 local_read   wrk, 16 connections: tools/call local_read of a 4 KiB file, full auditing;
#                  its ratio to ping from 4 alternating runs of each      target ≥ 40% of ping
#                  (plus, for information, both over a single connection: per-call latency)
#   4 sdk          official MCP TypeScript SDK client, sequential local_read of a 4 KiB file vs
#                  read_text_file on @modelcontextprotocol/server-filesystem over stdio
#                                                                        target ≥ 1.5×
#   5 local_search one local_search call over a generated tree (files/s) vs grep -rF and rg
#
# --quick (used by scripts/test.sh): wrk 5 s per run, 500 SDK calls, 5,000 files; about a minute.
# Default: wrk 15 s per run, 2,000 SDK calls, 50,000 files.
# Environment: TOOLWARDEN_BIN (default build/daemon/toolwarden), TMPDIR.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/common.sh
source "$here/common.sh"
parse_args "$@"

if [[ $mode == quick ]]; then
  WRK_SECS=5 WARM_SECS=1 SDK_CALLS=500 TREE_FILES=5000
else
  WRK_SECS=15 WARM_SECS=2 SDK_CALLS=2000 TREE_FILES=50000
fi
WRK_CONNS=16 WRK_THREADS=2 HELD_CONNS=1000 SEARCH_RUNS=3
NEEDLE=qzxv_needle_7731 # a literal that only the planted lines contain

# ---- prerequisites -----------------------------------------------------------------------------
command -v wrk >/dev/null || die "wrk is not installed (Debian package wrk; scripts/install-deps.sh --test installs it)"
NGINX=$(command -v nginx || true)
[[ -z $NGINX && -x /usr/sbin/nginx ]] && NGINX=/usr/sbin/nginx
[[ -n $NGINX ]] || die "nginx is not installed (Debian package nginx-light; scripts/install-deps.sh --test installs it)"
command -v node >/dev/null || die "node (Node.js 20 or later) is not installed"
command -v npm >/dev/null || die "npm is not installed (it comes with Node.js)"
[[ -x $BIN ]] || die "toolwarden binary not found at $BIN (build it: ninja -C build toolwarden, or set TOOLWARDEN_BIN)"
RG=$(command -v rg || true)

# 1,000 held connections plus the daemon's own descriptors; wrk needs few. Raise the soft limit.
hard=$(ulimit -Hn)
[[ $hard == unlimited ]] && hard=1048576
if (($(ulimit -Sn) < 8192)); then
  ulimit -n $((hard < 65536 ? hard : 65536)) 2>/dev/null || true
fi
(($(ulimit -n) >= HELD_CONNS + 256)) ||
  echo "run.sh: warning: open-file limit $(ulimit -n) is too low for $HELD_CONNS connections" >&2

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tw-bench.XXXXXX")
touch "$tmp/pids" "$tmp/results.env"
# shellcheck source=tests/bench/procs.sh
source "$here/procs.sh"

# Results go to $tmp/results.env as NAME=VALUE lines (benchmarks run in subshells).
result() { printf '%s=%q\n' "$1" "$2" >>"$tmp/results.env"; }
# shellcheck disable=SC1091 # written by this script
load_results() { source "$tmp/results.env"; }

# ---- helpers -----------------------------------------------------------------------------------

# wrk prints latencies as 416.00us, 2.03ms, 1.20s or 1.00m.
to_ms() {
  awk -v v="$1" 'BEGIN {
    n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
    if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
    printf "%.2f", n }'
}

# CPU time a process (all its threads) has used, in clock ticks; and the machine's total and
# stolen ticks (time a virtual machine's CPUs waited for the host), from /proc/stat.
proc_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
machine_ticks() { awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i; print t, $9 }' /proc/stat; }
CLK_TCK=$(getconf CLK_TCK)

# run_wrk LABEL URL [wrk args...]: warm-up run, then a measured one. Sets WRK_RPS, WRK_P50,
# WRK_P99 (ms), WRK_REQS, WRK_BAD (non-2xx responses), WRK_ERRS (socket errors, text),
# WRK_STEAL (% of the machine's CPU time stolen by the host during the measured run) and, with
# CPU_PID set, WRK_CPU_US (that process's CPU time per request, µs): throughput moves with what
# else the host runs, CPU per request much less.
run_wrk() {
  local label=$1 url=$2
  shift 2
  local out="$tmp/wrk-$label.txt" m0 m1 c0=0 c1=0
  tracked wrk -t"$WRK_THREADS" -c"$WRK_CONNS" -d"${WARM_SECS}s" "$@" "$url" >/dev/null
  m0=$(machine_ticks)
  [[ -n ${CPU_PID:-} ]] && c0=$(proc_ticks "$CPU_PID")
  tracked wrk -t"$WRK_THREADS" -c"$WRK_CONNS" -d"${WRK_SECS}s" --latency "$@" "$url" >"$out"
  [[ -n ${CPU_PID:-} ]] && c1=$(proc_ticks "$CPU_PID")
  m1=$(machine_ticks)
  WRK_STEAL=$(calc '100 * (s1 - s0) / (t1 - t0)' s0="${m0#* }" s1="${m1#* }" t0="${m0% *}" t1="${m1% *}" |
    xargs printf '%.0f')
  WRK_RPS=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$out")
  WRK_P50=$(to_ms "$(awk '$1 == "50%" { print $2 }' "$out")")
  WRK_P99=$(to_ms "$(awk '$1 == "99%" { print $2 }' "$out")")
  WRK_REQS=$(awk '/requests in/ { print $1 }' "$out")
  WRK_BAD=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$out")
  WRK_BAD=${WRK_BAD:-0}
  WRK_ERRS=$(sed -n 's/^ *Socket errors: *//p' "$out")
  if [[ -z $WRK_RPS || $WRK_RPS == 0 ]]; then
    cat "$out" >&2
    echo "wrk measured nothing for $label" >&2
    return 1
  fi
  WRK_CPU_US=
  [[ -n ${CPU_PID:-} ]] &&
    WRK_CPU_US=$(calc '(c1 - c0) * 1e6 / hz / n' c0="$c0" c1="$c1" hz="$CLK_TCK" n="$WRK_REQS" |
      xargs printf '%.0f')
  printf '%-22s req/s=%-8s p50=%sms  p99=%sms  (%s requests in %ss' \
    "$label" "$WRK_RPS" "$WRK_P50" "$WRK_P99" "$WRK_REQS" "$WRK_SECS"
  ((WRK_BAD > 0)) && printf ', %s non-2xx' "$WRK_BAD"
  [[ -n $WRK_ERRS ]] && printf ', socket errors: %s' "$WRK_ERRS"
  [[ -n $WRK_CPU_US ]] && printf '; daemon CPU %s µs/request' "$WRK_CPU_US"
  printf '; host steal %s%%)\n' "$WRK_STEAL"
}

# wrk_count BODY SECS: one wrk run of BODY against the main daemon (no warm-up, no latency
# figures); prints "REQUESTS SECONDS".
wrk_count() {
  local out
  out=$(TW_TOKEN=$MAIN_TOKEN TW_BODY=$1 tracked wrk -t"$WRK_THREADS" -c"$WRK_CONNS" -d"$2s" \
    -s "$here/mcp_post.lua" "$MAIN_URL")
  awk '/requests in/ { n = $1; t = $4; sub(/s,?$/, "", t); print n, t }' <<<"$out"
}

# Daemons: start_daemon DIR starts `toolwarden serve` with runtime/state/config under DIR and
# waits for endpoint.json. Sets D_PID, D_URL, D_ADMIN.
tw() {
  local dir=$1
  shift
  TOOLWARDEN_RUNTIME_DIR="$dir/run" TOOLWARDEN_STATE_DIR="$dir/state" \
    TOOLWARDEN_CONFIG="$dir/config.json" "$BIN" "$@"
}
start_daemon() {
  local dir=$1
  mkdir -p "$dir/run" "$dir/state"
  chmod 0700 "$dir/run" "$dir/state"
  env -u NOTIFY_SOCKET TOOLWARDEN_RUNTIME_DIR="$dir/run" TOOLWARDEN_STATE_DIR="$dir/state" \
    TOOLWARDEN_CONFIG="$dir/config.json" "$BIN" serve --listen 127.0.0.1:0 2>"$dir/daemon.log" &
  D_PID=$!
  track "$D_PID"
  for _ in $(seq 1 100); do
    [[ -s "$dir/run/endpoint.json" ]] && break
    if ! kill -0 "$D_PID" 2>/dev/null; then
      tail -20 "$dir/daemon.log" >&2
      echo "toolwarden serve exited before endpoint.json appeared" >&2
      return 1
    fi
    sleep 0.1
  done
  [[ -s "$dir/run/endpoint.json" ]] || {
    tail -20 "$dir/daemon.log" >&2
    echo "endpoint.json did not appear within 10 s" >&2
    return 1
  }
  D_URL=$(node "$here/util.mjs" json "$dir/run/endpoint.json" mcp_url)
  D_ADMIN=$(node "$here/util.mjs" json "$dir/run/endpoint.json" admin_socket)
}
# new_token DIR WORKTREE: creates a read job, prints its token.
new_token() {
  tw "$1" job create --worktree "$2" | node "$here/util.mjs" json - token
}
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
mib() { calc 'v / 1024' v="$1" | xargs printf '%.1f'; }

# ---- the run -----------------------------------------------------------------------------------
echo "== toolwarden benchmarks ($mode mode): $(nproc) CPUs, $(uname -r), wrk -t$WRK_THREADS -c$WRK_CONNS -d${WRK_SECS}s"
echo "   binary $BIN; load average $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews every figure)"

failed=()
run_bench() { # run_bench NAME FUNCTION: in a subshell with errexit; a failure is recorded, not fatal
  local name=$1 rc
  shift
  echo "-- $name"
  set +e
  (
    set -e
    "$@"
  ) &
  local sub=$!
  track "$sub"
  wait "$sub"
  rc=$?
  set -e
  if ((rc != 0)); then
    failed+=("$name")
    echo "!! $name could not run (exit $rc)"
  fi
}

# The SDK benchmark's dependencies (pinned in package-lock.json).
if [[ ! -f $here/node_modules/@modelcontextprotocol/sdk/package.json ||
  ! -f $here/node_modules/@modelcontextprotocol/server-filesystem/package.json ]]; then
  echo "   installing tests/bench dependencies (npm ci)"
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) || echo "run.sh: npm ci failed in tests/bench" >&2
fi

# A worktree with the 4 KiB text file that benchmarks 3 and 4 read.
mkdir -p "$tmp/wt"
node "$here/util.mjs" textfile "$tmp/wt/read4k.txt" 4096

# The daemon that benchmarks 1, 3, 4 and 5 share (benchmark 2 starts its own).
main="$tmp/daemon"
# wrk's 16 connections share one job: let all 16 calls be in flight (the default is 4 per job),
# so group commit sees the same concurrency the ping benchmark gets.
mkdir -p "$main"
printf '{"max_concurrent_calls": 16}\n' >"$main/config.json"
chmod 0600 "$main/config.json"
start_daemon "$main" || die "toolwarden did not start"
MAIN_PID=$D_PID MAIN_URL=$D_URL MAIN_ADMIN=$D_ADMIN
MAIN_TOKEN=$(new_token "$main" "$tmp/wt") || die "toolwarden job create failed"
echo "   daemon pid $MAIN_PID at $MAIN_URL (max_concurrent_calls 16)"
need_main() {
  kill -0 "$MAIN_PID" 2>/dev/null && return 0
  tail -20 "$main/daemon.log" >&2
  echo "the toolwarden daemon is gone" >&2
  return 1
}

bench_spine() {
  need_main
  # nginx: one process in the foreground of its own (no master), everything in a temp dir.
  local ng="$tmp/nginx" port
  mkdir -p "$ng/www" "$ng/tmp"
  head -c 99 /dev/zero | tr '\0' 'x' >"$ng/www/static100.txt"
  echo >>"$ng/www/static100.txt" # 100 bytes
  port=$(node "$here/util.mjs" freeport)
  cat >"$ng/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $ng/nginx.pid;
error_log $ng/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $ng/tmp/body;
  proxy_temp_path $ng/tmp/proxy;
  fastcgi_temp_path $ng/tmp/fastcgi;
  uwsgi_temp_path $ng/tmp/uwsgi;
  scgi_temp_path $ng/tmp/scgi;
  default_type text/plain;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$port;
    root $ng/www;
  }
}
EOF
  "$NGINX" -p "$ng" -c "$ng/nginx.conf" -e "$ng/error.log" 2>"$ng/stderr.log" &
  local ngpid=$!
  track "$ngpid"
  local up=
  for _ in $(seq 1 50); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      up=1
      break
    fi
    kill -0 "$ngpid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n $up ]] || {
    cat "$ng/stderr.log" "$ng/error.log" >&2 2>/dev/null || true
    echo "nginx did not start" >&2
    return 1
  }

  run_wrk nginx.static100 "http://127.0.0.1:$port/static100.txt"
  result NGINX_RPS "$WRK_RPS"
  result NGINX_P50 "$WRK_P50"
  result NGINX_P99 "$WRK_P99"
  kill_pids "$ngpid"

  node "$here/util.mjs" rpc "$MAIN_URL" "$MAIN_TOKEN" ping >/dev/null
  TW_TOKEN=$MAIN_TOKEN TW_BODY='{"jsonrpc":"2.0","id":1,"method":"ping"}' \
    CPU_PID=$MAIN_PID run_wrk spine.ping "$MAIN_URL" -s "$here/mcp_post.lua"
  ((WRK_BAD == 0)) || echo "   !! $WRK_BAD ping requests did not get a 2xx answer"
  result PING_RPS "$WRK_RPS"
  result PING_CPU_US "$WRK_CPU_US"
  result PING_STEAL "$WRK_STEAL"
  result PING_P50 "$WRK_P50"
  result PING_P99 "$WRK_P99"
  result PING_BAD "$WRK_BAD"
  load_results
  printf '%-22s toolwarden/nginx=%s%%  (target ≥ 50%%)\n' spine.ratio \
    "$(calc '100 * a / b' a="$WRK_RPS" b="$NGINX_RPS" | xargs printf '%.0f')"
  need_main
}

bench_rss() {
  local dir="$tmp/rss" holder out
  mkdir -p "$dir/wt"
  echo hello >"$dir/wt/hello.txt"
  start_daemon "$dir"
  local pid=$D_PID url=$D_URL token
  token=$(new_token "$dir" "$dir/wt")
  node "$here/util.mjs" rpc "$url" "$token" ping >/dev/null
  sleep 1
  local idle hwm
  idle=$(rss_kib "$pid")
  echo "$(printf '%-22s' rss.idle) VmRSS=$(mib "$idle")MiB  (target ≤ 16 MiB)"
  result RSS_IDLE "$(mib "$idle")"

  out="$dir/holder.out"
  node "$here/hold_connections.mjs" "$url" "$token" "$HELD_CONNS" >"$out" 2>"$dir/holder.err" &
  holder=$!
  track "$holder"
  for _ in $(seq 1 600); do
    grep -q '^\(ready\|failed\)' "$out" && break
    kill -0 "$holder" 2>/dev/null || break
    sleep 0.1
  done
  if ! grep -q '^ready' "$out"; then
    cat "$out" "$dir/holder.err" >&2
    echo "could not hold $HELD_CONNS connections open" >&2
    return 1
  fi
  sleep 1
  local held
  held=$(rss_kib "$pid")
  kill -TERM "$holder"
  wait "$holder" || true
  hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
  printf '%-22s VmRSS=%sMiB  (%s, %s; peak VmHWM=%sMiB; target ≤ 64 MiB)\n' "rss.conns$HELD_CONNS" \
    "$(mib "$held")" "$(sed -n 's/^ready //p' "$out")" "$(grep -o 'closed_by_peer=[0-9]*' "$out" || echo 'closed_by_peer=?')" \
    "$(mib "$hwm")"
  result RSS_HELD "$(mib "$held")"
  if ! kill -0 "$pid" 2>/dev/null; then
    tail -20 "$dir/daemon.log" >&2
    echo "the daemon died while holding connections" >&2
    return 1
  fi
  kill_pids "$pid"
}

bench_local_read() {
  need_main
  load_results
  local body='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"local_read","arguments":{"path":"read4k.txt"}}}'
  local size
  size=$(node "$here/util.mjs" rpc "$MAIN_URL" "$MAIN_TOKEN" tools/call \
    '{"name":"local_read","arguments":{"path":"read4k.txt"}}' | node "$here/util.mjs" json - result.structuredContent.size)
  [[ $size == 4096 ]] || {
    echo "local_read answered size $size, expected 4096" >&2
    return 1
  }
  # Every audited call commits to SQLite (WAL, synchronous=FULL): the disk's fdatasync latency
  # on the state dir's file system, measured now, bounds what follows.
  local fsync
  fsync=$(node "$here/util.mjs" fsyncprobe "$main/state" 200)
  printf '%-22s %s  (200 × 4 KiB write + fdatasync in the state dir)\n' disk.fdatasync "$fsync"
  result FSYNC_P50 "$(sed -n 's/^p50=\([0-9.]*\)ms.*/\1/p' <<<"$fsync")"
  TW_TOKEN=$MAIN_TOKEN TW_BODY=$body CPU_PID=$MAIN_PID \
    run_wrk local_read.4k "$MAIN_URL" -s "$here/mcp_post.lua"
  result READ_RPS "$WRK_RPS"
  result READ_CPU_US "$WRK_CPU_US"
  result READ_STEAL "$WRK_STEAL"
  result READ_P50 "$WRK_P50"
  result READ_P99 "$WRK_P99"
  # Every call must have succeeded: the daemon's own counters by result code.
  local codes
  codes=$(node "$here/util.mjs" metrics "$MAIN_ADMIN" |
    sed -n 's/^toolwarden_tool_calls_total{tool="local_read",code="\([A-Z_]*\)"} \([0-9.e+]*\)$/\1=\2/p' | tr '\n' ' ')
  echo "   daemon counters local_read: ${codes:-none}(includes warm-up); non-2xx=$WRK_BAD"
  result READ_CODES "$codes"
  result READ_BAD "$WRK_BAD"
  # The ratio to ping from alternating runs (ping, read, ping, read, ...): whatever else the
  # host runs meanwhile (the steal printed above) then weighs on both alike, where two runs
  # minutes apart can differ by half.
  local rounds=4 secs=$((WRK_SECS >= 8 ? WRK_SECS / 4 : 2)) i n_ping=0 t_ping=0 n_read=0 t_read=0 w
  for ((i = 0; i < rounds; i++)); do
    w=$(wrk_count '{"jsonrpc":"2.0","id":1,"method":"ping"}' "$secs")
    n_ping=$((n_ping + ${w% *})) t_ping=$(calc 'a + b' a="$t_ping" b="${w#* }")
    w=$(wrk_count "$body" "$secs")
    n_read=$((n_read + ${w% *})) t_read=$(calc 'a + b' a="$t_read" b="${w#* }")
  done
  local alt_ping alt_read
  alt_ping=$(calc 'n / t' n="$n_ping" t="$t_ping" | xargs printf '%.0f')
  alt_read=$(calc 'n / t' n="$n_read" t="$t_read" | xargs printf '%.0f')
  result PING_ALT_RPS "$alt_ping"
  result READ_ALT_RPS "$alt_read"
  printf '%-22s local_read/ping=%s%%  (%s × %s s each, alternating: read %s req/s, ping %s req/s; target ≥ 40%%)\n' \
    local_read.ratio "$(calc '100 * a / b' a="$alt_read" b="$alt_ping" | xargs printf '%.0f')" \
    "$rounds" "$secs" "$alt_read" "$alt_ping"
  # Per-call latency without queueing: one connection, one call at a time (informational).
  local c1_secs=$((WRK_SECS < 5 ? WRK_SECS : 5))
  TW_TOKEN=$MAIN_TOKEN TW_BODY=$body WRK_CONNS=1 WRK_THREADS=1 WRK_SECS=$c1_secs \
    run_wrk local_read.4k.c1 "$MAIN_URL" -s "$here/mcp_post.lua"
  result READ1_RPS "$WRK_RPS"
  result READ1_P50 "$WRK_P50"
  TW_TOKEN=$MAIN_TOKEN TW_BODY='{"jsonrpc":"2.0","id":1,"method":"ping"}' WRK_CONNS=1 WRK_THREADS=1 \
    WRK_SECS=$c1_secs run_wrk spine.ping.c1 "$MAIN_URL" -s "$here/mcp_post.lua"
  result PING1_RPS "$WRK_RPS"
  result PING1_P50 "$WRK_P50"
  local t0 t1 verify
  t0=$(now_ns)
  verify=$(tw "$main" audit verify) || echo "   !! audit verify failed: $verify"
  t1=$(now_ns)
  printf '%-22s %s  (%s ms)\n' audit.verify "$verify" "$(calc '(b - a) / 1e6' a="$t0" b="$t1" | xargs printf '%.0f')"
  need_main
}

bench_sdk() {
  need_main
  [[ -f $here/node_modules/@modelcontextprotocol/server-filesystem/package.json ]] || {
    echo "tests/bench/node_modules is missing (npm ci failed)" >&2
    return 1
  }
  local token out
  token=$(new_token "$main" "$tmp/wt")
  out=$(tracked node "$here/sdk_read.mjs" --url "$MAIN_URL" --token="$token" --dir "$tmp/wt" \
    --file read4k.txt --calls "$SDK_CALLS")
  local tw fsrv ping
  tw=$(awk '$1 == "toolwarden" { sub(/calls_per_s=/, "", $4); print $4 }' <<<"$out")
  ping=$(awk '$1 == "toolwarden_ping" { sub(/calls_per_s=/, "", $4); print $4 }' <<<"$out")
  fsrv=$(awk '$1 == "fs_server" { sub(/calls_per_s=/, "", $4); print $4 }' <<<"$out")
  [[ -n $tw && -n $fsrv ]] || {
    echo "$out" >&2
    return 1
  }
  printf '%-22s calls/s=%-8s (%s sequential calls, SDK 1.32.2, Streamable HTTP)\n' sdk.toolwarden "$tw" "$SDK_CALLS"
  printf '%-22s calls/s=%-8s (%s sequential MCP pings, same client: the HTTP client floor)\n' sdk.toolwarden.ping "$ping" "$SDK_CALLS"
  printf '%-22s calls/s=%-8s (%s sequential calls, read_text_file over stdio)\n' sdk.fs_server "$fsrv" "$SDK_CALLS"
  printf '%-22s toolwarden/fs_server=%s×  (target ≥ 1.5×)\n' sdk.ratio "$(calc 'a / b' a="$tw" b="$fsrv" | xargs printf '%.2f')"
  [[ -n $ping ]] && printf '%-22s ping/fs_server=%s×  (the ratio a call costing the daemon nothing would reach)\n' \
    sdk.ceiling "$(calc 'a / b' a="$ping" b="$fsrv" | xargs printf '%.2f')"
  result SDK_TW "$tw"
  result SDK_FS "$fsrv"
  result SDK_PING "$ping"
  need_main
}

# Wall-clock milliseconds of a command whose stdout goes to $tmp/search.out.
time_ms() {
  local t0 t1
  t0=$(now_ns)
  "$@" >"$tmp/search.out"
  t1=$(now_ns)
  calc '(b - a) / 1e6' a="$t0" b="$t1"
}
grep_count() { LC_ALL=C grep -rF -- "$NEEDLE" "$1" | wc -l; }
rg_count() { "$RG" -F --no-ignore --hidden --no-messages -- "$NEEDLE" "$1" | wc -l; }

bench_search() {
  need_main
  local tree="$tmp/tree" t0 t1 gen
  t0=$(now_ns)
  gen=$(tracked node "$here/util.mjs" gentree "$tree" "$TREE_FILES" "$NEEDLE")
  t1=$(now_ns)
  echo "   generated $gen in $(calc '(b - a) / 1e9' a="$t0" b="$t1" | xargs printf '%.1f') s"
  local token
  token=$(new_token "$main" "$tree")
  grep_count "$tree" >/dev/null # warm the page cache and the dentry cache
  local best_tw='' best_rg='' best_grep='' ms tw_files tw_matches rg_matches grep_matches line
  for _ in $(seq 1 "$SEARCH_RUNS"); do
    line=$(node "$here/util.mjs" search "$MAIN_URL" "$token" "$NEEDLE")
    ms=$(sed -n 's/^ms=\([0-9.]*\) .*/\1/p' <<<"$line")
    tw_files=$(sed -n 's/.*files_searched=\([0-9a-z]*\).*/\1/p' <<<"$line")
    tw_matches=$(sed -n 's/.*matches=\([0-9]*\).*/\1/p' <<<"$line")
    [[ -z $best_tw ]] || (($(calc 'a < b' a="$ms" b="$best_tw"))) && best_tw=$ms
    if [[ -n $RG ]]; then
      ms=$(time_ms rg_count "$tree")
      rg_matches=$(<"$tmp/search.out")
      [[ -z $best_rg ]] || (($(calc 'a < b' a="$ms" b="$best_rg"))) && best_rg=$ms
    fi
    ms=$(time_ms grep_count "$tree")
    grep_matches=$(<"$tmp/search.out")
    [[ -z $best_grep ]] || (($(calc 'a < b' a="$ms" b="$best_grep"))) && best_grep=$ms
  done
  [[ $tw_files =~ ^[0-9]+$ ]] || {
    echo "local_search did not report files_searched ($line)" >&2
    return 1
  }
  local tw_rate grep_rate rg_rate
  tw_rate=$(calc 'n * 1000 / t' n="$tw_files" t="$best_tw" | xargs printf '%.0f')
  grep_rate=$(calc 'n * 1000 / t' n="$TREE_FILES" t="$best_grep" | xargs printf '%.0f')
  printf '%-22s files/s=%-8s (%s files in %s ms, %s matches; best of %s, wall clock of the call)\n' \
    search.toolwarden "$tw_rate" "$tw_files" "$(printf '%.0f' "$best_tw")" "$tw_matches" "$SEARCH_RUNS"
  ((tw_files == TREE_FILES)) || echo "   !! local_search searched $tw_files files of $TREE_FILES"
  printf '%-22s files/s=%-8s (%s files in %s ms, %s matches; LC_ALL=C grep -rF)\n' \
    search.grep "$grep_rate" "$TREE_FILES" "$(printf '%.0f' "$best_grep")" "$grep_matches"
  result SEARCH_TW "$tw_rate"
  result SEARCH_GREP "$grep_rate"
  if [[ -n $RG ]]; then
    rg_rate=$(calc 'n * 1000 / t' n="$TREE_FILES" t="$best_rg" | xargs printf '%.0f')
    printf '%-22s files/s=%-8s (%s files in %s ms, %s matches; rg -F, default threads)\n' \
      search.rg "$rg_rate" "$TREE_FILES" "$(printf '%.0f' "$best_rg")" "$rg_matches"
    result SEARCH_RG "$rg_rate"
  else
    printf '%-22s rg not installed — skipped\n' search.rg
  fi
  [[ $tw_matches == "$grep_matches" ]] || echo "   !! local_search found $tw_matches matches, grep $grep_matches"
  need_main
}

run_bench "1 spine (wrk: ping vs nginx static file)" bench_spine
run_bench "2 rss (idle, $HELD_CONNS keep-alive connections)" bench_rss
run_bench "3 local_read (wrk, 4 KiB file, audited)" bench_local_read
run_bench "4 sdk (TypeScript SDK client: toolwarden vs server-filesystem)" bench_sdk
run_bench "5 local_search ($TREE_FILES files)" bench_search
run_bench "6 sandbox (toolwarden run vs bwrap and srt; local_test over MCP)" tracked "$here/sandbox.sh" "--$mode"
run_bench "7 custom tool (a trivial Python tool over MCP vs bare python3)" \
  tracked "$here/custom_tool.sh" "--$mode" --results "$tmp/results.env"
run_bench "8 snapshot (capture vs cp -a and sha256sum; again after 10 edits)" \
  tracked "$here/snapshot.sh" "--$mode" --results "$tmp/results.env"

# Clean shutdown of the shared daemon: SIGTERM must end it with status 0.
shutdown_note="ok"
if kill -0 "$MAIN_PID" 2>/dev/null; then
  t_stop=$(now_ns)
  kill -TERM "$MAIN_PID"
  set +e
  for _ in $(seq 1 100); do kill -0 "$MAIN_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$MAIN_PID" 2>/dev/null; then
    shutdown_note="still running 10 s after SIGTERM"
  else
    wait "$MAIN_PID"
    rc=$?
    ((rc == 0)) || shutdown_note="exit status $rc after SIGTERM"
    shutdown_note+=" ($(calc '(b - a) / 1e6' a="$t_stop" b="$(now_ns)" | xargs printf '%.0f') ms)"
  fi
  set -e
else
  shutdown_note="daemon had died"
fi

# ---- summary -----------------------------------------------------------------------------------
load_results
pct() { [[ -n ${1:-} && -n ${2:-} ]] && calc '100 * a / b' a="$1" b="$2" | xargs printf '%.0f%%' || echo "-"; }
times() { [[ -n ${1:-} && -n ${2:-} ]] && calc 'a / b' a="$1" b="$2" | xargs printf '%.2f×' || echo "-"; }

echo
echo "== summary ($mode mode; targets are printed, not asserted)"
row "figure" "toolwarden" "baseline (same run)" "ratio" "target" "verdict"
row "------" "----------" "-------------------" "-----" "------" "-------"
r=$(pct "${PING_RPS:-}" "${NGINX_RPS:-}")
row "1 spine ping req/s" "$(or_dash "${PING_RPS:-}")" "nginx $(or_dash "${NGINX_RPS:-}")" "$r" "≥ 50%" "$(verdict "$r" '>=' 50)"
row "1 spine ping p50 / p99 ms" "${PING_P50:-—} / ${PING_P99:-—}" "nginx ${NGINX_P50:-—} / ${NGINX_P99:-—}" "" "" ""
row "2 rss idle MiB" "$(or_dash "${RSS_IDLE:-}")" "" "" "≤ 16 MiB" "$(verdict "${RSS_IDLE:--}" '<=' 16)"
row "2 rss $HELD_CONNS conns MiB" "$(or_dash "${RSS_HELD:-}")" "" "" "≤ 64 MiB" "$(verdict "${RSS_HELD:--}" '<=' 64)"
r=$(pct "${READ_RPS:-}" "${PING_RPS:-}")
row "3 local_read 4 KiB req/s" "$(or_dash "${READ_RPS:-}")" "ping $(or_dash "${PING_RPS:-}")" "$r" "" ""
r=$(pct "${READ_ALT_RPS:-}" "${PING_ALT_RPS:-}")
row "3 alternating runs req/s" "$(or_dash "${READ_ALT_RPS:-}")" "ping $(or_dash "${PING_ALT_RPS:-}")" "$r" "≥ 40%" "$(verdict "$r" '>=' 40)"
row "3 daemon CPU µs/request" "$(or_dash "${READ_CPU_US:-}")" "ping $(or_dash "${PING_CPU_US:-}")" "" "" \
  "host steal ${READ_STEAL:-—}% / ${PING_STEAL:-—}%"
row "3 local_read p50 / p99 ms" "${READ_P50:-—} / ${READ_P99:-—}" "ping ${PING_P50:-—} / ${PING_P99:-—}" "" "" ""
r=$(pct "${READ1_RPS:-}" "${PING1_RPS:-}")
row "3 one conn: req/s, p50 ms" "${READ1_RPS:-—}, ${READ1_P50:-—}" "ping ${PING1_RPS:-—}, ${PING1_P50:-—}" "$r" "" ""
row "3 disk fdatasync p50 ms" "${FSYNC_P50:-—}" "" "" "" ""
r=$(times "${SDK_TW:-}" "${SDK_FS:-}")
row "4 SDK local_read calls/s" "$(or_dash "${SDK_TW:-}")" "server-fs $(or_dash "${SDK_FS:-}")" "$r" "≥ 1.5×" "$(verdict "$r" '>=' 1.5)"
r=$(times "${SDK_PING:-}" "${SDK_FS:-}")
row "4 SDK ping calls/s (floor)" "$(or_dash "${SDK_PING:-}")" "server-fs $(or_dash "${SDK_FS:-}")" "$r" "" \
  "the ceiling"
r=$(times "${SEARCH_TW:-}" "${SEARCH_GREP:-}")
row "5 local_search files/s" "$(or_dash "${SEARCH_TW:-}")" "grep -rF $(or_dash "${SEARCH_GREP:-}")" "$r" "—" ""
if [[ -n $RG ]]; then
  r=$(times "${SEARCH_TW:-}" "${SEARCH_RG:-}")
  row "" "" "rg $(or_dash "${SEARCH_RG:-}")" "$r" "—" ""
else
  row "" "" "rg not installed — skipped" "" "" ""
fi
r=$(times "${CT_MCP_P50:-}" "${CT_BARE_P50:-}")
row "7 custom tool p50 / p99 ms" "${CT_MCP_P50:-—} / ${CT_MCP_P99:-—}" "python3 ${CT_BARE_P50:-—} / ${CT_BARE_P99:-—}" \
  "$r" "≤ 1.5×" "$(verdict "$r" '<=' 1.5)"
r=$(times "${SNAP_FIRST_MS:-}" "${SNAP_CP_MS:-}")
row "8 snapshot capture ms" "$(or_dash "${SNAP_FIRST_MS:-}")" "cp -a $(or_dash "${SNAP_CP_MS:-}")" "$r" "≤ 2×" "$(verdict "$r" '<=' 2)"
row "8 again after 10 edits" "${SNAP_SECOND_MS:-—} ms" "dedup ${SNAP_DEDUP:-—}×" "" "" ""
echo "daemon shutdown on SIGTERM: $shutdown_note"
warnings=$(grep -c ' \(WARN\|ERROR\) ' "$main/daemon.log" || true)
echo "daemon log: $(wc -l <"$main/daemon.log") lines, ${warnings:-0} WARN/ERROR"
((${warnings:-0} == 0)) || grep -m5 ' \(WARN\|ERROR\) ' "$main/daemon.log" | sed 's/^/   /'
[[ ${PING_BAD:-0} == 0 && ${READ_BAD:-0} == 0 ]] ||
  echo "note: some wrk requests were not answered 2xx (ping ${PING_BAD:-0}, local_read ${READ_BAD:-0})"

if ((${#failed[@]})); then
  echo "benchmarks that could not run: ${failed[*]}"
  exit 1
fi

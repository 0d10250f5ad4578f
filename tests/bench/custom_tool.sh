#!/usr/bin/env bash
# Custom-tool benchmark (SPEC §11, issue 5): what running a trivial user-authored Python tool
# through toolwarden costs, next to running the same script with the bare interpreter, both
# measured in the same run on the same machine. Targets are printed, never asserted. Exit status
# is non-zero only when the benchmark could not run (the daemon, a call or a bare run failed).
#
#   tests/bench/custom_tool.sh [--quick] [--results FILE]
#
#   1 bare       /usr/bin/python3 tool.py < args.json, started with posix_spawn, its stdout read
#                through a pipe to EOF, N times: p50/p99 wall time
#   2 mcp        tools/call of the same tool.py as a user-scope custom tool (network none,
#                filesystem_write none), N sequential calls over ONE keep-alive HTTP/1.1
#                connection (raw HTTP: Python's http.client, so no SDK overhead is measured):
#                p50/p99 latency, and the daemon-reported elapsed_ms (the sandboxed run alone)
#   3 mcp.nospawn the same with process_spawn:false (Landlock execute rights + no-fork seccomp)
#   The three are interleaved call by call, so drift and noise hit all alike.
#   target: mcp p50 ≤ 1.5× the bare interpreter's p50
#
# --quick (run.sh --quick passes it): 100 calls of each. Default: 200.
# --results FILE: also append KEY=VALUE lines (CT_*) for run.sh's summary.
# Environment: TOOLWARDEN_BIN (default build/daemon/toolwarden), TMPDIR.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/common.sh
source "$here/common.sh"
PY=/usr/bin/python3
parse_args --with-results "$@"
if [[ $mode == quick ]]; then CALLS=100; else CALLS=200; fi
WARM=10

[[ -x $BIN ]] || die "toolwarden binary not found at $BIN (build it: ninja -C build toolwarden, or set TOOLWARDEN_BIN)"
[[ -x $PY ]] || die "$PY is not installed (the tool and the baseline both run it)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tw-ctool.XXXXXX")
# shellcheck source=tests/bench/procs.sh
source "$here/procs.sh"

# ---- the tool ----------------------------------------------------------------------------------
export HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/xdg" TOOLWARDEN_RUNTIME_DIR="$tmp/run" \
  TOOLWARDEN_STATE_DIR="$tmp/state" TOOLWARDEN_CONFIG="$tmp/config.json"
mkdir -p "$HOME" "$TOOLWARDEN_RUNTIME_DIR" "$TOOLWARDEN_STATE_DIR" "$tmp/wt" "$tmp/bare"
chmod 0700 "$TOOLWARDEN_RUNTIME_DIR" "$TOOLWARDEN_STATE_DIR"
cat >"$tmp/bare/tool.py" <<'PYTOOL'
import json, sys
args = json.load(sys.stdin)
print(json.dumps({"echo": args}))
PYTOOL
for t in echo echo_nospawn; do
  mkdir -p "$XDG_CONFIG_HOME/toolwarden/tools/$t"
  cp "$tmp/bare/tool.py" "$XDG_CONFIG_HOME/toolwarden/tools/$t/tool.py"
done
cat >"$XDG_CONFIG_HOME/toolwarden/tools/echo/tool.json" <<EOF
{"name": "echo", "description": "echoes its arguments", "input_schema": {"type": "object"},
 "run": ["$PY", "tool.py"], "capabilities": {"filesystem_write": "none", "network": "none"}}
EOF
cat >"$XDG_CONFIG_HOME/toolwarden/tools/echo_nospawn/tool.json" <<EOF
{"name": "echo_nospawn", "description": "echoes its arguments", "input_schema": {"type": "object"},
 "run": ["$PY", "tool.py"], "capabilities": {"filesystem_write": "none", "network": "none", "process_spawn": false}}
EOF

# ---- the driver --------------------------------------------------------------------------------
# driver.py PORT TOKEN CALLS WARM BARE_DIR OUT: interleaves, per round, one bare run and one
# tools/call of each tool; every answer is checked (the echo of that round's arguments).
cat >"$tmp/driver.py" <<'PYDRIVER'
import http.client, json, os, sys, time

port, token, calls, warm, bare_dir, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
conn = http.client.HTTPConnection('127.0.0.1', int(port), timeout=60)
headers = {'Authorization': 'Bearer ' + token, 'Content-Type': 'application/json',
           'Accept': 'application/json, text/event-stream'}
ids = iter(range(1, 1 << 30))
sockets = set()

def post(method, params):
    body = json.dumps({'jsonrpc': '2.0', 'id': next(ids), 'method': method, 'params': params})
    t0 = time.perf_counter_ns()
    conn.request('POST', '/mcp', body, headers)
    r = conn.getresponse()
    data = r.read()
    ms = (time.perf_counter_ns() - t0) / 1e6
    sockets.add(conn.sock.getsockname()[1] if conn.sock else None)
    if r.status != 200:
        sys.exit(f'driver: {method}: HTTP {r.status} {data[:300]!r}')
    return json.loads(data), ms

init, _ = post('initialize', {'protocolVersion': '2025-06-18', 'capabilities': {},
                              'clientInfo': {'name': 'tw-custom-tool-bench', 'version': '1'}})
if 'result' not in init:
    sys.exit(f'driver: initialize failed: {init}')

args_file = os.path.join(bare_dir, 'args.json')
devnull = os.open('/dev/null', os.O_WRONLY)

def bare(args):
    with open(args_file, 'w') as f:
        json.dump(args, f)
    fd = os.open(args_file, os.O_RDONLY)
    r, w = os.pipe()
    acts = [(os.POSIX_SPAWN_DUP2, fd, 0), (os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn('/usr/bin/python3', ['/usr/bin/python3', 'tool.py'], os.environ, file_actions=acts)
    os.close(w)
    chunks = []
    while True:
        c = os.read(r, 65536)
        if not c:
            break
        chunks.append(c)
    _, status = os.waitpid(pid, 0)
    ms = (time.perf_counter_ns() - t0) / 1e6
    os.close(r)
    os.close(fd)
    if os.waitstatus_to_exitcode(status) != 0 or json.loads(b''.join(chunks)) != {'echo': args}:
        sys.exit(f'driver: bare run failed: status {status}, output {b"".join(chunks)[:300]!r}')
    return ms

def mcp(name, args):
    resp, ms = post('tools/call', {'name': name, 'arguments': args})
    res = resp.get('result') or {}
    sc = res.get('structuredContent') or {}
    if res.get('isError') or sc.get('result') != {'echo': args}:
        sys.exit(f'driver: {name} call failed: {json.dumps(resp)[:600]}')
    return ms, sc['elapsed_ms']

os.chdir(bare_dir)
lat = {'BARE': [], 'MCP': [], 'NOSPAWN': []}
inside = {'MCP': [], 'NOSPAWN': []}
t_start = None
for i in range(warm + calls):
    if i == warm:
        t_start = time.perf_counter_ns()
    args = {'n': i, 'text': 'hello'}
    b = bare(args)
    m, me = mcp('echo', args)
    n, ne = mcp('echo_nospawn', args)
    if i >= warm:
        lat['BARE'].append(b)
        lat['MCP'].append(m)
        lat['NOSPAWN'].append(n)
        inside['MCP'].append(me)
        inside['NOSPAWN'].append(ne)
total_s = (time.perf_counter_ns() - t_start) / 1e9

def q(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]

with open(out, 'w') as f:
    for k, xs in lat.items():
        f.write(f'{k}_P50={q(xs, 0.5):.2f}\n{k}_P99={q(xs, 0.99):.2f}\n{k}_MAX={max(xs):.2f}\n')
    for k, xs in inside.items():
        f.write(f'{k}_INSIDE_P50={q(xs, 0.5)}\n')
    f.write(f'CALLS={calls}\nCONNS={len(sockets)}\nTOTAL_S={total_s:.1f}\n')
PYDRIVER

# ---- the run -----------------------------------------------------------------------------------
echo "== custom tool benchmark ($mode mode): $(nproc) CPUs, $(uname -r), $CALLS calls of each, interleaved"
echo "   binary $BIN; $($PY --version 2>&1) ($PY); load average $(cut -d' ' -f1-3 /proc/loadavg)"

env -u NOTIFY_SOCKET "$BIN" serve --listen 127.0.0.1:0 2>"$tmp/daemon.log" &
pid=$!
track "$pid"
for _ in $(seq 1 100); do
  [[ -s $TOOLWARDEN_RUNTIME_DIR/endpoint.json ]] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
[[ -s $TOOLWARDEN_RUNTIME_DIR/endpoint.json ]] || {
  tail -20 "$tmp/daemon.log" >&2
  die "toolwarden serve did not start"
}
job=$("$BIN" job create --worktree "$tmp/wt" --tool echo --tool echo_nospawn 2>"$tmp/job.err") ||
  die "job create failed: $(tail -2 "$tmp/job.err" | tr '\n' ' ')"
token=$($PY -c 'import json, sys; print(json.load(sys.stdin)["token"])' <<<"$job")
port=$($PY -c 'import json, sys, urllib.parse; print(urllib.parse.urlsplit(json.load(sys.stdin)["mcp_url"]).port)' <<<"$job")

rc=0
tracked "$PY" "$tmp/driver.py" "$port" "$token" "$CALLS" "$WARM" "$tmp/bare" "$tmp/ct.env" 2>"$tmp/driver.err" || rc=$?
kill -TERM "$pid" 2>/dev/null || true
for _ in $(seq 1 100); do
  running "$pid" || break
  sleep 0.1
done
if ((rc != 0)); then
  tail -3 "$tmp/driver.err" >&2
  tail -5 "$tmp/daemon.log" | sed 's/^/   /' >&2
  die "the benchmark driver failed (exit $rc)"
fi

f() { field "$tmp/ct.env" "$1"; }
ratio() { calc 'a / b' a="$1" b="$2" | xargs printf '%.2f'; }
printf '%-22s p50=%sms  p99=%sms  max=%sms  (%s runs: posix_spawn → exit, stdout read to EOF)\n' \
  ctool.bare "$(f BARE_P50)" "$(f BARE_P99)" "$(f BARE_MAX)" "$(f CALLS)"
printf '%-22s p50=%sms  p99=%sms  max=%sms  (%s calls, %s connection(s); daemon-reported elapsed_ms p50=%s)\n' \
  ctool.mcp "$(f MCP_P50)" "$(f MCP_P99)" "$(f MCP_MAX)" "$(f CALLS)" "$(f CONNS)" "$(f MCP_INSIDE_P50)"
printf '%-22s p50=%sms  p99=%sms  max=%sms  (process_spawn:false; elapsed_ms p50=%s)\n' \
  ctool.mcp.nospawn "$(f NOSPAWN_P50)" "$(f NOSPAWN_P99)" "$(f NOSPAWN_MAX)" "$(f NOSPAWN_INSIDE_P50)"
printf '%-22s mcp/bare p50 %s×  p99 %s×;  nospawn/bare p50 %s×  (target ≤ 1.5×)\n' ctool.ratio \
  "$(ratio "$(f MCP_P50)" "$(f BARE_P50)")" "$(ratio "$(f MCP_P99)" "$(f BARE_P99)")" \
  "$(ratio "$(f NOSPAWN_P50)" "$(f BARE_P50)")"
[[ $(f CONNS) == 1 ]] || echo "   !! the calls used $(f CONNS) connections, not one keep-alive connection"
echo "   daemon log: $(wc -l <"$tmp/daemon.log") lines, $(grep -c ' \(WARN\|ERROR\) ' "$tmp/daemon.log" || true) WARN/ERROR"

if [[ -n $results ]]; then
  {
    echo "CT_BARE_P50=$(f BARE_P50)"
    echo "CT_BARE_P99=$(f BARE_P99)"
    echo "CT_MCP_P50=$(f MCP_P50)"
    echo "CT_MCP_P99=$(f MCP_P99)"
    echo "CT_NOSPAWN_P50=$(f NOSPAWN_P50)"
    echo "CT_NOSPAWN_P99=$(f NOSPAWN_P99)"
    echo "CT_INSIDE_P50=$(f MCP_INSIDE_P50)"
  } >>"$results"
fi

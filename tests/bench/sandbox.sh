#!/usr/bin/env bash
# Sandbox benchmarks: what one sandboxed process costs, next to baselines measured in the same
# run on the same machine. Targets are printed, never asserted. Exit status is non-zero only when
# a benchmark could not run at all (toolwarden, bwrap or the daemon failed); an srt that cannot
# run on this machine is reported ("srt: could not run — reason") and skipped.
#
#   tests/bench/sandbox.sh [--quick]
#
#   1 run        whole process, median of N runs each (interleaved), wall and CPU time
#                (user+sys of the child and of every descendant it leaves behind):
#                  toolwarden run -- /bin/true       (worktree: an empty temp dir)
#                  bwrap --unshare-all … /bin/true   (read-only /usr, /proc, /dev, tmpfs /tmp)
#                  srt true                          (@anthropic-ai/sandbox-runtime, no network,
#                                                     home dirs unreadable, no writes)
#                targets: toolwarden ≤ 1.0× bwrap, ≤ 1/50 of srt
#   2 local_test tools/call local_test {"command":"true"} (a registered /bin/true) over MCP,
#                sequentially over one keep-alive connection: p50/p99 latency and calls/s,
#                next to the `toolwarden run` median of benchmark 1; then 20 calls 100 ms apart
#                (the cost of one call after a quiet spell)
#
# --quick (run.sh --quick passes it): 20 runs each, 200 calls. Default: 50 runs, 500 calls.
# Environment: TOOLWARDEN_BIN (default build/daemon/toolwarden), TMPDIR.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/common.sh
source "$here/common.sh"
parse_args "$@"
if [[ $mode == quick ]]; then
  RUNS=20 CALLS=200
else
  RUNS=50 CALLS=500
fi
WARM_RUNS=2 WARM_CALLS=20 SPACED_CALLS=20

# ---- prerequisites -----------------------------------------------------------------------------
[[ -x $BIN ]] || die "toolwarden binary not found at $BIN (build it: ninja -C build toolwarden, or set TOOLWARDEN_BIN)"
PY=$(command -v python3 || true)
[[ -z $PY && -x /usr/bin/python3 ]] && PY=/usr/bin/python3
[[ -n $PY ]] || die "python3 is not installed (it measures each child's wall and CPU time)"
command -v node >/dev/null || die "node (Node.js 20 or later) is not installed"
BWRAP=$(command -v bwrap || true)
[[ -n $BWRAP ]] || die "bwrap is not installed (Debian package bubblewrap; scripts/install-deps.sh --test installs it)"
SRT_PKG=$here/node_modules/@anthropic-ai/sandbox-runtime
if [[ ! -f $SRT_PKG/package.json ]] && command -v npm >/dev/null; then
  echo "   installing tests/bench dependencies (npm ci)"
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) || echo "sandbox.sh: npm ci failed in tests/bench" >&2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tw-sandbox.XXXXXX")
# shellcheck source=tests/bench/procs.sh
source "$here/procs.sh"

# ---- the measuring helper ----------------------------------------------------------------------
# measure.py RUNS WARM OUT.env NAME PROG [ARG]... [:: NAME PROG [ARG]...]...
# Runs the commands in turn, each round starting with the next one (so drift and neighbours hit
# all alike), stdin and stdout /dev/null, stderr to NAME.stderr next to OUT.env. It is a child
# subreaper: a descendant that outlives the command is re-parented to it, reaped and counted in
# the CPU time (reported as "late"); one still alive 2 s after the command ended is killed by its
# pid and reported as "leftover".
# Wall: posix_spawn to the command's exit (WALL_ALL: to the last descendant reaped).
# CPU: RUSAGE_CHILDREN user+sys delta over the run, descendants included.
cat >"$tmp/measure.py" <<'PY'
import ctypes, os, resource, shutil, signal, statistics, sys, time

runs, warm, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
cmds, cur = [], None
for a in sys.argv[4:]:
    if a == '::':
        cur = None
        continue
    if cur is None:
        cur = {'name': a, 'argv': []}
        cmds.append(cur)
    else:
        cur['argv'].append(a)
for c in cmds:
    path = c['argv'][0] if '/' in c['argv'][0] else shutil.which(c['argv'][0])
    if not path:
        sys.exit(f"measure.py: {c['argv'][0]} not found")
    c.update(path=path, wall=[], wall_all=[], cpu=[], user=[], sys=[], fails=0, late=0, leftover=0, last_status=None,
             errfile=os.path.join(os.path.dirname(out), f"{c['name']}.stderr"))

libc = ctypes.CDLL(None, use_errno=True)
PR_SET_CHILD_SUBREAPER = 36
if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
    sys.exit('measure.py: prctl(PR_SET_CHILD_SUBREAPER) failed')
me = os.getpid()

def our_children():
    kids = []
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open(f'/proc/{d}/stat') as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rfind(')') + 2:].split()
        if int(fields[1]) == me:
            kids.append(int(d))
    return kids

class Timeout(Exception):
    pass

def on_alarm(signum, frame):
    raise Timeout()

signal.signal(signal.SIGALRM, on_alarm)

def reap_rest():
    """Reaps descendants re-parented to us (blocking, 2 s at most); returns (late, leftover)."""
    late = leftover = 0
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        while True:
            os.waitpid(-1, 0)
            late += 1
    except ChildProcessError:
        pass
    except Timeout:
        for k in our_children():
            leftover += 1
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while True:
                os.waitpid(-1, 0)
        except ChildProcessError:
            pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return late, leftover

def run_once(c, record):
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(c['errfile'], 'ab') as err:
        acts = [(os.POSIX_SPAWN_OPEN, 0, '/dev/null', os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, '/dev/null', os.O_WRONLY, 0),
                (os.POSIX_SPAWN_DUP2, err.fileno(), 2)]
        t0 = time.perf_counter_ns()
        pid = os.posix_spawn(c['path'], c['argv'], os.environ, file_actions=acts)
        _, status, _ = os.wait4(pid, 0)
        t1 = time.perf_counter_ns()
    late, leftover = reap_rest()
    t2 = time.perf_counter_ns()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    code = os.waitstatus_to_exitcode(status)
    c['last_status'] = code
    if not record:
        return code
    u = ru1.ru_utime - ru0.ru_utime
    s = ru1.ru_stime - ru0.ru_stime
    c['wall'].append((t1 - t0) / 1e6)
    c['wall_all'].append((t2 - t0) / 1e6)
    c['user'].append(u * 1e3)
    c['sys'].append(s * 1e3)
    c['cpu'].append((u + s) * 1e3)
    c['late'] += late
    c['leftover'] += leftover
    if code != 0:
        c['fails'] += 1
    return code

for c in cmds:
    open(c['errfile'], 'wb').close()
# Each round starts with the next command: in a fixed order one command would always follow the
# same neighbour (srt's node process and its dozens of exiting children leave cold caches and
# kernel clean-up behind), which would bias it alone.
for _ in range(warm):
    for c in cmds:
        run_once(c, False)
for i in range(runs):
    k = i % len(cmds)
    for c in cmds[k:] + cmds[:k]:
        run_once(c, True)

def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p * (len(xs) - 1))))]

with open(out, 'w') as f:
    for c in cmds:
        n = c['name']
        if not c['wall']:
            continue
        vals = {
            'WALL': statistics.median(c['wall']), 'WALL_MIN': min(c['wall']), 'WALL_P90': q(c['wall'], 0.9),
            'WALL_ALL': statistics.median(c['wall_all']),
            'CPU': statistics.median(c['cpu']), 'USER': statistics.median(c['user']),
            'SYS': statistics.median(c['sys']),
        }
        for k, v in vals.items():
            f.write(f'{n}_{k}={v:.2f}\n')
        f.write(f"{n}_RUNS={len(c['wall'])}\n{n}_FAILS={c['fails']}\n{n}_LATE={c['late']}\n"
                f"{n}_LEFTOVER={c['leftover']}\n{n}_STATUS={c['last_status']}\n")
PY

# ---- the MCP client ----------------------------------------------------------------------------
# local_test.mjs URL TOKEN CALLS WARM SPACED: initialize, then WARM + CALLS sequential tools/call
# local_test {"command":"true"} over one keep-alive connection (node:http Agent, maxSockets 1),
# then SPACED more calls 100 ms apart on the same connection.
# Every answer must be 200 with state "completed" and exit_code 0. Prints KEY=VALUE lines.
cat >"$tmp/local_test.mjs" <<'JS'
import http from 'node:http';

const [url, token, callsText, warmText, spacedText] = process.argv.slice(2);
const calls = Number(callsText), warm = Number(warmText), spacedCalls = Number(spacedText);
const u = new URL(url);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const ports = new Set();
let nextId = 0, session;

function post(msg) {
  const body = JSON.stringify({ jsonrpc: '2.0', id: ++nextId, ...msg });
  const headers = {
    Authorization: `Bearer ${token}`,
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'Content-Length': Buffer.byteLength(body),
  };
  if (session) headers['Mcp-Session-Id'] = session;
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', agent, headers }, (res) => {
      ports.add(res.socket.localPort);
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString('utf8'), ms });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
function fail(what, r) {
  console.error(`local_test.mjs: ${what}: HTTP ${r.status} ${r.text.slice(0, 400)}`);
  process.exit(1);
}

const init = await post({
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'tw-sandbox-bench', version: '1' } },
});
if (init.status !== 200) fail('initialize', init);
session = init.headers['mcp-session-id'];

const call = { method: 'tools/call', params: { name: 'local_test', arguments: { command: 'true' } } };
const lat = [], elapsed = [];
let t0;
for (let i = 0; i < warm + calls; i++) {
  if (i === warm) t0 = process.hrtime.bigint();
  const r = await post(call);
  if (r.status !== 200) fail(`call ${i}`, r);
  const sc = JSON.parse(r.text).result?.structuredContent;
  if (!sc || sc.state !== 'completed' || sc.exit_code !== 0) fail(`call ${i} did not complete`, r);
  if (i >= warm) {
    lat.push(r.ms);
    elapsed.push(sc.elapsed_ms);
  }
}
const totalMs = Number(process.hrtime.bigint() - t0) / 1e6;
// The same call once every 100 ms, as an agent would make it: what one call costs when the
// kernel has gone quiet between calls (per-call setup that back-to-back calls amortise shows).
const spaced = [];
for (let i = 0; i < spacedCalls; i++) {
  await new Promise((r) => setTimeout(r, 100));
  const r = await post(call);
  if (r.status !== 200) fail(`spaced call ${i}`, r);
  const sc = JSON.parse(r.text).result?.structuredContent;
  if (!sc || sc.state !== 'completed' || sc.exit_code !== 0) fail(`spaced call ${i} did not complete`, r);
  spaced.push(r.ms);
}
agent.destroy();
const q = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.round(p * (s.length - 1))))];
};
console.log(`LT_CALLS=${calls}`);
console.log(`LT_P50=${q(lat, 0.5).toFixed(2)}`);
console.log(`LT_P99=${q(lat, 0.99).toFixed(2)}`);
console.log(`LT_MAX=${Math.max(...lat).toFixed(2)}`);
console.log(`LT_MEAN=${(lat.reduce((a, b) => a + b, 0) / lat.length).toFixed(2)}`);
console.log(`LT_RATE=${((calls * 1000) / totalMs).toFixed(0)}`);
console.log(`LT_ELAPSED_P50=${q(elapsed, 0.5)}`);
console.log(`LT_CONNS=${ports.size}`);
console.log(`LT_SPACED_P50=${q(spaced, 0.5).toFixed(2)}`);
console.log(`LT_SPACED_MAX=${Math.max(...spaced).toFixed(2)}`);
JS

# ---- the run -----------------------------------------------------------------------------------
srt_version=$(node -p "require('$SRT_PKG/package.json').version" 2>/dev/null || echo '?')
echo "== sandbox benchmarks ($mode mode): $(nproc) CPUs, $(uname -r), $RUNS runs each, $CALLS local_test calls"
echo "   binary $BIN; $("$BWRAP" --version); srt $srt_version (node $(node --version));" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"

failed=()
# Everything runs with a temp HOME and temp toolwarden dirs: the real ~/.srt-settings.json and
# the user's toolwarden config and state are never read or touched.
export HOME="$tmp/home" TOOLWARDEN_RUNTIME_DIR="$tmp/twrun" TOOLWARDEN_STATE_DIR="$tmp/twstate" \
  TOOLWARDEN_CONFIG="$tmp/twconfig.json"
mkdir -p "$HOME" "$TOOLWARDEN_RUNTIME_DIR" "$TOOLWARDEN_STATE_DIR" "$tmp/wt"
chmod 0700 "$TOOLWARDEN_RUNTIME_DIR" "$TOOLWARDEN_STATE_DIR"
wt=$tmp/wt

# bwrap's minimal root: /usr read-only plus the merged-/usr symlinks this host has.
bwrap_cmd=("$BWRAP" --unshare-all --die-with-parent --ro-bind /usr /usr)
for l in /bin /sbin /lib /lib32 /lib64 /libx32; do
  if [[ -L $l ]]; then
    bwrap_cmd+=(--symlink "$(readlink "$l")" "$l")
  elif [[ -d $l ]]; then
    bwrap_cmd+=(--ro-bind "$l" "$l")
  fi
done
bwrap_cmd+=(--proc /proc --dev /dev --tmpfs /tmp /bin/true)

# srt: no domain allowed (no network at all), no writes, the home directories and this checkout
# unreadable; the worktree and srt's own package (its seccomp helper runs inside) re-allowed.
srt_note=
SRT=$here/node_modules/.bin/srt
cat >"$tmp/srt-settings.json" <<EOF
{
  "network": { "allowedDomains": [], "deniedDomains": [] },
  "filesystem": {
    "denyRead": ["/root", "/home", "$root"],
    "allowRead": ["$wt", "$SRT_PKG"],
    "allowWrite": [],
    "denyWrite": []
  }
}
EOF
srt_cmd=("$SRT" --settings "$tmp/srt-settings.json" true)
if [[ ! -x $SRT ]]; then
  srt_note="tests/bench/node_modules has no srt (npm ci in tests/bench)"
elif ! command -v socat >/dev/null; then
  srt_note="socat is not installed (Debian package socat; srt bridges its proxies with it)"
fi

# One checked run of each before timing: a sandbox that cannot start is reported, not timed.
check() { # check NAME CMD...: runs once (cwd the worktree), stderr into $tmp/NAME.check
  local name=$1
  shift
  (cd "$wt" && "$@" </dev/null >/dev/null 2>"$tmp/$name.check")
}
why() { grep -v '^\s*$' "$tmp/$1.check" | tail -3 | tr '\n' ' ' | cut -c1-300; }

bench_run() {
  echo "-- 1 run: whole process, /bin/true in each sandbox (median of $RUNS, interleaved)"
  local args=() rc
  if check TW "$BIN" run -- /bin/true; then
    args+=(TW "$BIN" run -- /bin/true)
  else
    rc=$?
    echo "!! toolwarden run -- /bin/true failed (exit $rc): $(why TW)"
    failed+=("toolwarden run")
  fi
  if check BWRAP "${bwrap_cmd[@]}"; then
    ((${#args[@]})) && args+=(::)
    args+=(BWRAP "${bwrap_cmd[@]}")
  else
    rc=$?
    echo "!! bwrap failed (exit $rc): $(why BWRAP)"
    failed+=("bwrap")
  fi
  if [[ -z $srt_note ]]; then
    if check SRT "${srt_cmd[@]}"; then
      ((${#args[@]})) && args+=(::)
      args+=(SRT "${srt_cmd[@]}")
    else
      srt_note="exit $?: $(why SRT)"
    fi
  fi
  [[ -n $srt_note ]] && echo "srt: could not run — $srt_note"
  ((${#args[@]})) || return 0
  (cd "$wt" && tracked "$PY" "$tmp/measure.py" "$RUNS" "$WARM_RUNS" "$tmp/run.env" "${args[@]}") || {
    echo "!! the measuring helper failed"
    failed+=("measure")
    return 0
  }
  local n label fails late left
  for n in TW BWRAP SRT; do
    [[ -n $(field "$tmp/run.env" "${n}_WALL") ]] || continue
    case $n in
      TW) label="toolwarden run" ;;
      BWRAP) label=bwrap ;;
      SRT) label="srt $srt_version" ;;
    esac
    printf '%-22s wall p50=%sms (min %s, p90 %s)  cpu p50=%sms (user %s + sys %s)  [%s]\n' \
      "run.$(tr '[:upper:]' '[:lower:]' <<<"$n")" \
      "$(field "$tmp/run.env" "${n}_WALL")" "$(field "$tmp/run.env" "${n}_WALL_MIN")" \
      "$(field "$tmp/run.env" "${n}_WALL_P90")" "$(field "$tmp/run.env" "${n}_CPU")" \
      "$(field "$tmp/run.env" "${n}_USER")" "$(field "$tmp/run.env" "${n}_SYS")" "$label"
    fails=$(field "$tmp/run.env" "${n}_FAILS")
    late=$(field "$tmp/run.env" "${n}_LATE")
    left=$(field "$tmp/run.env" "${n}_LEFTOVER")
    ((fails == 0)) || echo "   !! $label: $fails of $RUNS runs exited non-zero:" \
      "$(grep -v '^\s*$' "$tmp/$n.stderr" | tail -2 | tr '\n' ' ' | cut -c1-300)"
    ((late == 0)) || echo "   note: $label left $late descendant(s) running after it exited (reaped here, CPU" \
      "counted; wall until the last one is gone p50=$(field "$tmp/run.env" "${n}_WALL_ALL")ms)"
    ((left == 0)) || echo "   !! $label: $left descendant(s) still alive 2 s after it exited (killed)"
  done
  local tw bw sr
  tw=$(field "$tmp/run.env" TW_WALL) bw=$(field "$tmp/run.env" BWRAP_WALL) sr=$(field "$tmp/run.env" SRT_WALL)
  [[ -n $tw && -n $bw ]] && printf '%-22s wall %s×  cpu %s×  (target ≤ 1.0×)\n' run.ratio.bwrap \
    "$(calc 'a / b' a="$tw" b="$bw" | xargs printf '%.2f')" \
    "$(calc 'a / b' a="$(field "$tmp/run.env" TW_CPU)" b="$(field "$tmp/run.env" BWRAP_CPU)" | xargs printf '%.2f')"
  [[ -n $tw && -n $sr ]] && printf '%-22s wall 1/%s  cpu 1/%s  (target ≤ 1/50)\n' run.ratio.srt \
    "$(calc 'b / a' a="$tw" b="$sr" | xargs printf '%.0f')" \
    "$(calc 'b / a' a="$(field "$tmp/run.env" TW_CPU)" b="$(field "$tmp/run.env" SRT_CPU)" | xargs printf '%.0f')"
  # No run may leave anything behind in the (empty, read-only) worktree.
  [[ -z $(find "$wt" -mindepth 1 -print -quit) ]] ||
    echo "   !! the worktree is no longer empty: $(find "$wt" -mindepth 1 -maxdepth 1 -printf "%f " | head -c 300)"
  if [[ $(field "$tmp/run.env" TW_FAILS) == "$RUNS" ]]; then failed+=("toolwarden run"); fi
  if [[ $(field "$tmp/run.env" BWRAP_FAILS) == "$RUNS" ]]; then failed+=("bwrap"); fi
  if [[ $(field "$tmp/run.env" SRT_FAILS) == "$RUNS" ]]; then srt_note="every timed run failed"; fi
  return 0
}

# /proc/PID/stat utime+stime+cutime+cstime in ticks (the daemon and the sandboxes it reaped)
proc_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 + $14 + $15 }' "/proc/$1/stat"; }

bench_local_test() {
  echo "-- 2 local_test: tools/call of a registered /bin/true over MCP ($CALLS sequential calls, one connection)"
  local dir="$tmp/daemon"
  mkdir -p "$dir/run" "$dir/state" "$dir/wt"
  chmod 0700 "$dir/run" "$dir/state"
  printf '{"commands":[{"id":"true","argv":["/bin/true"]}]}\n' >"$dir/config.json"
  chmod 0600 "$dir/config.json"
  local -x TOOLWARDEN_RUNTIME_DIR="$dir/run" TOOLWARDEN_STATE_DIR="$dir/state" TOOLWARDEN_CONFIG="$dir/config.json"
  env -u NOTIFY_SOCKET "$BIN" serve --listen 127.0.0.1:0 2>"$dir/daemon.log" &
  local pid=$!
  track "$pid"
  for _ in $(seq 1 100); do
    [[ -s $dir/run/endpoint.json ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ ! -s $dir/run/endpoint.json ]]; then
    tail -20 "$dir/daemon.log" >&2
    echo "!! toolwarden serve did not start"
    failed+=("local_test")
    return 0
  fi
  local job token url
  if ! job=$("$BIN" job create --worktree "$dir/wt" --command true 2>"$dir/job.err"); then
    echo "!! toolwarden job create --command true failed: $(tail -2 "$dir/job.err" | tr '\n' ' ')"
    failed+=("local_test")
    return 0
  fi
  token=$(node "$here/util.mjs" json - token <<<"$job")
  url=$(node "$here/util.mjs" json - mcp_url <<<"$job")
  local hz ticks0 ticks1 cpu_per_call tw_run verify
  hz=$(getconf CLK_TCK)
  ticks0=$(proc_ticks "$pid")
  if ! tracked node "$tmp/local_test.mjs" "$url" "$token" "$CALLS" "$WARM_CALLS" "$SPACED_CALLS" >"$tmp/lt.env" 2>"$tmp/lt.err"; then
    echo "!! the local_test client failed: $(tail -3 "$tmp/lt.err" | tr '\n' ' ' | cut -c1-400)"
    tail -5 "$dir/daemon.log" | sed 's/^/   /'
    failed+=("local_test")
  else
    ticks1=$(proc_ticks "$pid")
    cpu_per_call=$(calc '(b - a) * 1000 / hz / n' a="$ticks0" b="$ticks1" hz="$hz" n=$((CALLS + WARM_CALLS + SPACED_CALLS)) |
      xargs printf '%.2f')
    echo "LT_DAEMON_CPU=$cpu_per_call" >>"$tmp/lt.env"
    printf '%-22s p50=%sms  p99=%sms  max=%sms  calls/s=%s  (%s calls, %s connection(s); daemon-reported elapsed_ms p50=%s)\n' \
      local_test.true "$(field "$tmp/lt.env" LT_P50)" "$(field "$tmp/lt.env" LT_P99)" "$(field "$tmp/lt.env" LT_MAX)" \
      "$(field "$tmp/lt.env" LT_RATE)" "$CALLS" "$(field "$tmp/lt.env" LT_CONNS)" "$(field "$tmp/lt.env" LT_ELAPSED_P50)"
    printf '%-22s p50=%sms  max=%sms  (%s more calls, one every 100 ms, same connection)\n' local_test.spaced \
      "$(field "$tmp/lt.env" LT_SPACED_P50)" "$(field "$tmp/lt.env" LT_SPACED_MAX)" "$SPACED_CALLS"
    printf '%-22s %sms per call (daemon + the sandboxes it reaped, /proc/PID/stat ticks over %s calls incl. warm-up)\n' \
      local_test.cpu "$cpu_per_call" $((CALLS + WARM_CALLS + SPACED_CALLS))
    [[ $(field "$tmp/lt.env" LT_CONNS) == 1 ]] ||
      echo "   !! the calls used $(field "$tmp/lt.env" LT_CONNS) connections, not one keep-alive connection"
    tw_run=$(field "$tmp/run.env" TW_WALL)
    [[ -n $tw_run ]] && printf '%-22s local_test p50 / toolwarden run wall p50 = %s / %s ms = %s×\n' local_test.vs_run \
      "$(field "$tmp/lt.env" LT_P50)" "$tw_run" \
      "$(calc 'a / b' a="$(field "$tmp/lt.env" LT_P50)" b="$tw_run" | xargs printf '%.2f')"
    verify=$("$BIN" audit verify 2>&1) || echo "   !! audit verify failed: $verify"
    echo "   audit verify: $verify"
  fi
  local t_stop rc
  t_stop=$(date +%s%N)
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    running "$pid" || break
    sleep 0.1
  done
  if running "$pid"; then
    echo "   !! daemon still running 10 s after SIGTERM"
  else
    set +e
    wait "$pid"
    rc=$?
    set -e
    echo "   daemon stop: exit $rc after SIGTERM ($(calc '(b - a) / 1e6' a="$t_stop" b="$(date +%s%N)" | xargs printf '%.0f') ms);" \
      "log: $(wc -l <"$dir/daemon.log") lines, $(grep -c ' \(WARN\|ERROR\) ' "$dir/daemon.log" || true) WARN/ERROR"
  fi
  grep -m5 ' \(WARN\|ERROR\) ' "$dir/daemon.log" | sed 's/^/   /' || true
}

bench_run
bench_local_test

# ---- summary -----------------------------------------------------------------------------------
r() { field "$tmp/run.env" "$1"; }
l() { field "$tmp/lt.env" "$1"; }
ratio() { [[ -n ${1:-} && -n ${2:-} ]] && calc 'a / b' a="$1" b="$2" | xargs printf '%.3f×' || echo "-"; }

echo
echo "== sandbox summary ($mode mode; targets are printed, not asserted)"
row "figure" "toolwarden" "baseline (same run)" "ratio" "target" "verdict"
row "------" "----------" "-------------------" "-----" "------" "-------"
for kind in WALL CPU; do
  label=$([[ $kind == WALL ]] && echo "wall" || echo "CPU")
  x=$(ratio "$(r TW_$kind)" "$(r BWRAP_$kind)")
  row "S1 run /bin/true $label ms" "$(or_dash "$(r TW_$kind)")" "bwrap $(or_dash "$(r BWRAP_$kind)")" "$x" "≤ 1.0×" \
    "$(verdict "$x" '<=' 1.0)"
  if [[ -n $(r SRT_$kind) ]]; then
    x=$(ratio "$(r TW_$kind)" "$(r SRT_$kind)")
    row "" "" "srt $(r SRT_$kind)" "$x" "≤ 1/50" "$(verdict "$x" '<=' 0.02)"
  else
    row "" "" "srt could not run" "" "≤ 1/50" "n/a"
  fi
done
row "S2 local_test p50 / p99 ms" "$(or_dash "$(l LT_P50)") / $(or_dash "$(l LT_P99)")" \
  "run wall p50 $(or_dash "$(r TW_WALL)")" "$(ratio "$(l LT_P50)" "$(r TW_WALL)")" "" ""
row "S2 local_test calls/s" "$(or_dash "$(l LT_RATE)")" "" "" "" ""
row "S2 one call / 100 ms p50" "$(or_dash "$(l LT_SPACED_P50)")" "run wall p50 $(or_dash "$(r TW_WALL)")" \
  "$(ratio "$(l LT_SPACED_P50)" "$(r TW_WALL)")" "" ""
row "S2 CPU ms per call" "$(or_dash "$(l LT_DAEMON_CPU)")" "run CPU p50 $(or_dash "$(r TW_CPU)")" "" "" ""
[[ -z $srt_note ]] || echo "srt: could not run — $srt_note"

if ((${#failed[@]})); then
  echo "sandbox benchmarks that could not run: ${failed[*]}"
  exit 1
fi

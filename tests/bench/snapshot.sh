#!/usr/bin/env bash
# Snapshot benchmark (SPEC §12): what capturing a worktree costs, next to baselines measured in
# the same run on the same tree. Targets are printed, never asserted. Exit status is non-zero only
# when the benchmark could not run at all.
#
#   tests/bench/snapshot.sh [--quick] [--results FILE]
#
#   1 capture   `toolwarden snapshot capture` of a generated tree (wall clock of the CLI call:
#               walk, SHA-256 of every file, blobs written and synced, manifest committed),
#               next to `cp -a` of the same tree and `find … -type f -exec sha256sum {} +`
#   2 again     a second capture after 10 files changed: time, bytes newly stored, and the
#               dedup ratio (bytes the two snapshots name / bytes stored for both)
#
# --quick (run.sh --quick passes it): 2,000 files, 40 MB. Default: 10,000 files, 200 MB.
# The page cache is warm for every figure (the tree was just written); all three read it alike.
# --results FILE: also append KEY=VALUE lines (SNAP_*) for run.sh's summary.
# Environment: TOOLWARDEN_BIN (default build/daemon/toolwarden), TMPDIR.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/bench/common.sh
source "$here/common.sh"
parse_args --with-results "$@"
if [[ $mode == quick ]]; then
  FILES=2000 MBYTES=40
else
  FILES=10000 MBYTES=200
fi
CHANGED=10

[[ -x $BIN ]] || die "toolwarden binary not found at $BIN (build it: ninja -C build toolwarden, or set TOOLWARDEN_BIN)"
PY=$(command -v python3 || true)
[[ -n $PY ]] || die "python3 is not installed (it generates the tree)"
command -v sha256sum >/dev/null || die "sha256sum is not installed (coreutils)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tw-snapshot.XXXXXX")
# shellcheck source=tests/bench/procs.sh
source "$here/procs.sh"
ms_since() { calc '(b - a) / 1e6' a="$1" b="$(now_ns)" | xargs printf '%.0f'; }
result() { [[ -z $results ]] || printf '%s=%q\n' "$1" "$2" >>"$results"; }
json_field() { "$PY" -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# ---- the tree: FILES files in directories of 100, sizes spread around the mean, random bytes ----
tree="$tmp/tree"
t0=$(now_ns)
"$PY" - "$tree" "$FILES" "$MBYTES" <<'PY'
import os, random, sys
root, files, mbytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(7)
mean = mbytes * 1_000_000 // files
blob = os.urandom(4 * mean + 65536)
for i in range(files):
    d = os.path.join(root, f"dir{i // 100:03d}")
    os.makedirs(d, exist_ok=True)
    size = rng.randint(mean // 2, mean * 3 // 2)
    start = rng.randrange(0, len(blob) - size)
    with open(os.path.join(d, f"file{i:05d}.dat"), "wb") as f:
        f.write(i.to_bytes(4, "little") + blob[start:start + size - 4])
PY
tree_bytes=$(du -sb --apparent-size "$tree" | cut -f1)
echo "== snapshot benchmark ($mode mode): $FILES files, $(calc 'b / 1e6' b="$tree_bytes" | xargs printf '%.0f') MB," \
  "generated in $(ms_since "$t0") ms; $(nproc) CPUs, $(uname -r)"
echo "   binary $BIN; load average $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- the daemon ---------------------------------------------------------------------------------
dir="$tmp/daemon"
mkdir -p "$dir/run" "$dir/state"
chmod 0700 "$dir/run" "$dir/state"
printf '{"max_file_bytes": 4194304}\n' >"$dir/config.json"
chmod 0600 "$dir/config.json"
export TOOLWARDEN_RUNTIME_DIR="$dir/run" TOOLWARDEN_STATE_DIR="$dir/state" TOOLWARDEN_CONFIG="$dir/config.json"
env -u NOTIFY_SOCKET "$BIN" serve --listen 127.0.0.1:0 2>"$dir/daemon.log" &
pid=$!
track "$pid"
for _ in $(seq 1 100); do
  [[ -s $dir/run/endpoint.json ]] && break
  kill -0 "$pid" 2>/dev/null || {
    tail -5 "$dir/daemon.log" >&2
    die "toolwarden serve exited before endpoint.json appeared"
  }
  sleep 0.1
done
[[ -s $dir/run/endpoint.json ]] || die "endpoint.json did not appear within 10 s"

# ---- baselines ----------------------------------------------------------------------------------
t0=$(now_ns)
cp -a "$tree" "$tmp/copy"
sync -f "$tmp/copy"
cp_ms=$(ms_since "$t0")
# (the copy is removed at exit: deleting files here would load the disk under the next figures)
t0=$(now_ns)
find "$tree" -type f -exec sha256sum {} + >"$tmp/sums.txt"
sha_ms=$(ms_since "$t0")
[[ $(wc -l <"$tmp/sums.txt") == "$FILES" ]] || die "sha256sum did not see every file"

# ---- 1 capture ----------------------------------------------------------------------------------
t0=$(now_ns)
"$BIN" snapshot capture --worktree "$tree" >"$tmp/first.json"
first_ms=$(ms_since "$t0")
first_files=$(json_field files <"$tmp/first.json")
first_new=$(json_field new_bytes <"$tmp/first.json")
[[ $first_files == "$FILES" ]] || die "the capture recorded $first_files files, not $FILES"
stored1=$(du -sb --apparent-size "$dir/state/blobs" | cut -f1)

# ---- 2 again, after CHANGED files changed ----------------------------------------------------
"$PY" - "$tree" "$CHANGED" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    p = os.path.join(root, f"dir{i:03d}", f"file{i * 100:05d}.dat")
    with open(p, "r+b") as f:
        f.write(os.urandom(16))
PY
t0=$(now_ns)
"$BIN" snapshot capture --worktree "$tree" >"$tmp/second.json"
second_ms=$(ms_since "$t0")
second_new=$(json_field new_bytes <"$tmp/second.json")
second_bytes=$(json_field bytes <"$tmp/second.json")
stored2=$(du -sb --apparent-size "$dir/state/blobs" | cut -f1)
store_db=$(du -cb "$dir/state"/store.db* | tail -1 | cut -f1)
named=$((first_new + second_bytes))
dedup=$(calc 'a / b' a="$named" b="$stored2" | xargs printf '%.2f')

mb() { calc 'b / 1e6' b="$1" | xargs printf '%.1f'; }
rate() { calc 'b / 1e6 / (t / 1e3)' b="$1" t="$2" | xargs printf '%.0f'; }
printf '%-22s %6s ms  %5s MB/s  %s files/s  stored %s MB in blobs\n' capture.first "$first_ms" \
  "$(rate "$tree_bytes" "$first_ms")" "$(calc 'n * 1e3 / t' n="$FILES" t="$first_ms" | xargs printf '%.0f')" \
  "$(mb "$stored1")"
printf '%-22s %6s ms  %5s MB/s  (cp -a, then sync of the copy)\n' baseline.cp_a "$cp_ms" "$(rate "$tree_bytes" "$cp_ms")"
printf '%-22s %6s ms  %5s MB/s  (find -type f -exec sha256sum {} +)\n' baseline.sha256sum "$sha_ms" \
  "$(rate "$tree_bytes" "$sha_ms")"
printf '%-22s %6s ms  new %s bytes (%s files changed); blobs now %s MB, store.db %s MB\n' capture.second \
  "$second_ms" "$second_new" "$CHANGED" "$(mb "$stored2")" "$(mb "$store_db")"
printf '%-22s %6s×     (%s MB named by both snapshots / %s MB stored)\n' dedup.ratio "$dedup" \
  "$(mb "$named")" "$(mb "$stored2")"

result SNAP_FILES "$FILES"
result SNAP_FIRST_MS "$first_ms"
result SNAP_SECOND_MS "$second_ms"
result SNAP_CP_MS "$cp_ms"
result SNAP_SHA_MS "$sha_ms"
result SNAP_DEDUP "$dedup"
result SNAP_SECOND_NEW "$second_new"

ratio() { calc 'a / b' a="$1" b="$2" | xargs printf '%.2f×'; }
echo
echo "== snapshot summary ($mode mode; targets are printed, not asserted)"
row "figure" "toolwarden" "baseline (same run)" "ratio" "target" ""
row "------" "----------" "-------------------" "-----" "------" ""
row "N1 capture ms" "$first_ms" "cp -a $cp_ms" "$(ratio "$first_ms" "$cp_ms")" "≤ 2×" ""
row "" "" "sha256sum $sha_ms" "$(ratio "$first_ms" "$sha_ms")" "≤ 1.5×" ""
row "N2 capture after $CHANGED edits" "$second_ms" "first capture $first_ms" "$(ratio "$second_ms" "$first_ms")" "" ""
row "N2 bytes newly stored" "$second_new" "" "" "" ""
row "N2 dedup ratio" "$dedup×" "" "" "≈ 2×" ""

kill -TERM "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
grep -m3 ' \(WARN\|ERROR\) ' "$dir/daemon.log" | sed 's/^/   /' || true

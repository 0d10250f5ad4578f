#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz/ for a fixed time each, building the `fuzz` preset
# (clang, ASan + UBSan) first when it is missing or stale.
#
#   tests/fuzz/run.sh [--seconds N] [--work DIR] [target...]
#     --seconds N   time per target (default 60); scripts/test.sh runs the short form
#     --work DIR    where new inputs go (default: a scratch dir, removed afterwards); give the
#                   same DIR again to resume a long run from what it found
#     target        fuzz_http fuzz_mcp fuzz_path_policy fuzz_json_schema fuzz_tool_manifest
#                   fuzz_tool_output (default: all)
#
# A longer run, an hour per target, keeping what it finds for the next one:
#   tests/fuzz/run.sh --seconds 3600 --work ~/.cache/toolwarden-fuzz
#
# Each target reads its seeds from tests/fuzz/corpus/<target>/ and its dictionary from
# tests/fuzz/dict/; nothing is ever written back there (add a seed by hand when a new input
# is worth keeping). Exit status 0 when no target crashed; 1 after a crash, with the path of
# the reproducer (under build-fuzz/fuzz-artifacts/) and the command that replays it.
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=60
work=""
targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --work) work="${2:?--work needs a directory}"; shift 2 ;;
    -h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "--seconds needs a whole number" >&2; exit 2; }
((${#targets[@]})) ||
  targets=(fuzz_http fuzz_mcp fuzz_path_policy fuzz_json_schema fuzz_tool_manifest fuzz_tool_output)
for t in "${targets[@]}"; do
  [[ -f "tests/fuzz/$t.cpp" ]] || { echo "no fuzz target $t" >&2; exit 2; }
done

build=build-fuzz
[[ -f "$build/CMakeCache.txt" ]] || cmake --preset fuzz >/dev/null
# Two jobs at most: the CI machine has two cores.
cmake --build "$build" -j2 --target "${targets[@]}"

scratch=""
if [[ -z "$work" ]]; then
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/toolwarden-fuzz.XXXXXX")
  work="$scratch"
  trap 'rm -rf "$scratch"' EXIT
fi
mkdir -p "$work" "$build/fuzz-artifacts" "$build/fuzz-logs"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

failed=0
printf '%-18s %10s %8s %7s %7s %6s\n' target runs exec/s cov ft corpus
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  artifacts="$build/fuzz-artifacts/$t"
  log="$build/fuzz-logs/$t.log"
  mkdir -p "$work/$t" "$artifacts"
  dict=()
  [[ -f "tests/fuzz/dict/$name.dict" ]] && dict=("-dict=tests/fuzz/dict/$name.dict")
  start=$(date +%s)
  rc=0
  # New inputs go to the first directory only: the committed corpus is read, never written.
  "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" \
    "$work/$t" "tests/fuzz/corpus/$name" >"$log" 2>&1 || rc=$?
  # The last status line ("#N DONE cov: C ft: F corp: K/..."), or the last one printed.
  status=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n 1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$status")
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  printf '%-18s %10s %8s %7s %7s %6s  (%ss)\n' "$t" "${runs:-?}" "${rate:-?}" "${cov:-?}" \
    "${ft:-?}" "${corp:-?}" "$(($(date +%s) - start))"
  if ((rc != 0)); then
    failed=1
    reproducer=$(grep -o "Test unit written to .*" "$log" | tail -n 1 | sed 's/Test unit written to //')
    echo "FAILED: $t exited with status $rc; its log: $log" >&2
    grep -E 'invariant broken|[Aa]ssertion|ERROR: |runtime error|SUMMARY' "$log" | head -n 8 >&2 || true
    if [[ -n "$reproducer" ]]; then
      echo "reproducer: $reproducer" >&2
      echo "replay:     $build/tests/fuzz/$t $reproducer" >&2
    fi
  fi
done
exit "$failed"

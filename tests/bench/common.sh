# What the benchmark scripts share (sourced, not run), right after each sets `here`: the
# command line, messages, arithmetic and the binary to measure.
# shellcheck shell=bash

bench_script=$(basename "${BASH_SOURCE[1]}")
root=$(cd "$here/../.." && pwd)
BIN=${TOOLWARDEN_BIN:-$root/build/daemon/toolwarden}

# die MESSAGE...: says which script failed and why, then exits 1.
die() {
  echo "$bench_script: $*" >&2
  exit 1
}

# parse_args [--with-results] ARG...: --quick or --default set `mode` (default: default);
# with --with-results, --results FILE sets `results`; --help prints the calling script's
# header comment and exits.
parse_args() {
  local usage="[--quick]" with_results=false
  if [[ ${1:-} == --with-results ]]; then
    with_results=true usage="[--quick] [--results FILE]"
    shift
  fi
  mode=default results=
  while (($#)); do
    case $1 in
      --quick) mode=quick ;;
      --default) mode=default ;;
      --results)
        $with_results || break
        results=${2:?--results needs a file}
        shift
        ;;
      -h | --help)
        sed -n '2,/^set -euo/p' "$here/$bench_script" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
      *) break ;;
    esac
    shift
  done
  if (($#)); then
    echo "$bench_script: unknown argument '$1' (usage: $bench_script $usage)" >&2
    exit 2
  fi
}

# calc 'EXPR' [name=value]...: floating-point arithmetic (awk).
calc() {
  local expr=$1 vars=() kv
  shift
  for kv in "$@"; do vars+=(-v "$kv"); done
  awk "${vars[@]}" "BEGIN { printf \"%s\", ($expr) }" </dev/null
}
now_ns() { date +%s%N; }

# field FILE KEY: the value of a KEY=VALUE line of FILE (empty when absent).
field() {
  [[ -f $1 ]] || return 0
  sed -n "s/^$2=//p" "$1" | tail -1
}

# The summary tables. verdict VALUE OP LIMIT: "met" or "missed" for a figure like 42, 42% or
# 0.97× (informational only; never changes the exit status), "n/a" when it is missing.
verdict() {
  [[ -n ${1:-} && $1 != - ]] || {
    echo "n/a"
    return
  }
  local v=${1%\%}
  v=${v%×}
  if (($(calc "a $2 b" a="$v" b="$3"))); then echo met; else echo missed; fi
}
# pad TEXT WIDTH: pads by characters, not bytes (≥ and × are multibyte), whatever the locale.
pad() {
  local LC_ALL=C.UTF-8
  printf '%s%*s' "$1" $(($2 > ${#1} ? $2 - ${#1} : 0)) ''
}
# row FIGURE TOOLWARDEN BASELINE RATIO TARGET VERDICT: one line of a summary table.
row() {
  local w=(27 15 28 8 10) a=("$@") i line=
  for i in 0 1 2 3 4; do line+="$(pad "${a[i]:-}" "${w[i]}") "; done
  echo "$line${a[5]:-}"
}
or_dash() { echo "${1:-—}"; }

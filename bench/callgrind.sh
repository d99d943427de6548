#!/bin/sh
# callgrind.sh -- instructions per call of the C-level import (bench_import's
# cases), counted by valgrind's callgrind: the same count on every run, busy
# machine or not, where timings move by tens of percent.
#
#   bench/callgrind.sh [BUILD_DIR [JSON_PATH]]     (default: build, callgrind.json)
#   CALLS=N sets the calls per case (default 20000).
#
# Only run_case, the measured loop, is counted (--toggle-collect), so
# start-up and the library's first-use work stay out; the loop's own few
# instructions per call stay in. Exit status 3 when valgrind is missing
# (scripts/setup.sh bench installs it).
set -eu
build=${1:-build}
json=${2:-callgrind.json}
calls=${CALLS:-20000}
bin="$build/bench/bench_import"

if ! command -v valgrind >/dev/null 2>&1; then
  echo "callgrind: valgrind is not installed (scripts/setup.sh bench installs it)" >&2
  exit 3
fi
if [ ! -x "$bin" ]; then
  echo "callgrind: $bin not found: build the project first" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
version=$(valgrind --version)

printf 'instructions per call under callgrind (%s, %s calls per case)\n' "$version" "$calls"
printf '%-16s %16s %14s\n' case instructions per_call
{
  printf '{\n  "valgrind": "%s",\n  "calls": %s,\n  "cases": [\n' "$version" "$calls"
} >"$tmp/json"
sep=""
for case in validate import validate+import validate+adopt_validated; do
  out="$tmp/callgrind.out"
  if ! valgrind --tool=callgrind --toggle-collect='run_case*' \
      --callgrind-out-file="$out" "$bin" --count "$calls" --case "$case" \
      >"$tmp/log" 2>&1; then
    cat "$tmp/log" >&2
    echo "callgrind: bench_import --case $case failed" >&2
    exit 1
  fi
  ir=$(sed -n 's/^totals: *\([0-9][0-9]*\).*/\1/p' "$out")
  [ -n "$ir" ] || ir=$(sed -n 's/^summary: *\([0-9][0-9]*\).*/\1/p' "$out")
  if [ -z "$ir" ] || [ "$ir" -eq 0 ]; then
    echo "callgrind: no instructions counted in run_case for $case" >&2
    exit 1
  fi
  per=$(awk -v ir="$ir" -v n="$calls" 'BEGIN { printf "%.1f", ir / n }')
  printf '%-16s %16s %14s\n' "$case" "$ir" "$per"
  printf '%s    {"name": "%s", "instructions": %s, "per_call": %s}' \
    "$sep" "$case" "$ir" "$per" >>"$tmp/json"
  sep=",
"
done
printf '\n  ]\n}\n' >>"$tmp/json"
cp "$tmp/json" "$json"
echo "wrote $json"

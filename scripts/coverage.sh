#!/bin/sh
# coverage.sh -- line and branch coverage of the library (src/) and of the
# Python module (python/src/): builds both with gcov instrumentation (in
# build-cov and build-cov-py), runs the C suite and the Python suite, and
# prints gcovr's summary for each folder. A failing test fails the run.
#   scripts/coverage.sh [python]   (default .venv/bin/python)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
python=${1:-$root/.venv/bin/python}
meson=$root/.venv/bin/meson
ninja=$root/.venv/bin/ninja
c=$root/build-cov
py=$root/build-cov-py
cd "$root"
[ -f "$c/build.ninja" ] || "$meson" setup "$c" -Db_coverage=true -Dbuildtype=debug
[ -f "$py/build.ninja" ] || "$meson" setup "$py" -Dpython=true \
  -Dtest_extensions=true -Db_coverage=true -Dbuildtype=debug
"$ninja" -C "$c"
"$ninja" -C "$py"
find "$c" "$py" -name '*.gcda' -delete

echo "coverage: the C suite"
"$c/tests/c/dlb_tests" > "$c/c-tests.log" 2>&1 || {
  grep FAIL "$c/c-tests.log"
  exit 1
}
tail -n 1 "$c/c-tests.log"

# The extension is run from its build folder, beside the package's Python
# files, as tests/python/run_sanitized.sh does.
pkg=$py/coverage-pkg
rm -rf "$pkg"
mkdir -p "$pkg/dlbridge/dlpack"
for f in "$root"/python/dlbridge/*; do ln -s "$f" "$pkg/dlbridge/"; done
for f in "$py"/python/*.so; do ln -s "$f" "$pkg/dlbridge/"; done
ln -s "$root/include/dlpack/dlpack.h" "$pkg/dlbridge/dlpack/"
echo "coverage: the Python suite"
PYTHONPATH="$pkg" "$python" -m pytest -q -p no:cacheprovider tests/python

for part in src python/src; do
  echo "coverage of $part/:"
  gcovr -r "$root" --filter "$root/$part/" --print-summary -o /dev/null \
    "$c" "$py" | grep -E '^(lines|branches):'
done

#!/bin/sh
# The Python suite against the module built with AddressSanitizer and
# UndefinedBehaviorSanitizer (the build folder is $1, configured with
# -Dpython=true -Dtest_extensions=true -Db_sanitize=address,undefined).
# The extension is not installed: a package folder of links puts the
# sanitized build beside the package's Python files, and the sanitizer
# runtimes are preloaded, since the interpreter itself is not built with
# them. Leak checks stay off: the interpreter keeps much of its memory to
# the end by design; the C suite checks dlbridge's leaks.
set -eu
build=$1
python=${2:-.venv/bin/python}
root=$(cd "$(dirname "$0")/../.." && pwd)
pkg=$build/sanitized-pkg
rm -rf "$pkg"
mkdir -p "$pkg/dlbridge/dlpack"
for f in "$root"/python/dlbridge/*; do ln -s "$f" "$pkg/dlbridge/"; done
for f in "$build"/python/*.so; do ln -s "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$pkg/dlbridge/"; done
ln -s "$root/include/dlpack/dlpack.h" "$pkg/dlbridge/dlpack/"
cc=${CC:-cc}
runtimes="$($cc -print-file-name=libasan.so) $($cc -print-file-name=libubsan.so)"
for lib in $runtimes; do
  [ -e "$lib" ] || { echo "run_sanitized.sh: $lib not found" >&2; exit 1; }
done
DLBRIDGE_SANITIZED=1 PYTHONMALLOC=malloc \
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
LD_PRELOAD="$runtimes" PYTHONPATH="$pkg" \
  exec "$python" -m pytest -q -p no:cacheprovider "$root/tests/python"

#!/bin/sh
# test_install.sh BUILD_DIR -- installs the build into a scratch folder
# (DESTDIR) and builds the demo against it as users of the installed
# library would: by hand through pkg-config, with the CMake package
# (examples/cmake) and with the pkg-config Makefile (examples/pkg-config),
# the last two running without LD_LIBRARY_PATH; checks the exported
# symbols, that the installed headers stand alone in C and C++, and the
# installed command (its RUNPATH, --version, bench) and man page.
set -eu
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
dest="$scratch/dest"
meson install -C "$build" --quiet --destdir "$dest" >/dev/null
pc=$(find "$dest" -name dlbridge.pc | head -n 1)
[ -n "$pc" ] || { echo "install: no dlbridge.pc installed"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$pc")"
export PKG_CONFIG_SYSROOT_DIR="$dest"
# With PKG_CONFIG_SYSROOT_DIR set, pkg-config puts dest in front itself.
libdir="$(pkg-config --variable=libdir dlbridge)"
pass=0
cc -std=c11 -Wall -Werror "$root/examples/demo.c" -o "$scratch/demo" \
  $(pkg-config --cflags dlbridge) -L"$libdir" -ldlbridge
LD_LIBRARY_PATH="$libdir" "$scratch/demo" >"$scratch/out"
grep -q "producer's release ran 1 time" "$scratch/out"
pass=$((pass + 1))
cc -std=c11 "$root/examples/demo.c" -o "$scratch/demo-static" \
  $(pkg-config --cflags dlbridge) "$libdir/libdlbridge.a" -lpthread -ldl -lm
"$scratch/demo-static" >"$scratch/out-static"
grep -q "producer's release ran 1 time" "$scratch/out-static"
pass=$((pass + 1))
lib=$(find "$libdir" -name 'libdlbridge.so.*.*' | head -n 1)
[ -n "$lib" ] || { echo "install: no libdlbridge.so.X.Y installed"; exit 1; }
# The exports are exactly the DLB_API functions of the installed headers:
# nothing internal (dlb__*) leaks out and nothing declared is missing.
incdir="$(pkg-config --variable=includedir dlbridge)"
grep -ho 'DLB_API[^(]*(' "$incdir/dlbridge.h" "$incdir"/dlbridge/*.h |
  grep -o 'dlb_[a-z0-9_]*($' | tr -d '(' | sort -u >"$scratch/declared"
nm -D --defined-only "$lib" | awk '{print $3}' | sort -u >"$scratch/exported"
[ -s "$scratch/declared" ] || { echo "install: no DLB_API in headers"; exit 1; }
if ! cmp -s "$scratch/declared" "$scratch/exported"; then
  echo "install: exports differ from the headers (< declared, > exported):"
  diff "$scratch/declared" "$scratch/exported" | grep '^[<>]'
  exit 1
fi
pass=$((pass + 1))
for h in dlbridge.h dlpack/dlpack.h $(cd "$incdir" && ls dlbridge/*.h); do
  printf '#include <%s>\nint main(void){return 0;}\n' "$h" |
    cc -std=c11 -Wall -Wextra -Werror -x c - -o /dev/null $(pkg-config --cflags dlbridge)
  printf '#include <%s>\nint main(){return 0;}\n' "$h" |
    c++ -Wall -Wextra -Werror -x c++ - -o /dev/null $(pkg-config --cflags dlbridge)
  pass=$((pass + 1))
done
version=$(LD_LIBRARY_PATH="$libdir" "$(pkg-config --variable=prefix dlbridge)/bin/dlbridge" version)
[ "$version" = "$(pkg-config --modversion dlbridge)" ] ||
  { echo "install: dlbridge version says '$version', pkg-config '$(pkg-config --modversion dlbridge)'"; exit 1; }
pass=$((pass + 1))
prefix="$(pkg-config --variable=prefix dlbridge)"
# The command finds the library through its RUNPATH, wherever the prefix is.
readelf -d "$prefix/bin/dlbridge" | grep -q 'RUNPATH.*\$ORIGIN/\.\./' ||
  { echo "install: dlbridge has no \$ORIGIN RUNPATH"; exit 1; }
[ "$(env -u LD_LIBRARY_PATH "$prefix/bin/dlbridge" --version)" = "$version" ] ||
  { echo "install: the installed dlbridge does not run without LD_LIBRARY_PATH"; exit 1; }
pass=$((pass + 1))
# Installed, bench runs the copy benchmark from libexec/dlbridge.
DLBRIDGE_PYTHON=/nonexistent/python env -u LD_LIBRARY_PATH \
  "$prefix/bin/dlbridge" bench --quick --json >"$scratch/bench.json" 2>"$scratch/bench.err" ||
  { echo "install: dlbridge bench failed:"; cat "$scratch/bench.err"; exit 1; }
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["cases"], j' \
  "$scratch/bench.json" ||
  { echo "install: dlbridge bench --json printed no copy results"; exit 1; }
grep -q 'skipped the exchange benchmark' "$scratch/bench.err" ||
  { echo "install: dlbridge bench did not say why it skipped Python"; exit 1; }
pass=$((pass + 1))
[ -f "$prefix/share/man/man1/dlbridge.1" ] ||
  { echo "install: no man page"; exit 1; }
grep -q '^MIT License$' "$prefix/share/doc/dlbridge/LICENSE" ||
  { echo "install: no license text in share/doc/dlbridge"; exit 1; }
pass=$((pass + 1))
# A CMake project: find_package(dlbridge) and the imported target.
cmake_cfg=$(find "$dest" -name dlbridgeConfig.cmake | head -n 1)
[ -n "$cmake_cfg" ] || { echo "install: no dlbridgeConfig.cmake"; exit 1; }
mkdir "$scratch/cmake-src"
cp "$root/examples/cmake/CMakeLists.txt" "$scratch/cmake-src/"
cp "$root/examples/demo.c" "$scratch/"
# Debian's CMake, which scripts/setup.sh installs, when it is there: a
# cmake found earlier in PATH may be a pip-installed wrapper of another
# version.
cmake=cmake
[ -x /usr/bin/cmake ] && cmake=/usr/bin/cmake
"$cmake" -S "$scratch/cmake-src" -B "$scratch/cmake-build" \
  -DCMAKE_PREFIX_PATH="$prefix" >"$scratch/cmake.log" 2>&1 &&
  "$cmake" --build "$scratch/cmake-build" >>"$scratch/cmake.log" 2>&1 ||
  { echo "install: the CMake project failed:"; cat "$scratch/cmake.log"; exit 1; }
env -u LD_LIBRARY_PATH "$scratch/cmake-build/demo" >"$scratch/out-cmake"
grep -q "producer's release ran 1 time" "$scratch/out-cmake"
pass=$((pass + 1))
# The pkg-config Makefile project.
mkdir "$scratch/make-src"
cp "$root/examples/pkg-config/Makefile" "$scratch/make-src/"
make -s -C "$scratch/make-src" >"$scratch/make.log" 2>&1 ||
  { echo "install: the pkg-config Makefile failed:"; cat "$scratch/make.log"; exit 1; }
env -u LD_LIBRARY_PATH "$scratch/make-src/demo" >"$scratch/out-make"
grep -q "producer's release ran 1 time" "$scratch/out-make"
pass=$((pass + 1))
echo "install: $pass passed, 0 failed"

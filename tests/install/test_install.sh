#!/bin/sh
# test_install.sh BUILD_DIR -- installs the build into a scratch folder
# (DESTDIR) and builds the demo against it through pkg-config, as a user of
# the installed library would; checks the exported symbols and that the
# installed headers stand alone in C and C++.
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
"$scratch/demo-static" >/dev/null
pass=$((pass + 1))
lib=$(find "$libdir" -name 'libdlbridge.so.*.*' | head -n 1)
extra=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^dlb_' || true)
[ -z "$extra" ] || { echo "install: unexpected exports: $extra"; exit 1; }
pass=$((pass + 1))
for h in dlbridge.h dlpack/dlpack.h; do
  printf '#include <%s>\nint main(void){return 0;}\n' "$h" |
    cc -std=c11 -Wall -Wextra -Werror -x c - -o /dev/null $(pkg-config --cflags dlbridge)
  printf '#include <%s>\nint main(){return 0;}\n' "$h" |
    c++ -Wall -Wextra -Werror -x c++ - -o /dev/null $(pkg-config --cflags dlbridge)
  pass=$((pass + 1))
done
LD_LIBRARY_PATH="$libdir" "$(pkg-config --variable=prefix dlbridge)/bin/dlbridge" version >/dev/null
pass=$((pass + 1))
echo "install: $pass passed, 0 failed"

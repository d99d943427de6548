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
echo "install: $pass passed, 0 failed"

#!/bin/sh
# test_wheel.sh VENV_PYTHON -- builds the wheel as `pip wheel .` does (with
# the build tools already in the project's .venv, so nothing is fetched),
# checks what it holds (metadata with the README, the typing stub, the
# command), installs it into a fresh virtual environment and runs a part of
# the Python tests and the command there. NumPy, PyTorch and pytest come
# from the project's .venv through a .pth file, after the fresh
# environment's own packages, so the dlbridge imported is the wheel's.
set -eu
vpy=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$root"
"$vpy" -m pip wheel -q --no-build-isolation --no-deps -w "$scratch/dist" \
  -Cbuild-dir=build/wheel .
wheel=$(ls "$scratch"/dist/dlbridge-*.whl)
version=$(sed -n "s/^  version: '\(.*\)',$/\1/p" meson.build)
case "$wheel" in
  */dlbridge-"$version"-*) ;;
  *) echo "wheel: $wheel does not carry version $version"; exit 1 ;;
esac
pass=1
"$vpy" - "$wheel" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
def need(cond, what):
    if not cond:
        sys.exit("wheel: " + what + "; it holds:\n  " + "\n  ".join(names))
meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
need("Description-Content-Type: text/markdown" in meta and "# dlbridge" in meta,
     "METADATA lacks the README")
need("License: MIT" in meta or "License-Expression: MIT" in meta, "METADATA lacks the license")
need("License-File: LICENSE" in meta, "METADATA names no license file")
lic = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
need(lic and b"MIT License" in z.read(lic[0]), "no licenses/LICENSE with the MIT text")
for f in ("dlbridge/__init__.py", "dlbridge/__init__.pyi", "dlbridge/py.typed",
          "dlbridge/__main__.py", "dlbridge/dlbridge_capi.h", "dlbridge/dlpack/dlpack.h"):
    need(f in names, "no " + f)
need(any(n.endswith(".data/scripts/dlbridge") for n in names), "no dlbridge command")
need(not any("_testhelper" in n or "_capi_example" in n for n in names),
     "test extensions in a plain wheel")
PY
pass=$((pass + 1))
base=$("$vpy" -c 'import sys; print(sys._base_executable)')
"$base" -m venv "$scratch/venv"
"$scratch/venv/bin/python" -m pip install -q --disable-pip-version-check \
  --no-deps --no-index "$wheel"
site=$("$scratch/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
"$vpy" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' >"$site/dlbridge-test-deps.pth"
# The tests drive the test helper extension, which a plain wheel leaves out.
cp build/py/python/_testhelper.*.so "$site/dlbridge/"
where=$("$scratch/venv/bin/python" -c 'import dlbridge; print(dlbridge.__file__)')
case "$where" in
  "$site"/*) ;;
  *) echo "wheel: dlbridge imported from $where, not the fresh venv"; exit 1 ;;
esac
pass=$((pass + 1))
[ "$("$scratch/venv/bin/dlbridge" --version)" = "$version" ] ||
  { echo "wheel: the installed command does not say $version"; exit 1; }
"$scratch/venv/bin/python" -m dlbridge check --kinds cpu | grep -q '^2 of 2 checks passed$' ||
  { echo "wheel: python -m dlbridge check failed"; exit 1; }
pass=$((pass + 1))
"$scratch/venv/bin/python" -m pytest -q -p no:cacheprovider \
  tests/python/test_tensor.py \
  tests/python/test_export.py tests/python/test_npy.py tests/python/test_signatures.py
pass=$((pass + 1))
echo "wheel: $pass passed, 0 failed"

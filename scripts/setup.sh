#!/bin/sh
# setup.sh -- installs what building and testing dlbridge needs, then exits.
#   scripts/setup.sh [c|python|bench|fuzz|tools|cross]   (default: python)
# c:      the C toolchain (Debian packages, installed with apt-get when run as
#         root; otherwise it says which are missing) and meson + ninja.
# python: c, plus Open MPI and a virtual environment .venv with
#         meson-python, NumPy, PyTorch (CPU), pytest, Hypothesis, mpi4py,
#         Dask distributed and mypy (stubtest) from PyPI.
# bench:  python, plus valgrind for instruction counts.
# fuzz:   c, plus clang and its libFuzzer runtime (make fuzz).
# tools:  python, plus valgrind and gcovr (make test-valgrind, make coverage).
# cross:  c, plus the aarch64 cross compiler and qemu-user (make test-aarch64).
# PYTHON=/path/to/python3 picks the interpreter that makes .venv.
set -eu

what=${1:-python}
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
python=${PYTHON:-python3}

need_debs=""
have() { command -v "$1" >/dev/null 2>&1; }
have cc || need_debs="$need_debs build-essential"
have c++ || need_debs="$need_debs g++"
have pkg-config || need_debs="$need_debs pkg-config"
have git || need_debs="$need_debs git"
# The install test builds a CMake project against the installed library.
have cmake || need_debs="$need_debs cmake"
have readelf || need_debs="$need_debs binutils"
# The C API reference (make docs, make check).
have doxygen || need_debs="$need_debs doxygen"
have "$python" || need_debs="$need_debs python3"
if have "$python"; then
  "$python" -c 'import venv, ensurepip' 2>/dev/null || need_debs="$need_debs python3-venv"
  inc=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  [ -f "$inc/Python.h" ] || need_debs="$need_debs python3-dev"
fi
if [ "$what" = bench ] || [ "$what" = tools ]; then
  have valgrind || need_debs="$need_debs valgrind"
fi
if [ "$what" = tools ]; then have gcovr || need_debs="$need_debs gcovr"; fi
if [ "$what" = cross ]; then
  have aarch64-linux-gnu-gcc || need_debs="$need_debs gcc-aarch64-linux-gnu"
  [ -f /usr/aarch64-linux-gnu/include/stdio.h ] ||
    need_debs="$need_debs libc6-dev-arm64-cross"
  have qemu-aarch64 || need_debs="$need_debs qemu-user"
fi
if [ "$what" = fuzz ]; then
  have clang || need_debs="$need_debs clang"
  if ! have clang || ! ls "$(clang -print-resource-dir)"/lib/linux/libclang_rt.fuzzer-*.a \
       >/dev/null 2>&1; then
    need_debs="$need_debs libclang-rt-14-dev"
  fi
fi
# The two-rank mpi4py test runs on Debian's Open MPI.
if [ "$what" = python ]; then
  have mpirun || need_debs="$need_debs openmpi-bin libopenmpi-dev"
fi

if [ -n "$need_debs" ]; then
  if [ "$(id -u)" = 0 ] && have apt-get; then
    echo "setup: installing Debian packages:$need_debs"
    DEBIAN_FRONTEND=noninteractive apt-get update -q
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need_debs
  else
    echo "setup: missing:$need_debs; install them (as root: apt-get install$need_debs)" >&2
    exit 1
  fi
fi

# Tools and test peers live in the project's own virtual environment.
if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv with $python"
  "$python" -m venv "$venv"
fi
pip_install() {
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@"
}
stamp="$venv/.dlbridge-$what"
if [ ! -f "$stamp" ] || [ "$root/scripts/setup.sh" -nt "$stamp" ]; then
  pip_install meson ninja
  if [ "$what" != c ] && [ "$what" != fuzz ] && [ "$what" != cross ]; then
    # torch is pinned: 2.13.0's CPU build is what the tests are written for.
    pip_install meson-python 'numpy>=2,<3' pytest 'torch==2.13.0' 'hypothesis>=6,<7'
    # mpi4py's binary wheel finds Debian's Open MPI at run time.
    pip_install --only-binary=mpi4py 'mpi4py==4.1.2'
    # The stub's agreement with the module (tests/python/test_stubtest.py).
    pip_install 'mypy==1.20.2'
    # The LocalCluster test (tests/python/test_dask.py) and its example.
    pip_install 'dask[distributed]==2026.8.0'
  fi
  touch "$stamp"
fi

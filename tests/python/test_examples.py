"""The examples run and say what they show: the Python tour that `make
demo` runs (examples/tour.py), PyTorch and NumPy sharing pinned memory
(examples/pinned_exchange.py) and the OpenMP kernel working in place on a
tensor from Python (examples/openmp)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_share_mp import emulated_cuda  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "examples" / "tour.py"


def run_tour(cuda_library):
    r = subprocess.run([sys.executable, str(TOUR)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, DLBRIDGE_CUDA_LIBRARY=cuda_library))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_tour_shows_shared_memory_and_a_mapped_file():
    out = run_tour("/nonexistent/libcuda.so.1")
    assert "from NumPy:        (3, 4) float32 on cpu, same memory: True" in out
    assert "NumPy writes, dlbridge reads: t[0, 0] = 42.0" in out
    assert "strides (4, 2), [[42.0, 2.0], [4.0, 6.0], [8.0, 10.0]]" in out
    assert "to PyTorch:        (3, 2), same memory: True" in out
    assert "load_npy (mapped): (2, 3) int16, strides (1, 2), [[0, 1, 2], [3, 4, 5]]" in out
    assert ("shared memory:     3 processes wrote their rows into this process's tensor: True; "
            "each saw it as cpu (no GPU runtime to pin it for)") in out
    assert "\ncuda: not available" in out and "\nrocm: " in out


def test_tour_pins_the_shared_tensor_in_each_process_with_a_gpu(emulated_cuda):  # noqa: F811
    # The emulated driver (tests/emu) stands in for a CUDA GPU: each worker
    # registers its own mapping of the parent's pages.
    out = run_tour(emulated_cuda)
    assert ("shared memory:     3 processes wrote their rows into this process's tensor: True; "
            "each saw it as cuda_host\n") in out
    assert "\ncuda: version " in out


PINNED = ROOT / "examples" / "pinned_exchange.py"


def run_pinned(cuda_library):
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, str(PINNED)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, DLBRIDGE_CUDA_LIBRARY=cuda_library))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.splitlines()


def test_pinned_exchange_without_a_gpu_says_it_uses_cpu_memory():
    assert run_pinned("/nonexistent/libcuda.so.1") == [
        "no CUDA GPU: ordinary CPU memory, not pinned",
        "allocated: (3, 4) float32 on cpu, the driver says cpu",
        "NumPy and PyTorch view it: same memory: True",
        "each sees the other's writes: [-1.0, 10.0, 20.0, 30.0]",
        "NumPy array pinned in place: cpu, PyTorch adds 1: [1.0, 1.25, 1.5, 1.75, 2.0], same memory: True",
        "after the last holder is gone: cpu",
    ]


def test_pinned_exchange_shares_pinned_memory_with_a_gpu(emulated_cuda):  # noqa: F811
    # The emulated driver (tests/emu) stands in for a CUDA GPU.
    assert run_pinned(emulated_cuda) == [
        "CUDA GPUs cuda:0, cuda:1: host memory pinned for them",
        "allocated: (3, 4) float32 on cuda_host, the driver says cuda_host",
        "NumPy and PyTorch view it: same memory: True",
        "each sees the other's writes: [-1.0, 10.0, 20.0, 30.0]",
        "NumPy array pinned in place: cuda_host, PyTorch adds 1: [1.0, 1.25, 1.5, 1.75, 2.0], same memory: True",
        "after the last holder is gone: cpu",
    ]


def _build_kernel(tmp_path):
    import shutil
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("needs a C compiler")
    lib = tmp_path / "scale.so"
    src = ROOT / "examples" / "openmp" / "scale.c"
    subprocess.run([cc, "-shared", "-fPIC", "-fopenmp", "-O2", "-std=c11", "-Wall", "-Wextra",
                    "-Werror", f"-I{ROOT / 'include'}", str(src), "-o", str(lib)], check=True)
    return lib


def test_openmp_kernel_scales_a_python_tensor_in_place(tmp_path):
    lib = _build_kernel(tmp_path)
    script = ROOT / "examples" / "openmp" / "scale.py"
    want = ": [[0.0, 10.0, 2.0, 30.0], [4.0, 50.0, 6.0, 70.0], [8.0, 90.0, 10.0, 110.0]]\n"
    env = dict(os.environ, OMP_NUM_THREADS="2",
               DLBRIDGE_CUDA_LIBRARY="/nonexistent/libcuda.so.1")
    r = subprocess.run([sys.executable, str(script), str(lib)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0 and r.stdout == "cpu" + want, r.stdout + r.stderr
    emu = ROOT / "build" / "tests" / "emu" / "libcuda.so.1"
    if emu.exists():
        # With a CUDA GPU (here the emulated driver) the tensor is managed
        # memory that the GPU could use too.
        env["DLBRIDGE_CUDA_LIBRARY"] = str(emu)
        r = subprocess.run([sys.executable, str(script), str(lib)], capture_output=True,
                           text=True, timeout=120, env=env)
        assert r.returncode == 0 and r.stdout == "cuda_managed" + want, r.stdout + r.stderr


def test_openmp_kernel_refuses_read_only_memory(tmp_path):
    lib = _build_kernel(tmp_path)
    import ctypes
    import numpy as np
    import dlbridge
    kernel = ctypes.CDLL(str(lib))
    kernel.scale_inplace.argtypes = [ctypes.c_void_p, ctypes.c_float]
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    np.save(tmp_path / "w.npy", np.ones(4, dtype=np.float32))
    mapped = dlbridge.load_npy(tmp_path / "w.npy")
    cap = mapped.__dlpack__(max_version=(1, 0))
    assert kernel.scale_inplace(get(cap, b"dltensor_versioned"), 2.0) == -1
    ints = dlbridge.from_dlpack(np.ones(4, dtype=np.int32))
    cap = ints.__dlpack__(max_version=(1, 0))
    assert kernel.scale_inplace(get(cap, b"dltensor_versioned"), 2.0) == -1
    assert ints.tolist() == [1, 1, 1, 1] and mapped.tolist() == [1.0] * 4


def test_openmp_kernel_checks_the_major_version_first(tmp_path):
    # A consumer of a versioned struct must check version.major before it
    # reads anything past flags: another major may lay the tensor out
    # elsewhere. The kernel refuses major 2 and leaves the data alone, and
    # scales the same struct once it says major 1.
    lib = _build_kernel(tmp_path)
    import ctypes
    import numpy as np
    from dlpack_ctypes import DLManagedTensorVersioned
    kernel = ctypes.CDLL(str(lib))
    kernel.scale_inplace.argtypes = [ctypes.c_void_p, ctypes.c_float]
    data = np.ones(4, dtype=np.float32)
    shape = (ctypes.c_int64 * 1)(4)
    strides = (ctypes.c_int64 * 1)(1)
    m = DLManagedTensorVersioned()
    m.major, m.minor = 2, 0
    t = m.dl_tensor
    t.data = data.ctypes.data
    t.device.device_type, t.device.device_id = 1, 0
    t.ndim = 1
    t.dtype.code, t.dtype.bits, t.dtype.lanes = 2, 32, 1
    t.shape = ctypes.addressof(shape)
    t.strides = ctypes.addressof(strides)
    assert kernel.scale_inplace(ctypes.addressof(m), 2.0) == -1
    assert data.tolist() == [1.0] * 4
    m.major = 1
    assert kernel.scale_inplace(ctypes.addressof(m), 2.0) == 0
    assert data.tolist() == [2.0] * 4


def test_every_example_is_run_by_a_test():
    # Each example file is named by a test (or a script of the suite) that
    # runs or builds it; a new example without one fails here.
    tests = ROOT / "tests"
    text = "".join(p.read_text(errors="replace") for p in tests.rglob("*")
                   if p.is_file() and p.suffix in (".py", ".sh", ".c", ".build"))
    examples = [p for p in (ROOT / "examples").rglob("*")
                if p.is_file() and p.suffix in (".py", ".c") or p.name in ("CMakeLists.txt", "Makefile")]
    assert len(examples) >= 10
    for p in examples:
        rel = p.relative_to(ROOT / "examples")
        named = p.name in text or (p.suffix == ".py" and f"import {p.stem}" in text)
        folder = rel.parent == Path(".") or f"{rel.parent}" in text
        assert named and folder, f"no test runs examples/{rel}"


def test_make_demo_installs_the_module_and_runs_both_tours():
    import shutil
    make = shutil.which("make")
    if make is None or not (ROOT / "Makefile").exists():
        pytest.skip("needs make and the source tree")
    # What `make demo` would run (-n: nothing is run), in order.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    r = subprocess.run([make, "-n", "-s", "demo"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    steps = r.stdout.replace("\\\n", " ")
    install = steps.find(".venv/bin/python -m pip install")
    demo = steps.find("build/examples/demo")
    tour = steps.find(".venv/bin/python examples/tour.py")
    assert 0 <= install < tour and 0 <= demo < tour, steps
    assert steps[install:].split("\n")[0].rstrip().endswith(" ."), steps

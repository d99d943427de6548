"""GPU memory kinds end to end, on the emulated CUDA driver and HIP runtime
of tests/emu (host memory behind the real entry points, every call
counted). Each case runs in a fresh interpreter: a process loads its GPU
runtime once."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EMU = REPO / "tests" / "emu"


@pytest.fixture(scope="module")
def emulators(tmp_path_factory):
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None or not (EMU / "emu_core.c").exists():
        pytest.skip("needs a C compiler and tests/emu")
    out = tmp_path_factory.mktemp("emu")
    libs = {}
    for name, source, extra in (
        ("libcuda.so.1", "emu_cuda.c", ["-DEMU_PROC_ADDRESS"]),
        ("libamdhip64.so.6", "emu_hip.c", []),
    ):
        path = out / name
        subprocess.run(
            [cc, "-shared", "-fPIC", "-O1", "-D_GNU_SOURCE", *extra, f"-I{REPO / 'src'}", f"-I{EMU}",
             str(EMU / source), str(EMU / "emu_core.c"), "-fvisibility=hidden", "-Wl,-Bsymbolic",
             "-lpthread", "-o", str(path)],
            check=True,
        )
        libs[name] = str(path)
    return libs


PRELUDE = """
import ctypes, os
import numpy as np
import dlbridge
from dlbridge import _testhelper as h

def runtime(var):
    lib = ctypes.CDLL(os.environ[var])
    lib.emu_calls.restype = ctypes.c_long
    lib.emu_calls.argtypes = [ctypes.c_char_p]
    return lib
"""


def run(emulators, body, **env):
    full = dict(
        os.environ,
        OPENBLAS_NUM_THREADS="1",
        DLBRIDGE_CUDA_LIBRARY=emulators["libcuda.so.1"],
        DLBRIDGE_HIP_LIBRARY=emulators["libamdhip64.so.6"],
        **env,
    )
    r = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_cuda_tensors_are_made_moved_and_described(emulators):
    run(
        emulators,
        """
        t = dlbridge.zeros((2, 3), device="cuda:1")
        assert t.device == "cuda:1" and t.__dlpack_device__() == (2, 1)
        cai = t.__cuda_array_interface__
        assert cai["shape"] == (2, 3) and cai["data"][0] == t.data_ptr and cai["version"] == 3
        assert t.to("cpu").tolist() == [[0.0] * 3] * 2
        try:
            memoryview(t)
        except BufferError:
            pass
        else:
            raise AssertionError("the CPU read device memory")
        u = dlbridge.from_dlpack(np.arange(6.0).reshape(2, 3), device="cuda:0")
        assert u.device == "cuda:0"
        assert dlbridge.from_dlpack(u, device="cpu").tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
        # dl_device asks the producer for a copy on another device.
        c = dlbridge.from_dlpack(u.__dlpack__(max_version=(1, 0), dl_device=(1, 0)))
        assert c.device == "cpu" and c.tolist()[1] == [3.0, 4.0, 5.0]
        assert dlbridge.arange(4, device="cuda:0").to("cpu").tolist() == [0, 1, 2, 3]
        assert dlbridge.full(2, 2.5, device="cuda:0").copy().to("cpu").tolist() == [2.5, 2.5]
        assert u[1, ::2].to("cpu").tolist() == [3.0, 5.0]
        """,
    )


def test_cuda_host_type_kinds(emulators):
    run(
        emulators,
        """
        for kind in ("cuda_host", "cuda_managed"):
            t = dlbridge.arange(5, device=kind)
            assert t.device == kind
            assert np.asarray(t).tolist() == [0, 1, 2, 3, 4]
            assert np.from_dlpack(t).tolist() == [0, 1, 2, 3, 4]
            assert "typestr" in t.__cuda_array_interface__
            assert t.to("cpu").device == "cpu"
        """,
    )


def test_export_hands_the_consumer_stream_an_event(emulators):
    run(
        emulators,
        """
        cuda = runtime("DLBRIDGE_CUDA_LIBRARY")
        t = dlbridge.zeros(4, device="cuda:0")

        def waits(stream):
            names = (b"cuStreamWaitEvent", b"cuEventRecord", b"cuStreamSynchronize", b"cuCtxSynchronize")
            before = [cuda.emu_calls(n) for n in names]
            t.__dlpack__(stream=stream, max_version=(1, 0))
            wait, record, sync, ctx_sync = (cuda.emu_calls(n) - b for n, b in zip(names, before))
            # The host never blocks for the consumer.
            assert sync == 0 and ctx_sync == 0
            return wait, record

        # The data is ordered before the legacy default stream: a consumer
        # on that stream, or one asking for no synchronisation, needs nothing.
        assert waits(None) == (0, 0)
        assert waits(1) == (0, 0)
        assert waits(-1) == (0, 0)
        # The per-thread default stream waits on an event, without blocking.
        assert waits(2) == (1, 1)
        # A handle the runtime does not know is refused, naming the call.
        try:
            t.__dlpack__(stream=0x7F00DEAD)
        except BufferError as e:
            assert "cuStreamWaitEvent" in str(e)
        else:
            raise AssertionError("a bogus stream handle was accepted")
        """,
    )


def test_rocm_stream_hand_off(emulators):
    run(
        emulators,
        """
        hip = runtime("DLBRIDGE_HIP_LIBRARY")
        t = dlbridge.from_dlpack(np.arange(3.0), device="rocm:0")
        assert t.device == "rocm:0" and t.to("cpu").tolist() == [0.0, 1.0, 2.0]
        stream = ctypes.c_void_p()
        assert hip.hipStreamCreateWithFlags(ctypes.byref(stream), 1) == 0
        for s, expect in ((None, 0), (0, 0), (-1, 0), (stream.value, 1)):
            before = hip.emu_calls(b"hipStreamWaitEvent")
            t.__dlpack__(stream=s, max_version=(1, 0))
            assert hip.emu_calls(b"hipStreamWaitEvent") - before == expect, s
        assert dlbridge.zeros(2, device="rocm_host").tolist() == [0.0, 0.0]
        """,
    )


def test_import_of_host_type_memory_waits_for_the_producer(emulators):
    run(
        emulators,
        """
        cuda = runtime("DLBRIDGE_CUDA_LIBRARY")
        dlbridge.zeros(1, device="cuda:0")  # device 0 in use
        a = np.arange(3.0)
        for kind, expect in ((13, True), (3, True), (1, False)):
            before = cuda.emu_calls(b"cuStreamSynchronize")
            t = dlbridge.from_dlpack(h.make_capsule(data=a, shape=(3,), dtype=(2, 64, 1), device=(kind, 0)))
            synced = cuda.emu_calls(b"cuStreamSynchronize") > before
            assert synced == expect, kind
            assert t.tolist() == [0.0, 1.0, 2.0]
        """,
    )


def test_no_gpu_means_clear_errors(emulators):
    out = run(
        emulators,
        """
        for device in ("cuda:0", "rocm:0"):
            try:
                dlbridge.empty(2, device=device)
            except RuntimeError as e:
                print(e)
            else:
                raise AssertionError(device)
        """,
        EMU_CUDA_DEVICES="0",
        EMU_HIP_DEVICES="0",
    )
    cuda, rocm = out.splitlines()
    assert "cuda:0" in cuda and "GPU" in cuda
    assert "rocm:0" in rocm and "GPU" in rocm

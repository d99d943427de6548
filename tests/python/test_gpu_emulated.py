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
             str(EMU / source), str(EMU / "emu_core.c"), str(REPO / "src" / "backend" / "host_maps.c"),
             "-fvisibility=hidden", "-Wl,-Bsymbolic",
             "-lpthread", "-o", str(path)],
            check=True,
        )
        libs[name] = str(path)
    return libs


PRELUDE = """
import ctypes, gc, os, weakref
import numpy as np
import dlbridge
from dlbridge import _testhelper as h

# What emu_live_kind() counts (tests/emu/emu_control.h).
LIVE_REGISTERED = 4
KINDS = ("cpu", "cuda:0", "cuda:1", "cuda_host", "cuda_managed", "rocm:0", "rocm_host")

def runtime(var):
    lib = ctypes.CDLL(os.environ[var])
    lib.emu_calls.restype = ctypes.c_long
    lib.emu_calls.argtypes = [ctypes.c_char_p]
    lib.emu_live_kind.restype = ctypes.c_long
    lib.emu_live_kind.argtypes = [ctypes.c_int]
    lib.emu_shadow.restype = ctypes.c_void_p
    lib.emu_shadow.argtypes = [ctypes.c_void_p]
    lib.emu_prefetch_location.argtypes = [ctypes.c_void_p]
    lib.emu_advice.restype = ctypes.c_uint
    lib.emu_advice.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    lib.emu_fail.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    return lib

# fn() must raise exc with every word in its message.
def raises(exc, fn, *words):
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in str(e), (w, str(e))
        return str(e)
    raise AssertionError(f"no {exc.__name__}")
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


# ---------------------------------------------------------------------------
# pin, device_of, prefetch, advise, synchronize
# ---------------------------------------------------------------------------


def test_pin_shares_memory_and_unregisters_with_the_last_owner(emulators):
    run(
        emulators,
        """
        for kind, var in (("cuda_host", "DLBRIDGE_CUDA_LIBRARY"), ("rocm_host", "DLBRIDGE_HIP_LIBRARY")):
            rt = runtime(var)
            base = rt.emu_live_kind(LIVE_REGISTERED)
            a = np.arange(6.0)
            assert dlbridge.device_of(a) == "cpu"
            p = dlbridge.pin(a, kind=kind)
            assert p.device == kind and p.data_ptr == a.ctypes.data and not p.readonly
            assert rt.emu_live_kind(LIVE_REGISTERED) == base + 1
            # The runtime now calls the numpy array's memory pinned.
            assert dlbridge.device_of(a) == kind
            # One memory, seen from both sides.
            np.from_dlpack(p)[1] = 42.0
            assert a[1] == 42.0
            a[2] = -1.0
            assert p.tolist()[:3] == [0.0, 42.0, -1.0]
            # Pinning again, or the pinned tensor, shares the registration.
            q = dlbridge.pin(a, kind=kind)
            r = dlbridge.pin(p, kind=kind)
            assert q.data_ptr == r.data_ptr == a.ctypes.data and r.device == kind
            view = p[2:]
            assert rt.emu_live_kind(LIVE_REGISTERED) == base + 1
            del p, q, r
            gc.collect()
            # The view is the last owner.
            assert rt.emu_live_kind(LIVE_REGISTERED) == base + 1
            assert view.tolist() == [-1.0, 3.0, 4.0, 5.0]
            del view
            gc.collect()
            assert rt.emu_live_kind(LIVE_REGISTERED) == base
            assert dlbridge.device_of(a) == "cpu"

        # The pinned tensor keeps its source alive; the last owner frees it.
        cuda = runtime("DLBRIDGE_CUDA_LIBRARY")
        base = cuda.emu_live_kind(LIVE_REGISTERED)
        b = np.arange(4, dtype=np.int32)
        alive = weakref.ref(b)
        p = dlbridge.pin(b)
        del b
        gc.collect()
        assert alive() is not None and p.tolist() == [0, 1, 2, 3]
        del p
        gc.collect()
        assert alive() is None and cuda.emu_live_kind(LIVE_REGISTERED) == base
        """,
    )


def test_fork_while_a_thread_pins_or_opens_leaves_the_child_working(emulators):
    # A thread inside a slow pin (cuMemHostRegister) or a slow import of
    # another process's allocation (cuIpcOpenMemHandle) holds the library's
    # lock for it; a fork meanwhile must not leave that lock taken in the
    # child, whose release of an inherited pinned or imported tensor would
    # then wait forever.
    run(emulators, """
        import subprocess, sys, threading, time

        def fork_and_release(victim, start_slow_call):
            th = threading.Thread(target=start_slow_call)
            th.start()
            time.sleep(0.2)  # inside the slow call
            pid = os.fork()
            if pid == 0:
                del victim[:]
                gc.collect()
                os._exit(0)
            th.join()
            deadline = time.time() + 30
            while time.time() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
                    return
                time.sleep(0.05)
            os.kill(pid, 9)
            raise AssertionError("the child hung releasing what it inherited")

        a, b = np.ones(4096, np.float32), np.ones(4096, np.float32)
        pinned = [dlbridge.pin(a)]
        fork_and_release(pinned, lambda: dlbridge.pin(b))

        exporter = subprocess.Popen(
            [sys.executable, "-c",
             "import sys, dlbridge\\n"
             "ts = [dlbridge.zeros((1000,), device='cuda:0') for _ in range(2)]\\n"
             "for t in ts: print(dlbridge.share_export(t)[0].hex(), flush=True)\\n"
             "sys.stdin.read()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        h1 = bytes.fromhex(exporter.stdout.readline().strip())
        h2 = bytes.fromhex(exporter.stdout.readline().strip())
        imported = [dlbridge.share_import(h1, -1)]
        fork_and_release(imported, lambda: dlbridge.share_import(h2, -1))
        exporter.stdin.close()
        assert exporter.wait() == 0
    """, EMU_CUDA_SLOW="cuMemHostRegister_v2,cuIpcOpenMemHandle_v2", EMU_CUDA_SLOW_MS="600")


def test_pin_takes_any_cpu_buffer_and_keeps_read_only(emulators):
    run(
        emulators,
        """
        cuda = runtime("DLBRIDGE_CUDA_LIBRARY")
        base = cuda.emu_live_kind(LIVE_REGISTERED)
        ro = np.arange(3.0)
        ro.flags.writeable = False
        p = dlbridge.pin(ro)
        assert p.readonly and p.device == "cuda_host" and p.tolist() == [0.0, 1.0, 2.0]
        assert memoryview(p).readonly and not np.from_dlpack(p).flags.writeable
        data = b"\\x01\\x02\\x03"
        assert dlbridge.pin(data).readonly and dlbridge.pin(data).tolist() == [1, 2, 3]
        buf = bytearray(b"\\x05\\x06")
        w = dlbridge.pin(memoryview(buf))
        assert not w.readonly
        np.from_dlpack(w)[0] = 9
        assert buf[0] == 9
        # A DLPack producer that is not a buffer (a capsule).
        c = dlbridge.pin(h.make_capsule(data=np.arange(2.0), shape=(2,), dtype=(2, 64, 1)))
        assert c.device == "cuda_host" and c.tolist() == [0.0, 1.0]
        del p, w, c
        gc.collect()
        assert cuda.emu_live_kind(LIVE_REGISTERED) == base

        # Memory pinned by someone else is taken as it is, even labelled cpu
        # (CuPy exports pinned host arrays so).
        host = dlbridge.arange(4, dtype="float32", device="cuda_host")
        mislabelled = h.make_capsule(data=host.data_ptr, shape=(4,), dtype=(2, 32, 1), device=(1, 0))
        t = dlbridge.pin(mislabelled)
        assert t.data_ptr == host.data_ptr and t.tolist() == [0.0, 1.0, 2.0, 3.0]
        assert cuda.emu_live_kind(LIVE_REGISTERED) == base
        # A pinned tensor of that kind already is shared; another kind's is refused.
        assert dlbridge.pin(host).data_ptr == host.data_ptr
        raises(ValueError, lambda: dlbridge.pin(host, kind="rocm_host"), "cuda_host", "only cpu")
        raises(ValueError, lambda: dlbridge.pin(dlbridge.zeros(2, device="cuda:1")), "cuda:1")

        # The runtime refusing leaves nothing registered and the array intact.
        a = np.arange(3.0)
        cuda.emu_fail(b"cuMemHostRegister_v2", 1, 2)  # CUDA_ERROR_OUT_OF_MEMORY
        raises(MemoryError, lambda: dlbridge.pin(a), "cuMemHostRegister")
        cuda.emu_fail(b"cuMemHostRegister_v2", 1, 1)  # CUDA_ERROR_INVALID_VALUE
        raises(RuntimeError, lambda: dlbridge.pin(a), "cuMemHostRegister")
        gc.collect()
        assert cuda.emu_live_kind(LIVE_REGISTERED) == base and dlbridge.device_of(a) == "cpu"
        assert dlbridge.pin(a).tolist() == [0.0, 1.0, 2.0]
        """,
    )


def test_device_of_tells_every_kind_whatever_the_label(emulators):
    run(
        emulators,
        """
        for kind in KINDS:
            t = dlbridge.arange(8, dtype="float32", device=kind)
            assert dlbridge.device_of(t) == kind, kind
            # An address inside the allocation, as an int.
            assert dlbridge.device_of(t.data_ptr + 12) == kind, kind
            # A foreign producer's view of it, labelled cpu (or mislabelled).
            cap = h.make_capsule(data=t.data_ptr, shape=(8,), dtype=(2, 32, 1), device=(1, 0))
            if kind in ("cpu", "cuda_host", "cuda_managed", "rocm_host"):
                assert dlbridge.device_of(cap) == kind, kind
                assert dlbridge.device_of(np.from_dlpack(t)) == kind, kind
        assert dlbridge.device_of(np.zeros(3)) == "cpu"
        assert dlbridge.device_of(bytearray(2)) == "cpu"
        """,
    )


def test_prefetch_and_advise_steer_managed_memory(emulators):
    run(
        emulators,
        """
        cuda = runtime("DLBRIDGE_CUDA_LIBRARY")
        m = dlbridge.arange(1024, dtype="float32", device="cuda_managed")
        p = m.data_ptr
        assert cuda.emu_prefetch_location(p) == -2
        dlbridge.prefetch(m, "cuda:1")
        assert cuda.emu_prefetch_location(p) == 1
        dlbridge.prefetch(m, "cpu", stream=2)
        assert cuda.emu_prefetch_location(p) == -1
        # Any producer of the memory will do: NumPy's array calls it cpu.
        dlbridge.prefetch(np.from_dlpack(m), device="cuda:0", stream=1)
        assert cuda.emu_prefetch_location(p) == 0
        # A tensor without elements needs nothing.
        dlbridge.prefetch(m[:0], "cuda:1")
        assert cuda.emu_prefetch_location(p) == 0

        where = ctypes.c_int(-9)
        dlbridge.advise(m, "set_read_mostly")
        assert cuda.emu_advice(p, ctypes.byref(where)) == 1
        # No device (None) is the host, as "cpu" is.
        dlbridge.advise(m, "set_preferred_location")
        assert cuda.emu_advice(p, ctypes.byref(where)) == 1 | 4 and where.value == -1
        dlbridge.advise(m, "set_preferred_location", "cuda:1")
        assert cuda.emu_advice(p, ctypes.byref(where)) == 1 | 4 and where.value == 1
        dlbridge.advise(m, "set_preferred_location", None)
        assert cuda.emu_advice(p, ctypes.byref(where)) == 1 | 4 and where.value == -1
        dlbridge.advise(m, "set_preferred_location", "cuda:1")
        dlbridge.advise(m, "set_accessed_by", device="cuda:0")
        assert cuda.emu_advice(p, ctypes.byref(where)) == 1 | 4 | 16 and where.value == 0
        dlbridge.advise(m, "unset_read_mostly")
        dlbridge.advise(m, "unset_preferred_location", "cpu")
        dlbridge.advise(m, "unset_accessed_by", "cuda:0")
        assert cuda.emu_advice(p, ctypes.byref(where)) == 0
        assert m.tolist()[:3] == [0.0, 1.0, 2.0]

        # Memory that is not managed, whatever its label, is refused by both.
        host = dlbridge.zeros(4, device="cuda_host")
        for t in (dlbridge.zeros(4, device="cuda:0"), host, np.zeros(4), dlbridge.zeros(4, device="rocm_host")):
            raises(ValueError, lambda: dlbridge.prefetch(t, "cuda:0"), "not cuda_managed")
            raises(ValueError, lambda: dlbridge.advise(t, "set_read_mostly"), "not cuda_managed")
        cap = h.make_capsule(data=host.data_ptr, shape=(4,), dtype=(2, 32, 1), device=(13, 0))
        raises(ValueError, lambda: dlbridge.prefetch(cap, "cuda:0"), "not cuda_managed")
        # Targets and streams.
        raises(ValueError, lambda: dlbridge.prefetch(m, "rocm:0"), "rocm")
        raises(RuntimeError, lambda: dlbridge.prefetch(m, "cuda:7"), "cuda:7")
        raises(ValueError, lambda: dlbridge.prefetch(m, "cuda:0", stream=0), "stream")
        raises(ValueError, lambda: dlbridge.prefetch(m, "cuda:0", stream=-1), "-1")
        raises(RuntimeError, lambda: dlbridge.prefetch(m, "cuda:0", stream=0x7F00DEAD), "cuMemPrefetchAsync")
        raises(TypeError, lambda: dlbridge.prefetch(m, "cuda:0", stream="s"))
        raises(TypeError, lambda: dlbridge.prefetch(m))
        raises(TypeError, lambda: dlbridge.prefetch("m", "cpu"), "str")
        raises(ValueError, lambda: dlbridge.advise(m, "read_mostly"), "set_read_mostly")
        raises(TypeError, lambda: dlbridge.advise(m, 1))
        raises(ValueError, lambda: dlbridge.advise(m, "set_preferred_location", "vulkan:0"), "vulkan")
        assert cuda.emu_prefetch_location(p) == 0 and cuda.emu_advice(p, ctypes.byref(where)) == 0
        """,
    )


def test_queries_look_at_a_capsule_without_consuming_it(emulators):
    run(
        emulators,
        """
        cuda = runtime("DLBRIDGE_CUDA_LIBRARY")
        m = dlbridge.arange(1024, dtype="float32", device="cuda_managed")
        p = m.data_ptr
        where = ctypes.c_int(-9)
        for versioned in (True, False):
            cap = m.__dlpack__(max_version=(1, 0)) if versioned else m.__dlpack__()
            assert dlbridge.device_of(cap) == "cuda_managed"
            dlbridge.prefetch(cap, "cuda:1")
            assert cuda.emu_prefetch_location(p) == 1
            dlbridge.advise(cap, "set_read_mostly")
            assert cuda.emu_advice(p, ctypes.byref(where)) == 1
            dlbridge.advise(cap, "unset_read_mostly")
            # Still the capsule it was: imported once, then used up.
            t = dlbridge.from_dlpack(cap)
            assert t.data_ptr == p and t.tolist()[:3] == [0.0, 1.0, 2.0]
            raises(BufferError, lambda: dlbridge.from_dlpack(cap), "consumed")
            # A used capsule is refused as the import refuses it.
            raises(BufferError, lambda: dlbridge.device_of(cap), "consumed")
            raises(BufferError, lambda: dlbridge.prefetch(cap, "cpu"), "consumed")
        # A struct the import refuses is refused by the queries too, and the
        # capsule stays unconsumed (its destructor frees it).
        bad = h.make_capsule(data=p, shape=(-1,), dtype=(2, 32, 1), device=(13, 0))
        raises(BufferError, lambda: dlbridge.device_of(bad), "shape")
        raises(BufferError, lambda: dlbridge.prefetch(bad, "cpu"), "shape")
        """,
    )


def test_prefetch_to_a_gpu_without_concurrent_managed_access(emulators):
    run(
        emulators,
        """
        m = dlbridge.zeros(16, device="cuda_managed")
        dlbridge.prefetch(m, "cpu")
        raises(RuntimeError, lambda: dlbridge.prefetch(m, "cuda:0"), "cuda:0")
        """,
        EMU_CUDA_CONCURRENT_MANAGED="0",
    )


def test_synchronize_waits_for_the_device(emulators):
    run(
        emulators,
        """
        cuda = runtime("DLBRIDGE_CUDA_LIBRARY")
        hip = runtime("DLBRIDGE_HIP_LIBRARY")

        def syncs(lib, name, x):
            before = lib.emu_calls(name)
            assert dlbridge.synchronize(x) is None
            return lib.emu_calls(name) - before

        one = dlbridge.zeros(2, device="cuda:1")
        dlbridge.zeros(2, device="cuda:0")
        assert syncs(cuda, b"cuCtxSynchronize", one) == 1
        assert syncs(cuda, b"cuCtxSynchronize", "cuda:0") == 1
        assert syncs(cuda, b"cuCtxSynchronize", (2, 1)) == 1
        # Host-type memory may have been written by any GPU in use.
        assert syncs(cuda, b"cuCtxSynchronize", dlbridge.zeros(2, device="cuda_managed")) == 2
        assert syncs(cuda, b"cuCtxSynchronize", "cuda_host") == 2
        # A producer's own __dlpack_device__ names the device.
        class Producer:
            def __dlpack__(self, **kw):
                raise AssertionError("synchronize imported the producer")
            def __dlpack_device__(self):
                return (2, 1)
        assert syncs(cuda, b"cuCtxSynchronize", Producer()) == 1
        # A capsule is read, not consumed; a framework's device object
        # (type and index, as torch.device has) names its device.
        capsule = one.__dlpack__()
        assert syncs(cuda, b"cuCtxSynchronize", capsule) == 1
        assert dlbridge.from_dlpack(capsule).device == "cuda:1"
        class FrameworkDevice:
            type, index = "cuda", 1
        assert syncs(cuda, b"cuCtxSynchronize", FrameworkDevice()) == 1
        assert syncs(hip, b"hipDeviceSynchronize", dlbridge.zeros(2, device="rocm:0")) == 1
        assert syncs(hip, b"hipDeviceSynchronize", "rocm:1") == 1
        # The CPU has nothing to wait for.
        before = cuda.emu_calls(None) + hip.emu_calls(None)
        dlbridge.synchronize("cpu")
        dlbridge.synchronize(np.zeros(2))
        assert cuda.emu_calls(None) + hip.emu_calls(None) == before

        raises(RuntimeError, lambda: dlbridge.synchronize("cuda:5"), "cuda:5")
        raises(ValueError, lambda: dlbridge.synchronize("vulkan:0"), "vulkan")
        raises(ValueError, lambda: dlbridge.synchronize("tpu"))
        raises(TypeError, lambda: dlbridge.synchronize(3))
        raises(TypeError, lambda: dlbridge.synchronize(None))
        class Liar:
            def __dlpack__(self, **kw):
                pass
            def __dlpack_device__(self):
                return "cuda:0"
        raises(TypeError, lambda: dlbridge.synchronize(Liar()), "__dlpack_device__")
        """,
    )


# ---------------------------------------------------------------------------
# Moving and sharing between kinds
# ---------------------------------------------------------------------------


def test_from_dlpack_puts_the_result_on_the_device_asked_for(emulators):
    run(
        emulators,
        """
        cuda = runtime("DLBRIDGE_CUDA_LIBRARY")
        d = dlbridge.from_dlpack(np.arange(4.0), device="cuda:0")
        c = dlbridge.from_dlpack(d, device="cpu")
        assert c.device == "cpu" and c.data_ptr != d.data_ptr and c.tolist() == [0.0, 1.0, 2.0, 3.0]
        # The copy is the consumer's alone: writing the device memory leaves it.
        (ctypes.c_double * 4).from_address(cuda.emu_shadow(d.data_ptr))[0] = 99.0
        assert d.to("cpu").tolist()[0] == 99.0 and c.tolist()[0] == 0.0
        raises(ValueError, lambda: dlbridge.from_dlpack(d, device="cpu", copy=False), "copy=False")
        raises(ValueError, lambda: dlbridge.from_dlpack(d, device="cpu", in_place=True),
               "in_place=True", "cuda:0 memory", "cpu cannot address")

        # Memory a device can address is still not on it: copy=None copies
        # there, copy=False refuses, whatever the source's form.
        m = dlbridge.arange(4, dtype="float64", device="cuda_managed")
        p = dlbridge.arange(4, dtype="float64", device="cuda_host")
        for src in (m, p):
            sources = (lambda: src, lambda: src.__dlpack__(max_version=(1, 0)), lambda: src.__dlpack__())
            for make in sources:
                for device in ("cpu", "cuda:0", "cuda:1", "cuda_host", "cuda_managed"):
                    if device == src.device:
                        continue
                    s = dlbridge.from_dlpack(make(), device=device)
                    assert s.device == device and s.data_ptr != src.data_ptr, device
                    assert s.to("cpu").tolist() == [0.0, 1.0, 2.0, 3.0]
                    raises(ValueError, lambda: dlbridge.from_dlpack(make(), device=device, copy=False),
                           "copy=False", src.device, "in_place=True")
                a = dlbridge.asarray(make(), device="cpu")
                assert a.device == "cpu" and a.data_ptr != src.data_ptr
                raises(ValueError, lambda: dlbridge.asarray(make(), device="cpu", copy=False), "copy=False")
        # in_place=True: the memory where it is, under the name asked for.
        s = dlbridge.from_dlpack(m, device="cpu", in_place=True)
        assert s.device == "cpu" and s.data_ptr == m.data_ptr
        assert s.__dlpack_device__() == (1, 0)
        np.from_dlpack(m)[1] = 7.0
        assert s.tolist()[1] == 7.0
        g = dlbridge.from_dlpack(m.__dlpack__(max_version=(1, 0)), device="cuda:1", in_place=True, copy=False)
        assert g.device == "cuda:1" and g.data_ptr == m.data_ptr
        q = dlbridge.from_dlpack(p, device="cpu", in_place=True)
        assert q.device == "cpu" and q.data_ptr == p.data_ptr
        del s, g, q
        raises(ValueError, lambda: dlbridge.from_dlpack(m, device="cpu", in_place=True, copy=True), "copy=True")
        raises(ValueError, lambda: dlbridge.from_dlpack(m, device="rocm:0", in_place=True), "cannot address")
        # copy=True always copies.
        k = dlbridge.from_dlpack(m, device="cpu", copy=True)
        assert k.device == "cpu" and k.data_ptr != m.data_ptr
        np.from_dlpack(m)[1] = 8.0
        assert k.tolist()[1] == 7.0
        k = dlbridge.from_dlpack(m, copy=True)
        assert k.device == "cuda_managed" and k.data_ptr != m.data_ptr
        r = dlbridge.from_dlpack(m, device="rocm:0")
        assert r.device == "rocm:0" and r.to("cpu").tolist() == [0.0, 8.0, 2.0, 3.0]
        # Tensor.to follows the same rule.
        assert m.to("cpu").device == "cpu" and m.to("cpu").data_ptr != m.data_ptr
        raises(ValueError, lambda: m.to("cpu", copy=False), "copy=False")
        assert m.to("cuda_managed", copy=False) is m
        """,
    )


def test_every_kind_moves_to_every_kind_and_round_trips(emulators):
    run(
        emulators,
        """
        expect = np.arange(12, dtype=np.float32).reshape(3, 4).T.tolist()
        for src_kind in KINDS:
            src = dlbridge.arange(12, dtype="float32", device=src_kind).reshape(3, 4).T
            # DLPack both ways, versioned and legacy, shares the memory.
            for cap in (src.__dlpack__(max_version=(1, 0)), src.__dlpack__()):
                back = dlbridge.from_dlpack(cap)
                assert back.device == src_kind and back.data_ptr == src.data_ptr
                assert back.strides == src.strides
            for dst_kind in KINDS:
                out = src.to(dst_kind)
                assert out.device == dst_kind, (src_kind, dst_kind)
                if dst_kind == src_kind:
                    assert out is src
                    out = src.to(dst_kind, copy=True)
                    assert out.data_ptr != src.data_ptr
                assert out.to("cpu").tolist() == expect, (src_kind, dst_kind)
        """,
    )


def test_asarray_converting_a_tensor_keeps_it_on_its_device(emulators):
    # The array API standard infers the result's device from an array
    # when device= is not given: a dtype conversion happens on the host,
    # and its values go back to the memory the data came from.
    run(
        emulators,
        """
        for kind in KINDS:
            src = dlbridge.arange(6, dtype="int32", device=kind).reshape(2, 3).T
            for make in (lambda: src, lambda: src.__dlpack__(max_version=(1, 0)),
                         lambda: np.asarray(src) if src.device == "cpu" else src):
                out = dlbridge.asarray(make(), dtype="float64")
                assert out.device == kind and out.dtype == "float64", (kind, out.device)
                assert out.to("cpu").tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]], kind
            # device= still names where the result goes.
            out = dlbridge.asarray(src, dtype="int8", device="cpu")
            assert out.device == "cpu" and out.tolist() == [[0, 3], [1, 4], [2, 5]]
        """,
    )


def test_assignment_between_kinds(emulators):
    run(
        emulators,
        """
        # Device memory as a source is copied to the host first.
        t = dlbridge.zeros(4)
        t[1:3] = dlbridge.full(2, 2.5, device="cuda:0")
        assert t.tolist() == [0.0, 2.5, 2.5, 0.0]
        t[:] = dlbridge.arange(4, dtype="float32", device="rocm:0")[None]
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
        # Memory the CPU can write takes values in place.
        for kind in ("cuda_host", "cuda_managed", "rocm_host"):
            m = dlbridge.zeros((2, 2), device=kind)
            m[0] = [1.0, 2.0]
            m[1, ...] = m[0]
            assert m.device == kind and m.tolist() == [[1.0, 2.0], [1.0, 2.0]]
        # A value of another dtype in device memory is converted as one in
        # host memory is: read on the host, not refused for its dtype.
        for kind in ("cuda:0", "rocm:0"):
            for dtype in ("float64", "int32", "bool"):
                v = dlbridge.arange(1, 4, dtype="int64", device=kind)
                v = dlbridge.asarray(v, dtype=dtype)
                assert v.device == kind, (kind, v.device)
                for value in (v, v.__dlpack__(max_version=(1, 0)), v[None]):
                    t = dlbridge.zeros(3, dtype="float32")
                    t[:] = value
                    expect = [1.0, 1.0, 1.0] if dtype == "bool" else [1.0, 2.0, 3.0]
                    assert t.tolist() == expect, (kind, dtype)
            # A dtype with no conversion is still refused, naming both.
            h = dlbridge.zeros(3, dtype="float32")
            raises(TypeError, lambda: h.__setitem__(slice(None), dlbridge.zeros(3, dtype="float32x4", device=kind)),
                   "float32x4", "float32")
        # Device memory as a destination is refused, naming the way out.
        for kind in ("cuda:0", "rocm:0"):
            d = dlbridge.zeros(2, device=kind)
            raises(BufferError, lambda: d.__setitem__(0, 1.0), kind, "to()")
            assert d.to("cpu").tolist() == [0.0, 0.0]
        """,
    )


def test_pinning_and_waiting_for_pinned_data_release_the_gil(emulators):
    # The driver's calls take 300 ms each here; a thread that ticks every
    # 5 ms keeps ticking through them only if dlbridge let the GIL go.
    run(
        emulators,
        """
        import threading, time
        ticks = []
        stop = threading.Event()
        def tick():
            while not stop.is_set():
                ticks.append(time.perf_counter())
                time.sleep(0.005)
        def ticks_during(call):
            t = threading.Thread(target=tick)
            t.start()
            time.sleep(0.05)
            t0 = time.perf_counter()
            result = call()
            t1 = time.perf_counter()
            stop.set()
            t.join()
            stop.clear()
            during = sum(t0 < x < t1 for x in ticks)
            ticks.clear()
            assert t1 - t0 > 0.25, t1 - t0
            return result, during
        a = dlbridge.zeros(1 << 16, dtype="uint8")
        p, during = ticks_during(lambda: dlbridge.pin(a))
        assert p.device == "cuda_host" and during >= 10, during
        host = dlbridge.zeros(16, device="cuda_host")
        capsule = host.__dlpack__(max_version=(1, 0))
        u, during = ticks_during(lambda: dlbridge.from_dlpack(capsule))
        assert u.device == "cuda_host" and during >= 10, during
        """,
        EMU_CUDA_SLOW="cuMemHostRegister_v2,cuCtxSynchronize,cuStreamSynchronize",
        EMU_CUDA_SLOW_MS="300",
    )


def test_a_fill_whose_host_tensor_cannot_be_allocated_frees_the_device_memory(emulators):
    # full() on a GPU fills a host tensor and copies it over: when the host
    # tensor cannot be allocated, the device memory allocated before it is
    # freed with the MemoryError.
    run(
        emulators,
        """
        from dlbridge import _dlbridge as core
        LIVE_DEVICE = 1
        cuda = runtime("DLBRIDGE_CUDA_LIBRARY")
        dlbridge.zeros(1, device="cuda:0")
        gc.collect()
        base = cuda.emu_live_kind(LIVE_DEVICE)
        core._set_allocator(h.oom_allocator())
        failures = 0
        for n in range(1, 100):
            h.oom_arm(n, 1)
            try:
                t = dlbridge.full((4,), 2.0, device="cuda:0")
            except MemoryError:
                t = None
            finally:
                counted, failed = h.oom_disarm()
            if not failed:
                break
            failures += 1
            assert t is None and cuda.emu_live_kind(LIVE_DEVICE) == base, n
        core._set_allocator(None)
        assert failures >= 2 and t.to("cpu").tolist() == [2.0] * 4
        del t
        gc.collect()
        assert cuda.emu_live_kind(LIVE_DEVICE) == base
        """,
    )

"""dlbridge on a machine without GPU runtimes.

DLBRIDGE_CUDA_LIBRARY and DLBRIDGE_HIP_LIBRARY name files that do not exist,
so both runtimes fail to load as they do where no driver is installed. The
module must still import and serve CPU memory, device_of must answer cpu,
and every request for GPU memory or GPU work must raise an error that says
what was looked for. Each case runs in a fresh interpreter: a process loads
its runtimes once.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dlbridge
from support import capsule_of, deleted


def run(body, **env):
    full = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    for name, value in env.items():
        if value is None:
            full.pop(name, None)
        else:
            full[name] = value
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_missing_runtimes_leave_cpu_working_and_say_why(tmp_path):
    missing = tmp_path / "nowhere"
    run(
        """
        import os
        import numpy as np
        import dlbridge

        CUDA = os.environ["DLBRIDGE_CUDA_LIBRARY"]
        HIP = os.environ["DLBRIDGE_HIP_LIBRARY"]

        def raises(exc, fn, *words):
            try:
                fn()
            except exc as e:
                for w in words:
                    assert w in str(e), (w, str(e))
                return
            raise AssertionError(f"no {exc.__name__} from {fn}")

        a = np.arange(6.0)
        t = dlbridge.from_dlpack(a)
        for x in (a, t, t.data_ptr, bytearray(4), memoryview(b"ab"), t.__dlpack__()):
            assert dlbridge.device_of(x) == "cpu", x
        # CPU memory works as ever.
        assert dlbridge.zeros(3).tolist() == [0.0] * 3
        assert np.from_dlpack(dlbridge.from_dlpack(a, copy=True)).tolist() == a.tolist()
        assert t.to("cpu") is t
        dlbridge.synchronize("cpu")
        dlbridge.synchronize(t)

        for device in ("cuda", "cuda:1", "cuda_host", "cuda_managed", "rocm:0", "rocm_host"):
            lib, var = (HIP, "DLBRIDGE_HIP_LIBRARY") if device.startswith("rocm") else (CUDA, "DLBRIDGE_CUDA_LIBRARY")
            for make in (dlbridge.empty, dlbridge.zeros):
                raises(RuntimeError, lambda: make(2, device=device), "cannot allocate", lib, var)
            raises(RuntimeError, lambda: dlbridge.arange(3, device=device), lib)
            raises(RuntimeError, lambda: t.to(device), lib)
            raises(BufferError, lambda: dlbridge.from_dlpack(a, device=device), lib)
            raises(RuntimeError, lambda: dlbridge.synchronize(device), "synchronize()", lib)
        raises(RuntimeError, lambda: dlbridge.pin(a), "pin()", CUDA, "DLBRIDGE_CUDA_LIBRARY")
        raises(RuntimeError, lambda: dlbridge.pin(a, kind="rocm_host"), "pin()", HIP, "DLBRIDGE_HIP_LIBRARY")
        raises(RuntimeError, lambda: dlbridge.prefetch(a, "cuda:0"), "prefetch()", CUDA)
        raises(RuntimeError, lambda: dlbridge.advise(t, "set_read_mostly"), "advise()", CUDA)
        # The failed pin left the array as it was.
        assert dlbridge.device_of(a) == "cpu" and a.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        # A capsule whose pin failed is left unconsumed, for another consumer.
        for cap in (t.__dlpack__(), a.__dlpack__(max_version=(1, 0)), a.__dlpack__()):
            raises(RuntimeError, lambda: dlbridge.pin(cap), "pin()", CUDA)
            assert '"dltensor' in repr(cap), repr(cap)
            assert dlbridge.from_dlpack(cap).data_ptr == t.data_ptr
            assert '"used_dltensor' in repr(cap), repr(cap)
        """,
        DLBRIDGE_CUDA_LIBRARY=str(missing / "libcuda.so.1"),
        DLBRIDGE_HIP_LIBRARY=str(missing / "libamdhip64.so.6"),
    )


@pytest.mark.parametrize(
    "device, library, variable",
    [
        ("cuda:0", "libcuda.so.1", "DLBRIDGE_CUDA_LIBRARY"),
        ("rocm:0", "libamdhip64.so", "DLBRIDGE_HIP_LIBRARY"),
    ],
)
def test_the_default_search_names_the_libraries_tried(device, library, variable):
    # Each runtime on its own: one installed here must not hide the other.
    out = run(
        f"""
        import dlbridge
        try:
            dlbridge.empty(2, device={device!r})
        except RuntimeError as e:
            print(e)
        else:
            print("loaded")
        """,
        DLBRIDGE_CUDA_LIBRARY=None,
        DLBRIDGE_HIP_LIBRARY=None,
    )
    if out.strip() == "loaded":
        pytest.skip(f"the runtime {device} needs is installed here")
    assert library in out and variable in out, out


# Arguments are checked before any runtime is needed, so these hold on every
# machine, with or without a GPU.


@pytest.mark.parametrize(
    "call, exc, words",
    [
        (lambda: dlbridge.device_of(0), ValueError, "address 0 is NULL"),
        (lambda: dlbridge.device_of(-8), ValueError, "negative"),
        (lambda: dlbridge.device_of(2**64), OverflowError, "pointer"),
        (lambda: dlbridge.device_of(True), TypeError, "bool"),
        (lambda: dlbridge.device_of("cuda"), TypeError, "str"),
        (lambda: dlbridge.device_of(None), TypeError, "NoneType"),
        (lambda: dlbridge.pin(np.zeros(2), kind="cuda"), ValueError, "cuda:0"),
        (lambda: dlbridge.pin(np.zeros(2), kind="cpu"), ValueError, "rocm_host"),
        (lambda: dlbridge.pin(np.zeros(2), kind=3), TypeError, "device"),
        (lambda: dlbridge.pin("text"), TypeError, "str"),
        (lambda: dlbridge.pin(5), TypeError, "int"),
        (lambda: dlbridge.pin(), TypeError, "obj"),
        (lambda: dlbridge.pin(obj=np.zeros(2)), TypeError, "obj"),
        (lambda: dlbridge.prefetch(np.zeros(2), "cuda:0", stream=0), ValueError, "stream"),
        (lambda: dlbridge.prefetch(np.zeros(2), "gpu"), ValueError, "gpu"),
        (lambda: dlbridge.prefetch(np.zeros(2), "cuda:0", None, 1), TypeError, "3"),
        (lambda: dlbridge.advise(np.zeros(2), "often"), ValueError, "often"),
        (lambda: dlbridge.advise(np.zeros(2), "set_read_mostly", 3.5), TypeError, "float"),
        (lambda: dlbridge.synchronize([2, 0]), TypeError, "list"),
        (lambda: dlbridge.synchronize((2, 0, 0)), TypeError, "2 ints"),
    ],
)
def test_bad_arguments_fail_before_any_runtime_is_needed(call, exc, words):
    with pytest.raises(exc, match=words):
        call()


def test_device_of_passes_on_why_a_buffer_was_refused():
    # The exporter's own error: a buffer that cannot be had is not taken
    # for an object of the wrong type.
    m = memoryview(b"ab")
    m.release()
    with pytest.raises(ValueError, match="released memoryview"):
        dlbridge.device_of(m)


def test_device_of_passes_on_a_buffer_error_of_any_exporter():
    # A buffer exporter that is no DLPack producer, refusing with
    # BufferError: that refusal is the answer, not a TypeError.
    testbuffer = pytest.importorskip("_testbuffer")
    x = testbuffer.ndarray([1, 2, 3], shape=[3], format="B", flags=testbuffer.ND_GETBUF_FAIL)
    with pytest.raises(BufferError, match="ND_GETBUF_FAIL"):
        dlbridge.device_of(x)


class _Address:
    """An int in all but type: __index__ only."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def test_device_of_takes_any_index_as_an_address():
    a = np.arange(3)
    assert dlbridge.device_of(_Address(a.ctypes.data)) == "cpu"
    with pytest.raises(ValueError, match="address -8 is negative"):
        dlbridge.device_of(_Address(-8))
    with pytest.raises(ValueError, match="address 0 is NULL"):
        dlbridge.device_of(_Address(0))


def test_prefetch_and_advise_release_what_they_import(helper):
    # A producer's tensor is imported, refused (it is not managed memory,
    # or there is no CUDA to ask) and released: its deleter runs once per
    # call.
    class Producer:
        def __dlpack__(self, **kwargs):
            return capsule_of(np.zeros(4, dtype=np.float32))

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises((ValueError, RuntimeError), match="not cuda_managed|CUDA"):
        dlbridge.prefetch(Producer(), "cpu")
    with pytest.raises((ValueError, RuntimeError), match="not cuda_managed|CUDA"):
        dlbridge.advise(Producer(), "set_read_mostly")
    assert deleted() == 2


def test_synchronize_passes_on_what_looking_up_the_device_raised():
    # Looking up or calling __dlpack_device__ raises: that is the error.
    # A CPU device waits for nothing, so no runtime is needed.
    class Broken:
        def __getattr__(self, name):
            raise KeyError(name)

    class Raises:
        def __dlpack_device__(self):
            raise LookupError("no device today")

    class Cpu:
        def __dlpack_device__(self):
            return (1, 0)

    class NotAMethod:
        __dlpack_device__ = (1, 0)

    with pytest.raises(KeyError, match="__dlpack_device__"):
        dlbridge.synchronize(Broken())
    with pytest.raises(LookupError, match="no device today"):
        dlbridge.synchronize(Raises())
    assert dlbridge.synchronize(Cpu()) is None
    with pytest.raises(TypeError, match=r"NotAMethod.__dlpack_device__ is tuple, not a method"):
        dlbridge.synchronize(NotAMethod())
    # A CPU capsule waits for nothing and stays importable.
    capsule = dlbridge.zeros(2).__dlpack__()
    assert dlbridge.synchronize(capsule) is None
    assert dlbridge.from_dlpack(capsule).tolist() == [0.0, 0.0]
    with pytest.raises(TypeError, match="a DLPack capsule or a DLPack producer, not int"):
        dlbridge.synchronize(3)


def test_empty_buffers_and_tensors_have_memory_to_name():
    # The buffer protocol and dlbridge never give NULL, even for no bytes.
    assert dlbridge.device_of(b"") == "cpu"
    assert dlbridge.device_of(dlbridge.empty(0)) == "cpu"


def test_a_tensor_without_data_has_no_device_of(helper):
    cap = helper.make_capsule(data=None, shape=(0,), dtype=(2, 32, 1))
    with pytest.raises(ValueError, match="no data pointer"):
        dlbridge.device_of(dlbridge.from_dlpack(cap))


def test_pin_refusing_a_capsule_leaves_it_unconsumed():
    from support import helper

    helper.reset()
    cap = helper.make_capsule(data=0x1000, shape=(2,), dtype=(2, 32, 1), device=(2, 0))
    with pytest.raises(ValueError, match="only cpu memory can be pinned"):
        dlbridge.pin(cap)
    assert '"dltensor_versioned"' in repr(cap) and deleted() == 0
    t = dlbridge.from_dlpack(cap)
    assert t.device == "cuda:0" and "used_dltensor_versioned" in repr(cap)
    del cap, t
    assert deleted() == 1

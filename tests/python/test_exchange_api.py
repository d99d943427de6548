"""The DLPack C exchange table of dlbridge.Tensor, driven from C by the test
helper, and PyTorch's table consumed by dlbridge."""

import ctypes
import gc
import sys
import types

import pytest

from dlpack_ctypes import DLDataType, DLDevice, DLManagedTensorVersioned, DLTensor
from support import (
    IS_COPIED,
    KDLCPU,
    KDLCUDA,
    KDLCUDAHOST,
    READ_ONLY,
    SUBBYTE_PADDED,
    capsule_of,
    deleted,
    dlbridge,
    helper,
    needs_torch,
    np,
    torch,
)

Tensor = dlbridge.Tensor


def test_table_is_published_as_capsule_and_int():
    cap = Tensor.__dlpack_c_exchange_api__
    assert type(cap).__name__ == "PyCapsule" and '"dlpack_exchange_api"' in repr(cap)
    assert isinstance(Tensor.__c_dlpack_exchange_api__, int)
    info = helper.exchange_version(Tensor)
    assert info == {
        "major": 1,
        "minor": 3,
        "prev_api_null": True,
        "int_attr_matches": True,
        "all_set": True,
    }
    # Reached from instances too, as a type attribute.
    assert dlbridge.arange(2).__dlpack_c_exchange_api__ is cap


def test_from_py_object_and_to_py_object_round_trip():
    t = dlbridge.arange(6).reshape(2, 3)
    u = helper.exchange_roundtrip(Tensor, t)
    assert type(u) is Tensor and u is not t
    assert u.data_ptr == t.data_ptr and u.tolist() == t.tolist()
    del t
    gc.collect()
    assert u.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_from_py_object_keeps_read_only_and_drops_is_copied(helper):
    ro = dlbridge.from_dlpack(capsule_of(np.arange(2, dtype=np.float32), flags=READ_ONLY))
    flags, major, minor = helper.exchange_flags(ro)
    assert flags == READ_ONLY and (major, minor) == (1, 3)
    copied = dlbridge.from_dlpack(capsule_of(np.arange(2, dtype=np.float32), flags=IS_COPIED))
    assert helper.exchange_flags(copied)[0] == 0


def test_from_py_object_refuses_other_objects():
    for obj in (np.arange(3), object(), None):
        with pytest.raises(TypeError, match="expected a dlbridge.Tensor"):
            helper.exchange_roundtrip(Tensor, obj)


def test_dltensor_from_py_object_is_a_view_of_the_tensor():
    a = np.arange(24, dtype=np.int16).reshape(4, 6)[::-1, 1::2]
    t = dlbridge.from_dlpack(a)
    v = helper.exchange_view(Tensor, t)
    assert v == {
        "data": t.data_ptr,
        "ndim": 2,
        "shape": (4, 3),
        "strides": (-6, 2),
        "byte_offset": t.byte_offset,
        "device": (KDLCPU, 0),
        "dtype": (0, 16, 1),
    }
    with pytest.raises(TypeError):
        helper.exchange_view(Tensor, a)


def test_dltensor_view_refuses_what_a_dltensor_cannot_say():
    ro = dlbridge.from_dlpack(capsule_of(np.arange(2, dtype=np.float32), flags=READ_ONLY))
    with pytest.raises(BufferError, match="read-only and a DLTensor cannot say so"):
        helper.exchange_view(Tensor, ro)
    raw = np.array([1, 2, 3], dtype=np.uint8)
    padded = dlbridge.from_dlpack(capsule_of(raw, dtype=(0, 4, 1), flags=SUBBYTE_PADDED))
    with pytest.raises(BufferError, match="padded to a byte each"):
        helper.exchange_view(Tensor, padded)
    # The owning export carries both flags; packed units and padded whole
    # bytes have nothing to say.
    assert helper.exchange_flags(ro)[0] == READ_ONLY
    assert helper.exchange_flags(padded)[0] == SUBBYTE_PADDED
    packed = dlbridge.from_dlpack(capsule_of(raw, dtype=(0, 4, 1), shape=(6,)))
    assert helper.exchange_view(Tensor, packed)["shape"] == (6,)
    whole = dlbridge.from_dlpack(capsule_of(raw, flags=SUBBYTE_PADDED))
    assert helper.exchange_view(Tensor, whole)["dtype"] == (1, 8, 1)


def test_dltensor_view_outlives_a_view_of_its_tensor():
    source = [dlbridge.arange(12).reshape(3, 4)]
    t = dlbridge.from_dlpack(source[0])  # a share of the first tensor

    def meanwhile():
        t[1:]  # a view: t's tensor becomes a dlbridge one
        source.clear()  # the first tensor's last reference goes
        gc.collect()
        # Same rank, so the same sizes: tensors and shares of them.
        made = [dlbridge.zeros((7, 7)) for _ in range(100)]
        return made + [dlbridge.from_dlpack(m) for m in made]

    v = helper.exchange_view(Tensor, t, meanwhile)
    assert v["shape"] == (3, 4) and v["strides"] == (4, 1)
    assert t.tolist()[2] == [8, 9, 10, 11]


def test_allocator_makes_a_tensor_like_the_prototype():
    t = helper.exchange_alloc(Tensor, (2, 3), (2, 64, 1), (KDLCPU, 0))
    assert type(t) is Tensor
    assert (t.shape, t.dtype, t.device, t.strides) == ((2, 3), "float64", "cpu", (3, 1))
    np.from_dlpack(t)[:] = 1.5
    assert t.tolist() == [[1.5] * 3] * 2
    s = helper.exchange_alloc(Tensor, (), (0, 8, 1), (KDLCPU, 0))
    assert s.shape == () and s.dtype == "int8"


def test_allocator_reports_errors_through_set_error():
    kind, message, calls = helper.exchange_alloc(Tensor, (2,), (99, 8, 1), (KDLCPU, 0))
    assert calls == 1 and kind == "BufferError" and "code" in message
    kind, message, calls = helper.exchange_alloc(Tensor, (2, -1), (2, 32, 1), (KDLCPU, 0))
    assert calls == 1 and "shape" in message
    kind, message, calls = helper.exchange_alloc(Tensor, (2,), (2, 32, 1), (KDLCPU, 0), 99)
    assert calls == 1 and "ndim" in message
    kind, message, calls = helper.exchange_alloc(Tensor, (1 << 40, 1 << 30), (2, 32, 1), (KDLCPU, 0))
    assert calls == 1 and kind in ("MemoryError", "BufferError")
    # cuda memory needs the GPU runtime; without one the error says so.
    r = helper.exchange_alloc(Tensor, (2,), (2, 32, 1), (KDLCUDA, 0))
    if isinstance(r, tuple):
        assert r[2] == 1 and "cuda" in r[1].lower()
    else:  # pragma: no cover - only with a CUDA GPU
        assert r.device == "cuda:0"


def test_allocator_reports_a_failed_allocation_as_memory_error(helper):
    # The core's first allocation (the tensor's block) fails: set_error
    # gets the kind a consumer raises for it, MemoryError, not BufferError.
    dlbridge._dlbridge._set_allocator(helper.oom_allocator())
    try:
        helper.oom_arm(1, 1)  # the core's allocator only
        r = helper.exchange_alloc(Tensor, (2,), (2, 32, 1), (KDLCPU, 0))
        assert helper.oom_disarm() == (1, True)
    finally:
        dlbridge._dlbridge._set_allocator(None)
    assert r[0] == "MemoryError" and r[2] == 1 and "out of memory" in r[1]


def test_without_the_module_tensors_are_still_stolen(helper, monkeypatch):
    # Something else in sys.modules under the extension's name: the calls
    # that make a Tensor say so, and still release what they were given.
    monkeypatch.setitem(sys.modules, "dlbridge._dlbridge", types.ModuleType("dlbridge._dlbridge"))
    a = np.arange(4, dtype=np.float32)
    with pytest.raises(ImportError, match="not dlbridge's"):
        helper.exchange_to_py(Tensor, data=a, shape=(4,), dtype=(2, 32, 1))
    with pytest.raises(ImportError, match="not dlbridge's"):
        helper.capi_from(data=a, shape=(4,), dtype=(2, 32, 1))
    with pytest.raises(ImportError, match="not dlbridge's"):
        helper.capi_from(data=a, shape=(4,), dtype=(2, 32, 1), legacy=True)
    monkeypatch.undo()
    assert deleted() == 3


def test_to_py_object_steals_and_validates(helper):
    a = np.arange(4, dtype=np.float32)
    t = helper.exchange_to_py(Tensor, data=a, shape=(4,), dtype=(2, 32, 1))
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    del t
    assert deleted() == 1
    # Refused tensors are still stolen: their deleter runs at once.
    # Major versions on either side of 1 (the struct's layout is 1's only).
    with pytest.raises(BufferError, match=r"version is 2\.0"):
        helper.exchange_to_py(Tensor, data=a, shape=(4,), version=(2, 0))
    with pytest.raises(BufferError, match=r"version is 0\.9"):
        helper.exchange_to_py(Tensor, data=a, shape=(4,), version=(0, 9))
    assert deleted() == 3
    with pytest.raises(BufferError, match="shape"):
        helper.exchange_to_py(Tensor, data=a, shape=(4, -2))
    assert deleted() == 4


def test_refused_versions_report_what_their_deleter_raised(helper, monkeypatch):
    # A tensor of another major version is refused and its deleter run at
    # once: an exception the deleter leaves set is reported as unraisable,
    # not dropped under the refusal (to_py_object, DLBridge_FromManaged,
    # and a producer's table handing one to from_dlpack).
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(str(u.exc_value)))
    a = np.arange(4, dtype=np.float32)
    with pytest.raises(BufferError, match="version"):
        helper.exchange_to_py(Tensor, data=a, shape=(4,), version=(2, 0), deleter="leave_error")
    with pytest.raises(BufferError, match="version"):
        helper.capi_from(data=a, shape=(4,), version=(0, 9), deleter="leave_error")

    class Producer:
        __dlpack_c_exchange_api__ = helper.fake_exchange(0)

        def __init__(self):
            self.capsule = capsule_of(a, version=(2, 0), deleter="leave_error")

    with pytest.raises(BufferError, match="version"):
        dlbridge.from_dlpack(Producer())
    assert seen == ["left set by the deleter"] * 3
    assert deleted() == 3


def test_refusals_report_what_the_deleter_raised_meanwhile(helper, monkeypatch):
    # The refusal is pending when the refused tensor's deleter runs: an
    # exception the deleter leaves set is reported as unraisable, and the
    # refusal is what the caller gets (to_py_object, and FromLegacy, which
    # releases the struct itself).
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(str(u.exc_value)))
    a = np.arange(4, dtype=np.float32)
    with pytest.raises(BufferError, match="shape"):
        helper.exchange_to_py(Tensor, data=a, shape=(4, -2), deleter="leave_error")
    with pytest.raises(BufferError, match="dtype|code"):
        helper.capi_from(data=a, shape=(4,), dtype=(77, 8, 1), legacy=True, deleter="leave_error")
    assert seen == ["left set by the deleter"] * 2
    assert deleted() == 2


def test_to_py_object_of_foreign_tensor_takes_the_gil_in_threads(helper):
    a = np.arange(4, dtype=np.float32)
    t = helper.exchange_to_py(Tensor, data=a, shape=(4,), dtype=(2, 32, 1))
    helper.release_in_thread([t[1:]])
    del t
    assert deleted() == 1
    assert helper.counters()["without_gil"] == 0


def test_current_work_stream_is_the_default_stream():
    for dev in ((KDLCPU, 0), (KDLCUDA, 0), (KDLCUDAHOST, 0)):
        assert helper.exchange_stream(Tensor, *dev) == 0


def test_current_work_stream_refuses_what_is_not_a_device():
    for dev in ((0, 0), (99, 0), (-1, 0), (KDLCUDA, -1)):
        with pytest.raises(ValueError, match=r"device \(%d, %d\)" % dev):
            helper.exchange_stream(Tensor, *dev)


@needs_torch
def test_tables_work_across_libraries():
    # PyTorch's table builds PyTorch tensors from dlbridge-made managed
    # tensors, and dlbridge's builds Tensors from PyTorch's.
    torch_type = type(torch.empty(0))
    assert helper.exchange_version(torch_type)["major"] == 1
    x = torch.arange(5.0)
    t = helper.exchange_roundtrip(Tensor, dlbridge.from_dlpack(x))
    y = helper.exchange_roundtrip(torch_type, x)
    assert y.data_ptr() == x.data_ptr() == t.data_ptr
    t2 = helper.exchange_to_py(Tensor, data=np.arange(3.0), shape=(3,), dtype=(2, 64, 1))
    assert torch.from_dlpack(t2).tolist() == [0.0, 1.0, 2.0]


class _Table(ctypes.Structure):
    # DLPackExchangeAPI of dlpack.h.
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("prev_api", ctypes.c_void_p),
                ("allocator", ctypes.c_void_p), ("from_py", ctypes.c_void_p), ("to_py", ctypes.c_void_p),
                ("dltensor_from_py", ctypes.c_void_p), ("current_work_stream", ctypes.c_void_p)]


_SET_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def test_null_pointers_are_refused_by_name():
    # Every NULL pointer argument is refused with its parameter's name, and
    # to_py_object steals its tensor even when out_py_object is NULL.
    table = _Table.from_address(Tensor.__c_dlpack_exchange_api__)
    fn = ctypes.PYFUNCTYPE
    c_int, vp = ctypes.c_int, ctypes.c_void_p
    alloc = fn(c_int, vp, vp, vp, _SET_ERROR)(table.allocator)
    from_py = fn(c_int, vp, vp)(table.from_py)
    to_py = fn(c_int, vp, vp)(table.to_py)
    view = fn(c_int, vp, vp)(table.dltensor_from_py)
    stream = fn(c_int, c_int, ctypes.c_int32, vp)(table.current_work_stream)
    errors = []
    set_error = _SET_ERROR(lambda ctx, kind, message: errors.append((kind, message)))
    proto = DLTensor(device=DLDevice(KDLCPU, 0), ndim=0, dtype=DLDataType(2, 32, 1))
    out = ctypes.c_void_p()
    assert alloc(None, ctypes.addressof(out), None, set_error) == -1
    assert alloc(ctypes.addressof(proto), None, None, set_error) == -1
    assert alloc(None, None, None, _SET_ERROR()) == -1  # no set_error: nothing to call
    assert errors == [(b"ValueError", b"managed_tensor_allocator: prototype is NULL"),
                      (b"ValueError", b"managed_tensor_allocator: out is NULL")]
    t = dlbridge.arange(2)
    dl = DLTensor()
    for call, message in (
        (lambda: from_py(None, ctypes.addressof(out)), "from_py_object_no_sync: expected a dlbridge.Tensor, got NULL"),
        (lambda: from_py(id(t), None), "from_py_object_no_sync: out is NULL"),
        (lambda: view(None, ctypes.addressof(dl)),
         "dltensor_from_py_object_no_sync: expected a dlbridge.Tensor, got NULL"),
        (lambda: view(id(t), None), "dltensor_from_py_object_no_sync: out is NULL"),
        (lambda: stream(KDLCPU, 0, None), "current_work_stream: out_current_stream is NULL"),
        (lambda: to_py(None, ctypes.addressof(out)), "to_py_object_no_sync: tensor is NULL"),
    ):
        with pytest.raises((TypeError, ValueError), match=message):
            call()
    calls = []
    deleter = _DELETER(calls.append)
    a = np.arange(3, dtype=np.float32)
    shape = (ctypes.c_int64 * 1)(3)
    m = DLManagedTensorVersioned(major=1, minor=3, deleter=ctypes.cast(deleter, ctypes.c_void_p))
    m.dl_tensor = DLTensor(data=a.ctypes.data, device=DLDevice(KDLCPU, 0), ndim=1, dtype=DLDataType(2, 32, 1),
                           shape=ctypes.addressof(shape))
    with pytest.raises(ValueError, match="to_py_object_no_sync: out_py_object is NULL"):
        to_py(ctypes.addressof(m), None)
    assert calls == [ctypes.addressof(m)]


def test_to_py_object_keeps_the_reason_a_share_of_ours_is_refused():
    # A tensor from_py_object made, its flags rewritten to say its packed
    # 4-bit units are padded: the refusal says why (the import's own
    # message, not one put over it), and the share is released.
    table = _Table.from_address(Tensor.__c_dlpack_exchange_api__)
    from_py = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(table.from_py)
    to_py = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(table.to_py)
    t = dlbridge.zeros(8, dtype="uint4")
    refs = sys.getrefcount(t)
    slot, out = ctypes.c_void_p(), ctypes.c_void_p()
    assert from_py(id(t), ctypes.addressof(slot)) == 0
    DLManagedTensorVersioned.from_address(slot.value).flags |= SUBBYTE_PADDED
    with pytest.raises(BufferError, match="^DLPack tensor: flags has IS_SUBBYTE_TYPE_PADDED, but the 4-bit units"):
        to_py(slot.value, ctypes.addressof(out))
    assert out.value is None and sys.getrefcount(t) == refs


def test_null_pointers_return_minus_one():
    # Exactly -1: the contract's failure, which a consumer may test for.
    # The allocator raises nothing (it reports through set_error, and may
    # run without the GIL); every other function raises ValueError.
    t = dlbridge.arange(2)
    for which in ("alloc_prototype", "alloc_out"):
        assert helper.exchange_null(Tensor, which) == (-1, None)
    for which in ("from_py_object", "from_py_out", "to_py_tensor", "view_object", "view_out", "stream_out"):
        rc, exc = helper.exchange_null(Tensor, which, t)
        assert rc == -1 and isinstance(exc, (TypeError, ValueError)) and "NULL" in str(exc), (which, exc)

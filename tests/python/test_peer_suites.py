"""dlbridge against what the peers' own DLPack suites check of a producer and
a consumer (NumPy, PyTorch, CuPy, the array API tests) and what the array
API standard (2023.12, 2024.12) asks of __dlpack__, __dlpack_device__ and
from_dlpack, with real NumPy and PyTorch on both sides of each exchange.

Where dlbridge deliberately answers differently from a peer, the test
asserts dlbridge's answer and says why next to it.
"""

import gc
import itertools
import re
import sys

import numpy as np
import pytest

import dlbridge
from support import capsule_of, deleted, needs_torch, torch

# The device types the standard lists for __dlpack_device__.
STANDARD_DEVICE_TYPES = {1, 2, 3, 4, 7, 8, 9, 10, 13, 14}

NUMPY_DTYPES = [
    np.bool_, np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128,
]


def capsule_name(capsule):
    return re.search(r'capsule object "([^"]*)"', repr(capsule)).group(1)


class OldProducer(np.ndarray):
    """A producer from before max_version: __dlpack__(stream=None) only."""

    def __dlpack__(self, stream=None):
        return super().__dlpack__(stream=stream)


def producers(values):
    """The same data from a current producer and from an old one."""
    a = np.asarray(values)
    return [a, a.copy().view(OldProducer)]


class Handing:
    """Hands over a capsule made beforehand, whatever it is asked."""

    def __init__(self, capsule, device=(1, 0)):
        self.capsule = capsule
        self.device = device

    def __dlpack__(self, *args, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


class Wrapper:
    """Exposes an array's two DLPack methods and nothing else."""

    def __init__(self, inner):
        self.inner = inner

    def __dlpack__(self, *args, **kwargs):
        return self.inner.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()


# ---------------------------------------------------------------------------
# Tensor.__dlpack__ and __dlpack_device__: the producer
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("max_version", [(0, 0), None, (1, 0), (2, 0), (100, 3)])
def test_a_capsule_holds_one_reference_until_it_dies(max_version):
    t = dlbridge.arange(5)
    before = sys.getrefcount(t)
    cap = t.__dlpack__(max_version=max_version)
    assert sys.getrefcount(t) == before + 1
    del cap
    assert sys.getrefcount(t) == before


@pytest.mark.parametrize(
    "kwargs,name",
    [({}, "dltensor"), (dict(max_version=None), "dltensor"),
     (dict(max_version=(0, 0)), "dltensor"), (dict(max_version=(0, 8)), "dltensor"),
     (dict(max_version=(1, 0)), "dltensor_versioned"),
     (dict(max_version=(2, 0)), "dltensor_versioned"),
     (dict(max_version=(10, 10)), "dltensor_versioned"),
     (dict(max_version=(100, 3)), "dltensor_versioned")],
    ids=repr,
)
def test_max_version_picks_the_struct(kwargs, name):
    t = dlbridge.arange(3, dtype="int8")
    cap = t.__dlpack__(**kwargs)
    assert capsule_name(cap) == name
    # Every capsule reads back, by us and by PyTorch.
    u = dlbridge.from_dlpack(Handing(cap))
    assert u.data_ptr == t.data_ptr and u.tolist() == [0, 1, 2]
    assert capsule_name(cap) == "used_" + name
    if torch is not None:
        v = torch.from_dlpack(t.__dlpack__(**kwargs))
        assert v.data_ptr() == t.data_ptr


def test_stream_on_cpu_is_none_only():
    t = dlbridge.arange(3)
    dlbridge.from_dlpack(t.__dlpack__(stream=None))
    # The standard: CPU takes only None. NumPy raises RuntimeError and
    # PyTorch AssertionError; dlbridge's StreamError is a RuntimeError and
    # a ValueError (a bad argument value), so either expectation holds.
    for stream in (0, 1, 2, -1, 12345):
        with pytest.raises(RuntimeError):
            t.__dlpack__(stream=stream)
        with pytest.raises(ValueError):
            t.__dlpack__(stream=stream)
    with pytest.raises(TypeError):
        t.__dlpack__(stream=object())


def test_copy_argument_is_true_false_or_none():
    t = dlbridge.arange(5)
    for copy in (True, None, False):
        dlbridge.from_dlpack(t.__dlpack__(copy=copy))
    # NumPy raises ValueError here only because it tests the array's truth
    # value; dlbridge takes nothing but a bool or None (its documented
    # TypeError for other types), so an array is refused as a wrong type.
    with pytest.raises(TypeError, match="copy"):
        t.__dlpack__(copy=np.array([1, 2, 3]))


def test_dlpack_takes_keywords_only():
    t = dlbridge.arange(3)
    with pytest.raises(TypeError, match="positional"):
        t.__dlpack__(None)
    with pytest.raises(TypeError, match="unexpected keyword"):
        t.__dlpack__(strem=None)
    with pytest.raises(TypeError):
        t.__dlpack__(max_version=[1, 0])


def _export_then_raise(max_version):
    t = dlbridge.arange(5)
    _ = t.__dlpack__(max_version=max_version)
    raise RuntimeError("raised while a capsule dies")


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_a_dying_capsule_keeps_the_exception_being_raised(max_version):
    with pytest.raises(RuntimeError, match="while a capsule dies"):
        _export_then_raise(max_version)


def test_copy_true_hands_a_marked_copy():
    t = dlbridge.arange(4)
    u = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True))
    assert u.data_ptr != t.data_ptr and u.tolist() == [0, 1, 2, 3]
    # IS_COPIED is set: a consumer told never to copy sees that it was.
    with pytest.raises(ValueError, match="IS_COPIED"):
        dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True), copy=False)
    # A plain share is not marked.
    dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0)), copy=False)


def test_dl_device_cpu_is_served_in_place():
    t = dlbridge.arange(3)
    for dev in ((1, 0), (dlbridge.DLDeviceType.kDLCPU, 0)):
        for copy in (None, False):
            u = dlbridge.from_dlpack(t.__dlpack__(dl_device=dev, copy=copy))
            assert u.data_ptr == t.data_ptr
    u = dlbridge.from_dlpack(t.__dlpack__(dl_device=(1, 0), copy=True))
    assert u.data_ptr != t.data_ptr


@pytest.mark.parametrize("device_type", [4, 7, 8, 9, 14, 16])
def test_dl_device_the_producer_cannot_serve_is_a_buffer_error(device_type):
    # Kinds no dlbridge backend allocates, on any machine. PyTorch's suite
    # asks for kDLHexagon (16), CuPy's for kDLVPI (9).
    t = dlbridge.arange(3)
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(1, 0), dl_device=(device_type, 0))
    with pytest.raises(BufferError, match="copy=False"):
        t.__dlpack__(max_version=(1, 0), dl_device=(device_type, 0), copy=False)


def test_dl_device_host_ids_are_normalised():
    # CuPy's suite refuses (its device type, 2**30); NumPy refuses any CPU
    # id but 0. DLPack says host memory carries device_id 0, and dlbridge
    # reads any id of a host-type device as that one device (as it does on
    # import), so the request is served in place.
    t = dlbridge.arange(3)
    for dev_id in (1, 2**30):
        u = dlbridge.from_dlpack(t.__dlpack__(dl_device=(1, dev_id)))
        assert u.data_ptr == t.data_ptr
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(1, -1))


def test_read_only_data_needs_the_versioned_struct():
    a = np.arange(5)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    assert t.readonly
    for kwargs in ({}, dict(max_version=None), dict(max_version=(0, 8))):
        with pytest.raises(BufferError, match="read-only"):
            t.__dlpack__(**kwargs)
    b = np.from_dlpack(t)
    assert not b.flags.writeable and b.ctypes.data == a.ctypes.data
    # A copy is the consumer's own, and may go through either struct.
    c = np.from_dlpack(t, copy=True)
    assert c.flags.writeable and c.ctypes.data != a.ctypes.data
    d = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True))
    assert not d.readonly and d.tolist() == [0, 1, 2, 3, 4]
    # Through the legacy struct too: dlbridge made that struct of its own
    # writable copy, so the import keeps it writable.
    e = dlbridge.from_dlpack(t.__dlpack__(copy=True))
    assert not e.readonly and e.tolist() == [0, 1, 2, 3, 4]


def test_dlpack_device_is_a_device_type_and_an_int():
    t = dlbridge.from_dlpack(np.arange(5))
    for x in (t, t[::2], dlbridge.zeros(()), dlbridge.empty((0, 3))):
        dev = x.__dlpack_device__()
        assert type(dev) is tuple and dev == (1, 0)
        # An int subclass, as the array API standard asks for an Enum.
        assert isinstance(dev[0], dlbridge.DLDeviceType) and type(dev[1]) is int
        assert dev[0] in STANDARD_DEVICE_TYPES
    with pytest.raises(TypeError):
        t.__dlpack_device__(0)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "float16", "bfloat16", "float64", "complex128"])
def test_every_argument_combination_of_the_array_api_tests(dtype):
    # Shapes of 1 and 2 dimensions with sides of 0 to 2, every copy,
    # max_version (major 0 to 2) and dl_device=(kDLCPU, 0) given or not.
    shapes = [(0,), (1,), (2,), (0, 2), (2, 1), (2, 2)]
    copies = [{}, dict(copy=None), dict(copy=True), dict(copy=False)]
    versions = [{}, dict(max_version=(0, 0)), dict(max_version=(1, 0)), dict(max_version=(2, 0))]
    devices = [{}, dict(dl_device=(1, 0))]
    for shape in shapes:
        t = dlbridge.zeros(shape, dtype)
        for c, v, d in itertools.product(copies, versions, devices):
            u = dlbridge.from_dlpack(t.__dlpack__(**c, **v, **d))
            assert u.shape == shape and u.dtype == dtype
            if c.get("copy") is not True:
                assert u.data_ptr == t.data_ptr
            elif u.size:
                assert u.data_ptr != t.data_ptr


# ---------------------------------------------------------------------------
# from_dlpack: the consumer
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["current", "old"])
def test_an_import_holds_one_reference_to_the_producer(kind):
    a = producers(np.arange(5))[kind == "old"]
    before = sys.getrefcount(a)
    t = dlbridge.from_dlpack(a)
    assert sys.getrefcount(a) == before + 1
    del t
    assert sys.getrefcount(a) == before


@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_dtypes_pass_through_both_protocols(dtype):
    for x in producers(np.arange(5).astype(dtype)):
        t = dlbridge.from_dlpack(x)
        assert t.dtype == np.dtype(dtype).name
        y = np.from_dlpack(t)
        assert y.dtype == x.dtype and y.ctypes.data == x.ctypes.data
        np.testing.assert_array_equal(y, x)


def test_what_numpy_refuses_to_export_is_a_buffer_error():
    record = np.zeros((5,), dtype=[("int", np.int32), ("char", np.int8)])
    for x in (record["int"],  # strides not a multiple of the itemsize
              np.asarray(np.datetime64("2021-05-27")),
              np.arange(5, dtype=np.dtype("=i8").newbyteorder())):
        with pytest.raises(BufferError):
            dlbridge.from_dlpack(x)


def test_views_of_numpy_arrays():
    x = np.arange(25).reshape(5, 5)
    for v in (x[0], x[:, 0], x[1, :], x[1], np.diagonal(x).copy(), x.T, x[::-1, ::2], x[3:, 1:4]):
        t = dlbridge.from_dlpack(v)
        assert t.tolist() == v.tolist()
        assert t.strides == tuple(s // v.itemsize for s in v.strides)
        back = np.from_dlpack(t)
        assert back.ctypes.data == v.ctypes.data
        np.testing.assert_array_equal(back, v)


@pytest.mark.parametrize("ndim", [0, 1, 2, 8, 31, 32, 33, 64])
def test_higher_dimensions(ndim):
    shape = (1,) * ndim
    x = np.zeros(shape, dtype=np.float64)
    t = dlbridge.from_dlpack(x)
    assert t.shape == shape and t.ndim == ndim
    assert np.from_dlpack(t).shape == shape


def test_zero_dimensions():
    for x in (np.array(1.5), np.array(True), np.array(-7, dtype=np.int16)):
        t = dlbridge.from_dlpack(x)
        assert t.shape == () and t.tolist() == x.item()
        np.testing.assert_array_equal(np.from_dlpack(t), x)


def test_size_one_dimensions_with_odd_strides():
    # A stride of 4 bytes for an f8 axis of extent 1: never stepped over.
    x = np.ndarray(dtype="f8", shape=(10, 5, 1), strides=(8, 80, 4),
                   buffer=np.ones(1000, dtype=np.uint8), order="F")
    t = dlbridge.from_dlpack(x)
    assert t.shape == (10, 5, 1)
    np.testing.assert_array_equal(np.from_dlpack(t), x)


def test_size_zero_dimensions():
    for shape in ((0,), (3, 0), (0, 5, 2)):
        t = dlbridge.from_dlpack(np.zeros(shape))
        assert t.shape == shape and t.size == 0
        assert np.from_dlpack(t).shape == shape
        if torch is not None:
            assert tuple(torch.from_dlpack(t).shape) == shape
            assert dlbridge.from_dlpack(torch.zeros(shape)).shape == shape


def test_copy_keyword():
    x = np.arange(5)
    assert np.may_share_memory(x, np.from_dlpack(dlbridge.from_dlpack(x)))
    assert np.may_share_memory(x, np.from_dlpack(dlbridge.from_dlpack(x, copy=False)))
    y = dlbridge.from_dlpack(x, copy=True)
    assert not np.may_share_memory(x, np.from_dlpack(y))
    assert y.tolist() == x.tolist() and not y.readonly


def test_device_keyword():
    x = np.arange(5)
    for device in ("cpu", None, (1, 0), dlbridge.from_dlpack(x).device):
        t = dlbridge.from_dlpack(x, device=device)
        assert t.data_ptr == x.ctypes.data and t.device == "cpu"
    with pytest.raises(ValueError):
        dlbridge.from_dlpack(x, device="gpu")
    # The standard: a copy is needed but copy=False, so ValueError.
    with pytest.raises(ValueError, match="copy=False"):
        dlbridge.from_dlpack(x, device="cuda", copy=False)


def test_read_only_and_writable_imports():
    new, old = producers(np.arange(5))
    assert not dlbridge.from_dlpack(new).readonly
    # NumPy imports every legacy struct read-only: the struct has no flags
    # and cannot say that its producer allows writes. dlbridge does the
    # same, so no export of the data offers more than the producer did.
    legacy = dlbridge.from_dlpack(old)
    assert legacy.readonly
    assert not np.from_dlpack(legacy).flags.writeable
    ro = np.arange(3)
    ro.flags.writeable = False
    assert dlbridge.from_dlpack(ro).readonly
    assert not dlbridge.from_dlpack(ro, copy=True).readonly


def test_a_capsule_is_consumed_once():
    t = dlbridge.arange(3)
    for kwargs in ({}, dict(max_version=(1, 0))):
        cap = t.__dlpack__(**kwargs)
        name = capsule_name(cap)
        u = dlbridge.from_dlpack(cap)
        assert capsule_name(cap) == "used_" + name
        # CuPy raises ValueError here and PyTorch RuntimeError; dlbridge's
        # documented answer for a used capsule is BufferError.
        with pytest.raises(BufferError, match="already consumed"):
            dlbridge.from_dlpack(cap)
        with pytest.raises(BufferError, match="already consumed"):
            dlbridge.from_dlpack(Handing(cap))
        assert u.tolist() == [0, 1, 2]


def test_a_refused_capsule_stays_unused_and_is_freed_once(helper):
    for legacy in (False, True):
        helper.reset()
        cap = capsule_of(np.arange(3.0), ndim=-1, legacy=legacy)
        name = capsule_name(cap)
        with pytest.raises(BufferError):
            dlbridge.from_dlpack(cap)
        assert capsule_name(cap) == name
        assert deleted() == 0
        del cap
        assert deleted() == 1


def test_objects_without_dlpack():
    # The standard names AttributeError for an object without __dlpack__
    # (NumPy raises it too; PyTorch's RuntimeError comes from treating the
    # object as a capsule).
    class DeviceOnly:
        def __dlpack_device__(self):
            return (1, 0)

    for x in (5, [1, 2], object(), DeviceOnly()):
        with pytest.raises(AttributeError):
            dlbridge.from_dlpack(x)


def test_producer_errors_propagate():
    class Refuses:
        def __dlpack__(self, **kwargs):
            raise BufferError("cannot export this")

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(BufferError, match="cannot export this"):
        dlbridge.from_dlpack(Refuses())

    class NotACapsule(Refuses):
        def __dlpack__(self, **kwargs):
            return 5

    with pytest.raises(BufferError, match="not a DLPack capsule"):
        dlbridge.from_dlpack(NotACapsule())


def test_old_producers_are_asked_without_max_version():
    calls = []

    class Old:
        def __init__(self):
            self.a = np.arange(3.0)

        def __dlpack__(self, stream=None):
            calls.append(stream)
            return self.a.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return (1, 0)

    p = Old()
    assert dlbridge.from_dlpack(p).tolist() == [0.0, 1.0, 2.0]
    assert calls == [None]


def test_the_consumer_outlives_the_producer_and_back():
    a = np.arange(4.0)
    t = dlbridge.from_dlpack(a)
    del a
    gc.collect()
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    b = np.from_dlpack(t)
    del t
    gc.collect()
    assert b.tolist() == [0.0, 1.0, 2.0, 3.0]


# ---------------------------------------------------------------------------
# PyTorch on either side
# ---------------------------------------------------------------------------

TORCH_DTYPES = [
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
]


@needs_torch
@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_dtypes_round_trip(name):
    dtype = getattr(torch, name)
    x = (torch.arange(6) % 3).to(dtype).reshape(2, 3)
    for src in (x, torch.utils.dlpack.to_dlpack(x), Wrapper(x)):
        t = dlbridge.from_dlpack(src)
        assert t.dtype == name and t.shape == (2, 3)
        y = torch.from_dlpack(t)
        assert y.dtype == dtype and y.data_ptr() == x.data_ptr()
        assert torch.equal(y, x)


@needs_torch
def test_torch_narrow_float_types_pass_through():
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"):
        x = torch.arange(4, dtype=torch.uint8).view(getattr(torch, name))
        t = dlbridge.from_dlpack(x)
        assert t.dtype == name
        y = torch.from_dlpack(t)
        assert torch.equal(y.view(torch.uint8), x.view(torch.uint8))


@needs_torch
def test_torch_views_keep_their_strides():
    y = torch.rand(16)[::3][:1]
    assert y.stride() == (3,)
    t = dlbridge.from_dlpack(y)
    assert t.strides == (3,)
    assert torch.from_dlpack(t).stride() == (3,)
    x = torch.arange(25).reshape(5, 5)
    for v in (x[0], x[:, 0], x[1, :], x[1], x.t()):
        back = torch.from_dlpack(dlbridge.from_dlpack(v))
        assert torch.equal(back, v) and back.stride() == v.stride()


@needs_torch
def test_numpy_dlbridge_torch_dlbridge_numpy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.from_dlpack(dlbridge.from_dlpack(torch.from_dlpack(dlbridge.from_dlpack(a))))
    assert b.ctypes.data == a.ctypes.data
    np.testing.assert_array_equal(a, b)
    b[2, 3] = -1
    assert a[2, 3] == -1


@needs_torch
def test_torch_consumes_with_copy_and_device():
    t = dlbridge.arange(4)
    assert torch.from_dlpack(t).data_ptr() == t.data_ptr
    assert torch.from_dlpack(t, copy=False).data_ptr() == t.data_ptr
    assert torch.from_dlpack(t, device="cpu").data_ptr() == t.data_ptr
    c = torch.from_dlpack(t, copy=True)
    assert c.data_ptr() != t.data_ptr and c.tolist() == [0, 1, 2, 3]
    assert torch.tensor(Wrapper(t)).tolist() == [0, 1, 2, 3]


@needs_torch
def test_torch_shares_storage_both_ways():
    x = torch.zeros(4)
    z = torch.from_dlpack(dlbridge.from_dlpack(x))
    z[0] = 5
    assert x[0].item() == 5
    before = sys.getrefcount(x)
    t = dlbridge.from_dlpack(x)
    del t
    gc.collect()
    assert sys.getrefcount(x) == before


@needs_torch
@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: torch.zeros(3, requires_grad=True), "require gradient"),
        (lambda: torch.nn.Parameter(torch.zeros(2)), "require gradient"),
        (lambda: torch.zeros(3, dtype=torch.float8_e4m3fn, requires_grad=True), "require gradient"),
        (lambda: torch.zeros(3, dtype=torch.bfloat16, requires_grad=True), "require gradient"),
        (lambda: torch.tensor([1 + 1j, 2 - 3j]).conj(), "conjugate bit"),
        (lambda: torch.tensor([1 + 2j, 3 - 4j]).conj().imag, "negated view"),
        (lambda: torch.tensor(1 + 2j).conj().imag, "negated view"),
        (lambda: torch.tensor([[1 + 2j, 3 - 4j]] * 2).conj().imag.T, "negated view"),
        (lambda: torch.sparse_coo_tensor([[0]], [1.0], size=(1,), check_invariants=True), "strided"),
        (lambda: torch.quantize_per_tensor(torch.randn(()), 0.1, 10, torch.qint8), "not supported"),
        (lambda: torch.empty(2, device="meta"), "meta"),
        # An efficient zero tensor has no memory: exported with NULL data.
        (lambda: torch._efficientzerotensor(3), "data is NULL with 3 elements"),
        (lambda: torch._efficientzerotensor(()), "data is NULL with 1 element$"),
    ],
    ids=["requires_grad", "parameter", "float8_requires_grad", "bfloat16_requires_grad", "conjugated", "negated", "negated_0d", "negated_2d", "sparse", "quantized", "meta", "zero_tensor", "zero_tensor_0d"],
)
def test_what_torch_refuses_to_export_is_refused(make, message):
    # PyTorch's __dlpack__ refuses these with a BufferError, which the
    # standard says from_dlpack propagates. Its C exchange table checks none
    # of that (a conjugated view would come out with the conjugate values)
    # and fails the rest with RuntimeError, so the refusal must come from
    # __dlpack__. A negated view (the imaginary part of a conjugated one)
    # both export as the memory holds it, negated; dlbridge refuses it.
    x = make()
    with pytest.raises(BufferError, match=message):
        dlbridge.from_dlpack(x)


@needs_torch
def test_what_torch_exports_still_comes_through_its_table():
    calls = []

    class Spy(torch.Tensor):
        def __dlpack__(self, *args, **kwargs):
            calls.append(kwargs)
            return super().__dlpack__(*args, **kwargs)

    # Integer and plain floating tensors: the table, zero-copy.
    for base in (torch.arange(4), torch.arange(4.0), torch.ones(3, requires_grad=True).detach()):
        s = base.as_subclass(Spy)
        t = dlbridge.from_dlpack(s)
        assert t.data_ptr == base.data_ptr() and t.tolist() == base.tolist()
    assert calls == []
    # Complex tensors are asked through __dlpack__, zero-copy too, and a
    # conjugation made real by resolve_conj() reads as its values.
    z = torch.tensor([1 + 1j, 2 - 3j])
    for x in (z, z.conj().resolve_conj()):
        t = dlbridge.from_dlpack(x.as_subclass(Spy))
        assert t.data_ptr == x.data_ptr() and t.tolist() == x.tolist()
    assert len(calls) == 2 and all(c.get("stream", -1) is None for c in calls)


@needs_torch
def test_torch_negated_views_are_asked_only_when_strided():
    asked = []

    class Spy(torch.Tensor):
        def is_neg(self):
            asked.append(self.shape)
            return super().is_neg()

    # A negated view's strides are all even: a tensor whose rows hold two
    # or more elements one apart is not asked, and imported as it is.
    plain = torch.arange(6.0).reshape(2, 3)
    for x in (plain, plain[:, 1:]):
        t = dlbridge.from_dlpack(x.as_subclass(Spy))
        assert t.data_ptr == x.data_ptr() and t.tolist() == x.tolist()
    assert asked == []
    # The others are asked, and imported zero-copy when the answer is no:
    # the imaginary part of an unconjugated tensor, a transposed matrix,
    # one element.
    z = torch.tensor([1 + 2j, 3 - 4j])
    for x in (z.imag, plain.T, plain[0, :1]):
        t = dlbridge.from_dlpack(x.as_subclass(Spy))
        assert t.data_ptr == x.data_ptr() and t.tolist() == x.tolist()
    assert len(asked) == 3
    # A negation resolved is a compact copy of the values.
    assert dlbridge.from_dlpack(z.conj().imag.resolve_neg()).tolist() == [-2.0, 4.0]


@needs_torch
def test_torch_reads_read_only_data_through_versioned_capsules():
    a = np.arange(3.0)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    assert t.readonly
    # PyTorch has no read-only tensors and ignores the flag; it asks for the
    # versioned struct, so the export goes; the legacy one is refused.
    assert torch.from_dlpack(t).data_ptr() == a.ctypes.data
    with pytest.raises(BufferError):
        torch.utils.dlpack.from_dlpack(t.__dlpack__())

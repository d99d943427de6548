"""Hostile producers, consumers and arguments: capsules built by hand with
ctypes, random struct contents, junk from __dlpack__ and junk arguments.
Nothing may crash; every refusal raises the standard's exception; a
producer's deleter runs exactly once when dlbridge took the tensor, never
when it refused, and refused imports leak nothing."""

import ctypes
import gc
import itertools
import os
import random
import sys
import tracemalloc

import pytest

from dlpack_ctypes import DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLTensor, describe
from support import (
    IS_COPIED,
    KDLCPU,
    READ_ONLY,
    capsule_of,
    deleted,
    dlbridge,
    helper,
    measures_process_memory,
    needs_torch,
    np,
    torch,
)

assert ctypes.sizeof(DLTensor) == 48
assert ctypes.sizeof(DLManagedTensorVersioned) == 80
assert ctypes.sizeof(DLManagedTensor) == 64

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

# A capsule keeps the name's pointer: the names must live as long as it.
NAMES = {
    n: ctypes.create_string_buffer(n)
    for n in (
        b"dltensor",
        b"dltensor_versioned",
        b"used_dltensor",
        b"used_dltensor_versioned",
        b"dltensor_versioned_x",
        b"DLTENSOR",
        b"",
    )
}

DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# The manager_ctx of every deleter call: each producer's is its own id.
calls = []
_ids = itertools.count(1)


@DELETER
def _deleter_versioned(ptr):
    calls.append(DLManagedTensorVersioned.from_address(ptr).manager_ctx)


@DELETER
def _deleter_legacy(ptr):
    calls.append(DLManagedTensor.from_address(ptr).manager_ctx)


COUNTING = ctypes.cast(_deleter_versioned, ctypes.c_void_p).value
COUNTING_LEGACY = ctypes.cast(_deleter_legacy, ctypes.c_void_p).value


class Producer:
    """A hand-made managed tensor over a numpy array, in a capsule with no
    destructor: only a consumer can call the deleter."""

    def __init__(self, array=None, legacy=False, name=None, **fields):
        self.array = np.arange(6, dtype=np.float32) if array is None else array
        a = self.array
        self.m = DLManagedTensor() if legacy else DLManagedTensorVersioned()
        self.id = next(_ids)
        t = self.m.dl_tensor
        self.shape, self.strides = describe(t, a, a.ctypes.data)
        self.m.deleter = COUNTING_LEGACY if legacy else COUNTING
        self.m.manager_ctx = self.id
        if not legacy:
            self.m.major, self.m.minor = 1, 3
        for k, v in fields.items():
            setattr(t if hasattr(t, k) else self.m, k, v)
        if name is None:
            name = b"dltensor" if legacy else b"dltensor_versioned"
        self.capsule = _capsule_new(ctypes.addressof(self.m), NAMES[name], None)

    def name(self):
        return _capsule_name(self.capsule)

    def deleter_calls(self):
        gc.collect()
        return calls.count(self.id)


# ---------------------------------------------------------------------------
# Hand-made capsules: accepted ones
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("legacy", [False, True])
def test_taken_capsule_is_renamed_and_deleted_once_after_every_user(legacy):
    p = Producer(legacy=legacy)
    t = dlbridge.from_dlpack(p.capsule)
    assert p.name() == (b"used_dltensor" if legacy else b"used_dltensor_versioned")
    assert t.tolist() == list(range(6))
    view = t.reshape((2, 3)).T
    arr = np.from_dlpack(view)
    # A legacy import is read-only, which the legacy struct cannot carry.
    caps = [t.__dlpack__(max_version=(1, 0))] + ([] if legacy else [t.__dlpack__()])
    del t, view
    assert p.deleter_calls() == 0
    assert arr.tolist() == [[0, 3], [1, 4], [2, 5]]
    del arr, caps
    assert p.deleter_calls() == 1
    gc.collect()
    assert p.deleter_calls() == 1


def test_capsule_whose_default_strides_wrap_is_refused(helper):
    # The helper's compact strides for a shape past 2**64 elements wrap
    # around (making them overflowed a signed product in the helper itself,
    # UBSan); the tensor they describe is refused, its deleter left alone.
    cap = helper.make_capsule(data=np.zeros(4, np.float32), shape=(2**40, 2**40))
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(cap)
    del cap
    assert deleted() == 1


def test_taken_capsule_cannot_be_taken_again():
    p = Producer()
    t = dlbridge.from_dlpack(p.capsule)
    for _ in range(3):
        with pytest.raises(BufferError, match="consumed"):
            dlbridge.from_dlpack(p.capsule)
    del t
    assert p.deleter_calls() == 1


@needs_torch
def test_a_capsule_taken_by_dlbridge_is_refused_by_torch():
    p = Producer()
    t = dlbridge.from_dlpack(p.capsule)
    with pytest.raises(Exception):
        torch.utils.dlpack.from_dlpack(p.capsule)
    del t
    assert p.deleter_calls() == 1


def test_null_deleter_is_accepted():
    p = Producer(deleter=None)
    t = dlbridge.from_dlpack(p.capsule)
    assert t.tolist() == list(range(6))
    del t
    assert p.deleter_calls() == 0


def test_zero_size_tensor_with_null_data_and_strides():
    p = Producer(array=np.zeros((0, 3), np.float32), data=None, strides=None)
    t = dlbridge.from_dlpack(p.capsule)
    assert t.shape == (0, 3) and t.tolist() == []
    del t
    assert p.deleter_calls() == 1


def test_ndim_zero_with_null_shape_and_strides():
    p = Producer(array=np.array(7.0, np.float32), shape=None, strides=None)
    t = dlbridge.from_dlpack(p.capsule)
    assert t.shape == () and t.tolist() == 7.0
    del t
    assert p.deleter_calls() == 1


# ---------------------------------------------------------------------------
# Hand-made capsules: refused ones stay the producer's
# ---------------------------------------------------------------------------

BAD = 0x1  # a pointer that crashes whoever reads through it

REFUSED = [
    ("major 0", dict(major=0)),
    ("major 2", dict(major=2)),
    ("major max", dict(major=0xFFFFFFFF, minor=0xFFFFFFFF)),
    ("ndim -1", dict(ndim=-1)),
    ("ndim huge", dict(ndim=0x7FFFFFFF)),
    ("null shape", dict(shape=None)),
    ("null data with elements", dict(data=None)),
    ("byte_offset 2**63", dict(byte_offset=1 << 63)),
    ("byte_offset max", dict(byte_offset=(1 << 64) - 1)),
    ("unknown dtype code", dict(dtype=DLDataType(200, 32, 1))),
    ("zero bits", dict(dtype=DLDataType(2, 0, 1))),
    ("zero lanes", dict(dtype=DLDataType(2, 32, 0))),
    ("float6 with 8 bits", dict(dtype=DLDataType(15, 8, 1))),
    ("float4 with 8 bits", dict(dtype=DLDataType(17, 8, 1))),
    ("device type 5", dict(device=DLDevice(5, 0))),
    ("device type 0", dict(device=DLDevice(0, 0))),
    ("device type huge", dict(device=DLDevice(0x7FFFFFFF, 0))),
    ("negative device id", dict(device=DLDevice(KDLCPU, -1))),
    ("unknown flag", dict(flags=1 << 63)),
]


@pytest.mark.parametrize("fields", [f for _, f in REFUSED], ids=[n for n, _ in REFUSED])
def test_refused_capsule_is_untouched_and_still_usable(fields):
    p = Producer(**fields)
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(p.capsule)
    assert p.name() == b"dltensor_versioned"
    assert p.deleter_calls() == 0
    # The producer's struct, mended, is still there for another consumer.
    good = Producer()
    ctypes.memmove(ctypes.addressof(p.m), ctypes.addressof(good.m), ctypes.sizeof(p.m))
    p.m.deleter, p.m.manager_ctx = COUNTING, p.id
    t = dlbridge.from_dlpack(p.capsule)
    assert t.tolist() == list(range(6))
    del t
    assert p.deleter_calls() == 1


@pytest.mark.parametrize("major", [0, 2, 3, 0xFFFFFFFF])
def test_other_major_versions_read_nothing_past_flags(major):
    # Past the frozen prefix another major may lay out anything: pointers
    # that crash when read through, counts that would overrun.
    p = Producer(major=major, ndim=40, shape=BAD, strides=BAD, data=BAD)
    p.m.dl_tensor.dtype = DLDataType(0xFF, 0xFF, 0xFFFF)
    with pytest.raises(BufferError, match="version"):
        dlbridge.from_dlpack(p.capsule)
    assert p.deleter_calls() == 0
    assert p.name() == b"dltensor_versioned"


@pytest.mark.parametrize("legacy", [False, True])
def test_refused_legacy_and_versioned_fields(legacy):
    for fields in (dict(ndim=-5), dict(shape=None), dict(data=None),
                   dict(byte_offset=1 << 63), dict(device=DLDevice(6, 0))):
        p = Producer(legacy=legacy, **fields)
        with pytest.raises(BufferError):
            dlbridge.from_dlpack(p.capsule)
        assert p.deleter_calls() == 0
        assert p.name() in (b"dltensor", b"dltensor_versioned")


@pytest.mark.parametrize(
    "name", [b"dltensor_versioned_x", b"DLTENSOR", b""], ids=repr
)
def test_capsule_of_another_name_is_a_type_error_and_untouched(name):
    p = Producer(name=name)
    with pytest.raises(TypeError):
        dlbridge.from_dlpack(p.capsule)
    assert p.name() == name
    assert p.deleter_calls() == 0


@pytest.mark.parametrize("name", [b"used_dltensor", b"used_dltensor_versioned"])
def test_capsule_already_used_is_refused_without_a_deleter_call(name):
    p = Producer(name=name, legacy=name == b"used_dltensor")
    with pytest.raises(BufferError, match="consumed"):
        dlbridge.from_dlpack(p.capsule)
    assert p.deleter_calls() == 0


def test_capsule_with_null_name_is_a_type_error():
    m = DLManagedTensorVersioned()
    cap = _capsule_new(ctypes.addressof(m), None, None)
    with pytest.raises(TypeError):
        dlbridge.from_dlpack(cap)


# ---------------------------------------------------------------------------
# Random struct contents
# ---------------------------------------------------------------------------


def _random_fields(rng, buf):
    ndim = rng.choice([0, 1, 2, 3, 5, 64, 65, -1, rng.randrange(-(1 << 31), 1 << 31)])
    n = max(0, min(ndim, 70))
    shape = [rng.choice([0, 1, 2, 3, -1, 1 << 40, 1 << 62, -(1 << 63)]) for _ in range(n)]
    strides = [rng.choice([0, 1, -1, 2, 3, 1 << 40, -(1 << 62), (1 << 63) - 1])
               for _ in range(n)]
    fields = dict(
        data=rng.choice([buf, None, buf, buf]),
        shape=shape,
        strides=rng.choice([strides, strides, None]),
        dtype=rng.choice([(2, 32, 1), (0, 8, 1), (6, 8, 1), (5, 128, 1), (4, 16, 1),
                          (17, 4, 1), (15, 6, 1), (2, 32, 4), (3, 64, 1),
                          (rng.randrange(0, 256), rng.randrange(0, 256),
                           rng.randrange(0, 1 << 16))]),
        device=(rng.choice([1, 1, 1, 2, 3, 5, 13, 19, -1, 1 << 30]),
                rng.choice([0, 0, 1, -1, (1 << 31) - 1])),
        byte_offset=rng.choice([0, 0, 4, 1 << 63, (1 << 64) - 1]),
        flags=rng.choice([0, 0, READ_ONLY, IS_COPIED, 4, 7, 8, (1 << 64) - 1]),
        version=rng.choice([(1, 3), (1, 3), (1, 0), (1, 0xFFFFFFFF), (0, 8), (2, 0),
                            (0xFFFFFFFF, 0)]),
        legacy=rng.random() < 0.25,
        ndim=ndim,
    )
    if rng.random() < 0.1:
        fields["shape_null"] = True
    return fields


def test_random_structs_never_crash_and_delete_exactly_once(helper):
    rng = random.Random(20260101)
    buf = np.zeros(64, np.uint8)
    made = accepted = 0
    for _ in range(3000):
        fields = _random_fields(rng, buf)
        cap = helper.make_capsule(**fields)
        made += 1
        try:
            t = dlbridge.from_dlpack(cap)
        except BufferError:
            continue
        accepted += 1
        # Only the description is read: the data may be anywhere.
        assert t.ndim == fields["ndim"]
        assert len(t.shape) == t.ndim and len(t.strides) == t.ndim
        assert t.__dlpack_device__()[0] == fields["device"][0]
        del t
    del cap
    assert deleted() == made
    assert 0 < accepted < made


def test_random_strides_are_accepted_only_when_addressable(helper):
    # Strides reaching beyond what a 64-bit address can hold are refused;
    # the rest give back what they were given.
    rng = random.Random(7)
    for _ in range(500):
        ndim = rng.randrange(1, 5)
        shape = [rng.randrange(0, 4) for _ in range(ndim)]
        strides = [rng.choice([0, 1, -3, 7, 1 << 30, 1 << 61, -(1 << 61), (1 << 63) - 1])
                   for _ in range(ndim)]
        cap = helper.make_capsule(data=1 << 40, shape=shape, strides=strides,
                                  dtype=(0, 64, 1))
        try:
            t = dlbridge.from_dlpack(cap)
        except BufferError:
            continue
        assert t.shape == tuple(shape)
        if 0 not in shape:
            assert t.strides == tuple(strides)


# ---------------------------------------------------------------------------
# Producers whose __dlpack__ or __dlpack_device__ misbehave
# ---------------------------------------------------------------------------


class Junk:
    """__dlpack__ returns (or raises) whatever make() gives."""

    def __init__(self, make, device=(KDLCPU, 0)):
        self.make = make
        self.device = device
        self.calls = 0

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls += 1
        return self.make()

    def __dlpack_device__(self):
        if isinstance(self.device, BaseException):
            raise self.device
        return self.device


def _raise(exc):
    raise exc


def _used_capsule():
    c = capsule_of(np.arange(3.0))
    dlbridge.from_dlpack(c)
    return c


JUNK = [
    ("None", lambda: None, BufferError),
    ("int", lambda: 7, BufferError),
    ("str", lambda: "dltensor", BufferError),
    ("bytes", lambda: b"dltensor", BufferError),
    ("ndarray", lambda: np.arange(3), BufferError),
    ("tensor", lambda: dlbridge.arange(3), BufferError),
    ("exchange capsule", lambda: helper.fake_exchange(0), BufferError),
    ("capsule of another name", lambda: capsule_of(np.arange(3.0), name="mytensor"), BufferError),
    ("used capsule", _used_capsule, BufferError),
    ("major 2 capsule", lambda: capsule_of(np.arange(3.0), version=(2, 0)), BufferError),
    ("invalid capsule", lambda: capsule_of(np.arange(3.0), ndim=-1), BufferError),
    ("raises RuntimeError", lambda: _raise(RuntimeError("producer")), RuntimeError),
    ("raises BufferError", lambda: _raise(BufferError("producer")), BufferError),
    ("raises KeyError", lambda: _raise(KeyError("producer")), KeyError),
]


@pytest.mark.parametrize("make,exc", [(m, e) for _, m, e in JUNK], ids=[n for n, _, _ in JUNK])
def test_junk_from_dlpack_is_refused_and_freed(helper, make, exc):
    p = Junk(make)
    before = sys.getrefcount(p)
    for _ in range(3):
        with pytest.raises(exc):
            dlbridge.from_dlpack(p)
    gc.collect()
    assert sys.getrefcount(p) == before
    # Every helper capsule the producer made was deleted exactly once: by
    # its own destructor when refused, by dlbridge when taken.
    makes_capsules = make in (_used_capsule,) or "capsule_of" in make.__code__.co_names
    assert deleted() == (p.calls if makes_capsules else 0)


def test_refused_capsules_from_dlpack_are_deleted_once(helper):
    p = Junk(lambda: capsule_of(np.arange(3.0), version=(0xFFFFFFFF, 1)))
    for _ in range(5):
        with pytest.raises(BufferError):
            dlbridge.from_dlpack(p)
    assert deleted() == 5


def test_taken_capsules_from_dlpack_are_deleted_once(helper):
    a = np.arange(3.0)
    p = Junk(lambda: capsule_of(a))
    ts = [dlbridge.from_dlpack(p) for _ in range(5)]
    assert deleted() == 0
    assert all(t.tolist() == [0.0, 1.0, 2.0] for t in ts)
    del ts
    assert deleted() == 5


@pytest.mark.parametrize(
    "device",
    [(), (1,), (1, 0, 0), "cpu", None, 5, ("1", "0"), (1 << 70, 0), (1, 1 << 70),
     (2, 0), (-1, -1), 1.5, RuntimeError("device")],
    ids=repr,
)
def test_junk_dlpack_device_never_crashes(helper, device):
    a = np.arange(3.0)
    p = Junk(lambda: capsule_of(a), device=device)
    try:
        t = dlbridge.from_dlpack(p)
    except (TypeError, ValueError, BufferError, OverflowError, RuntimeError):
        pass
    else:
        assert t.tolist() == [0.0, 1.0, 2.0]
        del t
    gc.collect()
    assert deleted() == p.calls


def test_dlpack_that_is_not_callable_is_a_type_error():
    class P:
        __dlpack__ = 5

    with pytest.raises(TypeError):
        dlbridge.from_dlpack(P())


def test_dlpack_that_recurses_is_a_recursion_error():
    class P:
        def __dlpack__(self, **kw):
            return dlbridge.from_dlpack(self)

    with pytest.raises(RecursionError):
        dlbridge.from_dlpack(P())


def test_dlpack_that_deletes_itself_from_its_class():
    class P:
        def __dlpack__(self, **kw):
            del P.__dlpack__
            return np.arange(3.0).__dlpack__(**kw)

    assert dlbridge.from_dlpack(P()).tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(AttributeError):
        dlbridge.from_dlpack(P())


def test_objects_without_dlpack_are_attribute_errors():
    # The array API: from_dlpack raises AttributeError when x has no
    # __dlpack__.
    for x in (5, None, "x", [1, 2], object()):
        with pytest.raises(AttributeError):
            dlbridge.from_dlpack(x)


# ---------------------------------------------------------------------------
# Junk arguments
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,exc",
    [
        (dict(max_version=(1,)), TypeError),
        (dict(max_version=(1, 2, 3)), TypeError),
        (dict(max_version=("1", 0)), TypeError),
        (dict(max_version=(1, "0")), TypeError),
        (dict(max_version=(1.0, 0)), TypeError),
        (dict(max_version=-1), TypeError),
        (dict(max_version=(None, None)), TypeError),
        (dict(max_version=(-1, 0)), ValueError),
        (dict(max_version=(1, -1)), ValueError),
        (dict(stream=1.0), TypeError),
        (dict(stream="1"), TypeError),
        (dict(stream=b"1"), TypeError),
        (dict(stream=object()), TypeError),
        (dict(stream=0), ValueError),
        (dict(stream=1), ValueError),
        (dict(stream=2), ValueError),
        (dict(stream=-1), ValueError),
        (dict(dl_device="cpu"), TypeError),
        (dict(dl_device=(1,)), TypeError),
        (dict(dl_device=(1, 0, 0)), TypeError),
        (dict(dl_device=(1.0, 0)), TypeError),
        (dict(dl_device=(5, 0)), BufferError),
        (dict(dl_device=(0, 0)), BufferError),
        (dict(dl_device=(1 << 40, 0)), BufferError),
        (dict(dl_device=(1, -1)), BufferError),
        (dict(copy="yes"), TypeError),
        (dict(copy=2), TypeError),
        (dict(copy=0), TypeError),
        (dict(copy=np.bool_(True)), TypeError),
    ],
    ids=repr,
)
def test_junk_arguments_to_dlpack(kwargs, exc):
    t = dlbridge.arange(4)
    before = sys.getrefcount(t)
    with pytest.raises(exc):
        t.__dlpack__(**kwargs)
    assert sys.getrefcount(t) == before


@pytest.mark.parametrize(
    "kwargs,exc",
    [
        (dict(copy="yes"), TypeError),
        (dict(copy=2), TypeError),
        (dict(device=5), TypeError),
        (dict(device=(1,)), TypeError),
        (dict(device=(1.5, 0)), TypeError),
        (dict(device="gpu"), ValueError),
        (dict(device=""), ValueError),
        (dict(device=(5, 0)), ValueError),
        (dict(device=(1 << 40, 0)), ValueError),
        (dict(stream=None), TypeError),
        (dict(max_version=(1, 0)), TypeError),
    ],
    ids=repr,
)
def test_junk_arguments_to_from_dlpack(kwargs, exc):
    a = np.arange(3.0)
    before = sys.getrefcount(a)
    with pytest.raises(exc):
        dlbridge.from_dlpack(a, **kwargs)
    assert sys.getrefcount(a) == before


def test_junk_arguments_leave_a_capsule_untaken(helper):
    cap = capsule_of(np.arange(3.0))
    with pytest.raises(TypeError):
        dlbridge.from_dlpack(cap, copy="yes")
    with pytest.raises(ValueError):
        dlbridge.from_dlpack(cap, device="gpu")
    assert _capsule_name(cap) == b"dltensor_versioned"
    assert dlbridge.from_dlpack(cap).tolist() == [0.0, 1.0, 2.0]
    del cap
    assert deleted() == 1


# ---------------------------------------------------------------------------
# Leaks
# ---------------------------------------------------------------------------


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _refusals():
    a = np.arange(3.0)
    bad_major = Junk(lambda: capsule_of(a, version=(2, 0)))
    bad_field = Junk(lambda: capsule_of(a, ndim=-1))
    used = _used_capsule()
    none = Junk(lambda: None)
    t = dlbridge.arange(3)

    def once():
        for x in (bad_major, bad_field, used, none):
            try:
                dlbridge.from_dlpack(x)
            except BufferError:
                pass
        for kw in (dict(stream=1), dict(max_version=(1,)), dict(copy=2)):
            try:
                t.__dlpack__(**kw)
            except (TypeError, ValueError):
                pass

    return once


@measures_process_memory
def test_refused_imports_leak_nothing(helper):
    once = _refusals()
    for _ in range(500):
        once()
    gc.collect()
    tracemalloc.start()
    rss = _rss()
    snap = tracemalloc.take_snapshot()
    for _ in range(20000 // 4):
        once()
    gc.collect()
    grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(snap, "filename"))
    tracemalloc.stop()
    assert grown < 64 * 1024
    assert _rss() - rss < 4 * 1024 * 1024
    # Each refused capsule was freed once by its own destructor.
    assert deleted() == 2 * (500 + 20000 // 4) + 1


@measures_process_memory
def test_taken_and_refused_hand_made_capsules_leak_nothing():
    def once():
        p = Producer()
        dlbridge.from_dlpack(p.capsule)
        q = Producer(major=2)
        try:
            dlbridge.from_dlpack(q.capsule)
        except BufferError:
            pass

    for _ in range(300):
        once()
    calls.clear()
    gc.collect()
    rss = _rss()
    for _ in range(5000):
        once()
    gc.collect()
    assert len(calls) == 5000
    assert _rss() - rss < 4 * 1024 * 1024


# ---------------------------------------------------------------------------
# What peers import from dlbridge
# ---------------------------------------------------------------------------

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64", "float16", "float32", "float64", "complex64", "complex128"]


def _values(dtype):
    a = np.arange(12).reshape(3, 4)
    return (a % 2 == 0) if dtype == "bool" else a.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_imports_every_dtype(dtype):
    src = _values(dtype)
    t = dlbridge.from_dlpack(src)
    for x in (t, t.T, t.reshape((12,)), t.reshape((2, 6))):
        y = np.from_dlpack(x)
        assert y.dtype == np.dtype(dtype)
        assert np.array_equal(y, np.asarray(x.tolist(), dtype=dtype))
    y = np.from_dlpack(t)
    assert y.ctypes.data == src.ctypes.data
    y[0, 0] = 1
    assert src[0, 0] == 1


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_imports_every_dtype(dtype):
    src = _values(dtype)
    t = dlbridge.from_dlpack(src)
    y = torch.from_dlpack(t)
    assert str(y.dtype) == "torch." + dtype
    assert y.data_ptr() == src.ctypes.data
    assert y.tolist() == src.tolist()
    assert torch.from_dlpack(t.T).tolist() == src.T.tolist()


@needs_torch
def test_torch_bfloat16_round_trip():
    x = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    t = dlbridge.from_dlpack(x)
    assert t.dtype == "bfloat16"
    y = torch.from_dlpack(t)
    assert y.dtype == torch.bfloat16 and torch.equal(y, x)
    assert y.data_ptr() == x.data_ptr()


@pytest.mark.parametrize(
    "index",
    [np.s_[1:, 2:], np.s_[::2, ::3], np.s_[2, 1:], np.s_[1, 2:3][0], np.s_[:0], np.s_[:, 5:]],
    ids=["offset", "step", "row", "scalar", "empty", "one column"],
)
def test_numpy_imports_views(index):
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    src = a[index]
    t = dlbridge.from_dlpack(src)
    for y in (np.from_dlpack(t), np.from_dlpack(np.from_dlpack(t))):
        assert y.shape == src.shape
        assert np.array_equal(y, src)
        if src.size:
            assert y.ctypes.data == src.ctypes.data
            assert y.strides == src.strides


@needs_torch
@pytest.mark.parametrize(
    "index",
    [np.s_[1:, 2:], np.s_[::2, ::3], np.s_[2, 1:], np.s_[1, 2:3][0], np.s_[:0]],
    ids=["offset", "step", "row", "scalar", "empty"],
)
def test_torch_imports_views(index):
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    src = a[index]
    y = torch.from_dlpack(dlbridge.from_dlpack(src))
    assert tuple(y.shape) == src.shape
    assert y.numpy().tolist() == src.tolist()
    if src.size:
        assert y.data_ptr() == src.ctypes.data


def test_read_only_reaches_numpy_read_only():
    a = np.arange(5.0)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    assert t.readonly
    y = np.from_dlpack(t)
    assert not y.flags.writeable
    with pytest.raises(BufferError):
        t.__dlpack__()
    cap = t.__dlpack__(max_version=(1, 0))
    m = DLManagedTensorVersioned.from_address(_capsule_pointer(cap, b"dltensor_versioned"))
    assert m.flags & READ_ONLY and not m.flags & IS_COPIED
    # A copy is the consumer's own: writable, and marked as a copy.
    cap = t.__dlpack__(max_version=(1, 0), copy=True)
    m = DLManagedTensorVersioned.from_address(_capsule_pointer(cap, b"dltensor_versioned"))
    assert m.flags == IS_COPIED
    assert t.__dlpack__(copy=True) is not None
    z = np.from_dlpack(t, copy=True)
    assert z.flags.writeable and z.ctypes.data != a.ctypes.data


def test_broadcast_numpy_stays_read_only_with_zero_strides():
    b = np.broadcast_to(np.arange(3.0), (4, 3))
    t = dlbridge.from_dlpack(b)
    assert t.readonly and t.strides == (0, 1)
    assert t.tolist() == b.tolist()
    y = np.from_dlpack(t)
    assert y.strides == (0, 8) and not y.flags.writeable
    assert np.array_equal(y, b)


def test_negative_strides_from_numpy():
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    src = a[::-1, ::-2]
    t = dlbridge.from_dlpack(src)
    assert t.strides == (-6, -2)
    assert t.tolist() == src.tolist()
    assert t.data_ptr == src.ctypes.data
    y = np.from_dlpack(t)
    assert y.strides == src.strides and np.array_equal(y, src)


def test_versioned_and_legacy_capsule_names():
    t = dlbridge.arange(3)
    for mv in (None, (0, 8), (0, 0)):
        assert _capsule_name(t.__dlpack__(max_version=mv)) == b"dltensor"
    for mv in ((1, 0), (1, 3), (1, 1 << 31), (100, 3)):
        cap = t.__dlpack__(max_version=mv)
        assert _capsule_name(cap) == b"dltensor_versioned"
        m = DLManagedTensorVersioned.from_address(_capsule_pointer(cap, b"dltensor_versioned"))
        assert (m.major, m.minor) == (1, 3) and m.flags == 0


def test_copy_flags_on_export():
    t = dlbridge.arange(3)
    for copy, flags in ((None, 0), (False, 0), (True, IS_COPIED)):
        cap = t.__dlpack__(max_version=(1, 0), copy=copy)
        m = DLManagedTensorVersioned.from_address(_capsule_pointer(cap, b"dltensor_versioned"))
        assert m.flags == flags
        same = m.dl_tensor.data == t.data_ptr
        assert same == (copy is not True)


def test_cpu_stream_rules():
    t = dlbridge.arange(3)
    assert _capsule_name(t.__dlpack__(stream=None)) == b"dltensor"
    for s in (0, 1, 2, -1):
        with pytest.raises(ValueError):
            t.__dlpack__(stream=s)
    assert t.__dlpack_device__() == (KDLCPU, 0)
    device_type, device_id = t.__dlpack_device__()
    assert device_type is dlbridge.DLDeviceType.kDLCPU and type(device_id) is int


def test_dlpack_refcount_like_numpy():
    x = dlbridge.arange(5)
    y = x.__dlpack__()
    start = sys.getrefcount(x)
    del y
    assert start - sys.getrefcount(x) == 1
    y = np.from_dlpack(x)
    start = sys.getrefcount(x)
    del y
    assert start - sys.getrefcount(x) == 1


# ---------------------------------------------------------------------------
# Refusals after the tensor was taken: dlbridge calls the deleter, once
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields,opts,exc",
    [
        (dict(flags=IS_COPIED), dict(copy=False), ValueError),
        (dict(device=(2, 0)), dict(device="cpu", copy=False), ValueError),
        (dict(), dict(device="cuda", copy=False), ValueError),
        (dict(legacy=True), dict(device=(2, 0), copy=False), ValueError),
    ],
    ids=["producer copied", "cuda to cpu", "cpu to cuda", "legacy cpu to cuda"],
)
def test_refusal_after_taking_deletes_once(helper, fields, opts, exc):
    # A capsule refused for its copy= or device= is given back unconsumed:
    # its own destructor deletes the tensor, once.
    cap = capsule_of(np.arange(3.0), **fields)
    with pytest.raises(exc):
        dlbridge.from_dlpack(cap, **opts)
    assert not _capsule_name(cap).startswith(b"used_")
    assert deleted() == 0
    del cap
    assert deleted() == 1


class FromTable:
    """A producer whose exchange table hands over the capsule's tensor."""

    __dlpack_c_exchange_api__ = helper.fake_exchange(0)

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        raise AssertionError("the exchange table is the route")


@pytest.mark.parametrize(
    "fields",
    [dict(version=(2, 0)), dict(version=(0, 0)), dict(version=(0xFFFFFFFF, 0)),
     dict(ndim=-1), dict(shape_null=True), dict(data=None), dict(flags=1 << 40),
     dict(byte_offset=1 << 63), dict(device=(6, 0))],
    ids=repr,
)
def test_bad_tensor_from_an_exchange_table_is_deleted_once(helper, fields):
    p = FromTable(capsule_of(np.arange(3.0), **fields))
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(p)
    assert deleted() == 1
    del p
    assert deleted() == 1


def test_exchange_table_success_with_an_exception_set_is_refused(helper):
    p = FromTable(capsule_of(np.arange(3.0)))
    p.leave_error = True
    with pytest.raises(BufferError, match="with an exception set"):
        dlbridge.from_dlpack(p)
    assert deleted() == 1
    # The interpreter is left clean: the next import works.
    assert dlbridge.from_dlpack(FromTable(capsule_of(np.arange(2.0)))).tolist() == [0.0, 1.0]


def test_good_tensor_from_an_exchange_table_is_deleted_once(helper):
    p = FromTable(capsule_of(np.arange(3.0)))
    t = dlbridge.from_dlpack(p)
    del p
    assert t.tolist() == [0.0, 1.0, 2.0] and deleted() == 0
    del t
    assert deleted() == 1


def test_exchange_table_to_py_object_steals_refused_tensors(helper):
    a = np.arange(3.0)
    for fields in (dict(version=(2, 0)), dict(ndim=-1), dict(flags=1 << 40)):
        with pytest.raises(BufferError):
            helper.exchange_to_py(dlbridge.Tensor, data=a, shape=(3,),
                                  dtype=(2, 64, 1), **fields)
    assert deleted() == 3


@pytest.mark.parametrize(
    "shape,dtype,device,ndim",
    [((3,), (2, 32, 1), (1, 0), -1), ((3,), (2, 32, 1), (1, 0), 65),
     ((3,), (99, 32, 1), (1, 0), -999), ((-3,), (2, 32, 1), (1, 0), -999),
     ((1 << 62, 1 << 62), (2, 32, 1), (1, 0), -999), ((3,), (2, 32, 1), (5, 0), -999),
     ((3,), (2, 32, 0), (1, 0), -999), ((3,), (15, 8, 1), (1, 0), -999)],
    ids=repr,
)
def test_exchange_allocator_refuses_bad_prototypes(shape, dtype, device, ndim):
    kind, message, n = helper.exchange_alloc(dlbridge.Tensor, shape, dtype, device, ndim)
    assert kind == "BufferError" and message and n == 1


@pytest.mark.parametrize("ndim", [0, 1, 2, 31, 32, 33, 63, 64])
def test_higher_dims_round_trip_through_numpy(ndim):
    x = np.zeros((1,) * ndim, dtype=np.float64)
    t = dlbridge.from_dlpack(x)
    assert t.shape == x.shape
    assert np.from_dlpack(t).shape == x.shape
    assert dlbridge.from_dlpack(np.from_dlpack(t)).shape == x.shape


def test_65_dimensions_are_refused(helper):
    with pytest.raises(BufferError, match="ndim"):
        dlbridge.from_dlpack(capsule_of(np.zeros(1), shape=(1,) * 65, strides=(1,) * 65))
    assert deleted() == 1


# ---- dlbridge's own capsules, rewritten by a consumer and handed back ----

def _own_capsule(kind, t):
    # "share": a share of t's memory; "copy": a tensor of the core's own.
    if kind == "share":
        return t.__dlpack__(max_version=(1, 0))
    return t.__dlpack__(max_version=(1, 0), copy=True)


def _struct_of(capsule):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return DLManagedTensorVersioned.from_address(get(capsule, b"dltensor_versioned"))


_REWRITES = {
    "ndim past its arrays": (lambda m: setattr(m.dl_tensor, "ndim", 40), "ndim is 40"),
    # Within the room the core's block has: nothing of the tensor's is there.
    "ndim one past its arrays": (lambda m: setattr(m.dl_tensor, "ndim", 3), "ndim is 3"),
    "negative ndim": (lambda m: setattr(m.dl_tensor, "ndim", -1), "ndim"),
    "zero bits": (lambda m: setattr(m.dl_tensor.dtype, "bits", 0), "bits"),
    "zero lanes": (lambda m: setattr(m.dl_tensor.dtype, "lanes", 0), "lanes"),
    "unknown dtype code": (lambda m: setattr(m.dl_tensor.dtype, "code", 200), "code"),
    "unknown flag": (lambda m: setattr(m, "flags", 1 << 40), "not DLPack flags"),
    "unknown device": (lambda m: setattr(m.dl_tensor.device, "device_type", 99), "99"),
    "NULL data": (lambda m: setattr(m.dl_tensor, "data", None), "data is NULL"),
}


@pytest.mark.parametrize("kind", ["share", "copy"])
@pytest.mark.parametrize("what", sorted(_REWRITES))
def test_own_capsule_rewritten_is_judged_as_any_tensor(kind, what):
    # The consumer owns the struct it took: what it hands back is checked
    # as a foreign producer's would be, not trusted for coming from us.
    t = dlbridge.arange(12, dtype="float32").reshape(3, 4)
    rewrite, says = _REWRITES[what]
    capsule = _own_capsule(kind, t)
    rewrite(_struct_of(capsule))
    with pytest.raises(BufferError, match=says):
        dlbridge.from_dlpack(capsule)
    assert t.tolist()[2] == [8.0, 9.0, 10.0, 11.0]


_KEEP = []


def _new_arrays(t, shape, strides):
    # A consumer that changes the shape or strides points the struct at
    # arrays of its own: the ones it got are the producer's.
    arrays = ((ctypes.c_int64 * 2)(*shape), (ctypes.c_int64 * 2)(*strides))
    _KEEP.append(arrays)
    t.shape = ctypes.addressof(arrays[0])
    t.strides = ctypes.addressof(arrays[1])


def _rewrite_reach(m, how):
    t = m.dl_tensor
    if how == "shape":
        _new_arrays(t, (4, 4), (4, 1))
    elif how == "stride":
        _new_arrays(t, (3, 4), (4, 2))
    elif how == "byte_offset":
        t.byte_offset = 8
    elif how == "data":
        t.data -= 4
    elif how == "negative stride":
        _new_arrays(t, (3, 4), (-4, 1))


@pytest.mark.parametrize("how", ["shape", "stride", "byte_offset", "data", "negative stride"])
def test_own_share_rewritten_past_its_memory_is_refused(how):
    # What a consumer rewrites is judged as a foreign tensor, but within
    # the memory dlbridge gave it: a share knows its source's bytes.
    t = dlbridge.arange(12, dtype="float32").reshape(3, 4)
    capsule = t.__dlpack__(max_version=(1, 0))
    _rewrite_reach(_struct_of(capsule), how)
    with pytest.raises(BufferError, match="reach past the 48 bytes"):
        dlbridge.from_dlpack(capsule)
    legacy = t.__dlpack__()
    _rewrite_reach(_legacy_struct_of(legacy), how)
    with pytest.raises(BufferError, match="reach past the 48 bytes"):
        dlbridge.from_dlpack(legacy)
    assert t.tolist()[2] == [8.0, 9.0, 10.0, 11.0]


def test_own_share_rewritten_within_its_memory_is_taken():
    t = dlbridge.arange(12, dtype="float32").reshape(3, 4)
    for get in (_struct_of, _legacy_struct_of):
        capsule = t.__dlpack__(max_version=(1, 0)) if get is _struct_of else t.__dlpack__()
        m = get(capsule).dl_tensor
        # The last two rows, every second element, read backwards.
        m.byte_offset = 44
        _new_arrays(m, (2, 2), (-4, -2))
        assert dlbridge.from_dlpack(capsule).tolist() == [[11.0, 9.0], [7.0, 5.0]]
    assert t.shape == (3, 4) and t.strides == (4, 1)
    # Padding claimed by a rewritten packed share counts a byte per unit.
    packed = dlbridge.zeros(16, dtype="uint4")
    capsule = packed.__dlpack__(max_version=(1, 0))
    m = _struct_of(capsule)
    m.dl_tensor.dtype.code = 0  # int4 now: rewritten, so judged whole
    m.flags |= 1 << 2
    with pytest.raises(BufferError, match="reach past the 8 bytes"):
        dlbridge.from_dlpack(capsule)


def test_own_share_may_point_its_shape_at_its_strides():
    # A core tensor's strides follow its shape in one array: shape pointed
    # at the strides starts just past the shape's entries, inside the
    # strides', and reads only those.
    t = dlbridge.arange(4, dtype="float32").reshape(2, 2)
    for legacy in (False, True):
        capsule = t.__dlpack__() if legacy else t.__dlpack__(max_version=(1, 0))
        m = (_legacy_struct_of if legacy else _struct_of)(capsule).dl_tensor
        m.shape = m.strides
        u = dlbridge.from_dlpack(capsule)
        assert u.shape == (2, 1) and u.tolist() == [[0.0], [2.0]]


def test_own_share_with_shape_run_past_its_strides_is_refused():
    # Pointed into the strides' entries, the shape may not read past them.
    t = dlbridge.arange(4, dtype="float32").reshape(2, 2)
    capsule = t.__dlpack__(max_version=(1, 0))
    m = _struct_of(capsule).dl_tensor
    m.shape = m.strides + 8
    with pytest.raises(BufferError, match="ndim is 2, but its shape and strides run past"):
        dlbridge.from_dlpack(capsule)


def test_own_share_rewritten_empty_reads_nothing_wherever_its_data_is():
    # An empty tensor reads no byte, so where its data pointer points is no
    # reach past the source's memory.
    t = dlbridge.arange(12, dtype="float32").reshape(3, 4)
    capsule = t.__dlpack__(max_version=(1, 0))
    m = _struct_of(capsule).dl_tensor
    _new_arrays(m, (0, 4), (4, 1))
    m.data += 4096
    u = dlbridge.from_dlpack(capsule)
    assert u.shape == (0, 4) and u.tolist() == []


def test_own_capsules_with_a_cleared_deleter_are_dropped_without_a_call():
    # A consumer that takes the tensor by clearing its deleter instead of
    # renaming the capsule: the capsule's destructor has nothing to call.
    # (What the struct held is the consumer's to free now.)
    t = dlbridge.arange(4, dtype="float32")
    capsule = t.__dlpack__(max_version=(1, 0), copy=True)
    _struct_of(capsule).deleter = None
    del capsule
    legacy = t.__dlpack__(copy=True)
    _legacy_struct_of(legacy).deleter = None
    del legacy
    gc.collect()
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_own_share_made_read_only_by_a_consumer_stays_read_only():
    # The flags a consumer set on a share of a writable tensor are the
    # import's, also once reshaping makes it a tensor of the core's.
    t = dlbridge.arange(4, dtype="float32")
    capsule = t.__dlpack__(max_version=(1, 0))
    _struct_of(capsule).flags |= READ_ONLY
    u = dlbridge.from_dlpack(capsule)
    assert u.readonly
    assert u.reshape(2, 2).readonly and u.readonly
    assert not t.readonly


def test_own_share_rewritten_within_its_memory_keeps_what_it_says():
    # The import is a tensor of the rewritten geometry, not its source's:
    # reshaping or pickling it (which make it a tensor of the core's) keeps
    # the elements it had.
    import pickle

    t = dlbridge.arange(12, dtype="float32").reshape(3, 4)
    capsule = t.__dlpack__(max_version=(1, 0))
    _new_arrays(_struct_of(capsule).dl_tensor, (2, 3), (4, 2))
    u = dlbridge.from_dlpack(capsule)
    assert u.tolist() == [[0.0, 2.0, 4.0], [4.0, 6.0, 8.0]]
    assert pickle.loads(pickle.dumps(u)).tolist() == u.tolist()
    assert u.reshape(6).tolist() == [0.0, 2.0, 4.0, 4.0, 6.0, 8.0]


@pytest.mark.parametrize("kind", ["share", "copy"])
def test_own_capsule_with_strides_cleared_reads_compact(kind):
    t = dlbridge.arange(12, dtype="float32").reshape(3, 4)
    capsule = _own_capsule(kind, t)
    _struct_of(capsule).dl_tensor.strides = None
    assert dlbridge.from_dlpack(capsule).tolist() == t.tolist()


def test_own_share_cannot_claim_padding_or_writes_its_source_lacks():
    packed = dlbridge.zeros(4001, dtype="int4")
    capsule = packed.__dlpack__(max_version=(1, 0))
    _struct_of(capsule).flags |= 1 << 2  # IS_SUBBYTE_TYPE_PADDED
    with pytest.raises(BufferError, match="lacks|packed"):
        dlbridge.from_dlpack(capsule)
    # A read-only source stays read-only, whatever the struct says now.
    ro = dlbridge.from_dlpack(capsule_of(np.arange(4.0), flags=READ_ONLY))
    assert ro.readonly
    capsule = ro.__dlpack__(max_version=(1, 0))
    m = _struct_of(capsule)
    assert m.flags & READ_ONLY
    m.flags &= ~READ_ONLY
    back = dlbridge.from_dlpack(capsule)
    assert back.readonly


def _legacy_struct_of(capsule):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return DLManagedTensor.from_address(get(capsule, b"dltensor"))


@pytest.mark.parametrize("kind", ["share", "copy"])
def test_own_legacy_capsule_with_ndim_raised_is_refused(kind):
    # A legacy struct of ours (the module's share, or the core's of a
    # copy) whose ndim was raised would read past the arrays it points at.
    t = dlbridge.zeros((1,) * 8, dtype="float32")
    capsule = t.__dlpack__() if kind == "share" else t.__dlpack__(copy=True)
    _legacy_struct_of(capsule).dl_tensor.ndim = 9
    with pytest.raises(BufferError, match="ndim is 9, but"):
        dlbridge.from_dlpack(capsule)


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("shape", [(), (5,), (2, 3)])
def test_own_copy_capsule_with_ndim_raised_by_one_is_refused(shape, versioned):
    # The core's struct of a copy has room for more dimensions than it
    # has (or, legacy and 0-dimensional, none at all): one more would read
    # its strides as shape, or read past it.
    t = dlbridge.zeros(shape, dtype="float32")
    kwargs = {"max_version": (1, 0)} if versioned else {}
    capsule = t.__dlpack__(copy=True, **kwargs)
    struct = _struct_of(capsule) if versioned else _legacy_struct_of(capsule)
    struct.dl_tensor.ndim = len(shape) + 1
    with pytest.raises(BufferError, match=f"ndim is {len(shape) + 1}, but"):
        dlbridge.device_of(capsule)
    with pytest.raises(BufferError, match=f"ndim is {len(shape) + 1}, but"):
        dlbridge.from_dlpack(capsule)
    struct.dl_tensor.ndim = len(shape)
    assert dlbridge.from_dlpack(capsule).shape == shape


@pytest.mark.parametrize("kind", ["share", "copy", "legacy share", "legacy copy"])
def test_own_struct_of_a_0d_tensor_with_ndim_raised_is_refused(kind):
    # A 0-dimensional tensor's shape and strides are empty arrays at a
    # real address (the core's legacy struct has them at the end of its
    # block, its tensor at the start of a block's spare room): a struct
    # whose ndim was raised would read its shape and strides from whatever
    # lies there (it was refused only when those bytes made no valid
    # tensor).
    t = dlbridge.asarray(5.0)
    capsule = {"share": lambda: t.__dlpack__(max_version=(1, 0)),
               "copy": lambda: t.__dlpack__(max_version=(1, 0), copy=True),
               "legacy share": lambda: t.__dlpack__(),
               "legacy copy": lambda: t.__dlpack__(copy=True)}[kind]()
    m = (_legacy_struct_of if kind.startswith("legacy") else _struct_of)(capsule)
    assert m.dl_tensor.shape is not None and m.dl_tensor.ndim == 0
    m.dl_tensor.ndim = 1
    with pytest.raises(BufferError, match="ndim is 1, but"):
        dlbridge.from_dlpack(capsule)
    m.dl_tensor.ndim = 0
    assert dlbridge.from_dlpack(capsule).tolist() == 5.0


@pytest.mark.parametrize("step", ["pickle", "reshape"])
def test_own_share_ndim_check_holds_after_its_source_changed_struct(step):
    # The share points at the arrays it was made with, even after its
    # source's struct was replaced (a NumPy import turned into dlbridge's
    # own on pickling or reshaping).
    import pickle

    s = dlbridge.from_dlpack(np.arange(12.0).reshape(3, 4))
    capsule = s.__dlpack__(max_version=(1, 0))
    pickle.dumps(s) if step == "pickle" else s.reshape(12)
    _struct_of(capsule).dl_tensor.ndim = 3
    with pytest.raises(BufferError, match="ndim is 3, but"):
        dlbridge.from_dlpack(capsule)


def test_own_share_is_never_taken_for_a_copy():
    t = dlbridge.arange(4, dtype="float32")
    capsule = t.__dlpack__(max_version=(1, 0))
    _struct_of(capsule).flags |= IS_COPIED
    c = dlbridge.from_dlpack(capsule, copy=True)
    c[0] = 99.0
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("kind", ["share", "copy"])
def test_queries_refuse_own_capsules_with_ndim_raised(versioned, kind):
    # device_of, prefetch and advise read a capsule without consuming it:
    # they bound a struct of ours by its arrays as the import does, before
    # anything reads past them.
    t = dlbridge.zeros((1,) * 8, dtype="float32")
    kwargs = {"max_version": (1, 0)} if versioned else {}
    if kind == "copy":
        kwargs["copy"] = True
    capsule = t.__dlpack__(**kwargs)
    struct = _struct_of(capsule) if versioned else _legacy_struct_of(capsule)
    struct.dl_tensor.ndim = 9
    queries = (dlbridge.device_of,
               lambda c: dlbridge.prefetch(c, "cpu"),
               lambda c: dlbridge.advise(c, "set_read_mostly"))
    for query in queries:
        with pytest.raises(BufferError, match="ndim is 9, but"):
            query(capsule)
    struct.dl_tensor.ndim = 8
    assert dlbridge.device_of(capsule) == "cpu"
    # Still unconsumed, whoever made the struct.
    assert dlbridge.from_dlpack(capsule).shape == (1,) * 8


def test_queries_refuse_an_own_share_moved_past_its_memory():
    t = dlbridge.zeros(4, dtype="float32")
    capsule = t.__dlpack__(max_version=(1, 0))
    _struct_of(capsule).dl_tensor.byte_offset = 1 << 20
    with pytest.raises(BufferError, match="reach past"):
        dlbridge.device_of(capsule)


def test_queries_refuse_a_capsule_of_another_major_version_untouched():
    t = dlbridge.arange(4, dtype="float32")
    capsule = t.__dlpack__(max_version=(1, 0))
    _struct_of(capsule).major = 2
    with pytest.raises(BufferError, match="version is 2"):
        dlbridge.device_of(capsule)
    _struct_of(capsule).major = 1
    assert dlbridge.from_dlpack(capsule).tolist() == [0.0, 1.0, 2.0, 3.0]

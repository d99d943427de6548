"""Seeded random DLPack capsules built from Python with ctypes, fed to
dlbridge.from_dlpack directly and through producer objects.

test_hostile.py covers hand-picked refusals, capsules without destructors
and random descriptions whose data is never read. Here every capsule has a
producer-style destructor (it runs the deleter unless the capsule was
renamed used_*), every accepted tensor over memory this file owns is read
back and compared with the bytes a model of the DLPack rules names, every
refusal must name a field the model found at fault, and the deleter of each
struct must run exactly once over the whole life of the capsule and the
tensor, whoever ran it. Producers misbehave in the ways the protocol
leaves open: old signatures, TypeErrors of their own, reused capsules,
wrong names, a __dlpack_device__ that disagrees with the capsule.

DLB_FUZZ_SEED picks another sequence.
"""

import ctypes
import gc
import os
import random

import numpy as np
import pytest

import dlbridge
from dlpack_ctypes import DLDataType as DType
from dlpack_ctypes import DLDevice as Device
from dlpack_ctypes import DLManagedTensor as Legacy
from dlpack_ctypes import DLManagedTensorVersioned as Versioned
from dlpack_ctypes import DLTensor as Tensor

SEED = int(os.environ.get("DLB_FUZZ_SEED", "20260301"), 0)
INT64_MAX = (1 << 63) - 1
MAX_NDIM = 64

# ---------------------------------------------------------------------------
# The structs and the capsule API
# ---------------------------------------------------------------------------


assert ctypes.sizeof(Versioned) == 80 and ctypes.sizeof(Legacy) == 64
assert Versioned.dl_tensor.offset == 32 and Legacy.deleter.offset == 56

DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 DESTRUCTOR)(("PyCapsule_New", ctypes.pythonapi))
_get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
    ("PyCapsule_GetName", ctypes.pythonapi))
# The destructor gets a capsule whose reference count is 0: it must not be
# turned into a Python object, so these take the raw pointer.
_raw_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_GetName", ctypes.pythonapi))
_raw_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))

# A capsule keeps a pointer to its name: names live as long as the module.
NAMES = {n: ctypes.create_string_buffer(n) for n in (
    b"dltensor", b"dltensor_versioned", b"used_dltensor", b"used_dltensor_versioned",
    b"dltensor_versionedx", b"dlpack_exchange_api", b"Dltensor", b"")}

# manager_ctx -> number of deleter calls
calls = {}
# manager_ctx -> the Struct record, kept until the test ends
records = {}
# struct address -> its record
by_address = {}


@DELETER
def _deleter(ptr):
    # manager_ctx sits at a different offset in each struct; the record
    # knows which struct ptr is.
    rec = by_address[ptr]
    calls[rec.id] = calls.get(rec.id, 0) + 1


@DESTRUCTOR
def _destructor(capsule):
    # What a producer's destructor does: free the tensor unless a consumer
    # took it (and renamed the capsule).
    name = _raw_name(capsule)
    if name is None or name.startswith(b"used_"):
        return
    m = _raw_pointer(capsule, name)
    if m is None:
        return
    rec = by_address.get(m)
    if rec is not None and rec.m.deleter:
        DELETER(rec.m.deleter)(m)


DELETER_ADDR = ctypes.cast(_deleter, ctypes.c_void_p).value


@pytest.fixture(autouse=True)
def _ledger():
    calls.clear()
    records.clear()
    by_address.clear()
    yield
    gc.collect()
    records.clear()
    by_address.clear()


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------

INT_BITS = {1, 2, 4, 8, 16, 32, 64}
BITS = {0: INT_BITS, 1: INT_BITS, 2: {8, 16, 32, 64}, 3: {64}, 4: {16}, 5: {32, 64, 128},
        6: {8}, 15: {6}, 16: {6}, 17: {4}}
BITS.update({c: {8} for c in range(7, 15)})
HOST_TYPES = {1, 3, 11, 13}
KNOWN_DEVICES = {1, 2, 3, 4} | set(range(7, 19))


def dtype_ok(code, bits, lanes):
    if lanes == 0 or bits not in BITS.get(code, ()):
        return False
    return (bits * lanes) % 8 == 0 or lanes == 1


def judge(d, padded):
    """The fields at fault in description d (empty when valid), and the
    element count and byte span [lo, hi) relative to data when valid."""
    ndim, shape, strides = d["ndim"], d["shape"], d["strides"]
    if ndim < 0 or ndim > MAX_NDIM:
        return {"ndim"}, None
    if ndim > 0 and shape is None:
        return {"shape"}, None
    if any(e < 0 for e in shape or ()):
        return {"shape"}, None
    numel = 1
    for e in shape or ():
        numel *= e
    if numel > INT64_MAX:
        return {"shape"}, None
    code, bits, lanes = d["dtype"]
    if not dtype_ok(code, bits, lanes):
        return {"dtype"}, None
    dev_type, dev_id = d["device"]
    if dev_type not in KNOWN_DEVICES or dev_id < 0:
        return {"device"}, None
    sub = (bits * lanes) % 8 != 0
    if sub and not padded and numel > 0 and strides is not None:
        expected = 1
        for e, s in reversed(list(zip(shape, strides))):
            if e != 1 and s != expected:
                return {"strides"}, None
            expected *= e if e != 1 else 1
    off = d["byte_offset"]
    if off > INT64_MAX:
        return {"byte_offset"}, None
    eb = 8 if sub and padded else bits * lanes
    lo = hi = off
    if numel > 0:
        mn, mx = 0, numel - 1
        if strides is not None:
            mx = 0
            for e, s in zip(shape, strides):
                term = (e - 1) * s
                if not -(1 << 63) <= term <= INT64_MAX:
                    return {"strides"}, None
                mn, mx = (mn + term, mx) if term < 0 else (mn, mx + term)
                if mn < -(1 << 63) or mx > INT64_MAX:
                    return {"strides"}, None
        blo, bhi = (mn * eb) // 8, -((-(mx + 1) * eb) // 8)
        if blo < -(1 << 63) or bhi > INT64_MAX or bhi - blo > INT64_MAX:
            return {"strides"}, None
        lo, hi = blo + off, bhi + off
        if lo > INT64_MAX or hi > INT64_MAX:
            return {"byte_offset", "strides"}, None
    if d["data"] is None and numel > 0:
        return {"data"}, None
    base = d["data"] or 0
    if base + lo < 0 or base + hi > (1 << 64) - 1:
        return {"wraps"}, None
    return set(), (numel, lo, hi)


def offsets(shape, strides):
    """Element offsets in row-major order."""
    n = int(np.prod(shape, dtype=object)) if shape else 1
    compact, out = [], 1
    for e in reversed(shape):
        compact.insert(0, out)
        out *= e
    st = compact if strides is None else strides
    res = []
    for k in range(n):
        off, rest = 0, k
        for e, s in zip(reversed(shape), reversed(st)):
            off += (rest % e) * s
            rest //= e
        res.append(off)
    return res


# ---------------------------------------------------------------------------
# Hostile structs
# ---------------------------------------------------------------------------

NUMPY_TYPES = {(0, 8, 1): "i1", (0, 16, 1): "i2", (0, 32, 1): "i4", (0, 64, 1): "i8",
               (1, 8, 1): "u1", (1, 16, 1): "u2", (1, 32, 1): "u4", (1, 64, 1): "u8",
               (2, 16, 1): "f2", (2, 32, 1): "f4", (2, 64, 1): "f8", (5, 64, 1): "c8",
               (5, 128, 1): "c16", (6, 8, 1): "?"}
GOOD_TYPES = list(NUMPY_TYPES) + [(4, 16, 1), (2, 32, 4), (0, 4, 1), (17, 4, 1), (15, 6, 1),
                                  (1, 1, 1), (12, 8, 1)]


class Struct:
    """One hand-made managed tensor (versioned or legacy) with memory of its
    own; `desc` is what it says, in Python values."""

    def __init__(self, rng, ident, legacy=None):
        self.id = ident
        self.legacy = rng.random() < 0.3 if legacy is None else legacy
        self.m = Legacy() if self.legacy else Versioned()
        d = self.desc = self._describe(rng)
        self.flags = 0
        if not self.legacy:
            self.m.major = rng.choice([1] * 12 + [0, 2, 3, 0xFFFFFFFF])
            self.m.minor = rng.choice([0, 3, 4, 0xFFFFFFFF])
            self.flags = rng.choice([0] * 10 + [1, 2, 3, 4, 7, 8, 1 << 40, (1 << 64) - 1])
            self.m.flags = self.flags
        self.with_deleter = rng.random() < 0.9
        self.m.deleter = DELETER_ADDR if self.with_deleter else None
        self.m.manager_ctx = ident
        t = self.m.dl_tensor
        n = max(0, min(d["ndim"], 70))
        self.shape_arr = (ctypes.c_int64 * max(n, 1))(*(d["shape"] or [0] * n)[:n])
        strides = d["strides"] if d["strides"] is not None else []
        self.strides_arr = (ctypes.c_int64 * max(n, 1))(*strides[:n])
        t.ndim = d["ndim"]
        t.dtype = DType(*d["dtype"])
        t.device = Device(*d["device"])
        t.shape = None if d["shape"] is None else ctypes.addressof(self.shape_arr)
        t.strides = None if d["strides"] is None else ctypes.addressof(self.strides_arr)
        t.byte_offset = d["byte_offset"]
        self._place(rng)
        self.faults, self.span = judge(d, bool(self.flags & 4))
        if not self.legacy and self.m.major != 1:
            self.faults = {"version"}
        elif self.flags & ~7:
            self.faults = {"flags"}
        records[ident] = self
        by_address[ctypes.addressof(self.m)] = self

    @staticmethod
    def _describe(rng):
        ndim = rng.choice(list(range(6)) * 6 + [-1, -(1 << 31), 64, 65, (1 << 31) - 1])
        n = max(0, min(ndim, 70))
        big = n > 5
        shape = [1 if big else rng.choice([0] + [1, 2, 3, 4, 5] * 4) for _ in range(n)]
        if n and rng.random() < 0.1:
            shape[rng.randrange(n)] = rng.choice([-1, -(1 << 63), 1 << 62, INT64_MAX, 3037000500])
        kind = rng.random()
        if kind < 0.2:
            strides = None
        else:
            strides, acc = [], 1
            for e in reversed(shape):
                s = acc * (1 if kind < 0.5 else rng.choice([1, 1, 2, 3]))
                if kind >= 0.5 and rng.random() < 0.25:
                    s = -s
                if kind >= 0.5 and rng.random() < 0.08:
                    s = 0
                strides.insert(0, s)
                acc *= min(max(e, 1), 1000)
            if n and rng.random() < 0.12:
                strides[rng.randrange(n)] = rng.choice(
                    [INT64_MAX, -(1 << 63), 1 << 62, -(1 << 62), 1 << 40])
        if rng.random() < 0.8:
            dtype = rng.choice(GOOD_TYPES)
        else:
            dtype = (rng.choice(list(range(20)) + [200, 255]),
                     rng.choice([0, 1, 4, 6, 7, 8, 16, 24, 32, 64, 128, 255]),
                     rng.choice([0, 1, 2, 4, 65535]))
        r = rng.random()
        if r < 0.7:
            device = (1, 0)
        elif r < 0.85:
            device = (rng.choice([1, 3, 11, 13]), rng.choice([0, 1, 7]))
        elif r < 0.93:
            device = (rng.choice([2, 4, 7, 10, 14, 18]), rng.choice([0, 1, -1]))
        else:
            device = (rng.choice([0, 5, 6, 19, -1, (1 << 31) - 1]), rng.choice([0, -5]))
        offset = rng.choice([0, 0, 0, 1, 3, 8, 17])
        if rng.random() < 0.05:
            offset = rng.choice([(1 << 64) - 1, 1 << 63, INT64_MAX, 1 << 62])
        return dict(ndim=ndim, shape=None if (n and rng.random() < 0.03) else shape,
                    strides=strides, dtype=dtype, device=device, byte_offset=offset,
                    data=None)

    def _place(self, rng):
        """Memory for the span the model names, with guard bytes; a small
        buffer nothing may read for anything else."""
        d = self.desc
        probe = dict(d, data=1 << 44)
        faults, span = judge(probe, bool(self.flags & 4))
        if not faults and 0 < span[0] <= 4096 and span[2] - span[1] <= 1 << 16:
            numel, lo, hi = span
            pre = rng.randrange(9)
            self.buf = np.frombuffer(rng.randbytes(pre + hi - lo + rng.randrange(9)), np.uint8).copy()
            if d["dtype"] == (6, 8, 1):
                self.buf &= 1
            d["data"] = (self.buf.ctypes.data + pre - lo) % (1 << 64)
            self.backed = True
        else:
            self.backed = False
            self.buf = np.frombuffer(rng.randbytes(16), np.uint8).copy()
            d["data"] = self.buf.ctypes.data
        if rng.random() < 0.04:
            d["data"] = None
            self.backed = False
        self.m.dl_tensor.data = d["data"]

    @property
    def accepted(self):
        return not self.faults

    def capsule(self, name=None):
        if name is None:
            name = b"dltensor" if self.legacy else b"dltensor_versioned"
        return _new_capsule(ctypes.addressof(self.m), NAMES[name], _destructor)

    def deletes(self):
        # Nothing here makes cycles: references alone free capsules and
        # tensors (a collection per case would cost more than the case).
        return calls.get(self.id, 0)

    def expected_bytes(self):
        """The elements' bytes in row-major order, from the model."""
        d = self.desc
        numel, _, _ = self.span
        code, bits, lanes = d["dtype"]
        size = bits * lanes // 8
        base = self.buf.ctypes.data
        raw = self.buf.tobytes()
        out = bytearray()
        for off in offsets(d["shape"] or [], d["strides"]):
            at = d["data"] + d["byte_offset"] + off * size - base
            assert 0 <= at and at + size <= len(raw), "model left the buffer"
            out += raw[at:at + size]
        return bytes(out)


def check_accepted(s, t):
    d = s.desc
    assert t.ndim == d["ndim"] and t.shape == tuple(d["shape"] or ())
    if d["strides"] is not None and s.span[0] > 0:
        assert t.strides == tuple(d["strides"])
    dev_type, dev_id = d["device"]
    assert t.__dlpack_device__() == (dev_type, 0 if dev_type in HOST_TYPES else dev_id)
    # The legacy struct cannot say the data is writable: it imports read-only.
    assert t.readonly == (bool(s.flags & 1) or s.legacy)
    np_type = NUMPY_TYPES.get(d["dtype"])
    if np_type is not None and dev_type == 1 and s.backed:
        got = np.ascontiguousarray(np.from_dlpack(t))
        assert got.dtype == np.dtype(np_type)
        assert got.tobytes() == s.expected_bytes()


def check_refused(s, exc):
    message = str(exc.value)
    assert any(f in message for f in s.faults), (s.faults, message)


# ---------------------------------------------------------------------------
# Capsules straight to from_dlpack
# ---------------------------------------------------------------------------


def test_random_capsules_are_judged_read_back_and_deleted_once():
    rng = random.Random(SEED)
    taken = refused = read = 0
    for i in range(1500):
        s = Struct(rng, 1000 + i)
        cap = s.capsule()
        if s.accepted:
            t = dlbridge.from_dlpack(cap)
            assert _get_name(cap).startswith(b"used_")
            check_accepted(s, t)
            read += NUMPY_TYPES.get(s.desc["dtype"]) is not None and s.backed
            del cap
            assert s.deletes() == 0
            del t
            taken += 1
        else:
            with pytest.raises(BufferError) as exc:
                dlbridge.from_dlpack(cap)
            check_refused(s, exc)
            assert not _get_name(cap).startswith(b"used_")
            assert s.deletes() == 0
            del cap
            refused += 1
        # Taken: dlbridge ran it when the tensor died; refused: the
        # capsule's own destructor did.
        assert s.deletes() == (1 if s.with_deleter else 0)
    assert taken > 300 and refused > 300 and read > 150


def test_a_refused_capsule_can_still_be_taken_after_the_producer_mends_it():
    rng = random.Random(SEED + 1)
    mended = 0
    for i in range(400):
        s = Struct(rng, 5000 + i, legacy=False)
        if s.accepted or s.faults == {"version"}:
            continue
        cap = s.capsule()
        with pytest.raises(BufferError):
            dlbridge.from_dlpack(cap)
        # The same struct, made valid in place: nothing of the refusal
        # may linger in it or in the capsule.
        good = np.arange(6, dtype=np.int32)
        shape, strides = (ctypes.c_int64 * 1)(6), (ctypes.c_int64 * 1)(1)
        s.m.flags = 0
        s.m.dl_tensor = Tensor(good.ctypes.data, Device(1, 0), 1, DType(0, 32, 1),
                               ctypes.addressof(shape), ctypes.addressof(strides), 0)
        t = dlbridge.from_dlpack(cap)
        assert t.tolist() == list(range(6))
        del t, cap
        assert s.deletes() == (1 if s.with_deleter else 0)
        mended += 1
    assert mended > 50


@pytest.mark.parametrize("name", [b"dltensor_versionedx", b"dlpack_exchange_api",
                                  b"Dltensor", b""], ids=repr)
def test_capsules_of_other_names_are_refused_and_freed_by_their_destructor(name):
    rng = random.Random(SEED + 2)
    for i in range(50):
        s = Struct(rng, 7000 + i, legacy=False)
        cap = s.capsule(name)
        with pytest.raises(TypeError, match="capsule"):
            dlbridge.from_dlpack(cap)
        del cap
        assert s.deletes() == (1 if s.with_deleter else 0)


# ---------------------------------------------------------------------------
# Producers
# ---------------------------------------------------------------------------


# A ctypes destructor is Python code, which cannot run while an exception
# is set and keep it; so the producers below keep the capsules they hand
# out, and the capsules die when the producer does, after from_dlpack has
# returned or raised (test_refusal_survives_a_destructor_running_python
# covers the other order).


class Producer:
    """Hands out a capsule of one struct: versioned when asked for
    max_version >= 1, legacy otherwise (when it has one)."""

    def __init__(self, versioned, legacy=None, device=None):
        self.versioned, self.legacy, self.device, self.asked = versioned, legacy, device, []
        self.made = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.asked.append(max_version)
        if max_version is not None and max_version[0] >= 1:
            self.made.append(self.versioned.capsule())
        elif self.legacy is None:
            raise BufferError("this producer exports versioned tensors only")
        else:
            self.made.append(self.legacy.capsule())
        return self.made[-1]

    def __dlpack_device__(self):
        if self.device is not None:
            return self.device
        return tuple(self.versioned.desc["device"])


class OldProducer:
    """Before max_version: a TypeError for the keyword, the legacy struct."""

    def __init__(self, legacy):
        self.legacy, self.made = legacy, []

    def __dlpack__(self, stream=None):
        self.made.append(self.legacy.capsule())
        return self.made[-1]

    def __dlpack_device__(self):
        return tuple(self.legacy.desc["device"])


def _pair(rng, ident):
    """A versioned struct and a legacy one describing the same memory."""
    v = Struct(rng, ident, legacy=False)
    legacy = Legacy()
    legacy.dl_tensor = v.m.dl_tensor
    lrec = Struct.__new__(Struct)
    lrec.__dict__.update(v.__dict__)
    lrec.id, lrec.legacy, lrec.m, lrec.flags = ident + 1, True, legacy, 0
    lrec.m.deleter, lrec.m.manager_ctx = DELETER_ADDR if v.with_deleter else None, ident + 1
    lrec.faults, lrec.span = judge(v.desc, False)
    records[ident + 1] = lrec
    by_address[ctypes.addressof(legacy)] = lrec
    return v, lrec


def expect_import(struct, producer):
    """Imports from producer, whose capsule holds struct, and checks the
    verdict and the content against struct's model."""
    if struct.accepted:
        t = dlbridge.from_dlpack(producer)
        check_accepted(struct, t)
        del t
    else:
        with pytest.raises(BufferError) as exc:
            dlbridge.from_dlpack(producer)
        check_refused(struct, exc)
        # Its traceback holds this frame and so the producer: a cycle that
        # would keep the capsule alive until the next collection.
        del exc


def test_random_producers_asked_for_versioned_first_and_deleted_once():
    rng = random.Random(SEED + 3)
    for i in range(600):
        v, legacy = _pair(rng, 10000 + 2 * i)
        # Disagreeing __dlpack_device__ answers must not change the import:
        # the capsule says where the data is.
        p = Producer(v, legacy, device=rng.choice([None, (2, 0), (1, 3), (13, 0)]))
        expect_import(v, p)
        assert p.asked == [(1, 3)] or p.asked[0][0] >= 1
        del p
        assert v.deletes() == (1 if v.with_deleter else 0)
        assert legacy.deletes() == 0


def test_old_producers_get_the_keywordless_call_and_deleted_once():
    rng = random.Random(SEED + 4)
    for i in range(400):
        _, legacy = _pair(rng, 20000 + 2 * i)
        p = OldProducer(legacy)
        expect_import(legacy, p)
        del p
        assert legacy.deletes() == (1 if legacy.with_deleter else 0)


def test_a_producer_reusing_its_capsule_is_refused_the_second_time():
    rng = random.Random(SEED + 5)
    reused = 0
    for i in range(200):
        s = Struct(rng, 30000 + i)
        if not s.accepted:
            continue
        cap = s.capsule()

        class Reuser:
            def __dlpack__(self, **kwargs):
                return cap

        first = dlbridge.from_dlpack(Reuser())
        for _ in range(2):
            with pytest.raises(BufferError, match="consumed"):
                dlbridge.from_dlpack(Reuser())
        assert s.deletes() == 0
        del first
        assert s.deletes() == (1 if s.with_deleter else 0)
        del cap
        assert s.deletes() == (1 if s.with_deleter else 0)
        reused += 1
    assert reused > 50


JUNK = [7, None, "dltensor", b"dltensor", 1.5, object(), (1, 2), np.arange(3)]


def test_producers_returning_junk_or_wrong_capsules_free_what_they_made():
    rng = random.Random(SEED + 6)
    for i in range(300):
        s = Struct(rng, 40000 + i, legacy=False)
        made = rng.choice(["junk", "name", "raise", "typeerror"])
        kept = []

        class Bad:
            def __dlpack__(self, **kwargs):
                if made == "junk":
                    return rng.choice(JUNK)
                if made == "name":
                    kept.append(s.capsule(rng.choice([b"Dltensor", b"", b"dlpack_exchange_api"])))
                    return kept[-1]
                if made == "raise":
                    raise rng.choice([RuntimeError, KeyError, BufferError])("producer")
                # A TypeError of the producer's own, with or without keywords.
                raise TypeError("producer")

        exc = {"junk": BufferError, "name": BufferError, "raise": Exception,
               "typeerror": TypeError}[made]
        with pytest.raises(exc):
            dlbridge.from_dlpack(Bad())
        assert s.deletes() == 0
        del kept
        expected = 1 if made == "name" and s.with_deleter else 0
        assert s.deletes() == expected


class Proxy:
    """A wrapper handing on __dlpack__ to whatever it wraps, as array
    wrappers and lazy containers do; instances of one class may wrap
    producers of either generation."""

    def __init__(self, inner):
        self.inner = inner

    def __dlpack__(self, **kwargs):
        return self.inner.__dlpack__(**kwargs)


def test_a_proxy_type_wrapping_new_then_old_producers_falls_back_each_time():
    rng = random.Random(SEED + 7)
    v, legacy = _pair(rng, 50000)
    while not (v.accepted and legacy.accepted):
        v, legacy = _pair(rng, 50000 + 2 * rng.randrange(1, 1 << 20))
    proxy = type("NewThenOld", (Proxy,), {})
    dlbridge.from_dlpack(proxy(Producer(v, legacy)))
    t = dlbridge.from_dlpack(proxy(OldProducer(legacy)))
    check_accepted(legacy, t)


def test_a_proxy_type_wrapping_old_then_new_producers_asks_for_versioned():
    rng = random.Random(SEED + 8)
    v, legacy = _pair(rng, 60000)
    while not (v.accepted and legacy.accepted):
        v, legacy = _pair(rng, 60000 + 2 * rng.randrange(1, 1 << 20))
    proxy = type("OldThenNew", (Proxy,), {})
    dlbridge.from_dlpack(proxy(OldProducer(legacy)))
    t = dlbridge.from_dlpack(proxy(Producer(v)))
    check_accepted(v, t)


class Dropper:
    """Returns a refused capsule and keeps no reference to it: the capsule,
    and its Python destructor, die inside from_dlpack while the refusal is
    being raised."""

    def __init__(self, struct):
        self.struct = struct

    def __dlpack__(self, **kwargs):
        return self.struct.capsule()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_refusal_survives_a_destructor_running_python():
    rng = random.Random(SEED + 9)
    s = Struct(rng, 70000, legacy=False)
    while s.accepted or not s.with_deleter:
        s = Struct(rng, 70000 + rng.randrange(1, 1 << 20), legacy=False)
    with pytest.raises(BufferError) as exc:
        dlbridge.from_dlpack(Dropper(s))
    check_refused(s, exc)

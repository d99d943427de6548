#!/usr/bin/env python3
"""A random API-call fuzzer for the dlbridge Python module.

Every public function of `dlbridge` and every method, attribute and
operator of `dlbridge.Tensor` is called with arguments drawn at random from
a pool of hostile values: objects whose `__index__`, `__len__`, `__iter__`,
`__getitem__`, `__dlpack__`, `__dlpack_device__`, `__array_interface__`,
`__buffer__`, `__eq__`, `__hash__`, `__repr__` (and more) raise, lie,
return the wrong type or change the very objects being read (clear the
list that holds them, drop the last reference to a tensor, write into a
tensor, change their own class); DLPack capsules built by hand with
malformed contents and odd deleters; NumPy arrays and PyTorch tensors of
every dtype and odd layout; dlbridge tensors of every dtype, views and
shared tensors; nested sequences; huge and negative integers; keyword
arguments of the wrong type.

A call may return or raise an `Exception`. A finding is anything else: a
crash or a sanitizer report (the process dies; the log names the call), a
hang (faulthandler dumps the stacks after --hang seconds and exits), a
`SystemError` (or any exception that is not an `Exception`), or a
reference count of an input that differs after the call.

    python tests/fuzz/py_api_fuzz.py --seconds 120 --seed 1 --log calls.log

Run it against the module built with AddressSanitizer and UBSan as
tests/python/run_sanitized.sh runs the suite (a package folder of links,
the sanitizer runtimes preloaded; add allocator_may_return_null=1 to
ASAN_OPTIONS). A run is reproducible from its seed: --log writes each
call's description before the call is made, so the last line of the log
names the call that crashed. `run(seed, calls=N)` is the entry point the
derandomized pytest slice (tests/python/test_api_fuzz.py) uses.
"""

import argparse
import copy
import ctypes
import faulthandler
import gc
import math
import operator
import os
import pickle
import random
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import dlbridge  # noqa: E402
from dlpack_ctypes import (  # noqa: E402
    DLDataType,
    DLDevice,
    DLManagedTensor,
    DLManagedTensorVersioned,
    describe,
)

try:
    import torch  # noqa: E402

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - PyTorch is optional here
    torch = None

try:
    from dlbridge import _testhelper as helper  # noqa: E402
except ImportError:  # pragma: no cover - a build without test extensions
    helper = None


# ---------------------------------------------------------------------------
# Findings
# ---------------------------------------------------------------------------


# Counts the hostile callbacks that changed something (a list cleared, a
# reference dropped, a tensor written): reference counts of the inputs are
# not compared across a call during which one ran.
MUTATIONS = [0]


def _mutated():
    MUTATIONS[0] += 1


# ---------------------------------------------------------------------------
# Hand-made capsules
# ---------------------------------------------------------------------------

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

_NAMES = {
    n: ctypes.create_string_buffer(n)
    for n in (b"dltensor", b"dltensor_versioned", b"used_dltensor",
              b"used_dltensor_versioned", b"dltensor_x", b"")
}
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# Producers whose deleter has not run yet, by manager_ctx. A deleter that
# runs twice, or for a producer it does not know, is a finding.
_LIVE = {}
_DOUBLE = []
_next_id = [1000]


def _deleter_body(ptr, legacy, mode):
    cls = DLManagedTensor if legacy else DLManagedTensorVersioned
    ctx = cls.from_address(ptr).manager_ctx
    if _LIVE.pop(ctx, None) is None:
        _DOUBLE.append(ctx)
    if mode == "raise":
        raise RuntimeError("deleter raises")
    if mode == "reenter":
        dlbridge.zeros(3)
        gc.collect()


_DELETERS = {}
for _legacy in (False, True):
    for _mode in ("plain", "raise", "reenter"):
        _DELETERS[(_legacy, _mode)] = _DELETER(
            lambda ptr, _l=_legacy, _m=_mode: _deleter_body(ptr, _l, _m))


class Producer:
    """A managed tensor built by hand, in a capsule with no destructor: only
    a consumer calls the deleter. Its elements lie inside a 64 KiB block
    (16 KiB before the first, 48 KiB after), so that a changed dtype,
    byte_offset or ndim describes memory that exists: a producer that lies
    about its memory is no finding of the consumer's."""

    def __init__(self, rng, array, legacy, **fields):
        a = array
        self.block = np.zeros(65536, dtype=np.uint8)
        self.m = DLManagedTensor() if legacy else DLManagedTensorVersioned()
        self.id = _next_id[0]
        _next_id[0] += 1
        t = self.m.dl_tensor
        self.shape, self.strides = describe(
            t, a, self.block.ctypes.data + 16384, room=72)
        mode = fields.pop("deleter_mode", "plain")
        self.m.deleter = (None if mode == "null" else ctypes.cast(
            _DELETERS[(legacy, mode)], ctypes.c_void_p).value)
        self.m.manager_ctx = self.id
        if not legacy:
            self.m.major, self.m.minor = 1, 3
        name = fields.pop("name", None)
        for k, v in fields.items():
            setattr(t if hasattr(t, k) else self.m, k, v)
        if name is None:
            name = b"dltensor" if legacy else b"dltensor_versioned"
        if mode != "null":
            _LIVE[self.id] = self
        self.capsule = _capsule_new(ctypes.addressof(self.m), _NAMES[name], None)


# Producers stay alive for a while: a consumer may keep their memory.
_KEEP = []


def _trim_keep():
    if len(_KEEP) > 2000:
        del _KEEP[:1000]
        gc.collect()
        try:
            _PyErr_Occurred()
        except RuntimeError:  # a helper capsule's own "leave_error"
            pass


# ---------------------------------------------------------------------------
# The value pool
# ---------------------------------------------------------------------------

DL_DTYPES = [
    "bool", "int1", "int2", "int4", "int8", "int16", "int32", "int64",
    "uint1", "uint2", "uint4", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "bfloat16", "float8_e3m4",
    "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn",
    "float6_e3m2fn", "float4_e2m1fn", "complex32", "complex64", "complex128",
    "float32x4", "handle", "float8", "int8x4",
]
NP_DTYPES = ["?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4",
             "f8", "c8", "c16"]
NP_ODD_DTYPES = [">f4", ">i8", "M8[s]", "m8[s]", "O", "U3", "S2", "V4",
                 [("a", "i4"), ("b", "f4")], "g", "G"]
TORCH_DTYPES = [] if torch is None else [
    torch.bool, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.uint8, torch.uint16, torch.uint32, torch.uint64, torch.float16,
    torch.bfloat16, torch.float32, torch.float64, torch.complex32,
    torch.complex64, torch.complex128, torch.float8_e4m3fn,
    torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz,
    torch.qint8, torch.quint4x2,
]
HUGE = [2**31 - 1, 2**31, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64,
        -2**63, -2**63 - 1, -2**64, 2**100, -1, -2]
SMALL = [0, 1, 2, 3, -1, 4, 5, 7, 8, 16, 63, 64, 65]
DEVICES = ["cpu", "cpu:0", "cpu:1", "cuda", "cuda:0", "cuda:-1", "cuda_host",
           "rocm_host", "cuda_managed", "rocm:0", "metal", "", "cpu:",
           "cuda:99999999999", "cpu\x00", (1, 0), (1, 1), (2, 0), (3, 0),
           (13, 0), (1,), (1, 0, 0), (99, 0), (-1, 0), (1, 2**40)]
STRINGS = ["", "x", "\x00", "float32", "int4", "bfloat16", "f4", "<i8", ">f4",
           "?", "c8", "float", "double", "intc", "cpu", "cuda_host",
           "set_read_mostly", "unset_accessed_by", "x" * 300, "é", "\udcff"]


def _f(v):
    """A value made at run time, never a constant shared with other code."""
    return int(str(v)) if isinstance(v, int) and not isinstance(v, bool) else v


class Gen:
    """Draws hostile values. Each value comes with a short label that names
    it without calling any of its methods."""

    def __init__(self, rng, tmpdir, npy_paths=None):
        self.rng = rng
        self.tmpdir = tmpdir
        self.npy_paths = npy_paths or _make_npy_files(tmpdir)
        self.classes = {}

    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def chance(self, p):
        return self.rng.random() < p

    # -- numbers --------------------------------------------------------

    def int_(self):
        r = self.rng.random()
        if r < 0.5:
            return _f(self.pick(SMALL)), "int"
        if r < 0.8:
            v = self.pick(HUGE)
            return _f(v), "int(%d)" % v
        if r < 0.85:
            return self.pick([True, False]), "bool"
        if r < 0.9:
            return np.int64(self.pick(SMALL)), "np.int64"
        if r < 0.95:
            return np.uint64(2**64 - 1), "np.uint64(max)"
        return self.hostile("index"), "hostile_index"

    def number(self):
        r = self.rng.random()
        if r < 0.4:
            return self.int_()
        if r < 0.7:
            v = self.pick([0.0, -0.0, 1.5, -2.5, float("nan"), float("inf"),
                           -float("inf"), 1e308, 5e-324, 2.0**64, 0.5])
            return v, "float(%r)" % v
        if r < 0.8:
            v = self.pick([1j, complex(float("nan"), 1), complex(1e308, -1e308),
                           -0.5j])
            return v, "complex(%r)" % v
        if r < 0.9:
            v = self.pick([np.float32(1.5), np.float16(2), np.complex64(1j),
                           np.bool_(True), np.int8(-3), np.array(2.5),
                           np.array(3, dtype=np.uint8)])
            return v, "np_scalar(%s)" % type(v).__name__
        return self.hostile(self.pick(["index", "float", "int", "complex",
                                       "bool"])), "hostile_number"

    # -- shapes -----------------------------------------------------------

    def shape_ints(self, max_numel=64):
        ndim = self.pick([0, 1, 1, 2, 2, 3, 4])
        shape = []
        n = 1
        for _ in range(ndim):
            e = self.pick([0, 1, 1, 2, 2, 3, 4, 5])
            if n * max(e, 1) > max_numel:
                e = 1
            n *= max(e, 1)
            shape.append(e)
        return shape

    def shape(self):
        """A shape argument: mostly reasonable, sometimes hostile. Never one
        whose element count is valid and large (an allocation of gigabytes
        is no finding)."""
        r = self.rng.random()
        if r < 0.45:
            s = self.shape_ints()
            return tuple(s), "shape%r" % (tuple(s),)
        if r < 0.55:
            s = self.shape_ints()
            return list(s), "list_shape%r" % (s,)
        if r < 0.6:
            v = self.pick([0, 1, 5])
            return _f(v), "int_shape(%d)" % v
        if r < 0.7:
            s = self.shape_ints()
            i = self.rng.randrange(len(s) + 1)
            s.insert(i, self.pick(HUGE[5:] + [0]))
            if 0 not in s and any(e > 0 and e < 2**62 for e in s):
                s.append(0)
            return tuple(_f(e) for e in s), "huge_shape%r" % (tuple(s),)
        if r < 0.75:
            s = [2**32, 2**32, self.pick([1, 2**32])]
            return tuple(_f(e) for e in s), "overflow_shape%r" % (tuple(s),)
        if r < 0.8:
            n = self.pick([64, 65, 100, 1000])
            return tuple([1] * n), "ones(%d)" % n
        if r < 0.9:
            s = self.shape_ints()
            items, label = self.hostile_items(s)
            kind = self.pick(["tuple", "list", "seq", "iter"])
            if kind == "tuple":
                return tuple(items), "tuple[%s]" % label
            if kind == "list":
                return items, "list[%s]" % label
            return self.hostile("seq", items=items), "hostile_seq[%s]" % label
        return self.any(depth=1)

    def hostile_items(self, ints):
        items = list(ints)
        labels = [str(i) for i in ints]
        for _ in range(self.rng.randrange(1, 3)):
            if not items:
                items.append(1)
                labels.append("1")
            i = self.rng.randrange(len(items))
            v, lab = self.pick([
                lambda: (self.hostile("index"), "H"),
                lambda: (np.int32(items[i]), "np.int32"),
                lambda: self.int_(),
                lambda: (float(items[i]), "float"),
                lambda: (None, "None"),
                lambda: (torch.tensor(items[i]) if torch else 1, "torch0d"),
                lambda: (dlbridge.asarray(items[i]), "dlb0d"),
            ])()
            items[i] = v
            labels[i] = lab
        return items, ",".join(labels)

    # -- dtypes -----------------------------------------------------------

    def dtype(self):
        r = self.rng.random()
        if r < 0.5:
            v = self.pick(DL_DTYPES)
            return v, repr(v)
        if r < 0.6:
            v = np.dtype(self.pick(NP_DTYPES))
            return v, "np.dtype(%s)" % v.str
        if r < 0.65:
            v = self.pick([np.float32, np.intc, np.bool_, np.complex64,
                           bool, int, float, complex, np.datetime64, np.void,
                           object, str])
            return v, "type(%s)" % v.__name__
        if r < 0.7:
            try:
                v = np.dtype(self.pick(NP_ODD_DTYPES))
            except TypeError:
                v = np.dtype("f4")
            return v, "np.dtype(%s)" % v.str
        if r < 0.8 and torch is not None:
            v = self.pick(TORCH_DTYPES)
            return v, str(v)
        if r < 0.9:
            v = self.pick(STRINGS)
            return v, "str(%r)" % v[:20]
        return self.hostile("dtype"), "hostile_dtype"

    def device(self):
        if self.chance(0.85):
            v = self.pick(DEVICES)
            if isinstance(v, tuple):
                v = tuple(_f(x) for x in v)
            return v, "dev(%r)" % (v,)
        if self.chance(0.5):
            t, lab = self.hostile_items([1, 0])
            return tuple(t), "dev(%s)" % lab
        return self.any(depth=1)

    # -- arrays -----------------------------------------------------------

    def numpy(self):
        r = self.rng.random()
        dt = self.pick(NP_DTYPES)
        shape = self.shape_ints()
        n = int(np.prod(shape)) if shape else 1
        base = np.arange(max(n, 1) * 2).astype(dt)
        a = base[:n].reshape(shape) if shape else base[0:1].reshape(())
        label = "np(%s,%r" % (dt, tuple(shape))
        if r < 0.15 and a.ndim:
            a = a[::-1]
            label += ",neg"
        elif r < 0.25 and a.ndim:
            a = a.T
            label += ",T"
        elif r < 0.35 and a.ndim:
            a = np.broadcast_to(a[..., :1] if a.shape[-1] else a,
                                a.shape[:-1] + (3,) if a.shape[-1] else a.shape)
            label += ",bcast"
        elif r < 0.45:
            a = a.copy()
            a.flags.writeable = False
            label += ",ro"
        elif r < 0.55:
            raw = np.zeros(a.nbytes + 1, dtype=np.uint8)[1:]
            a = raw.view(dt).reshape(a.shape) if a.ndim else raw.view(dt)[:1]
            label += ",unaligned"
        elif r < 0.6 and a.ndim:
            a = base[::2][:n].reshape(shape) if shape else a
            label += ",step2"
        elif r < 0.65:
            try:
                a = np.zeros(3, dtype=self.pick(NP_ODD_DTYPES))
            except TypeError:
                a = np.zeros(3, dtype="O")
            label = "np(%s" % a.dtype.str
        elif r < 0.7:
            a = np.zeros((3, 0, 2), dtype=dt)[:, :, ::-1]
            label += ",empty_neg"
        return a, label + ")"

    def torch_(self):
        if torch is None:
            return self.numpy()
        dt = self.pick(TORCH_DTYPES[:-2])
        shape = self.shape_ints()
        r = self.rng.random()
        label = "torch(%s,%r" % (str(dt)[6:], tuple(shape))
        try:
            t = torch.arange(int(np.prod(shape)) if shape else 1).reshape(
                shape or ()).to(dt)
        except (RuntimeError, TypeError):
            t = torch.zeros(shape, dtype=dt)
        if r < 0.15 and t.ndim:
            t = t.T
            label += ",T"
        elif r < 0.3 and t.ndim:
            t = t[..., :1].expand(*t.shape[:-1], 4) if t.shape[-1] else t
            label += ",expand"
        elif r < 0.4 and t.ndim:
            t = t[::2]
            label += ",step2"
        elif r < 0.5 and dt.is_floating_point and dt not in (
                torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
                torch.float8_e5m2fnuz):
            t = t.clone().requires_grad_(True)
            label += ",grad"
        elif r < 0.55 and dt.is_complex and dt != torch.complex32:
            t = t.conj()
            label += ",conj"
        elif r < 0.6:
            t = torch.zeros(3, 4).to_sparse()
            label = "torch(sparse"
        elif r < 0.65 and t.ndim:
            t = t.unsqueeze(0)[:, ...].flip(0)
            label += ",flip"
        return t, label + ")"

    def dlb(self):
        r = self.rng.random()
        dt = self.pick(DL_DTYPES)
        shape = self.shape_ints()
        if SIGNALS[0] and self.chance(0.03):
            # Long enough that element walks check for signals.
            shape = self.pick([[40000], [200, 200], [2, 20000, 1]])
        label = "dlb(%s,%r" % (dt, tuple(shape))
        try:
            if dt in ("handle", "float32x4", "float8", "int8x4",
                      "float8_e8m0fnu"):
                t = dlbridge.empty(tuple(shape), dt)
            elif dt == "bool":
                t = dlbridge.full(tuple(shape), True, dtype=dt)
            else:
                t = dlbridge.arange(int(np.prod(shape)) if shape else 1,
                                    dtype="int64")
                t = dlbridge.asarray(t.tolist(), dtype=dt).reshape(shape)
        except Exception:
            t = dlbridge.zeros(tuple(shape), "float32")
            label = "dlb(float32,%r" % (tuple(shape),)
        try:
            if r < 0.1 and t.ndim:
                t = t[::-1]
                label += ",neg"
            elif r < 0.2 and t.ndim:
                t = t.T
                label += ",T"
            elif r < 0.3:
                t = t[None, ..., None]
                label += ",newaxis"
            elif r < 0.4:
                t = t.share_memory()
                label += ",shared"
            elif r < 0.45:
                t = dlbridge.zeros(tuple(shape), dt if dt != "float8_e8m0fnu"
                                   else "float32", shared=True)
                label += ",zeros_shared"
            elif r < 0.55:
                a = np.arange(6, dtype=np.float32)
                a.flags.writeable = False
                t = dlbridge.from_dlpack(a)
                label = "dlb(ro_np"
            elif r < 0.6 and t.ndim:
                t = t[..., ::2]
                label += ",step2"
            elif r < 0.65:
                t = dlbridge.from_dlpack(t.__dlpack__())
                label += ",reimport"
            elif r < 0.7:
                t = dlbridge.asarray(memoryview(np.arange(4.0)))
                label = "dlb(memoryview"
            elif r < 0.75:
                t = pickle.loads(pickle.dumps(t, protocol=5))
                label += ",unpickled"
            elif r < 0.9 and GPU[0]:
                dev = self.pick(["cuda:0", "cuda:1", "cuda_host",
                                 "cuda_managed", "rocm:0", "rocm_host"])
                t = t.to(dev) if self.chance(0.5) else dlbridge.zeros(
                    tuple(shape), dt, device=dev)
                label += "," + dev
        except Exception:
            pass
        return t, label + ")"

    def capsule(self):
        """A capsule: from a real producer, or built by hand with
        malformed contents."""
        r = self.rng.random()
        if r < 0.2:
            src, lab = self.pick([self.numpy, self.torch_, self.dlb])()
            kw = {}
            if self.chance(0.5):
                kw["max_version"] = (1, 0)
            try:
                return src.__dlpack__(**kw), "capsule_of(%s,%r)" % (lab, kw)
            except Exception:
                return dlbridge.zeros(2).__dlpack__(), "capsule_of(dlb)"
        if r < 0.3 and helper is not None:
            return self.helper_capsule()
        legacy = self.chance(0.3)
        a, alab = self.numpy()
        if a.dtype.kind not in "fiubc" or not a.flags.c_contiguous and self.chance(0.5):
            a = np.arange(6, dtype=np.float32)
            alab = "np(f4,(6,))"
        fields = {}
        for _ in range(self.rng.randrange(0, 3)):
            k = self.pick(["ndim", "shape", "strides", "dtype", "byte_offset",
                           "data", "version", "flags", "device", "name",
                           "deleter"])
            if k == "ndim":
                fields["ndim"] = self.pick([-1, 0, 1, 7, 8, 9, 64, 65, 1000,
                                            -2**31, 2**31 - 1])
            elif k == "shape":
                fields["shape"] = None
            elif k == "strides":
                fields["strides"] = None
            elif k == "dtype":
                fields["dtype"] = DLDataType(
                    self.pick([0, 1, 2, 3, 4, 5, 6, 7, 10, 14, 15, 17, 18, 255]),
                    self.pick([0, 1, 2, 4, 6, 8, 16, 32, 64, 128, 255, 3]),
                    self.pick([0, 1, 1, 1, 2, 4]))
            elif k == "byte_offset":
                fields["byte_offset"] = self.pick([1, 3, 4, 8, 2**64 - 1,
                                                   2**64 - 8, a.nbytes,
                                                   a.nbytes + 8])
            elif k == "data":
                fields["data"] = None
            elif k == "version" and not legacy:
                fields["major"], fields["minor"] = self.pick(
                    [(0, 0), (0, 9), (1, 0), (1, 99), (2, 0), (2**32 - 1, 0)])
            elif k == "flags" and not legacy:
                fields["flags"] = self.pick([1, 2, 3, 4, 7, 8, 2**63, 2**64 - 1])
            elif k == "device":
                fields["device"] = DLDevice(
                    self.pick([1, 2, 3, 4, 10, 11, 13, 17, 18, 19, 0, -1, 99]),
                    self.pick([0, 1, -1, 2**31 - 1]))
            elif k == "name":
                fields["name"] = self.pick(list(_NAMES))
            elif k == "deleter":
                fields["deleter_mode"] = self.pick(["null", "raise", "reenter"])
        p = Producer(self.rng, a, legacy, **fields)
        _KEEP.append(p)
        return p.capsule, "handmade(%s,%s,%r)" % (
            "legacy" if legacy else "v", alab, sorted(fields))

    def helper_capsule(self):
        kw = {}
        # 12 floats inside 16 KiB of zeros either side (see Producer).
        a = np.zeros(32768, dtype=np.uint8)[16384:]
        kw["data"] = a
        kw["shape"] = self.pick([(12,), (3, 4), (), (0,), (2**62, 0), (-1,),
                                 (12, 1, 1), (2**40, 2**40)])
        if self.chance(0.3):
            kw["strides"] = self.pick([None, (1,), (-1,), (0,), (2**62,),
                                       (4, 1), (1, 3), (-2**63,)])
        if self.chance(0.3):
            kw["dtype"] = self.pick([(2, 32, 1), (0, 4, 1), (1, 1, 1), (6, 8, 1),
                                     (5, 64, 1), (2, 32, 4), (17, 4, 1),
                                     (15, 6, 1), (6, 1, 1), (3, 64, 1)])
        if self.chance(0.2):
            kw["byte_offset"] = self.pick([1, 4, 48, 2**63])
        if self.chance(0.2):
            kw["flags"] = self.pick([1, 2, 4, 8, 5])
        if self.chance(0.2):
            kw["version"] = self.pick([(1, 0), (0, 5), (2, 0)])
        if self.chance(0.3):
            kw["legacy"] = True
            kw.pop("flags", None)
            kw.pop("version", None)
        if self.chance(0.2):
            kw["deleter"] = self.pick(["none", "clear_error", "leave_error"])
        if self.chance(0.1):
            kw["ndim"] = self.pick([-1, 70, 0])
        if self.chance(0.1):
            kw["shape_null"] = True
        if self.chance(0.1):
            kw["device"] = self.pick([(2, 0), (3, 0), (13, 0), (1, 5)])
        shape = kw["shape"]
        kw["shape"] = list(shape)

        try:
            c = helper.make_capsule(**kw)
        except Exception:
            c = helper.make_capsule(data=a, shape=[12])
        if kw.get("deleter") == "leave_error":
            # The helper's own destructor of an unconsumed capsule leaves
            # its error set too: such capsules live until a trim that
            # clears it (_trim_keep).
            _KEEP.append(c)
        label = "helper_capsule(%s)" % ",".join(
            "%s=%r" % (k, v) for k, v in sorted(kw.items()) if k != "data")
        return c, label

    # -- hostile objects ----------------------------------------------------

    def hostile(self, role, items=None):
        """An object of a class that plays `role` (index, seq, producer,
        dtype, ...) badly. Classes are made once per (role, behaviours) and
        reused: they are types dlbridge may cache."""
        behave = {}
        dunders = ROLE_DUNDERS[role]
        for d in dunders:
            if self.chance(0.75):
                behave[d] = self.pick(BEHAVIOURS)
        key = (role, tuple(sorted(behave.items())))
        cls = self.classes.get(key)
        if cls is None or self.chance(0.05):
            cls = _make_class(role, behave)
            if len(self.classes) < 400:
                self.classes[key] = cls
        obj = cls()
        obj._items = items if items is not None else [1, 2, 3]
        obj._seed = self.rng.randrange(2**30)
        obj._target = None
        if role == "xapi":
            if "__dlpack_c_exchange_api__" not in cls.__dict__:
                cls.__dlpack_c_exchange_api__ = self.exchange_table()
            if self.chance(0.3):
                obj.capsule = self.capsule()[0]
            else:
                p = Producer(self.rng, np.arange(6, dtype=np.float32), False)
                _KEEP.append(p)
                obj.capsule = p.capsule
            obj.leave_error = self.chance(0.2)
        if role in ("producer", "buffer") and self.chance(0.7):
            # What a plausible __dlpack__ hands out: a capsule of any kind,
            # the same one each time it is asked.
            obj._keep = self.capsule()[0]
        return obj

    def exchange_table(self):
        """What a producer type publishes as __dlpack_c_exchange_api__."""
        if helper is None:
            return None
        r = self.rng.random()
        if r < 0.5:
            return helper.fake_exchange(self.pick([0, 1, 2, 2**40]),
                                        self.chance(0.2))
        if r < 0.7:
            return helper.fake_exchange_owned()
        return self.pick([None, 5, "x", np.arange(3).__dlpack__(),
                          dlbridge.Tensor.__dlpack_c_exchange_api__])

    # -- anything -----------------------------------------------------------

    def any(self, depth=0):
        r = self.rng.random()
        if r < 0.12:
            return self.number()
        if r < 0.2:
            v = self.pick(STRINGS + [b"", b"abc", None, Ellipsis, (), [],
                                     {}, object(), slice(None), NotImplemented])
            return v, "const(%s)" % (
                repr(v[:20]) if isinstance(v, str) else
                "object()" if type(v) is object else repr(v))
        if r < 0.3:
            return self.numpy()
        if r < 0.38:
            return self.torch_()
        if r < 0.5:
            return self.dlb()
        if r < 0.6:
            return self.capsule()
        if r < 0.72:
            role = self.pick(list(ROLE_DUNDERS))
            return self.hostile(role), "hostile_" + role
        if r < 0.76 and depth < 3:
            return self.nested(depth + 1)
        if r < 0.8:
            return self.subclass()
        if r < 0.85:
            v = self.pick([
                lambda: bytearray(b"abcd"), lambda: memoryview(b"abcdefgh"),
                lambda: memoryview(bytearray(8)).cast("i"),
                lambda: memoryview(np.arange(6.0).reshape(2, 3))[::-1],
                lambda: memoryview(np.zeros((0, 3), np.int16)),
                lambda: memoryview(np.arange(4.0))[::2]])()
            return v, "buffer(%s)" % type(v).__name__
        if r < 0.9:
            return self.device()
        if r < 0.95:
            return self.dtype()
        return self.shape()

    def subclass(self):
        """Instances of subclasses of int, str, tuple, list and dict whose
        methods disagree with what the instance holds."""
        kind = self.pick(["int", "str", "tuple", "list", "dict", "careless"])
        if kind == "int":
            return _OddInt(self.pick([0, 1, 3, -1, 2**63])), "OddInt"
        if kind == "str":
            return _OddStr(self.pick(["float32", "cpu", "cuda:0", "int4",
                                      "set_read_mostly", ""])), "OddStr"
        if kind == "tuple":
            return _OddTuple(self.pick([(), (1, 0), (2, 3), (1, 3)])), "OddTuple"
        if kind == "list":
            return _OddList(self.pick([[], [1, 0], [2, 3], [1.5, 2]])), "OddList"
        if kind == "dict":
            return _OddDict(shape=(2,), typestr="<f4", data=(0, False),
                            version=3), "OddDict"
        if helper is None:
            return 1, "int"
        fmt = self.pick([None, "B", "f", "d", "<f", ">f", "Zf", "?", "e",
                         "i", "q", "x", "3f", "T{f}", "", "Q", "n", "P"])
        item = self.pick([1, 2, 4, 8, 3, 0, -1])
        kw = {"readonly": self.chance(0.5)}
        if self.chance(0.3):
            kw["on_release"] = lambda: (_mutated(), gc.collect())
        try:
            return helper.careless_buffer(item, fmt, **kw), "careless(%r,%r)" % (
                item, fmt)
        except Exception:
            return helper.careless_buffer(1), "careless(1)"

    def nested(self, depth=1):
        if SIGNALS[0] and self.chance(0.02):
            n = self.pick([20000, 40000])
            return [float(i) for i in range(n)], "floats(%d)" % n
        n = self.pick([0, 1, 2, 2, 3])
        items, labels = [], []
        first = self.rng.random()
        for _ in range(n):
            if first < 0.4:
                v, lab = self.number()
            elif first < 0.6 and depth < 3:
                v, lab = self.nested(depth + 1)
            else:
                v, lab = self.any(depth + 1)
            items.append(v)
            labels.append(lab)
        kind = self.pick(["list", "list", "tuple", "seq", "range"])
        label = "[%s]" % ",".join(labels)
        if kind == "tuple":
            return tuple(items), "tuple" + label
        if kind == "seq":
            return self.hostile("seq", items=items), "hseq" + label
        if kind == "range":
            return range(self.pick([0, 3, 5])), "range"
        return items, "list" + label

    def slice_key(self):
        parts = []
        for _ in range(self.pick([1, 1, 2, 3])):
            r = self.rng.random()
            if r < 0.3:
                v, lab = self.int_()
            elif r < 0.6:
                a = [self.pick([None, 0, 1, -1, 2, 2**63, -2**64, True])
                     for _ in range(3)]
                if a[2] == 0:
                    a[2] = self.pick([0, None])
                if self.chance(0.2):
                    a[self.rng.randrange(3)] = self.hostile("index")
                v, lab = slice(*a), "slice"
            elif r < 0.75:
                v, lab = self.pick([None, Ellipsis]), "None/..."
            else:
                v, lab = self.any(depth=2)
            parts.append(v)
        if len(parts) == 1 and self.chance(0.6):
            return parts[0], "key(%s)" % (type(parts[0]).__name__,)
        return tuple(parts), "key(%s)" % ",".join(type(p).__name__ for p in parts)


class _OddInt(int):
    def __index__(self):
        return 2**64

    def __int__(self):
        return -1


class _OddStr(str):
    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0

    def __str__(self):
        return "int4"


class _OddTuple(tuple):
    def __len__(self):
        return 100

    def __getitem__(self, i):
        return 2**63

    def __iter__(self):
        return iter(range(100))


class _OddList(list):
    def __len__(self):
        return 0

    def __getitem__(self, i):
        raise IndexError(i)

    def __iter__(self):
        return iter([2**64, None])


class _OddDict(dict):
    def __getitem__(self, k):
        raise KeyError(k)

    def get(self, k, d=None):
        return 2**64


# The dunders each role may define, with a plausible answer for each.
ROLE_DUNDERS = {
    "index": ["__index__", "__int__", "__float__", "__eq__", "__hash__",
              "__repr__"],
    "float": ["__float__", "__index__", "__repr__"],
    "int": ["__int__", "__repr__"],
    "complex": ["__complex__", "__float__", "__repr__"],
    "bool": ["__bool__", "__eq__", "__repr__"],
    "seq": ["__len__", "__getitem__", "__iter__", "__eq__", "__repr__"],
    "producer": ["__dlpack__", "__dlpack_device__", "__len__", "__repr__",
                 "__eq__", "__hash__"],
    "interface": ["__array_interface__", "__array__", "__len__",
                  "__getitem__", "__cuda_array_interface__"],
    "buffer": ["__buffer__", "__release_buffer__", "__dlpack__",
               "__len__"],
    "dtype": ["dtype", "name", "itemsize", "kind", "str", "byteorder",
              "__repr__", "__str__", "__eq__", "__hash__"],
    "path": ["__fspath__", "__repr__"],
    "eq": ["__eq__", "__ne__", "__hash__", "__bool__", "__repr__"],
    # A producer type with a C exchange table (the test helper's fake one,
    # or junk in its place).
    "xapi": ["__dlpack__", "__dlpack_device__", "__repr__"],
}

BEHAVIOURS = ["raise", "raise_other", "wrong", "plausible", "plausible",
              "plausible", "mutate", "huge", "self", "retype", "gc"]

_EXC = [ValueError, TypeError, IndexError, OverflowError, MemoryError,
        BufferError, KeyError, StopIteration, RecursionError, AttributeError,
        NotImplementedError, ZeroDivisionError]
_WRONG = [None, "str", 1.5, -1, 2**64, (1, 2), [1], b"x", NotImplemented,
          object(), float("nan"), True, -2**63 - 1, {}]


def _plausible(self, name, args, kwargs=None):
    kwargs = kwargs or {}
    items = self._items
    if name in ("__index__", "__int__"):
        return self._seed % 4
    if name == "__float__":
        return 1.5
    if name == "__complex__":
        return 1j
    if name == "__bool__":
        return True
    if name == "__len__":
        return len(items)
    if name == "__getitem__":
        i = args[0] if args else 0
        if isinstance(i, int) and -len(items) <= i < len(items):
            return items[i]
        raise IndexError(i)
    if name == "__iter__":
        return iter(list(items))
    if name == "__dlpack__":
        cap = getattr(self, "_keep", None)
        if cap is not None and type(cap).__name__ == "PyCapsule":
            if self._seed % 5 == 0 and "max_version" in kwargs:
                # An old producer: no keywords.
                raise TypeError("__dlpack__() got an unexpected keyword")
            return cap
        return np.arange(4, dtype=np.float32).__dlpack__()
    if name == "__dlpack_device__":
        return [(1, 0), (1, 0), (1, 0), (2, 0), (13, 0), (3, 0), (1, 5),
                (99, 0)][self._seed % 8]
    if name == "__array_interface__":
        a = np.arange(4.0)
        self._keep = a
        return a.__array_interface__
    if name == "__cuda_array_interface__":
        return {"shape": (2,), "typestr": "<f4", "data": (0, False),
                "version": 3}
    if name == "__array__":
        return np.arange(3)
    if name == "__buffer__":
        return memoryview(bytearray(8))
    if name == "__release_buffer__":
        return None
    if name in ("__eq__", "__ne__"):
        return False
    if name == "__hash__":
        return 7
    if name in ("__repr__", "__str__"):
        return "H"
    if name == "__fspath__":
        return _NPY_OK[0] if _NPY_OK else "/nonexistent"
    if name == "dtype":
        return np.dtype("f4")
    if name == "name":
        return "float32"
    if name == "itemsize":
        return 4
    if name == "kind":
        return "f"
    if name == "str":
        return "<f4"
    if name == "byteorder":
        return "="
    return None


def _mutate(self):
    """What a hostile callback changes: its target (a list, a tensor, a
    holder of the last reference) or the world."""
    _mutated()
    t = self._target
    how = self._seed % 7
    if isinstance(t, list):
        if how == 0:
            t.clear()
        elif how == 1 and t:
            t.pop()
        elif how == 2:
            t.extend([1, [2], t])
        elif how == 3 and t:
            t[0] = [[1, 2], [3]]
        else:
            del t[:]
    elif t is not None and isinstance(t, dlbridge.Tensor):
        # Calls back into dlbridge on the tensor being read.
        op = self._seed // 7 % 8
        try:
            if op == 0:
                t[...] = 0
            elif op == 1:
                t.reshape(-1)
            elif op == 2:
                pickle.dumps(t, protocol=5)
            elif op == 3:
                np.asarray(t)
            elif op == 4:
                dlbridge.from_dlpack(t.__dlpack__())
            elif op == 5:
                t.share_memory()
            elif op == 6:
                memoryview(t).release()
            else:
                t.tolist()
        except Exception:
            pass
    elif type(t).__name__ == "PyCapsule":
        # Takes the capsule being read.
        try:
            dlbridge.from_dlpack(t)
        except Exception:
            pass
    else:
        self._items[:] = []
    if how == 5:
        gc.collect()
    elif how == 6:
        dlbridge.asarray([1, 2, 3]).share_memory()


def _make_class(role, behave):
    ns = {"__slots__": ("_items", "_seed", "_target", "_keep", "capsule",
                        "leave_error", "__weakref__"),
          "_role": role}

    def make(name, how):
        def method(self, *args, **kwargs):
            if how == "raise":
                raise _EXC[self._seed % len(_EXC)]("hostile " + name)
            if how == "raise_other":
                raise RuntimeError("hostile " + name)
            if how == "wrong":
                return _WRONG[self._seed % len(_WRONG)]
            if how == "huge":
                return [2**64, -2**63 - 1, 2**63, 2**1000][self._seed % 4]
            if how == "self":
                return self
            if how == "retype":
                _mutated()
                cls = type(self)
                try:
                    if name in cls.__dict__:
                        setattr(cls, name, None if self._seed % 2 else
                                make(name, "raise"))
                except (TypeError, AttributeError):
                    pass
                return _plausible(self, name, args, kwargs)
            if how == "gc":
                _mutated()
                gc.collect()
                return _plausible(self, name, args, kwargs)
            if how == "mutate":
                _mutate(self)
                return _plausible(self, name, args, kwargs)
            return _plausible(self, name, args, kwargs)
        method.__name__ = name
        return method

    for name, how in behave.items():
        if name.startswith("__"):
            if name == "__dlpack_device__" or name not in (
                    "__array_interface__", "__cuda_array_interface__"):
                ns[name] = make(name, how)
            else:
                ns[name] = property(make(name, how))
        else:
            ns[name] = property(make(name, how))
    return type("Hostile_" + role, (object,), ns)


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------

_NPY_OK = []


def _make_npy_files(tmpdir):
    paths = []
    for i, (dt, shape, order) in enumerate([
            ("<f4", (3, 4), "C"), ("|b1", (5,), "C"), ("<c16", (), "C"),
            ("<i8", (2, 3), "F"), ("<u2", (0, 3), "C"), (">f8", (2,), "C")]):
        p = os.path.join(tmpdir, "a%d.npy" % i)
        np.save(p, np.zeros(shape, dtype=dt, order=order))
        paths.append(p)
    _NPY_OK[:] = [paths[0]]
    with open(paths[0], "rb") as f:
        data = f.read()
    for j, cut in enumerate([5, 10, 60, len(data) - 4]):
        p = os.path.join(tmpdir, "cut%d.npy" % j)
        with open(p, "wb") as f:
            f.write(data[:cut])
        paths.append(p)
    p = os.path.join(tmpdir, "obj.npy")
    np.save(p, np.array([1, "a"], dtype=object), allow_pickle=True)
    paths.append(p)
    p = os.path.join(tmpdir, "fifo")
    try:
        os.mkfifo(p)
        paths.append(p)
    except OSError:
        pass
    paths += [tmpdir, "/dev/null", os.path.join(tmpdir, "missing.npy"), ""]
    return paths


# ---------------------------------------------------------------------------
# The calls
# ---------------------------------------------------------------------------


def _kw(g, names):
    """Keyword arguments: each named one present or not, with a right or
    wrong value; now and then a keyword nobody takes."""
    kw, labels = {}, []
    for name, fn in names.items():
        if g.chance(0.5):
            v, lab = fn() if g.chance(0.7) else g.any(depth=2)
            kw[name] = v
            labels.append("%s=%s" % (name, lab))
    if g.chance(0.03):
        kw["bogus"] = 1
        labels.append("bogus=1")
    return kw, labels


def _bool(g):
    v = g.pick([True, False, None, 0, 1, "yes", np.bool_(True)])
    return v, "bool(%r)" % (v,)


def _tensorish(g):
    return g.pick([g.dlb, g.dlb, g.dlb, g.numpy, g.torch_, g.capsule,
                   lambda: g.any(depth=1)])()


def _max_version(g):
    if g.chance(0.15):
        v = (g.hostile("index"), g.pick([0, 3, g.hostile("index")]))
        return v, "mv(hostile)"
    v = g.pick([None, (1, 0), (1, 3), (0, 9), (2, 0), (100, 3), (1,), (1, 2, 3),
                (2**64, 0), (-1, 0), [1, 0], "1.0", (1, None)])
    return v, "mv(%r)" % (v,)


def _stream(g):
    if g.chance(0.1):
        return g.hostile("index"), "stream(hostile)"
    v = g.pick([None, -1, 0, 1, 2, 3, 2**64, -2**63 - 1, 1.5, "s"])
    return v, "stream(%r)" % (v,)


def _dl_device(g):
    if g.chance(0.15):
        v = (g.pick([1, g.hostile("index")]), g.hostile("index"))
        return v, "dd(hostile)"
    v = g.pick([None, (1, 0), (1, 1), (2, 0), (3, 0), (13, 0), (1,), (1, 0, 0),
                (2**40, 0), (1, -1), [1, 0], "cpu", (dlbridge.DLDeviceType.kDLCPU, 0)])
    return v, "dd(%r)" % (v,)


def _copy_kw(g):
    v = g.pick([None, True, False, 0, 1, "no"])
    return v, "copy(%r)" % (v,)


def _fill(g):
    return g.number() if g.chance(0.8) else g.any(depth=2)


def target_from_dlpack(g):
    x, lab = _tensorish(g)
    kw, kl = _kw(g, {"device": g.device, "copy": lambda: _copy_kw(g),
                     "in_place": lambda: _bool(g)})
    return dlbridge.from_dlpack, (x,), kw, "from_dlpack(%s,%s)" % (lab, kl)


def target_asarray(g):
    x, lab = g.pick([g.nested, lambda: _tensorish(g), g.number, g.any])()
    kw, kl = _kw(g, {"dtype": g.dtype, "device": g.device,
                     "copy": lambda: _copy_kw(g)})
    return dlbridge.asarray, (x,), kw, "asarray(%s,%s)" % (lab, kl)


def target_ctor(g):
    fn = g.pick([dlbridge.empty, dlbridge.zeros])
    shape, sl = g.shape()
    args = [shape]
    labels = [sl]
    if g.chance(0.6):
        d, dl = g.dtype()
        args.append(d)
        labels.append(dl)
        if g.chance(0.3):
            d, dl = g.device()
            args.append(d)
            labels.append(dl)
    kw, kl = _kw(g, {"shared": lambda: _bool(g)})
    return fn, tuple(args), kw, "%s(%s,%s)" % (fn.__name__, labels, kl)


def target_full(g):
    shape, sl = g.shape()
    v, vl = _fill(g)
    kw, kl = _kw(g, {"dtype": g.dtype, "device": g.device,
                     "shared": lambda: _bool(g)})
    return dlbridge.full, (shape, v), kw, "full(%s,%s,%s)" % (sl, vl, kl)


def target_arange(g):
    args, labels = [], []
    for _ in range(g.pick([0, 1, 1, 2, 3, 3, 4])):
        if g.chance(0.7):
            v = g.pick([0, 1, 5, -3, 0.5, 2.5, -1.5, 10, None, True,
                        float("nan"), float("inf"), 1e-300, 2**63, 2**70,
                        -2**63, np.float32(3), np.array(4.0)])
            lab = repr(v)
        else:
            v, lab = g.number()
        args.append(v)
        labels.append(lab)
    # Never a valid range of a huge count: an allocation of gigabytes is
    # no finding.
    nums = [a for a in args if isinstance(a, (int, float)) and not isinstance(a, bool)]
    if any(isinstance(a, (int, float)) and not isinstance(a, bool) and
           abs(a) > 1e6 and math.isfinite(a) for a in nums):
        if len(args) >= 2 and all(isinstance(a, (int, float)) for a in args[:3]):
            args = args[:2] + [args[1] if args[1] else 1]
            labels = labels[:2] + ["=stop"]
    kw, kl = _kw(g, {"dtype": g.dtype, "device": g.device})
    return dlbridge.arange, tuple(args), kw, "arange(%s,%s)" % (labels, kl)


def _huge_shape(shape):
    """Whether a shape asks for a real allocation of more than 100 MB (no
    finding, and this machine's memory is shared): the product of its
    plain ints, the others taken as 1."""
    items = shape if isinstance(shape, (tuple, list)) else [shape]
    n = 1
    for v in items:
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            v = int(v)
            if v <= 0:
                return False
            n *= v
    return 10**8 / 16 < n < 2**63


def _safe_arange(args):
    # A count above this would allocate for real; never call it.
    try:
        vals = []
        for a in args[:3]:
            if isinstance(a, (np.generic, np.ndarray)) or type(a) in (int, float, bool):
                vals.append(float(a))
            elif a is None:
                vals.append(None)
            else:
                return True  # refused before anything is allocated
        if not vals:
            return True
        start, stop, step = (0, vals[0], 1) if len(vals) == 1 else (
            vals[0], vals[1], vals[2] if len(vals) > 2 and vals[2] is not None else 1)
        if stop is None:  # arange(n, None) is arange(0, n)
            start, stop = 0, start
        if start is None or stop is None:
            return True
        if step == 0 or not all(math.isfinite(x) for x in (start, stop, step)):
            return True
        return abs((stop - start) / step) < 1e6 or abs((stop - start) / step) > 2**64
    except Exception:
        return True


def target_device_fns(g):
    fn = g.pick([dlbridge.device_of, dlbridge.synchronize, dlbridge.prefetch,
                 dlbridge.advise, dlbridge.pin])
    x, lab = _tensorish(g)
    args = [x]
    labels = [lab]
    if fn is dlbridge.prefetch:
        d, dl = g.device()
        args.append(d)
        labels.append(dl)
        if g.chance(0.4):
            s, sl = _stream(g)
            args.append(s)
            labels.append(sl)
    elif fn is dlbridge.advise:
        a = g.pick(["set_read_mostly", "unset_accessed_by", "bogus", 1, None])
        args.append(a)
        labels.append(repr(a))
        if g.chance(0.5):
            d, dl = g.device()
            args.append(d)
            labels.append(dl)
    elif fn is dlbridge.pin and g.chance(0.5):
        k = g.pick(["cuda_host", "rocm_host", "cpu", (3, 0), None, 5])
        args.append(k)
        labels.append(repr(k))
    return fn, tuple(args), {}, "%s(%s)" % (fn.__name__, labels)


def target_share(g):
    r = g.rng.random()
    if r < 0.4:
        x, lab = g.dlb() if g.chance(0.8) else g.any()
        return dlbridge.share_export, (x,), {}, "share_export(%s)" % lab
    if r < 0.8:
        t = dlbridge.zeros(g.pick([(3,), (2, 3), (0,), ()]),
                           g.pick(["float32", "int4", "bool", "complex64"]),
                           shared=True)
        if g.chance(0.3):
            t = t[::-1] if t.ndim else t
        try:
            h, fd = dlbridge.share_export(t)
        except Exception:
            h, fd = b"", -1
        del t
        hl = "handle"
        if g.chance(0.4):
            b = bytearray(h)
            for _ in range(g.pick([1, 2, 5])):
                if b:
                    i = g.rng.randrange(len(b))
                    b[i] = g.rng.randrange(256)
            h = bytes(b) if g.chance(0.5) else b
            hl = "mutated_handle"
        elif g.chance(0.2):
            h = h[:g.rng.randrange(len(h) + 1)]
            hl = "cut_handle"
        elif g.chance(0.1):
            h, hl = g.any()
        fdv = fd
        if g.chance(0.1):
            fdv, fl = g.pick([-1, 2**31, 2**64, "3", None]), "badfd"
        else:
            fl = "fd"
        kw, kl = _kw(g, {"pin": lambda: (g.pick([None, "cuda_host", "cpu", 3]),
                                          "pin")})
        return (dlbridge.share_import, (h, fdv), kw,
                "share_import(%s,%s,%s)" % (hl, fl, kl), fd)
    fn = g.pick([dlbridge.set_sharing_pin, dlbridge.get_sharing_pin])
    if fn is dlbridge.get_sharing_pin:
        return fn, (), {}, "get_sharing_pin()"
    v = g.pick([None, "cuda_host", "rocm_host", "cpu", (3, 0), 3, "x"])
    return fn, (v,), {}, "set_sharing_pin(%r)" % (v,)


def target_load_npy(g):
    if g.chance(0.8):
        p = g.pick(g.npy_paths)
        lab = "tmpdir" if p == g.tmpdir else os.path.basename(p) or repr(p)
        if g.chance(0.2):
            p = os.fsencode(p)
        elif g.chance(0.2):
            h = g.hostile("path")
            h._items = [p]
            p, lab = h, "hostile_path"
    else:
        p, lab = g.any()
    kw, kl = _kw(g, {"mmap": lambda: _bool(g),
                     "pin": lambda: (g.pick([False, True, "cuda_host", "cpu",
                                             None, 2]), "pin")})
    return dlbridge.load_npy, (p,), kw, "load_npy(%s,%s)" % (lab, kl)


def target_rebuild(g):
    """The reconstructor every pickle of a Tensor names: reachable from any
    pickle stream, so its four arguments may be anything."""
    from dlbridge._dlbridge import _rebuild
    dt, dl = g.dtype() if g.chance(0.3) else (
        g.pick(DL_DTYPES), "dtype")
    shape = g.shape_ints()
    n = int(np.prod(shape)) if shape else 1
    try:
        item = dlbridge.empty(0, dt).itemsize if isinstance(dt, str) else 4
    except Exception:
        item = 4
    nbytes = n * item
    r = g.rng.random()
    if r < 0.3:
        data, lab = bytes(nbytes), "bytes"
    elif r < 0.45:
        data, lab = bytearray(nbytes + g.pick([0, 0, 1, -1])), "bytearray"
    elif r < 0.55:
        data, lab = pickle.PickleBuffer(bytearray(nbytes)), "PickleBuffer"
    elif r < 0.6:
        data = memoryview(bytearray(nbytes * 2 + 1))[1:nbytes + 1]
        lab = "unaligned"
    elif r < 0.65:
        data, lab = memoryview(bytearray(nbytes * 2))[::2], "strided"
    elif r < 0.75:
        data, lab = g.pick([g.numpy, g.dlb])()
    else:
        data, lab = g.any()
    if g.chance(0.2):
        shape, sl = g.shape()
    else:
        sl = repr(shape)
        shape = tuple(shape)
    flags = g.pick([0, 0, 1, 4, 5, 2, 8, -1, 2**63, 2**64])
    if g.chance(0.1):
        flags, fl = g.int_()
    return _rebuild, (data, dt, shape, flags), {}, "_rebuild(%s,%s,%s,%r)" % (
        lab, dl, sl, flags)


def target_misc(g):
    fn = g.pick([dlbridge.runtimes, dlbridge.get_include,
                 lambda: dlbridge.DLDeviceType(g.pick([1, 2, 5, 18, 19])),
                 lambda: dlbridge.Tensor(),
                 lambda: dlbridge.Tensor.__new__(dlbridge.Tensor)])
    return fn, (), {}, "misc"


def _tensor_for(g):
    t, lab = g.dlb()
    return t, lab


def target_method(g):
    t, tl = _tensor_for(g)
    m = g.pick(METHODS)
    fn, args, kw, label = m(g, t)
    return fn, args, kw, "%s.%s" % (tl, label)


def _m_dlpack(g, t):
    if g.chance(0.4):
        # What consumers ask: mostly accepted.
        kw = {"max_version": g.pick([None, (1, 0), (1, 3), (0, 8), (2, 1)])}
        if g.chance(0.4):
            kw["dl_device"] = g.pick([(1, 0), t.__dlpack_device__()])
        if g.chance(0.4):
            kw["copy"] = g.pick([None, True, False])
        if g.chance(0.3):
            kw["stream"] = g.pick([None, -1, 1, 2])
        return t.__dlpack__, (), kw, "__dlpack__(%r)" % (kw,)
    kw, kl = _kw(g, {"stream": lambda: _stream(g), "max_version": lambda: _max_version(g),
                     "dl_device": lambda: _dl_device(g), "copy": lambda: _copy_kw(g)})
    args = ()
    if g.chance(0.05):
        args = (None,)
    return t.__dlpack__, args, kw, "__dlpack__(%s)" % kl


def _m_simple(name):
    def m(g, t):
        args = ()
        if g.chance(0.05):
            v, lab = g.any()
            args = (v,)
        return getattr(t, name), args, {}, "%s(%d)" % (name, len(args))
    return m


def _m_attr(g, t):
    name = g.pick(["shape", "strides", "dtype", "device", "ndim", "size",
                   "nbytes", "itemsize", "readonly", "data_ptr", "byte_offset",
                   "T", "is_shared", "__cuda_array_interface__",
                   "__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__"])
    return (lambda: getattr(t, name)), (), {}, "attr(%s)" % name


def _m_setattr(g, t):
    name = g.pick(["shape", "dtype", "readonly", "data_ptr", "x", "T"])
    v, lab = g.any()

    def f():
        setattr(t, name, v)
    return f, (), {}, "setattr(%s,%s)" % (name, lab)


def _m_getitem(g, t):
    k, kl = g.slice_key()
    return operator.getitem, (t, k), {}, "[%s]" % kl


def _fitting_value(g, shape):
    """A value of the given shape (or one that broadcasts to it): nested
    lists, a NumPy array, a PyTorch tensor, a dlbridge tensor of any
    dtype, or a view of the destination itself."""
    shape = list(shape)
    if g.chance(0.3) and shape:
        shape = shape[g.rng.randrange(len(shape)):]
        if shape and g.chance(0.5):
            shape[0] = 1
    n = int(np.prod(shape)) if shape else 1
    how = g.pick(["list", "np", "torch", "dlb", "dlb", "scalar"])
    base = np.arange(n, dtype=g.pick(NP_DTYPES)).reshape(shape)
    if how == "list":
        return base.tolist(), "fit_list%r" % (tuple(shape),)
    if how == "np":
        return (base[::-1] if base.ndim and g.chance(0.3) else base), \
            "fit_np(%s,%r)" % (base.dtype.str, tuple(shape))
    if how == "torch" and torch is not None:
        return torch.from_numpy(np.ascontiguousarray(base)), "fit_torch(%r)" % (
            tuple(shape),)
    if how in ("dlb", "torch"):
        dt = g.pick(DL_DTYPES[:33])
        try:
            v = dlbridge.asarray(base.astype("f8").tolist(), dtype=dt) \
                if n else dlbridge.zeros(tuple(shape), dt)
        except Exception:
            v = dlbridge.asarray(base)
            dt = base.dtype.str
        return v, "fit_dlb(%s,%r)" % (dt, tuple(shape))
    return g.number()


def _m_setitem(g, t):
    k, kl = g.slice_key() if g.chance(0.8) else ((Ellipsis, "..."))
    r = g.rng.random()
    if r < 0.4:
        if g.chance(0.6):
            k = g.pick([Ellipsis, slice(None), slice(None, None, -1),
                        slice(1, None, 2), (Ellipsis, slice(None, 1)),
                        (None, Ellipsis)])
            if t.ndim and t.shape[0] and g.chance(0.3):
                k = g.rng.randrange(-t.shape[0], t.shape[0])
            kl = repr(k)
        try:
            shape = t[k].shape
        except Exception:
            shape = t.shape
        v, vl = _fitting_value(g, shape)
    else:
        v, vl = g.pick([g.number, g.nested, lambda: _tensorish(g), g.any])()
    if g.chance(0.1):
        v, vl = t[::-1] if t.ndim else t, "self_view"
    return operator.setitem, (t, k, v), {}, "[%s]=%s" % (kl, vl)


def _m_delitem(g, t):
    k, kl = g.slice_key()
    return operator.delitem, (t, k), {}, "del[%s]" % kl


def _m_contains(g, t):
    v, vl = g.pick([g.number, g.any])()
    return operator.contains, (t, v), {}, "contains(%s)" % vl


def _m_iter(g, t):
    def f():
        out = []
        for i, x in enumerate(t):
            out.append(x)
            if i > 100:
                break
        return out
    return f, (), {}, "iter"


def _m_permute(g, t):
    r = g.rng.random()
    if r < 0.4:
        axes = list(range(t.ndim))
        g.rng.shuffle(axes)
        if g.chance(0.3):
            axes = [a - t.ndim for a in axes]
        args = (tuple(axes),) if g.chance(0.5) else tuple(axes)
        lab = repr(axes)
    elif r < 0.7:
        items, lab = g.hostile_items(list(range(t.ndim)))
        args = g.pick([(items,), tuple(items), (tuple(items),)])
    else:
        v, lab = g.any()
        args = (v,) if g.chance(0.7) else (v, v)
    return t.permute, args, {}, "permute(%s)" % lab


def _m_reshape(g, t):
    r = g.rng.random()
    n = t.size
    if r < 0.4:
        shape = [n] if g.chance(0.5) else [-1]
        if g.chance(0.4):
            shape = [1] + shape + [1]
        if g.chance(0.2):
            shape = [-1, -1]
        args = (tuple(shape),) if g.chance(0.5) else tuple(shape)
        lab = repr(shape)
    elif r < 0.7:
        items, lab = g.hostile_items([n])
        args = g.pick([(items,), tuple(items), (tuple(items),)])
    else:
        v, lab = g.shape()
        args = (v,)
    return t.reshape, args, {}, "reshape(%s)" % lab


def _m_to(g, t):
    d, dl = g.device()
    kw, kl = _kw(g, {"copy": lambda: _copy_kw(g)})
    return t.to, (d,), kw, "to(%s,%s)" % (dl, kl)


def _m_stride(g, t):
    if g.chance(0.5):
        v, lab = g.int_()
        return t.stride, (v,), {}, "stride(%s)" % lab
    v, lab = g.any()
    return t.stride, (v,), {}, "stride(%s)" % lab


def _m_array(g, t):
    kw, kl = _kw(g, {"dtype": lambda: g.pick([
        lambda: (None, "None"), lambda: (np.float32, "np.float32"),
        lambda: (np.dtype("c16"), "c16"), lambda: (np.dtype("i1"), "i1"),
        lambda: (np.dtype("O"), "O"), lambda: (np.dtype("M8[s]"), "M8"),
        g.dtype])(), "copy": lambda: _copy_kw(g)})
    args = ()
    if g.chance(0.3) and "dtype" in kw:
        args = (kw.pop("dtype"),)
    return t.__array__, args, kw, "__array__(%d,%s)" % (len(args), kl)


def _m_numpy(g, t):
    how = g.pick(["asarray", "array", "from_dlpack", "torch", "torch_from"])

    def f():
        if how == "asarray":
            return np.asarray(t)
        if how == "array":
            return np.array(t, copy=True)
        if how == "from_dlpack":
            return np.from_dlpack(t)
        if torch is None or any(x < 0 for x in t.strides):
            # PyTorch aborts the process on negative strides (docs/peers.md).
            return None
        if how == "torch":
            return torch.from_dlpack(t)
        return torch.utils.dlpack.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    return f, (), {}, "peer(%s)" % how


def _m_buffer(g, t):
    flags = g.pick([0, 1, 4, 8, 0x18, 0x38, 0x58, 0x98, 0x118, 0x11d, 0x1d,
                    -1, 2**31, 2**63])

    def f():
        if g.chance(0.5):
            m = memoryview(t)
            out = (m.format, m.shape, m.strides, m.nbytes)
            if m.nbytes and m.ndim and m.shape[0] and g.chance(0.5):
                try:
                    m.tobytes()
                except NotImplementedError:
                    pass
            m.release()
            return out
        if helper is not None and g.chance(0.5):
            return helper.get_buffer(t, flags)
        m = t.__buffer__(flags)
        m.release()
        return m
    return f, (), {}, "buffer(%#x)" % flags


def _m_pickle(g, t):
    how = g.pick(["dumps", "p5", "reduce", "copy", "deepcopy", "deepcopy_memo"])
    proto = g.pick([0, 1, 2, 4, 5, -1, 99, "x", None])

    def f():
        if how == "dumps":
            return pickle.loads(pickle.dumps(t))
        if how == "p5":
            bufs = []
            s = pickle.dumps(t, protocol=5, buffer_callback=bufs.append)
            return pickle.loads(s, buffers=bufs)
        if how == "reduce":
            return t.__reduce_ex__(proto)
        if how == "copy":
            return copy.copy(t)
        if how == "deepcopy":
            return copy.deepcopy(t)
        return t.__deepcopy__(g.pick([{}, None, [], 1]))
    return f, (), {}, "pickle(%s,%r)" % (how, proto)


def _m_convert(g, t):
    fn = g.pick([bool, int, float, complex, len, repr, str, hash, list, iter,
                 operator.index, abs, operator.neg])
    return fn, (t,), {}, "%s()" % getattr(fn, "__name__", "fn")


def _m_compare(g, t):
    v, vl = g.any()
    op = g.pick([operator.eq, operator.ne, operator.lt, operator.add,
                 operator.mul, operator.matmul])
    return op, (t, v), {}, "%s(%s)" % (op.__name__, vl)


def _m_exchange(g, t):
    """The C exchange table and the C API capsule, driven from C by the
    test helper; `then` callbacks run between taking a borrowed view and
    reading it."""
    if helper is None:
        return (lambda: None), (), {}, "exchange(none)"
    how = g.pick(["roundtrip", "view", "flags", "to_managed", "borrow",
                  "check", "to_py", "capi_from", "alloc", "stream"])
    arg, alab = (t, "self") if g.chance(0.7) else g.any()
    holder = [arg]
    del arg

    def then():
        _mutated()
        if g.chance(0.5):
            holder.clear()
        gc.collect()
        if isinstance(t, dlbridge.Tensor) and g.chance(0.3):
            try:
                t[...] = 0
            except Exception:
                pass

    def fields():
        kw = {"data": np.zeros(32768, dtype=np.uint8)[16384:],
              "shape": g.pick([[4], [2, 2], [], [0], [-1], [2**62, 0]])}
        if g.chance(0.3):
            kw["version"] = g.pick([(1, 0), (0, 9), (2, 0), (1, 99)])
        if g.chance(0.3):
            kw["dtype"] = g.pick([(2, 32, 1), (0, 4, 1), (77, 8, 1), (6, 1, 1),
                                  (2, 32, 2)])
        if g.chance(0.2):
            kw["flags"] = g.pick([1, 2, 4, 8, 2**63])
        if g.chance(0.2):
            kw["deleter"] = g.pick(["none", "clear_error", "leave_error"])
        if g.chance(0.1):
            kw["device"] = g.pick([(2, 0), (3, 0), (13, 0), (1, 3)])
        return kw

    def f():
        # The helper drives the table of the type it is given and turns a
        # table function that leaves an error behind into a SystemError:
        # another type's table (the helper's deliberately broken fake one)
        # is not driven, only asked for (a type without one).
        other = type(holder[0]) if holder else int
        if hasattr(other, "__dlpack_c_exchange_api__") and other is not dlbridge.Tensor:
            other = int
        T = dlbridge.Tensor if g.chance(0.9) else other
        if how == "roundtrip":
            return helper.exchange_roundtrip(T, holder[0])
        if how == "view":
            return helper.exchange_view(T, holder[0], then)
        if how == "flags":
            return helper.exchange_flags(holder[0] if other is not int else t)
        if how == "to_managed":
            return helper.capi_to_managed(holder[0], g.pick([0, 1, 2, 3, -1]))
        if how == "borrow":
            return helper.capi_borrow(holder[0], g.pick([0, 1, 2, 3]), then)
        if how == "check":
            return helper.capi_check(holder[0])
        if how == "to_py":
            kw = fields()
            kw.pop("deleter", None) if kw.get("deleter") == "leave_error" else None
            return helper.exchange_to_py(T, **kw)
        if how == "capi_from":
            kw = fields()
            if kw.get("deleter") == "leave_error":
                kw.pop("deleter")
            if g.chance(0.3):
                kw["legacy"] = True
                kw.pop("version", None)
                kw.pop("flags", None)
                kw["wrap_flags"] = g.pick([0, 1, 2, 4, 8])
            return helper.capi_from(**kw)
        if how == "alloc":
            return helper.exchange_alloc(
                T, g.pick([(3,), (2, 2), (), (0,), (-1,), (2**62, 4)]),
                g.pick([(2, 32, 1), (0, 4, 1), (77, 8, 1), (2, 32, 4)]),
                g.pick([(1, 0), (2, 0), (3, 0), (99, 0), (1, 1)]))
        return helper.exchange_stream(T, g.pick([1, 2, 13, 99]),
                                      g.pick([0, 1, -1]))
    return f, (), {}, "helper.%s(%s)" % (how, alab)


METHODS = [
    _m_dlpack, _m_dlpack, _m_simple("__dlpack_device__"), _m_attr, _m_attr,
    _m_setattr, _m_getitem, _m_getitem, _m_getitem, _m_setitem, _m_setitem,
    _m_setitem, _m_delitem, _m_contains, _m_iter, _m_permute, _m_reshape,
    _m_to, _m_stride, _m_array, _m_numpy, _m_buffer, _m_pickle, _m_convert,
    _m_compare, _m_simple("tolist"), _m_simple("item"), _m_simple("copy"),
    _m_simple("share_memory"), _m_simple("element_size"),
    _m_simple("numel"), _m_simple("dim"), _m_simple("is_contiguous"),
    _m_simple("__copy__"), _m_simple("__len__"), _m_exchange,
]

METHODS_BIG = [
    _m_dlpack, _m_getitem, _m_setitem, _m_reshape, _m_permute, _m_to,
    _m_array, _m_numpy, _m_buffer, _m_pickle, _m_simple("copy"),
    _m_simple("share_memory"), _m_exchange,
]

TARGETS = [
    (target_from_dlpack, 10), (target_asarray, 10), (target_ctor, 5),
    (target_full, 5), (target_arange, 4), (target_device_fns, 4),
    (target_share, 4), (target_load_npy, 3), (target_misc, 1),
    (target_rebuild, 3),
    (target_method, 40),
]


def _assign_targets(g, fn, args, kwargs):
    """Points each hostile object that mutates at something of this call:
    a list that holds it, another list, a tensor."""
    lists, tensors, hostiles = [], [], []

    def walk(v, depth):
        if depth > 4:
            return
        if isinstance(v, list):
            lists.append(v)
            for x in v:
                walk(x, depth + 1)
        elif isinstance(v, tuple):
            for x in v:
                walk(x, depth + 1)
        elif isinstance(v, dlbridge.Tensor) or type(v).__name__ == "PyCapsule":
            tensors.append(v)
        elif type(v).__name__.startswith("Hostile_"):
            hostiles.append(v)
            walk(v._items, depth + 1)
    for a in args:
        walk(a, 0)
    for a in kwargs.values():
        walk(a, 0)
    walk(getattr(fn, "__self__", None), 0)
    cands = lists + tensors
    for h in hostiles:
        if cands and g.chance(0.8):
            h._target = g.pick(cands)


_PyErr_Occurred = ctypes.pythonapi.PyErr_Occurred
_PyErr_Occurred.restype = ctypes.c_void_p
_PyErr_Occurred.argtypes = []


def _pending():
    """An exception left set with no error reported (by a destructor, say):
    ctypes raises it as the next C call returns."""
    try:
        _PyErr_Occurred()
    except BaseException as e:  # noqa: B902
        return "%s: %s" % (type(e).__name__, e)
    return None


_SKIP_REFS = (int, float, complex, str, bytes, bool, type(None), type,
              type(Ellipsis), slice, range)


def _tracked(args, kwargs):
    out = []

    def walk(v, depth):
        if depth > 3 or isinstance(v, _SKIP_REFS) or v is NotImplemented:
            return
        if isinstance(v, (np.generic, np.dtype)):
            return
        if torch is not None and isinstance(v, torch.dtype):
            return
        out.append(v)
        if isinstance(v, (list, tuple)):
            for x in v:
                walk(x, depth + 1)
    for a in args:
        walk(a, 0)
    for a in kwargs.values():
        walk(a, 0)
    return out


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------


class Stats:
    def __init__(self):
        self.calls = 0
        self.ok = 0
        self.raised = {}
        self.findings = []
        self.gen_errors = {}
        self.per_target = {}  # name -> [calls, returned]
        self.thread_calls = 0


def _target_name(tfn, label):
    if tfn is target_method:
        if "].[" in label or ").[" in label:
            rest = label.split(").", 1)[-1]
            if "]=" in rest:
                return "Tensor.__setitem__"
            return "Tensor.__getitem__"
        # "dlb(...).name(...)": the method's name
        rest = label.split(").", 1)[-1]
        for sep in "([":
            rest = rest.split(sep, 1)[0] if not rest.startswith(sep) else rest
        return "Tensor." + (rest[:12] if rest else "?")
    return label.split("(", 1)[0]


def _report(stats, log, label, finding):
    msg = "call %d: %s\n  -> %s" % (stats.calls, label, finding)
    stats.findings.append(msg)
    if log is not None:
        os.write(log, ("FINDING " + msg + "\n").encode("utf-8", "replace"))
    print("FINDING " + msg, file=sys.stderr, flush=True)


def _one(g, stats, log, check_refs):
    _trim_keep()
    pending = _pending()
    if pending is not None:
        _report(stats, log, "(freeing the arguments of the call before)",
                "an exception was left set: " + pending)
    tfn = g.rng.choices([t for t, _ in TARGETS], [w for _, w in TARGETS])[0]
    try:
        made = tfn(g)
    except SystemError as e:
        import traceback
        _report(stats, log, "(making the arguments of call %d)" % (stats.calls + 1),
                "SystemError: %s\n%s" % (e, "".join(traceback.format_tb(
                    e.__traceback__)[-4:])))
        return
    except Exception as e:  # a generator's own slip: not a finding
        key = "%s:%s" % (tfn.__name__, type(e).__name__)
        if key not in stats.gen_errors:
            print("generator %s: %r" % (key, e), file=sys.stderr)
        stats.gen_errors[key] = stats.gen_errors.get(key, 0) + 1
        return
    fd_to_close = None
    if len(made) == 5:
        fn, args, kwargs, label, fd_to_close = made
    else:
        fn, args, kwargs, label = made
    if fn is dlbridge.arange and not _safe_arange(args):
        return
    if fn in (dlbridge.empty, dlbridge.zeros, dlbridge.full) and \
            _huge_shape(args[0] if args else None):
        return
    _assign_targets(g, fn, args, kwargs)
    if POOL is not None:
        for v in list(args) + [getattr(fn, "__self__", None)]:
            if isinstance(v, dlbridge.Tensor):
                POOL.append(v)
    stats.calls += 1
    tname = _target_name(tfn, label)
    per = stats.per_target.setdefault(tname, [0, 0])
    per[0] += 1
    if log is not None:
        os.write(log, ("%d %s\n" % (stats.calls, label)).encode("utf-8",
                                                              "replace"))
    before_mut = MUTATIONS[0]
    tracked = _tracked(args, kwargs) if check_refs else []
    if tracked:
        gc.collect(1)
    counts = [sys.getrefcount(o) for o in tracked]
    finding = None
    armed = OOM[0] and g.chance(OOM[0])
    try:
        try:
            if armed:
                # Allocation n of this thread fails (the core's, CPython's
                # raw, mem or object domain): the call's error paths.
                domains = g.pick(OOM_DOMAINS)
                # A call makes a few blocks of the core, and many of Python.
                armed = (g.rng.randrange(1, 6 if domains == 1 else 60), domains)
                helper.oom_arm(*armed)
                try:
                    result = fn(*args, **kwargs)
                finally:
                    helper.oom_disarm()
            else:
                IN_CALL[0] = True
                try:
                    result = fn(*args, **kwargs)
                finally:
                    IN_CALL[0] = False
            if isinstance(result, tuple) and len(result) == 2 and \
                    isinstance(result[1], int) and fn is dlbridge.share_export:
                os.close(result[1])
            stats.ok += 1
            per[1] += 1
            # Touch what came back: its repr, its attributes.
            if isinstance(result, dlbridge.Tensor):
                _touch(result)
            del result
        except SystemError as e:
            finding = "SystemError: %s" % e
        except Exception as e:
            name = type(e).__name__
            stats.raised[name] = stats.raised.get(name, 0) + 1
            try:
                text = str(e)
            except Exception:  # an argument of the error whose repr raises
                text = ""
            if "error return without exception" in text or \
                    "returned a result with an exception set" in text:
                finding = "%s: %s" % (name, text)
            del e
    except BaseException as e:  # noqa: B902 - anything not an Exception
        if isinstance(e, KeyboardInterrupt) and not isinstance(e, Exception):
            raise
        finding = "%s (not an Exception): %s" % (type(e).__name__, e)
        del e
    finally:
        if fd_to_close is not None and fd_to_close >= 0:
            os.close(fd_to_close)
    pending = _pending()
    if pending is not None and finding is None:
        finding = "an exception was left set after the call: " + pending
    if _DOUBLE:
        finding = "a deleter ran twice or for no producer: %r" % _DOUBLE
        _DOUBLE.clear()
    if finding is None and tracked and MUTATIONS[0] == before_mut:
        after = [sys.getrefcount(o) for o in tracked]
        if after != counts:
            gc.collect()
            after = [sys.getrefcount(o) for o in tracked]
        if after != counts:
            diffs = [(type(o).__name__, b, a) for o, b, a in
                     zip(tracked, counts, after) if a != b]
            finding = "reference counts changed: %r" % diffs
        for o in tracked:
            if type(o) is bytearray and finding is None:
                # A buffer still exported after the call (never released)
                # keeps the bytearray from being resized.
                try:
                    o.append(0)
                    o.pop()
                except BufferError as e:
                    finding = "a bytearray is still exported: %s" % e
    del tracked
    if finding is not None:
        if armed:
            finding += " (allocation %d of domains %d failing)" % armed
        _report(stats, log, label, finding)


def _touch(t):
    try:
        repr(t)
        t.shape, t.strides, t.dtype, t.device, t.readonly, t.nbytes
        # tolist() makes a list per index up to the first empty extent:
        # (2**31, 4, 0) has no elements and 2**33 lists.
        lists = 1
        for e in t.shape:
            if e == 0 or lists > 4096:
                break
            lists *= e
        if t.size < 64 and lists <= 4096:
            t.tolist()
    except Exception:
        pass


# The chance that a call runs with one allocation failing (--oom), and the
# domains that may fail: the core's allocator (1), and with
# --oom-python CPython's raw (2), mem (4) and object (8) domains too,
# which every library in the process shares (a SystemError there may be
# CPython's, NumPy's or PyTorch's own).
OOM = [0.0]
OOM_DOMAINS = [1]

# Whether a timer signal runs Python code every 2 ms (--signals):
# inside dlbridge's long element walks, which check for signals.
SIGNALS = [False, 0]
IN_CALL = [False]


def _on_signal(signum, frame):
    SIGNALS[1] = n = SIGNALS[1] + 1
    _mutated()
    if n % 23 == 0 and IN_CALL[0]:
        raise RuntimeError("raised by a signal handler")
    if n % 97 == 0:
        gc.collect()
    elif n % 5 == 1:
        dlbridge.asarray([1.0, 2.0]).tolist()
    elif n % 5 == 2 and POOL:
        try:
            POOL[-1][...] = 0
        except Exception:
            pass


# Tensors the main thread used lately, for the other threads (--threads).
POOL = None


def _worker(seed, tmpdir, npy_paths, stats, log, stop):
    """Calls Tensor methods on the main thread's recent tensors (and on
    large ones, whose copies let go of the GIL) until stop is set."""
    g = Gen(random.Random(seed), tmpdir, npy_paths)
    while not stop.is_set():
        if not POOL or g.chance(0.02):
            POOL.append(dlbridge.zeros(g.pick([(1 << 20,), (512, 1024), (3,)]),
                                       g.pick(["float32", "int8", "int4"])))
            continue
        try:
            t = g.pick(list(POOL))
            # Walks of every element (tolist, in) of a large tensor would
            # hold the GIL for seconds.
            fn, args, kwargs, label = g.pick(
                METHODS if t.size <= 4096 else METHODS_BIG)(g, t)
        except Exception:
            continue
        try:
            r = fn(*args, **kwargs)
            del r
        except SystemError as e:
            _report(stats, log, "thread: " + label, "SystemError: %s" % e)
        except Exception:
            pass
        except BaseException as e:  # noqa: B902
            _report(stats, log, "thread: " + label,
                    "%s (not an Exception)" % type(e).__name__)
        stats.thread_calls += 1


def run(seed, seconds=None, calls=None, log_path=None, check_refs=True,
        hang=60, quiet=True, threads=0, oom=0.0, signals=False):
    """Runs the fuzzer for `seconds` or `calls` calls from `seed`; returns
    (calls made, list of findings, counts of the exceptions raised).
    threads > 0 starts that many threads calling Tensor methods on the
    tensors the main thread uses meanwhile (reference counts are then not
    compared, and the run is not reproducible call for call). oom is the
    chance that a call runs with one allocation failing (the test helper's
    allocators: the core's and CPython's three domains)."""
    global POOL
    import collections
    import threading
    rng = random.Random(seed)
    stats = Stats()
    log = None
    if log_path:
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    old_pin = dlbridge.get_sharing_pin()
    unraisable = sys.unraisablehook

    def hook(u):
        # A deleter's own error is reported this way, as it should be;
        # a SystemError is not.
        if isinstance(u.exc_value, SystemError):
            _report(stats, log, "(unraisable)", "SystemError: %s (%r)" % (
                u.exc_value, u.object))
    sys.unraisablehook = hook
    with tempfile.TemporaryDirectory() as tmpdir, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = Gen(rng, tmpdir)
        end = None if seconds is None else time.monotonic() + seconds
        workers, stop = [], threading.Event()
        if signals:
            import signal
            SIGNALS[0] = True
            old_handler = signal.signal(signal.SIGALRM, _on_signal)
            signal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)
        if oom and helper is not None:
            OOM[0] = oom
            dlbridge._dlbridge._set_allocator(helper.oom_allocator())
        if threads:
            check_refs = False
            POOL = collections.deque(maxlen=64)
            interval = sys.getswitchinterval()
            sys.setswitchinterval(1e-5)
            for i in range(threads):
                w = threading.Thread(target=_worker, daemon=True, args=(
                    seed * 1000 + i, tmpdir, g.npy_paths, stats, log, stop))
                w.start()
                workers.append(w)
        try:
            while True:
                if calls is not None and stats.calls >= calls:
                    break
                if end is not None and time.monotonic() >= end:
                    break
                if hang:
                    faulthandler.dump_traceback_later(hang, exit=True)
                _one(g, stats, log, check_refs)
                if not quiet and stats.calls % 1000 == 0:
                    print("%d calls, %d findings" % (stats.calls,
                                                     len(stats.findings)),
                          file=sys.stderr, flush=True)
        finally:
            stop.set()
            for w in workers:
                w.join()
            if SIGNALS[0]:
                signal.setitimer(signal.ITIMER_REAL, 0, 0)
                signal.signal(signal.SIGALRM, old_handler)
                SIGNALS[0] = False
            if OOM[0]:
                OOM[0] = 0.0
                dlbridge._dlbridge._set_allocator(None)
            if threads:
                POOL = None
                sys.setswitchinterval(interval)
            if hang:
                faulthandler.cancel_dump_traceback_later()
            sys.unraisablehook = unraisable
            try:
                dlbridge.set_sharing_pin(old_pin)
            except Exception:
                pass
            gc.collect()
            if log is not None:
                os.close(log)
    run.stats = stats
    return stats.calls, stats.findings, stats.raised


def build_emulators(outdir):
    """Builds tests/emu's CUDA driver and HIP runtime (host memory behind
    the real entry points; device memory has no access rights, so a host
    touch crashes) and points dlbridge at them. Call before the first GPU
    call of the process."""
    import shutil
    import subprocess
    repo = os.path.abspath(os.path.join(HERE, "..", ".."))
    emu = os.path.join(repo, "tests", "emu")
    cc = shutil.which(os.environ.get("CC", "cc"))
    for name, source, extra, var in (
            ("libcuda.so.1", "emu_cuda.c", ["-DEMU_PROC_ADDRESS"],
             "DLBRIDGE_CUDA_LIBRARY"),
            ("libamdhip64.so.6", "emu_hip.c", [], "DLBRIDGE_HIP_LIBRARY")):
        path = os.path.join(outdir, name)
        subprocess.run(
            [cc, "-shared", "-fPIC", "-O1", "-D_GNU_SOURCE", *extra,
             "-I" + os.path.join(repo, "src"), "-I" + emu,
             os.path.join(emu, source), os.path.join(emu, "emu_core.c"),
             os.path.join(repo, "src", "backend", "host_maps.c"),
             "-fvisibility=hidden", "-Wl,-Bsymbolic", "-lpthread", "-o", path],
            check=True)
        os.environ[var] = path
    GPU[0] = True


# Whether the emulated runtimes are loaded: tensors then live on every kind.
GPU = [False]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--calls", type=int, default=None)
    ap.add_argument("--log", default=None,
                    help="write each call's description here before the call")
    ap.add_argument("--no-refs", action="store_true",
                    help="do not compare the inputs' reference counts")
    ap.add_argument("--gpu-emulated", action="store_true",
                    help="load tests/emu's CUDA driver and HIP runtime (built "
                    "here with cc): tensors of every memory kind")
    ap.add_argument("--oom", type=float, default=0.0,
                    help="the chance that a call runs with one allocation "
                    "failing (needs the test helper)")
    ap.add_argument("--oom-python", action="store_true",
                    help="with --oom, fail CPython's allocations too")
    ap.add_argument("--signals", action="store_true",
                    help="a timer signal every 2 ms whose handler "
                    "calls dlbridge, collects garbage or raises")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads calling Tensor methods on the tensors the "
                    "main thread uses meanwhile")
    ap.add_argument("--hang", type=float, default=60,
                    help="seconds one call may take before it counts as a hang")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(2**32)
    faulthandler.enable()
    if a.oom_python:
        OOM_DOMAINS[:] = [1, 2, 4, 8, 15]
    if a.gpu_emulated:
        emu_dir = tempfile.mkdtemp(prefix="dlb-emu-")
        build_emulators(emu_dir)
    warnings.simplefilter("ignore")
    t0 = time.monotonic()
    calls, findings, raised = run(seed, seconds=None if a.calls else a.seconds,
                                  calls=a.calls, log_path=a.log,
                                  check_refs=not a.no_refs, hang=a.hang,
                                  quiet=False, threads=a.threads, oom=a.oom,
                                  signals=a.signals)
    dt = time.monotonic() - t0
    print("seed %d: %d calls (%d in other threads) in %.0f s, %d findings; "
          "exceptions: %s" % (
        seed, calls, run.stats.thread_calls, dt, len(findings),
        ", ".join("%s %d" % kv for kv in sorted(raised.items()))))
    for name, (n, ok) in sorted(run.stats.per_target.items()):
        print("  %-28s %7d calls %7d returned" % (name, n, ok))
    for f in findings:
        print(f)
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()

"""Narrow dtypes (sub-byte, float8/6/4, bfloat16, complex32) convert to the
right values or raise: tolist, item, iteration, len, `in`, and NumPy's
__array__ never fall back to something else (an empty array, an object
array of 0-d Tensors)."""

import ctypes
import math
import struct

import numpy as np
import pytest

import dlbridge
from support import SUBBYTE_PADDED, capsule_of, measures_time, needs_torch, torch

INT, UINT, FLOAT, BFLOAT, COMPLEX, BOOL = 0, 1, 2, 4, 5, 6
F8 = {
    "float8_e3m4": 7, "float8_e4m3": 8, "float8_e4m3b11fnuz": 9,
    "float8_e4m3fn": 10, "float8_e4m3fnuz": 11, "float8_e5m2": 12,
    "float8_e5m2fnuz": 13, "float8_e8m0fnu": 14,
}
F6 = {"float6_e2m3fn": 15, "float6_e3m2fn": 16}
F4 = {"float4_e2m1fn": 17}
NAN = float("nan")
INF = float("inf")


def tensor_of(raw, code, bits, count, flags=0, shape=None):
    """A Tensor of `count` elements over the bytes `raw`."""
    data = np.frombuffer(bytes(raw), dtype=np.uint8).copy()
    shape = shape or (count,)
    strides = []
    acc = 1
    for n in reversed(shape):
        strides.insert(0, acc)
        acc *= n
    return dlbridge.from_dlpack(capsule_of(
        data, dtype=(code, bits, 1), shape=shape, strides=tuple(strides),
        flags=flags))


def pack(values, bits):
    """Packs unsigned bit patterns little-bit-endian, as DLPack does."""
    acc = 0
    for i, v in enumerate(values):
        acc |= (v & ((1 << bits) - 1)) << (i * bits)
    return acc.to_bytes((len(values) * bits + 7) // 8, "little")


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return type(a) is type(b) and a == b


def check_values(t, expected):
    got = t.tolist()
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert same(g, e), (t.dtype, got, expected)


# ---- values of every narrow type ------------------------------------------

# (bit pattern, value) pairs from the formats' definitions.
KNOWN = {
    "float8_e3m4": [(0x30, 1.0), (0x6F, 15.5), (0x70, INF), (0xF0, -INF),
                    (0x71, NAN), (0x01, 1 / 64), (0x80, -0.0), (0xB8, -1.5)],
    "float8_e4m3": [(0x38, 1.0), (0x77, 240.0), (0x78, INF), (0x79, NAN),
                    (0x01, 2.0 ** -9), (0xC0, -2.0), (0x7F, NAN)],
    "float8_e4m3b11fnuz": [(0x58, 1.0), (0x7F, 30.0), (0x80, NAN),
                           (0x01, 2.0 ** -13), (0xD8, -1.0), (0x00, 0.0)],
    "float8_e4m3fn": [(0x38, 1.0), (0x7E, 448.0), (0x7F, NAN), (0xFF, NAN),
                      (0x78, 256.0), (0x01, 2.0 ** -9), (0x80, -0.0)],
    "float8_e4m3fnuz": [(0x40, 1.0), (0x7F, 240.0), (0x80, NAN),
                        (0x01, 2.0 ** -10), (0xC0, -1.0)],
    "float8_e5m2": [(0x3C, 1.0), (0x7B, 57344.0), (0x7C, INF), (0xFC, -INF),
                    (0x7D, NAN), (0x01, 2.0 ** -16)],
    "float8_e5m2fnuz": [(0x40, 1.0), (0x7F, 57344.0), (0x80, NAN),
                        (0x01, 2.0 ** -17), (0xC0, -1.0)],
    "float8_e8m0fnu": [(0x7F, 1.0), (0x80, 2.0), (0x00, 2.0 ** -127),
                       (0xFE, 2.0 ** 127), (0xFF, NAN)],
    "float6_e2m3fn": [(0x08, 1.0), (0x1F, 7.5), (0x01, 0.125), (0x3F, -7.5),
                      (0x20, -0.0), (0x07, 0.875)],
    "float6_e3m2fn": [(0x0C, 1.0), (0x1F, 28.0), (0x01, 0.0625),
                      (0x3F, -28.0), (0x03, 0.1875)],
    "float4_e2m1fn": list(zip(range(16), [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                                          -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])),
}
CODES = {**F8, **F6, **F4}


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_small_floats_read_as_their_formats_define(name):
    code = CODES[name]
    bits = 8 if name in F8 else 6 if name in F6 else 4
    patterns = [p for p, _ in KNOWN[name]]
    values = [v for _, v in KNOWN[name]]
    t = tensor_of(pack(patterns, bits), code, bits, len(patterns))
    assert t.dtype == name and len(t) == len(patterns)
    check_values(t, values)
    # One element a byte (the padded layout) reads the same.
    padded = tensor_of(bytes(patterns), code, bits, len(patterns),
                       flags=SUBBYTE_PADDED if bits < 8 else 0)
    check_values(padded, values)
    for i, v in enumerate(values):
        assert same(t[i].item(), v) and same(float(t[i]), v)


TORCH_F8 = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
            "float8_e5m2fnuz", "float8_e8m0fnu"]


@needs_torch
@pytest.mark.parametrize("name", TORCH_F8)
def test_float8_matches_pytorch_for_every_pattern(name):
    raw = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    want = raw.view(getattr(torch, name)).to(torch.float64).tolist()
    t = tensor_of(raw.numpy().tobytes(), F8[name], 8, 256)
    check_values(t, want)


@pytest.mark.parametrize("bits", [1, 2, 4])
def test_narrow_ints_read_signed_and_unsigned(bits):
    n = 11
    patterns = [(i * 5 + 3) % (1 << bits) for i in range(n)]
    signed = [p - (1 << bits) if p >> (bits - 1) else p for p in patterns]
    raw = pack(patterns, bits)
    check_values(tensor_of(raw, UINT, bits, n), patterns)
    check_values(tensor_of(raw, INT, bits, n), signed)
    check_values(tensor_of(bytes(patterns), INT, bits, n, flags=SUBBYTE_PADDED), signed)


def test_int4_low_nibble_first():
    t = tensor_of(b"\x21\xf8", INT, 4, 4)
    assert t.tolist() == [1, 2, -8, -1]
    assert [x.item() for x in t] == [1, 2, -8, -1]
    assert len(t) == 4 and len(list(t)) == 4
    assert -8 in t and 7 not in t
    u = tensor_of(b"\x21\xf8", UINT, 4, 4)
    assert u.tolist() == [1, 2, 8, 15] and int(u[3]) == 15


def test_complex32_reads_half_pairs():
    raw = struct.pack("<4e", 1.5, -2.0, 0.25, 65504.0)
    t = tensor_of(raw, COMPLEX, 32, 2)
    assert t.dtype == "complex32"
    assert t.tolist() == [complex(1.5, -2.0), complex(0.25, 65504.0)]
    assert complex(t[1]) == complex(0.25, 65504.0)


def test_bfloat16_reads_through_every_path():
    raw = struct.pack("<3H", 0x3FC0, 0xC000, 0x7F80)
    t = tensor_of(raw, BFLOAT, 16, 3)
    check_values(t, [1.5, -2.0, INF])
    assert [float(x) for x in t] == [1.5, -2.0, INF]


def test_types_without_python_numbers_still_refuse():
    for dtype in ("float32x4", "handle"):
        t = dlbridge.zeros(2, dtype=dtype)
        with pytest.raises(TypeError, match="scalar type"):
            t.tolist()
        with pytest.raises(TypeError, match="no NumPy dtype and no Python number"):
            np.asarray(t, dtype=np.float64)


def test_small_floats_are_not_written_from_python_numbers():
    for dtype in ("float8_e4m3fn", "float6_e2m3fn", "float4_e2m1fn", "complex32"):
        with pytest.raises(TypeError, match="Python number type"):
            dlbridge.full(2, 1.0, dtype=dtype)
        with pytest.raises(TypeError, match="Python number type"):
            dlbridge.asarray([1.0, 2.0], dtype=dtype)


def raw_bytes(t):
    return ctypes.string_at(t.data_ptr + t.byte_offset, t.nbytes)


NARROW_INTS = [("int1", -1, 0), ("int2", -2, 1), ("int4", -8, 7),
               ("uint1", 0, 1), ("uint2", 0, 3), ("uint4", 0, 15)]


@pytest.mark.parametrize("dtype,lo,hi", NARROW_INTS)
def test_narrow_integers_are_written_from_python_numbers(dtype, lo, hi):
    bits = int(dtype.lstrip("uint"))
    values = list(range(lo, hi + 1)) * 3
    # Packed little-bit-endian, the bits past the last unit zero.
    t = dlbridge.asarray(values, dtype=dtype)
    assert t.dtype == dtype and t.tolist() == values
    assert raw_bytes(t) == pack(values, bits)
    for v in (lo, hi):
        f = dlbridge.full((7,), v, dtype=dtype)
        assert f.tolist() == [v] * 7 and raw_bytes(f) == pack([v] * 7, bits)
    assert dlbridge.arange(lo, hi + 1, dtype=dtype).tolist() == list(range(lo, hi + 1))
    nested = [[hi, lo, hi], [lo, lo, hi]]
    assert dlbridge.asarray(nested, dtype=dtype).tolist() == nested
    # Floats truncate toward zero; out of range and NaN raise.
    assert dlbridge.full(3, hi + 0.75, dtype=dtype).tolist() == [hi] * 3
    for bad in (lo - 1, hi + 1, 2 ** 70, -(2 ** 70), hi + 1.5, -1e300):
        with pytest.raises(OverflowError, match=dtype):
            dlbridge.full(2, bad, dtype=dtype)
        with pytest.raises(OverflowError, match=dtype):
            dlbridge.asarray([lo, bad], dtype=dtype)
    with pytest.raises(ValueError, match="NaN"):
        dlbridge.full(2, NAN, dtype=dtype)
    with pytest.raises(TypeError, match="complex"):
        dlbridge.asarray([1j], dtype=dtype)


@pytest.mark.parametrize("dtype,lo,hi", NARROW_INTS)
def test_narrow_integers_are_assigned_from_python_numbers(dtype, lo, hi):
    bits = int(dtype.lstrip("uint"))
    # Rows of 8 units start on a byte whatever the width.
    t = dlbridge.zeros((3, 8), dtype=dtype)
    t[1] = hi
    t[2] = [lo, hi] * 4
    want = [[0] * 8, [hi] * 8, [lo, hi] * 4]
    assert t.tolist() == want
    assert raw_bytes(t) == pack([v for row in want for v in row], bits)
    # Values of another dtype convert through Python numbers.
    t[0] = dlbridge.asarray([hi] * 8, dtype="int32")
    assert t.tolist()[0] == [hi] * 8
    t[...] = lo
    assert t.tolist() == [[lo] * 8] * 3
    with pytest.raises(OverflowError, match=dtype):
        t[0] = hi + 1
    assert t.tolist() == [[lo] * 8] * 3
    # A column is no compact run of bits: no view writes it.
    with pytest.raises(ValueError, match="compact run"):
        t[:, 0] = hi
    # Padded units (a byte each) hold the value sign-extended.
    p = tensor_of(bytes(4), INT if dtype[0] == "i" else UINT, bits, 4,
                  flags=SUBBYTE_PADDED)
    p[1:3] = lo
    assert p.tolist() == [0, lo, lo, 0]
    assert raw_bytes(p)[1] == lo & 0xFF


# ---- packed iteration, indexing and layout ----------------------------------

def test_packed_rows_that_start_inside_a_byte_are_read_only_copies():
    # 3 x 3 int4: row 1 starts at bit 12.
    values = [[1, -2, 3], [-4, 5, -6], [7, -8, 0]]
    flat = [v & 15 for row in values for v in row]
    t = tensor_of(pack(flat, 4), INT, 4, 9, shape=(3, 3))
    assert t.tolist() == values
    assert len(t) == 3 and [r.tolist() for r in t] == values
    assert t[1].tolist() == [-4, 5, -6] and t[1].readonly
    assert t[-1, 1].item() == -8 and t[2, -1].item() == 0
    assert t[..., 1].tolist() == [-2, 5, -8]
    assert t[0, ...].tolist() == [1, -2, 3]
    with pytest.raises(IndexError, match="out of bounds"):
        t[3]
    with pytest.raises(IndexError, match="out of bounds"):
        t[1, -4]
    # With a slice that starts inside a byte the elements are copied out;
    # the index is checked there too.
    for key, words in (((3, slice(1, None)), "index 3 is out of bounds for axis 0 with size 3"),
                       ((-4, slice(1, None)), "index -4 is out of bounds for axis 0"),
                       ((slice(1, None), 3), "index 3 is out of bounds for axis 1")):
        with pytest.raises(IndexError, match=words):
            t[key]
    assert t[2, 1:].tolist() == [-8, 0] and t[1:, 2].tolist() == [-6, 0]
    with pytest.raises(ValueError, match="read-only"):
        t[1][0] = 3


def test_packed_views_are_compact_runs_from_a_byte():
    # 4 x 4 int4: every row starts on a byte, so rows and runs of rows are
    # views (writable, sharing the data); columns and steps are copies.
    values = [[(4 * r + c) % 16 - 8 for c in range(4)] for r in range(4)]
    flat = [v & 15 for row in values for v in row]
    t = tensor_of(pack(flat, 4), INT, 4, 16, shape=(4, 4))
    for key, offset in ((1, 2), (slice(1, 3), 2), (-1, 6), (slice(2, None), 4)):
        v = t[key]
        assert not v.readonly and v.data_ptr == t.data_ptr
        assert v.byte_offset == offset
        assert v.tolist() == np.array(values)[key].tolist()
    empty = t[4:]
    assert empty.shape == (0, 4) and not empty.readonly
    for key in ((slice(None), 1), slice(None, None, 2), slice(None, None, -1),
                (slice(1, 3), slice(1, 3)), (Ellipsis, slice(None, None, 3)),
                (slice(3, 0, -2), slice(None, None, -1))):
        c = t[key]
        assert c.readonly and c.data_ptr != t.data_ptr
        assert c.tolist() == np.array(values)[key].tolist(), key
    # Writing through a view changes those units and no others.
    t[1:3] = t[2:4].copy()
    t[0] = t[3].copy()
    want = [values[3], values[2], values[3], values[3]]
    assert t.tolist() == want
    # 3 x 3: rows 0 and 2 start on a byte; row 1 at bit 12 is a copy.
    odd = tensor_of(pack(flat[:9], 4), INT, 4, 9, shape=(3, 3))
    assert not odd[2].readonly and odd[2].byte_offset == 3
    assert odd[1].readonly
    odd[2] = odd[0].copy()
    assert odd.tolist()[2] == odd.tolist()[0]


def test_packed_float6_elements_across_bytes():
    patterns = [0x1F, 0x01, 0x08, 0x3F, 0x20]
    t = tensor_of(pack(patterns, 6), F6["float6_e2m3fn"], 6, 5)
    check_values(t, [7.5, 0.125, 1.0, -7.5, -0.0])
    assert [x.item() for x in t] == [7.5, 0.125, 1.0, -7.5, -0.0]
    assert 1.0 in t and 2.0 not in t


def test_packed_copy_keeps_the_values():
    t = tensor_of(b"\x21\xf8\x05", INT, 4, 5)
    assert t.copy().tolist() == [1, 2, -8, -1, 5]


# ---- NumPy ------------------------------------------------------------------

NUMPY_TYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
               "uint32", "uint64", "float16", "float32", "float64",
               "complex64", "complex128"]


@pytest.mark.parametrize("dtype", NUMPY_TYPES)
def test_numpy_types_convert_in_place(dtype):
    t = dlbridge.arange(6, dtype=dtype if dtype != "bool" else "int8")
    if dtype == "bool":
        t = dlbridge.asarray([True, False, True])
    a = np.asarray(t)
    assert a.dtype == np.dtype(dtype) and a.tolist() == t.tolist()
    assert a.ctypes.data == t.data_ptr
    c = np.array(t, copy=True)
    assert c.ctypes.data != t.data_ptr and c.tolist() == t.tolist()
    assert np.asarray(t, copy=False).ctypes.data == t.data_ptr


def test_numpy_copy_false_with_another_dtype_raises():
    t = dlbridge.arange(4, dtype="int32")
    with pytest.raises(ValueError):
        np.asarray(t, dtype=np.float64, copy=False)
    assert np.asarray(t, dtype=np.float64).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_numpy_sees_read_only_tensors_read_only():
    t = dlbridge.from_dlpack(capsule_of(np.arange(3.0), flags=1))
    assert not np.asarray(t).flags.writeable


NARROW = [("bfloat16", BFLOAT, 16, struct.pack("<2H", 0x3FC0, 0xC000), [1.5, -2.0]),
          ("float8_e4m3fn", 10, 8, b"\x38\x7e", [1.0, 448.0]),
          ("float8_e5m2", 12, 8, b"\x3c\xc0", [1.0, -2.0]),
          ("float4_e2m1fn", 17, 4, b"\x73", [1.5, 6.0]),
          ("float6_e3m2fn", 16, 6, pack([0x0C, 0x1F], 6), [1.0, 28.0]),
          ("int4", INT, 4, b"\xf8", [-8, -1]),
          ("uint2", UINT, 2, b"\x0e", [2, 3]),
          ("complex32", COMPLEX, 32, struct.pack("<4e", 1, 2, 3, 4), [1 + 2j, 3 + 4j])]


@pytest.mark.parametrize("name,code,bits,raw,values", NARROW, ids=[n[0] for n in NARROW])
def test_numpy_without_the_dtype_refuses_or_widens(name, code, bits, raw, values):
    t = tensor_of(raw, code, bits, 2)
    with pytest.raises(TypeError, match="NumPy has no %s dtype" % name):
        np.asarray(t)
    with pytest.raises(TypeError, match="NumPy has no %s dtype" % name):
        np.array(t)
    # dtype=None is no dtype.
    with pytest.raises(TypeError, match="NumPy has no %s dtype" % name):
        t.__array__(None)
    wide = np.complex128 if name == "complex32" else np.float64
    a = np.asarray(t, dtype=wide)
    assert a.dtype == wide and a.tolist() == values
    # Refused by name before any list is made (NumPy's own refusal of a
    # list also says copy=False).
    with pytest.raises(ValueError, match="%s elements become a NumPy dtype only in a copy, "
                                         "and copy=False forbids one" % name):
        np.asarray(t, dtype=wide, copy=False)
    if name.startswith(("int", "uint")):
        assert np.asarray(t, dtype=np.int8).tolist() == values


@pytest.mark.parametrize("shape", [(0, 3), (2, 0, 3), (3, 0), (0,)])
def test_numpy_widening_an_empty_tensor_keeps_its_shape(shape):
    # The values go through lists, which stop at the first empty dimension:
    # (0, 3) came out as (0,).
    for dtype in ("bfloat16", "int4"):
        a = np.asarray(dlbridge.zeros(shape, dtype=dtype), dtype=np.float32)
        assert (a.shape, a.dtype) == (shape, np.float32)


def test_numpy_asarray_of_a_packed_tensor_is_never_empty():
    t = tensor_of(b"\x21\xf8", INT, 4, 4)
    a = np.asarray(t, dtype=np.int16)
    assert a.shape == (4,) and a.tolist() == [1, 2, -8, -1]


def test_array_method_signature():
    t = dlbridge.arange(3, dtype="int32")
    assert t.__array__().dtype == np.int32
    assert t.__array__(np.int64).dtype == np.int64
    assert t.__array__(None, copy=True).ctypes.data != t.data_ptr
    with pytest.raises(TypeError):
        t.__array__(copy=1)
    with pytest.raises(TypeError):
        t.__array__(None, None, None)


@measures_time
@pytest.mark.parametrize("op", ["in", "tolist"])
def test_long_packed_loops_notice_signals(op):
    import signal
    import time

    # Uninterrupted, each takes about 0.7 s on one 2026 core (`in` over
    # four times the elements: it builds no lists).
    t = dlbridge.zeros((2, 1 << (26 if op == "in" else 24)), dtype="int4")
    run = {"in": lambda: 5 in t, "tolist": t.tolist}[op]
    limit = {"in": 1.0, "tolist": 0.35}[op]

    class Stop(Exception):
        pass

    def stop(signum, frame):
        raise Stop

    old = signal.signal(signal.SIGALRM, stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        start = time.monotonic()
        with pytest.raises(Stop):
            run()
        assert time.monotonic() - start < limit
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_numpy_of_memory_the_cpu_cannot_read_raises(helper):
    for dtype in ((2, 32, 1), (4, 16, 1)):
        t = dlbridge.from_dlpack(helper.make_capsule(data=0x1000, shape=(2,), dtype=dtype, device=(2, 0)))
        with pytest.raises(BufferError, match="CPU cannot read"):
            np.asarray(t)
        with pytest.raises(BufferError, match="CPU cannot read"):
            np.asarray(t, dtype=np.float64)


def _padded_int4(values):
    raw = np.array([v & 0xFF for v in values], dtype=np.uint8)
    return dlbridge.from_dlpack(capsule_of(raw, dtype=(0, 4, 1), flags=SUBBYTE_PADDED))


def test_assignment_between_padded_and_packed_sub_byte_units():
    # t[...] = value reads and writes each side as its flags say: padded
    # units take a byte each (the value sign-extended in it), packed ones
    # share bytes.
    want = [1, 2, 3, 4, 5, 6, 7, -1]
    src = _padded_int4(want)
    padded = _padded_int4([0] * 8)
    padded[...] = src
    assert padded.tolist() == want
    packed = dlbridge.zeros(8, dtype="int4")
    packed[...] = src
    assert packed.tolist() == want
    back = _padded_int4([0] * 8)
    back[...] = packed
    assert back.tolist() == want
    # The bytes a padded int4 tensor holds: each value sign-extended.
    raw = np.zeros(8, dtype=np.uint8)
    seen = dlbridge.from_dlpack(capsule_of(raw, dtype=(0, 4, 1), flags=SUBBYTE_PADDED))
    seen[...] = packed
    assert raw.tolist() == [1, 2, 3, 4, 5, 6, 7, 255]
    part = _padded_int4(want)
    part[1:3] = src[5:7]
    assert part.tolist() == [1, 6, 7, 4, 5, 6, 7, -1]
    strided = _padded_int4([0] * 8)
    strided[:4] = src[::2]
    assert strided.tolist() == [1, 3, 5, 7, 0, 0, 0, 0]
    # Broadcast from a packed value into a padded tensor.
    one = dlbridge.zeros(1, dtype="int4")
    one[...] = src[7:8]
    wide = _padded_int4([0] * 8)
    wide[...] = one
    assert wide.tolist() == [-1] * 8

"""dtype= takes what users pass to NumPy and PyTorch: names, NumPy codes,
dtypes and scalar types, PyTorch dtypes and Python types, in every
function that takes a dtype; anything else fails with the accepted forms
listed."""

import re
import sys

import numpy as np
import pytest

from support import dlbridge, needs_torch, torch

# Every NumPy type dlbridge has, by dtype.
NUMPY_TYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
               np.uint32, np.uint64, np.float16, np.float32, np.float64, np.complex64,
               np.complex128, np.byte, np.ubyte, np.short, np.ushort, np.intc, np.uintc,
               np.int_, np.uint, np.longlong, np.ulonglong, np.intp, np.uintp, np.half,
               np.single, np.double, np.csingle, np.cdouble]

NUMPY_CODES = ["?", "b", "B", "h", "H", "i", "I", "l", "L", "q", "Q", "p", "P", "e", "f",
               "d", "F", "D", "b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2",
               "f4", "f8", "c8", "c16", "byte", "ubyte", "short", "ushort", "intc", "uintc",
               "int", "long", "ulong", "longlong", "ulonglong", "intp", "uintp", "half",
               "single", "float", "double", "csingle", "complex", "cdouble"]
NATIVE = "<" if sys.byteorder == "little" else ">"
FOREIGN = ">" if sys.byteorder == "little" else "<"

# Every function that takes a dtype, called with one.
MAKERS = {
    "empty": lambda d: dlbridge.empty((2,), dtype=d),
    "zeros": lambda d: dlbridge.zeros((2,), d),
    "full": lambda d: dlbridge.full((2,), 1, dtype=d),
    "arange": lambda d: dlbridge.arange(2, dtype=d),
    "asarray values": lambda d: dlbridge.asarray([0, 1], dtype=d),
}


def made(maker, dtype):
    return MAKERS[maker](dtype).dtype


@pytest.mark.parametrize("maker", sorted(MAKERS))
@pytest.mark.parametrize("code", NUMPY_CODES)
def test_numpy_codes_and_aliases_mean_what_numpy_says(maker, code):
    assert made(maker, code) == np.dtype(code).name


@pytest.mark.parametrize("code", ["f4", "i8", "u2", "c16", "?", "d", "b1"])
def test_native_and_unordered_marks_are_accepted(code):
    for mark in (NATIVE, "=", "|"):
        assert made("empty", mark + code) == np.dtype(code).name


@pytest.mark.parametrize("dtype", ["f4", "i8", "u2", "c8", "d", "e"])
def test_foreign_byte_order_is_refused(dtype):
    for bad in (FOREIGN + dtype, np.dtype(FOREIGN + dtype)):
        with pytest.raises(ValueError, match="byte order"):
            dlbridge.empty(2, dtype=bad)
    # The same dtype in native order is fine.
    assert made("empty", np.dtype(NATIVE + dtype)) == np.dtype(dtype).name


@pytest.mark.parametrize("code", ["i1", "b", "u1", "B", "?", "b1"])
def test_a_foreign_mark_on_a_one_byte_type_orders_nothing(code):
    # As NumPy reads it, and as load_npy takes it in a header.
    assert made("zeros", FOREIGN + code) == np.dtype(FOREIGN + code).name
    for bigger in ("i2", "u2", "f2"):
        with pytest.raises(ValueError, match="byte order"):
            dlbridge.zeros(1, dtype=FOREIGN + bigger)


@pytest.mark.parametrize("maker", sorted(MAKERS))
@pytest.mark.parametrize("t", NUMPY_TYPES, ids=lambda t: t.__name__)
def test_numpy_scalar_types_and_dtypes(maker, t):
    assert made(maker, t) == np.dtype(t).name
    assert made(maker, np.dtype(t)) == np.dtype(t).name


@pytest.mark.parametrize("maker", sorted(MAKERS))
@pytest.mark.parametrize("t", [bool, int, float, complex])
def test_python_types_mean_what_numpy_makes_of_them(maker, t):
    assert made(maker, t) == np.dtype(t).name


def torch_dtypes():
    if torch is None:
        return []
    return sorted({v for v in vars(torch).values() if isinstance(v, torch.dtype)}, key=str)


def dlbridge_knows(name):
    try:
        dlbridge.empty(1, dtype=name)
    except ValueError:
        return False
    return True


@needs_torch
@pytest.mark.parametrize("d", torch_dtypes(), ids=str)
def test_every_torch_dtype_with_a_dlpack_type(d):
    name = str(d).split(".", 1)[1]
    if not dlbridge_knows(name):
        with pytest.raises(ValueError, match="accepted|dtype takes"):
            dlbridge.empty(1, dtype=d)
        return
    t = dlbridge.empty(3, dtype=d)
    assert t.dtype == name
    # What PyTorch makes of the tensor agrees, where it can import it.
    if d in (torch.bool, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
             torch.float16, torch.bfloat16, torch.float32, torch.float64,
             torch.complex64, torch.complex128):
        assert torch.from_dlpack(t).dtype == d


@needs_torch
def test_torch_dtypes_in_every_maker():
    for maker in ("empty", "zeros", "full", "arange", "asarray values"):
        assert made(maker, torch.bfloat16) == "bfloat16"
        assert made(maker, torch.float64) == "float64"
        assert made(maker, torch.int16) == "int16"
    assert made("empty", torch.float8_e4m3fn) == "float8_e4m3fn"
    assert made("empty", torch.float8_e5m2) == "float8_e5m2"


def test_dtype_of_a_dlpack_import_through_asarray():
    a = np.arange(4, dtype=np.int32)
    assert dlbridge.asarray(a, dtype=np.int32).dtype == "int32"
    assert dlbridge.asarray(a, dtype="i4").dtype == "int32"
    assert dlbridge.asarray(a, dtype="i8").dtype == "int64"


def test_pickled_dtype_names_still_rebuild():
    import pickle
    t = dlbridge.arange(3, dtype="u2")
    assert pickle.loads(pickle.dumps(t)).tolist() == [0, 1, 2]


class FakeDtype:
    """A dtype-like object: only a name."""
    name = "int16"


def test_dtype_like_objects_with_a_name():
    assert made("empty", FakeDtype()) == "int16"


@pytest.mark.parametrize("bad, exc", [
    ("float3", ValueError), ("f16", ValueError), ("i3", ValueError), ("c4", ValueError),
    ("b2", ValueError), ("g", ValueError), ("G", ValueError), ("<float32", ValueError),
    ("f0", ValueError), ("i", None), ("", ValueError), ("f4\0", ValueError),
    (3, TypeError), (None, "default"), (np.str_, ValueError), (np.dtype("U3"), ValueError),
    (np.dtype("O"), ValueError), (np.longdouble, ValueError), (np.void, TypeError),
    (type, TypeError), (str, TypeError), (object(), TypeError), (b"f4", TypeError),
])
def test_refusals_list_the_accepted_forms(bad, exc):
    if exc is None:
        assert made("empty", bad) == np.dtype(bad).name
        return
    if exc == "default":
        assert dlbridge.empty(1, dtype=bad).dtype == "float32"
        return
    with pytest.raises(exc) as info:
        dlbridge.empty(1, dtype=bad)
    msg = str(info.value)
    if not isinstance(bad, str) or "\0" not in bad:
        for form in ("'float32'", "'f4'", "numpy.float32", "torch.bfloat16", "bool, int, float, complex"):
            assert form in msg


@pytest.mark.parametrize("name, why", [
    ("float3", "(dtype.bits is 3; float needs 8, 16, 32 or 64)"),
    ("int300", "(bits 300 is past 255, the most a DLPack dtype holds)"),
    ("float32x70000", "(lanes 70000 is past 65535, the most a DLPack dtype holds)"),
    ("uint4x3", "(dtype.lanes is 3; 4-bit lanes make a 12-bit element"),
])
def test_names_of_a_types_form_say_which_field_is_refused(name, why):
    with pytest.raises(ValueError) as info:
        dlbridge.empty(1, dtype=name)
    msg = str(info.value)
    assert msg.startswith(f"dtype '{name}' is not known {why}")
    assert "dtype takes a name such as 'float32'" in msg
    # A name of no type's form says only what dtype takes.
    with pytest.raises(ValueError) as info:
        dlbridge.empty(1, dtype=name + "y")
    assert str(info.value).startswith(f"dtype '{name}y' is not known; dtype takes")


def test_a_numpy_like_type_from_elsewhere_is_not_called():
    calls = []

    class NotNumpy:
        def __init__(self):
            calls.append(1)
            self.dtype = np.dtype("f4")

    with pytest.raises(TypeError, match="not the type"):
        dlbridge.empty(1, dtype=NotNumpy)
    assert calls == []
    NotNumpy.__module__ = "numpy"
    assert made("empty", NotNumpy) == "float32"
    assert calls == [1]


def test_attribute_errors_other_than_missing_propagate():
    class Hostile:
        @property
        def name(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        dlbridge.empty(1, dtype=Hostile())


@pytest.mark.parametrize("module, accepted", [
    ("numpy", True), ("numpy.core", True), ("ml_dtypes", True), ("ml_dtypes._x", True),
    ("numpyx", False), ("ml_dtypesx", False), ("mynumpy", False), ("builtins", False)])
def test_scalar_types_are_read_only_from_numpy_and_ml_dtypes(module, accepted):
    class Scalar:
        dtype = None

        def __init__(self):
            self.dtype = np.dtype("u2")

    Scalar.__module__ = module
    if accepted:
        assert made("empty", Scalar) == "uint16"
    else:
        with pytest.raises(TypeError, match="not the type"):
            dlbridge.empty(1, dtype=Scalar)


def test_a_numpy_type_without_a_dtype_or_a_default_instance():
    class NoDtype:
        pass

    class NeedsArgs:
        def __init__(self, x):
            self.dtype = np.dtype("f4")

    for t in (NoDtype, NeedsArgs):
        t.__module__ = "numpy"
        with pytest.raises(TypeError, match="not the type"):
            dlbridge.empty(1, dtype=t)


class _Interrupt(BaseException):
    """Stands for KeyboardInterrupt: no Exception, so nothing may swallow it."""


@pytest.mark.parametrize("exc", [_Interrupt, MemoryError])
def test_interrupts_and_memory_errors_while_reading_a_type_propagate(exc):
    # An error other code may replace (the type is just not numpy's, or
    # cannot be called) becomes the refusal; these may not be replaced.
    class Meta(type):
        @property
        def __module__(cls):
            raise exc("module")

    Unreadable = Meta("Unreadable", (), {})
    with pytest.raises(exc, match="module"):
        dlbridge.empty(1, dtype=Unreadable)

    class Failing:
        def __init__(self):
            raise exc("made")

    Failing.__module__ = "numpy"
    with pytest.raises(exc, match="made"):
        dlbridge.empty(1, dtype=Failing)
    # Ordinary errors still read as "not a dtype".
    class QuietMeta(type):
        @property
        def __module__(cls):
            raise ValueError("module")

    with pytest.raises(TypeError, match="not the type"):
        dlbridge.empty(1, dtype=QuietMeta("Quiet", (), {}))


@pytest.mark.parametrize("code", ["i08", "f04", "u0002", "c016", "b01", NATIVE + "i08", "i000000000000000008"])
def test_kind_and_bytes_codes_with_leading_zeros(code):
    # NumPy reads the byte count as a number.
    assert made("zeros", code) == np.dtype(code).name


@pytest.mark.parametrize("code", ["u16", "i16", "c32", "f1", "u3", "b8", "f4x", "x4",
                                  "i99999999999", "==f4", "<|f4", "i0", "f00",
                                  "f4294967300", "i4294967297", "u18446744073709551617",
                                  NATIVE + "float32", "=bfloat16", "|int8"])
def test_malformed_codes(code):
    with pytest.raises(ValueError, match="not known"):
        dlbridge.empty(1, dtype=code)
    if code != "c32":  # NumPy's long double complex, which DLPack lacks
        with pytest.raises(TypeError):
            np.dtype(code)


def test_byteorder_attribute_of_dtype_like_objects():
    class Like:
        name = "float64"
        byteorder = "="

    assert made("empty", Like()) == "float64"
    Like.byteorder = FOREIGN
    with pytest.raises(ValueError, match="byte order"):
        dlbridge.empty(1, dtype=Like())
    Like.byteorder = NATIVE
    assert made("empty", Like()) == "float64"
    Like.byteorder = 3
    assert made("empty", Like()) == "float64"
    Like.name = 5
    with pytest.raises(TypeError, match="dtype must be"):
        dlbridge.empty(1, dtype=Like())


def test_a_byteorder_that_is_no_single_mark_is_no_order():
    class Like:
        name = "float64"

    # Only a one-character mark orders: an empty or longer str says nothing.
    for order in ("", FOREIGN * 2, FOREIGN + "x"):
        Like.byteorder = order
        assert made("empty", Like()) == "float64"


def test_an_unknown_name_is_not_known_without_the_cores_words():
    # The core's reason is repeated only for a name of a type's form.
    with pytest.raises(ValueError, match=r"^dtype 'floot32' is not known; dtype takes a name"):
        dlbridge.empty(1, dtype="floot32")
    # Even when the name holds what separates the core's reason from it.
    with pytest.raises(ValueError, match=r"""^dtype 'x": y' is not known; dtype takes a name"""):
        dlbridge.empty(1, dtype='x": y')
    with pytest.raises(ValueError, match=r"^dtype 'int3' is not known \(dtype.bits is 3"):
        dlbridge.empty(1, dtype="int3")


def test_a_code_after_a_byte_order_mark_repeats_no_earlier_reason():
    # A name behind a mark is not parsed by the core: the core's message
    # is still the one an earlier refusal left, and is not this one's.
    with pytest.raises(ValueError, match=r"dtype.bits is 3"):
        dlbridge.empty(1, dtype="int3")
    for text in (NATIVE + "int3", "=int3", "|int3"):
        with pytest.raises(ValueError, match=r"^dtype '" + re.escape(text) + "' is not known; dtype takes"):
            dlbridge.empty(1, dtype=text)


def test_a_type_whose_module_name_is_not_utf8_is_not_numpys():
    # __module__ holds a lone surrogate: it cannot be read as UTF-8, so
    # the type is not taken for one of numpy's.
    Odd = type("Odd", (), {"__module__": "numpy\udc80"})
    with pytest.raises(TypeError, match="not the type Odd"):
        dlbridge.empty(1, dtype=Odd)


def test_a_byteorder_attribute_that_raises_propagates():
    # Anything but AttributeError is the caller's error, not "no order".
    class Like:
        name = "float32"

        @property
        def byteorder(self):
            raise ValueError("no order today")

    with pytest.raises(ValueError, match="no order today"):
        dlbridge.empty(1, dtype=Like())

    class Missing:
        name = "float32"

        @property
        def byteorder(self):
            raise AttributeError("byteorder")

    assert dlbridge.empty(1, dtype=Missing()).dtype == "float32"

"""dlbridge.Tensor itself: properties, repr, indexing, views, copies and
the constructors."""

import ctypes
import gc
import math
import os
import struct
import subprocess
import sys
import weakref

import pytest

from support import (
    KDLCUDA,
    KDLCUDAHOST,
    READ_ONLY,
    SANITIZED,
    capsule_of,
    deleted,
    dlbridge,
    helper,
    needs_torch,
    np,
    torch,
)


def test_properties():
    a = np.arange(24, dtype=np.int16).reshape(2, 3, 4)[:, ::-1, ::2]
    t = dlbridge.from_dlpack(a)
    assert t.shape == (2, 3, 2)
    assert t.strides == (12, -4, 2)
    assert t.dtype == "int16"
    assert t.device == "cpu"
    assert t.ndim == 3
    assert t.size == 12
    assert t.itemsize == 2
    assert t.nbytes == 24
    assert t.readonly is False
    assert t.data_ptr + t.byte_offset == a.ctypes.data
    assert len(t) == 2
    assert isinstance(t.shape, tuple) and isinstance(t.strides, tuple)


def test_properties_are_read_only():
    t = dlbridge.arange(3)
    for name in ("shape", "strides", "dtype", "device", "ndim", "size", "readonly", "data_ptr"):
        with pytest.raises(AttributeError):
            setattr(t, name, 1)


def test_device_names(helper):
    a = np.zeros(2, np.float32)
    assert dlbridge.from_dlpack(capsule_of(a, device=(KDLCUDAHOST, 0))).device == "cuda_host"
    t = dlbridge.from_dlpack(helper.make_capsule(data=0x1000, shape=(2,), device=(KDLCUDA, 1)))
    assert t.device == "cuda:1"


def test_cannot_be_instantiated_or_subclassed():
    with pytest.raises(TypeError, match="from_dlpack"):
        dlbridge.Tensor()
    with pytest.raises(TypeError):
        type("Sub", (dlbridge.Tensor,), {})


def test_type_is_immutable():
    with pytest.raises(TypeError):
        dlbridge.Tensor.__dlpack_c_exchange_api__ = None


def test_repr_shows_values_dtype_device_and_read_only(helper):
    assert repr(dlbridge.arange(3)) == "dlbridge.Tensor([0, 1, 2], dtype=int64, device=cpu)"
    t = dlbridge.from_dlpack(capsule_of(np.ones(2, np.float32), flags=READ_ONLY))
    assert repr(t) == "dlbridge.Tensor([1.0, 1.0], dtype=float32, device=cpu, readonly=True)"
    big = dlbridge.zeros((100, 100))
    assert repr(big) == "dlbridge.Tensor(shape=(100, 100), dtype=float32, device=cpu)"
    gpu = dlbridge.from_dlpack(helper.make_capsule(data=0x1000, shape=(2,), device=(KDLCUDA, 0)))
    assert repr(gpu) == "dlbridge.Tensor(shape=(2,), dtype=float32, device=cuda:0)"
    assert "bfloat16" in repr(dlbridge.empty(2, dtype="bfloat16"))
    # Empty, but tolist() would build 2**40 lists.
    huge = dlbridge.zeros((2**40, 0))
    assert repr(huge) == "dlbridge.Tensor(shape=(1099511627776, 0), dtype=float32, device=cpu)"
    assert repr(dlbridge.zeros((2, 0))) == "dlbridge.Tensor([[], []], dtype=float32, device=cpu)"


def test_repr_shows_values_up_to_exactly_1000_elements():
    # The limit counts the elements and the lists holding them, an extent at
    # a time: 1000 is shown, 1001 is not, however the extents make it up.
    for shape in [(1000,), (10, 100), (1000, 1)]:
        assert repr(dlbridge.zeros(shape, dtype="uint8")).startswith("dlbridge.Tensor([")
    for shape in [(1001,), (7, 143), (1000, 2), (1001, 1)]:
        assert repr(dlbridge.zeros(shape, dtype="uint8")) == (
            f"dlbridge.Tensor(shape={shape}, dtype=uint8, device=cpu)"
        )
    # Lists stop at the first empty extent: nothing past it is built.
    assert repr(dlbridge.zeros((0, 2**40))) == "dlbridge.Tensor([], dtype=float32, device=cpu)"
    assert repr(dlbridge.zeros((3, 0, 5000))) == "dlbridge.Tensor([[], [], []], dtype=float32, device=cpu)"


def test_tolist_of_an_empty_tensor_never_steps_by_its_strides(helper):
    # A tensor without elements spans no bytes, so nothing bounds its
    # strides: the compact strides of (3, 2**62, 0) are (2**62, 1, 1), and
    # a foreign one may say anything. tolist() (and repr, which calls it)
    # multiplied them by the item size and by the index (a signed overflow,
    # UBSan) to reach elements it never reads.
    empty = dlbridge.zeros((3, 2**62, 0))[:, :0]
    assert empty.shape == (3, 0, 0) and empty.strides == (2**62, 1, 1)
    assert empty.tolist() == [[], [], []]
    assert repr(empty) == "dlbridge.Tensor([[], [], []], dtype=float32, device=cpu)"
    assert dlbridge.zeros((3, 2**62, 0), "int4")[:, :0].tolist() == [[], [], []]
    for strides in [(2**62, 1), (-(2**62), 1), (-(2**63), 2**63 - 1)]:
        t = dlbridge.from_dlpack(capsule_of(np.zeros((3, 0), np.complex128), strides=strides))
        assert t.tolist() == [[], [], []], strides


def test_iteration_walks_the_first_dimension():
    t = dlbridge.arange(6).reshape(2, 3)
    rows = list(t)
    assert [type(r) for r in rows] == [dlbridge.Tensor] * 2
    assert [r.tolist() for r in rows] == [[0, 1, 2], [3, 4, 5]]
    assert [[int(x) for x in r] for r in t] == [[0, 1, 2], [3, 4, 5]]
    assert list(dlbridge.zeros((0, 3))) == []
    # Rows are views: they share the tensor's memory.
    assert rows[1].data_ptr + rows[1].byte_offset == t.data_ptr + t.byte_offset + 3 * 8
    with pytest.raises(TypeError, match="0-d"):
        iter(dlbridge.full((), 1))


def test_in_compares_values():
    t = dlbridge.arange(6).reshape(2, 3)
    assert 4 in t and 4.0 in t and 6 not in t and "4" not in t
    # Through the strides: the view holds 2, 0, 5 and 3 only.
    v = t[:, ::-2]
    assert 5 in v and 1 not in v and 4 not in v
    assert 0 not in dlbridge.zeros((0, 3)) and 1 in dlbridge.full((), 1)
    assert (1 + 2j) in dlbridge.asarray([0j, 1 + 2j])
    with pytest.raises(TypeError, match="scalar type"):
        1 in dlbridge.empty(2, dtype="float32x4")

    class Incomparable:
        def __eq__(self, other):
            raise ZeroDivisionError("no comparison")

        __hash__ = None

    # The first comparison's error ends the search, from any dimension.
    for t in (dlbridge.arange(6), dlbridge.arange(6).reshape(2, 3), dlbridge.arange(8).reshape(2, 2, 2)):
        with pytest.raises(ZeroDivisionError, match="no comparison"):
            Incomparable() in t


def test_one_element_tensors_are_python_numbers():
    import operator

    assert bool(dlbridge.full((), True)) is True and bool(dlbridge.zeros((1, 1))) is False
    assert int(dlbridge.full((1,), 2.75)) == 2 and int(dlbridge.full((), -3, dtype="int8")) == -3
    assert float(dlbridge.full((), 3, dtype="uint16")) == 3.0
    assert complex(dlbridge.full((), 1.5)) == 1.5 + 0j
    assert complex(dlbridge.asarray([2 - 1j])) == 2 - 1j
    # -1.0 is also what a failed conversion returns: only an error set is one.
    assert complex(dlbridge.full((), -1.0)) == -1 + 0j
    # No __index__: a Tensor would pass for an int wherever Python (or the
    # module's own parsers) asks PyIndex_Check, whatever its dtype.
    with pytest.raises(TypeError):
        operator.index(dlbridge.full((), 7, dtype="uint8"))
    assert dlbridge.full((), 2.5).item() == 2.5 and type(dlbridge.full((), 2).item()) is int
    assert dlbridge.arange(4)[2].item() == 2


@pytest.mark.parametrize(
    "convert, t, exc, match",
    [
        (bool, dlbridge.arange(2), ValueError, "has 2"),
        (int, dlbridge.zeros(0), ValueError, "has 0"),
        (float, dlbridge.zeros((2, 2)), ValueError, "has 4"),
        (lambda t: t.item(), dlbridge.arange(3), ValueError, "has 3"),
        (int, dlbridge.asarray([1j]), TypeError, "complex"),
        (float, dlbridge.empty((), dtype="float32x4"), TypeError, "scalar type"),
    ],
)
def test_number_conversions_refuse(convert, t, exc, match):
    with pytest.raises(exc, match=match):
        convert(t)


@pytest.mark.parametrize(
    "name, convert",
    [("item()", lambda t: t.item()), ("bool()", bool), ("int()", int), ("float()", float),
     ("complex()", complex)],
)
def test_number_conversions_name_themselves_for_a_dtype_without_numbers(name, convert):
    # A vector dtype has no Python number: refused before the element is
    # read, naming the conversion asked for.
    t = dlbridge.empty((), dtype="float32x4")
    with pytest.raises(TypeError, match=r"^" + name.replace("(", r"\(").replace(")", r"\)")
                       + ": this dtype has no Python scalar type$"):
        convert(t)


@pytest.mark.parametrize(
    "make",
    [
        lambda: dlbridge.full(2, dlbridge.full((), 2)),
        lambda: dlbridge.arange(dlbridge.full((), 3)),
        lambda: dlbridge.arange(dlbridge.full((), 1.0), 3),
        lambda: dlbridge.arange(0, 5, dlbridge.full((), 2.0)),
        lambda: dlbridge.empty(dlbridge.asarray([2, 3])),
        lambda: dlbridge.zeros(3)[dlbridge.full((), 1)],
    ],
    ids=["fill_value", "arange_stop", "arange_start", "arange_step", "shape", "index"],
)
def test_tensors_are_not_taken_for_python_numbers(make):
    # A one-element tensor converts with float() and friends, but the
    # constructors would lose its dtype (int64 read as a float): refused.
    with pytest.raises((TypeError, IndexError), match="Tensor"):
        make()


def test_a_tensor_in_asarray_values_is_an_array_of_its_dtype():
    # asarray reads it as NumPy reads a 0-d array: its dtype counts.
    t = dlbridge.asarray([1, dlbridge.full((), 2, dtype="float64")])
    assert t.dtype == "float64" and t.tolist() == [1.0, 2.0]


def test_number_conversions_of_gpu_memory_are_refused(helper):
    gpu = dlbridge.from_dlpack(helper.make_capsule(data=0x1000, shape=(), device=(KDLCUDA, 0)))
    with pytest.raises(BufferError, match="copy it to 'cpu'"):
        float(gpu)


def test_len_of_scalar_is_a_type_error():
    with pytest.raises(TypeError):
        len(dlbridge.full((), 3))


def test_tolist_for_every_scalar_dtype():
    for dtype, values in [
        ("bool", [True, False]),
        ("int8", [-128, 127]),
        ("uint8", [0, 255]),
        ("int16", [-32768, 32767]),
        ("uint16", [0, 65535]),
        ("int32", [-(2**31), 2**31 - 1]),
        ("uint32", [0, 2**32 - 1]),
        ("int64", [-(2**63), 2**63 - 1]),
        ("uint64", [0, 2**64 - 1]),
        ("float16", [0.5, -65504.0]),
        ("bfloat16", [1.0, -2.0]),
        ("float32", [0.25, 2.0**100]),
        ("float64", [1e300, -0.0]),
        ("complex64", [1 + 2j, -3.5j]),
        ("complex128", [1e200 + 1j, 0j]),
    ]:
        t = dlbridge.asarray(values, dtype=dtype)
        assert t.dtype == dtype
        assert t.tolist() == values, dtype


# ---------------------------------------------------------------------------
# Indexing and views
# ---------------------------------------------------------------------------


INDICES = [
    (1,),
    (-1,),
    (slice(None),),
    (slice(1, None),),
    (slice(None, None, -1),),
    (slice(-2, None, -2),),
    (slice(5, -100, -1),),
    (slice(-100, 100, 3),),
    (1, slice(None, None, 2)),
    (Ellipsis, 0),
    (0, Ellipsis),
    (slice(None), Ellipsis, slice(1, 2)),
    (Ellipsis,),
    (),
    (2, 1, 3),
    (slice(3, 1),),
]


@pytest.mark.parametrize("key", INDICES)
def test_indexing_matches_numpy(key):
    a = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    t = dlbridge.from_dlpack(a)
    v = t[key]
    expect = a[key]
    assert v.shape == expect.shape
    assert v.tolist() == expect.tolist()
    assert v.strides == tuple(s // 4 for s in expect.strides) or expect.size <= 1
    if expect.size and expect.ndim:
        # The same first element: a view, not a copy.
        assert np.from_dlpack(v).__array_interface__["data"][0] == expect.__array_interface__["data"][0]


def test_single_index_not_in_a_tuple():
    t = dlbridge.arange(10)
    assert t[3].tolist() == 3 and t[3].shape == ()
    assert t[2:8:3].tolist() == [2, 5]


@pytest.mark.parametrize(
    "key, exc",
    [
        ((5,), IndexError),
        ((-6,), IndexError),
        ((0, 0, 0, 0), IndexError),
        ((Ellipsis, Ellipsis), IndexError),
        ((True,), IndexError),
        ((1.5,), IndexError),
        (("a",), IndexError),
        ((slice(0, 1, 0),), ValueError),
        ((slice("a", None),), TypeError),
        ((slice(None, None, 1.5),), TypeError),
        ((1 << 80,), IndexError),
    ],
)
def test_bad_indices(key, exc):
    t = dlbridge.arange(20).reshape(5, 4)
    with pytest.raises(exc):
        t[key]


def test_bools_in_slices_are_ints_as_numpy_reads_them():
    # As an index a bool is a mask (refused above); in a slice it is 0 or 1.
    t = dlbridge.arange(5)
    a = np.arange(5)
    for key in (slice(True, None), slice(None, False), slice(None, None, True),
                slice(False, True)):
        assert t[key].tolist() == a[key].tolist()
    # NumPy's own bool has no __index__: refused by both.
    with pytest.raises(TypeError, match="slice indices must be integers"):
        t[::np.True_]
    t[True:] = 9
    assert t.tolist() == [0, 9, 9, 9, 9]
    with pytest.raises(ValueError, match="step cannot be zero"):
        t[::False]


def test_huge_slice_bounds_clamp():
    t = dlbridge.arange(5)
    assert t[-(1 << 100) : 1 << 100].tolist() == [0, 1, 2, 3, 4]
    assert t[1 << 100 : -(1 << 100) : -1].tolist() == [4, 3, 2, 1, 0]
    assert t[:: -(1 << 100)].tolist() == [4]
    # A start below -2**63 saturates; stepping down from it takes nothing.
    a = np.arange(5)
    for key in (slice(-(1 << 100), None, -1), slice(-(1 << 63), None, -1),
                slice(None, -(1 << 100), -1), slice(-(1 << 63), 2)):
        assert t[key].tolist() == a[key].tolist()
    assert t[-(1 << 63) :: -1].tolist() == []


def test_views_write_through():
    a = np.zeros((3, 4), dtype=np.float32)
    t = dlbridge.from_dlpack(a)
    np.from_dlpack(t[1, ::2])[:] = 7
    assert a[1].tolist() == [7, 0, 7, 0]


def test_views_keep_the_base_alive(helper):
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = dlbridge.from_dlpack(capsule_of(a))
    del a
    ref = weakref.ref(t)
    v = t[::-1, 1::2]
    p = t.permute(1, 0)
    r = t.reshape(2, 6)
    del t
    gc.collect()
    assert ref() is None
    assert deleted() == 0
    assert v.tolist() == [[9.0, 11.0], [5.0, 7.0], [1.0, 3.0]]
    assert p.tolist()[0] == [0.0, 4.0, 8.0]
    assert r.tolist()[1] == [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]
    del v, p, r
    assert deleted() == 1


def test_permute():
    a = np.arange(24).reshape(2, 3, 4)
    t = dlbridge.from_dlpack(a)
    for axes in [(2, 0, 1), (0, 1, 2), (-1, -2, -3)]:
        assert t.permute(*axes).tolist() == a.transpose(axes).tolist()
        assert t.permute(axes).tolist() == a.transpose(axes).tolist()
        assert t.permute(list(axes)).shape == a.transpose(axes).shape
    assert t.T.tolist() == a.T.tolist()
    for bad in [(0, 1), (0, 0, 1), (0, 1, 3), (0, 1, -4)]:
        with pytest.raises(ValueError):
            t.permute(*bad)
    for axis in [3, -4]:
        with pytest.raises(ValueError, match=f"axis {axis} is out of range for a 3-dimensional"):
            t.permute(0, 1, axis)
    with pytest.raises(TypeError):
        t.permute(0, 1, "2")


def test_reshape_and_permute_take_up_to_64_dimensions():
    t = dlbridge.arange(6)
    ones = (1,) * 63
    r = t.reshape(6, *ones)
    assert r.ndim == 64 and r.reshape([6]).tolist() == list(range(6))
    assert r.permute(*range(63, -1, -1)).shape == (*ones, 6)
    with pytest.raises(ValueError, match="reshape\\(\\) takes at most 64 dimensions, not 65"):
        t.reshape(6, *ones, 1)
    with pytest.raises(ValueError, match="sequence has 65 dimensions; at most 64"):
        t.reshape((6, *ones, 1))


def test_reshape_views_when_possible_and_copies_otherwise():
    a = np.arange(24, dtype=np.int32)
    t = dlbridge.from_dlpack(a)
    r = t.reshape(2, 3, 4)
    assert r.data_ptr == t.data_ptr
    assert r.tolist() == a.reshape(2, 3, 4).tolist()
    assert t.reshape((4, -1)).shape == (4, 6)
    assert t.reshape([24]).shape == (24,)
    nc = t.reshape(4, 6).T
    flat = nc.reshape(-1)
    assert flat.tolist() == a.reshape(4, 6).T.reshape(-1).tolist()
    assert flat.data_ptr != t.data_ptr
    with pytest.raises(ValueError):
        t.reshape(5, 5)
    with pytest.raises(ValueError):
        t.reshape(-1, -1)
    assert dlbridge.full((), 5).reshape(1, 1).tolist() == [[5]]


def test_shapes_and_axes_are_any_sequence_of_ints():
    # As NumPy reads them: a range or an array of ints is a sequence (an
    # array has __index__, but only a 0-d one is one int).
    t = dlbridge.arange(6)
    for shape in [range(2, 4), np.array([2, 3]), np.array([2, 3], dtype=np.uint8)]:
        assert dlbridge.zeros(shape).shape == (2, 3)
        assert dlbridge.full(shape, 1).shape == (2, 3)
        assert dlbridge.empty(shape, dtype="int4").shape == (2, 3)
        assert t.reshape(shape).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert dlbridge.zeros(np.array(4)).shape == (4,)
    assert t.reshape(np.array(6)).shape == (6,)
    assert t.reshape(2, 3).permute(np.array([1, 0])).shape == (3, 2)
    assert t.reshape(2, 3).permute(range(-1, -3, -1)).shape == (3, 2)
    # A long sequence is refused from its length, before it is read.
    big = dlbridge.zeros(10**7, dtype="int8")
    with pytest.raises(ValueError, match="10000000 dimensions"):
        dlbridge.zeros(big)
    with pytest.raises(ValueError, match="10000000 dimensions"):
        t.reshape(big)
    with pytest.raises(TypeError):
        t.reshape("23")


def test_copy_is_compact_independent_and_writable(helper):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dlbridge.from_dlpack(capsule_of(a, flags=READ_ONLY))
    c = t[:, ::-2].copy()
    assert c.strides == (2, 1)
    assert not c.readonly
    assert c.tolist() == a[:, ::-2].tolist()
    assert c.data_ptr != t.data_ptr


def test_to():
    t = dlbridge.arange(3)
    assert t.to("cpu") is t
    assert t.to((1, 0)) is t
    c = t.to("cpu", copy=True)
    assert c is not t and c.data_ptr != t.data_ptr and c.tolist() == [0, 1, 2]
    try:
        g = t.to("cuda:0")
    except RuntimeError as e:
        assert "cuda:0" in str(e)
    else:  # pragma: no cover - only with a CUDA GPU
        assert g.device == "cuda:0" and g.to("cpu").tolist() == [0, 1, 2]
    with pytest.raises(TypeError):
        t.to(1)
    with pytest.raises(ValueError):
        t.to("moon")


def test_to_moves_host_type_memory_to_cpu(helper):
    a = np.arange(3, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a, device=(KDLCUDAHOST, 0)))
    c = t.to("cpu")
    assert c.device == "cpu" and c.tolist() == [0.0, 1.0, 2.0] and c.data_ptr != a.ctypes.data


def test_to_with_copy_false_refuses_a_move():
    a = np.arange(3, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a, device=(KDLCUDAHOST, 0)))
    assert t.to("cuda_host", copy=False) is t
    with pytest.raises(ValueError, match="copy=False, but the tensor is in cuda_host memory, not on cpu"):
        t.to("cpu", copy=False)


def test_stride_of_one_dimension_counts_negative_dims_from_the_end():
    t = dlbridge.zeros((2, 3, 4))[:, ::2]
    assert t.stride() == t.stride(None) == t.strides == (12, 8, 1)
    assert [t.stride(d) for d in range(-3, 3)] == [12, 8, 1, 12, 8, 1]
    assert t.stride(dim=-1) == 1
    for dim in [3, -4]:
        with pytest.raises(IndexError, match=f"dim {dim} is out of range for a 3-dimensional"):
            t.stride(dim)
    with pytest.raises(IndexError):
        dlbridge.zeros(()).stride(0)


def test_weakrefs():
    t = dlbridge.arange(3)
    r = weakref.ref(t)
    assert r() is t
    del t
    assert r() is None


# ---------------------------------------------------------------------------
# Constructors
# ---------------------------------------------------------------------------


def test_empty_zeros_full():
    e = dlbridge.empty((2, 3))
    assert (e.shape, e.dtype, e.device) == ((2, 3), "float32", "cpu")
    assert e.data_ptr % 256 == 0
    assert dlbridge.zeros(3, dtype="int8").tolist() == [0, 0, 0]
    assert dlbridge.zeros((2, 0)).shape == (2, 0)
    assert dlbridge.zeros(()).tolist() == 0.0
    assert dlbridge.full((2,), 1.5).dtype == "float32"
    assert dlbridge.full((2,), 3).tolist() == [3, 3]
    assert dlbridge.full((2,), 3).dtype == "int64"
    assert dlbridge.full((2,), True).dtype == "bool"
    assert dlbridge.full((2,), 1j).dtype == "complex64"
    assert dlbridge.full((3,), 7, dtype="uint8").tolist() == [7, 7, 7]
    assert dlbridge.full((2, 2), -1.5, "float64").tolist() == [[-1.5, -1.5], [-1.5, -1.5]]
    assert dlbridge.full(shape=5, fill_value=2, dtype="int16", device="cpu").tolist() == [2] * 5
    assert dlbridge.zeros(4, "float8_e4m3fn").nbytes == 4
    assert np.from_dlpack(dlbridge.zeros(4, "float32")).tolist() == [0.0] * 4


def test_full_values_convert_like_numpy():
    assert dlbridge.full(2, 2.9, dtype="int32").tolist() == [2, 2]
    assert dlbridge.full(2, -2.9, dtype="int32").tolist() == [-2, -2]
    assert dlbridge.full(1, 1e10, dtype="float16").tolist() == [math.inf]
    assert dlbridge.full(1, 1e39, dtype="float32").tolist() == [math.inf]
    assert dlbridge.full(1, 2**64 - 1, dtype="uint64").tolist() == [2**64 - 1]
    assert dlbridge.full(1, np.int16(5), dtype="int8").tolist() == [5]
    # Rounding to half precision, ties to even, subnormals and overflow
    # included, bit for bit as NumPy rounds.
    values = [0.1, 1 / 3, 65519.0, 65520.0, 6e-8, 3e-8, 2.9802322387695312e-08, 1e-8, -0.0, 2049.0, 2051.0,
              65536.0, 70000.0, -131071.0, 3 * 2.0**-25, 5 * 2.0**-25]
    with np.errstate(over="ignore"):
        half = np.array(values, dtype=np.float64).astype(np.float16)
    got = dlbridge.asarray(values, dtype="float16")
    assert np.from_dlpack(got).view(np.uint16).tolist() == half.view(np.uint16).tolist()
    bf = dlbridge.asarray([1.00390625, 1.01171875], dtype="bfloat16")
    assert bf.tolist() == [1.0, 1.015625]
    # A NaN stays a NaN whatever its payload: rounding must not carry it
    # into the sign (all payload bits set) or onto infinity.
    for bits in (0x7FFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 0x7FF0000020000000):
        nan = struct.unpack("<d", struct.pack("<Q", bits))[0]
        assert math.isnan(dlbridge.full((), nan, dtype="bfloat16").item())
    # float32: half a unit past the largest float is infinity (a tie, to
    # even), anything below it the largest float, as NumPy rounds.
    limit = float(np.finfo(np.float32).max) + 2.0**103
    for v in (limit, math.nextafter(limit, 0), -limit, math.nextafter(-limit, 0)):
        with np.errstate(over="ignore"):
            expect = np.float32(v)
        assert dlbridge.full((), v, dtype="float32").item() == expect


@needs_torch
def test_bfloat16_rounds_as_pytorch():
    values = [1.00390625, 1.01171875, 3.0e38, -1e-40, 1e39, 0.1, -7.3e-5]
    expect = torch.tensor(values, dtype=torch.float32).to(torch.bfloat16)
    got = torch.from_dlpack(dlbridge.asarray(values, dtype="bfloat16"))
    assert got.view(torch.int16).tolist() == expect.view(torch.int16).tolist()


@pytest.mark.parametrize(
    "value, dtype, exc",
    [
        (256, "uint8", OverflowError),
        (-1, "uint8", OverflowError),
        (-1, "uint64", OverflowError),
        (2**64, "uint64", OverflowError),
        (2**63, "int64", OverflowError),
        (1e20, "int32", OverflowError),
        # 2**k is the first float past a k-bit unsigned range.
        (256.0, "uint8", OverflowError),
        (2.0**63, "int64", OverflowError),
        (2.0**64, "uint64", OverflowError),
        (math.nan, "int32", ValueError),
        (math.inf, "int64", OverflowError),
        ("1", "float32", TypeError),
        (1j, "float32", TypeError),
        (None, "int8", TypeError),
        (1, "float8_e5m2", TypeError),
        (1, "float32x4", TypeError),
    ],
)
@pytest.mark.parametrize("shape", [3, (0, 3)])
def test_full_refuses_values_that_do_not_fit(value, dtype, exc, shape):
    # Also where there is no element to write: the value is converted all
    # the same.
    with pytest.raises(exc):
        dlbridge.full(shape, value, dtype=dtype)


def test_full_bool_passes_on_the_error_of_bool():
    class Untruthful:
        def __bool__(self):
            raise ZeroDivisionError("no truth value")

    with pytest.raises(ZeroDivisionError, match="no truth value"):
        dlbridge.full(2, Untruthful(), dtype="bool")


def test_complex_values_for_real_dtypes_say_so():
    for dtype in ("float32", "int8", "bfloat16"):
        with pytest.raises(TypeError, match=f"cannot store a complex number as {dtype}"):
            dlbridge.full(3, 1j, dtype=dtype)


@pytest.mark.parametrize(
    "args, kwargs, exc",
    [
        ((-1,), {}, ValueError),
        (((2, -1),), {}, ValueError),
        (((1,) * 65,), {}, ValueError),
        (((2**40, 2**40),), {}, (ValueError, MemoryError)),
        (("3",), {}, TypeError),
        ((2.0,), {}, TypeError),
        (([1, 2.5],), {}, TypeError),
        ((True,), {}, TypeError),
        ((3,), dict(dtype="float31"), ValueError),
        ((3,), dict(dtype=3), TypeError),
        ((3,), dict(device="gpu"), ValueError),
        ((3,), dict(device=("cpu",)), TypeError),
        ((3,), dict(bogus=1), TypeError),
        ((), {}, TypeError),
        ((3, "float32", "cpu", 4), {}, TypeError),
    ],
)
def test_bad_constructor_arguments(args, kwargs, exc):
    for fn in (dlbridge.empty, dlbridge.zeros):
        with pytest.raises(exc):
            fn(*args, **kwargs)


def test_dtype_objects_with_a_name_are_accepted():
    assert dlbridge.zeros(2, dtype=np.dtype("float64")).dtype == "float64"
    assert dlbridge.empty(2, dtype=np.dtype(np.uint16)).dtype == "uint16"


def test_zeros_of_a_type_without_zero():
    with pytest.raises(ValueError, match="no zero"):
        dlbridge.zeros(2, dtype="float8_e8m0fnu")


def test_constructors_on_other_devices_go_through_the_core():
    for fn, args in ((dlbridge.empty, (3,)), (dlbridge.zeros, (3,)), (dlbridge.full, (3, 1.0)), (dlbridge.arange, (3,))):
        try:
            t = fn(*args, device="cuda:0")
        except (ValueError, RuntimeError, BufferError) as e:
            assert "cuda" in str(e)
        else:  # pragma: no cover - only with a CUDA GPU
            assert t.device == "cuda:0"


def test_arange():
    assert dlbridge.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert dlbridge.arange(5).dtype == "int64"
    assert dlbridge.arange(2, 5).tolist() == [2, 3, 4]
    assert dlbridge.arange(5, 0, -2).tolist() == [5, 3, 1]
    assert dlbridge.arange(0, 5, 10).tolist() == [0]
    assert dlbridge.arange(3, 3).shape == (0,)
    assert dlbridge.arange(5, 0).shape == (0,)
    assert dlbridge.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert dlbridge.arange(0, 1, 0.25).dtype == "float32"
    assert dlbridge.arange(1.0, dtype="float64").tolist() == [0.0]
    assert dlbridge.arange(3, dtype="float16").tolist() == [0.0, 1.0, 2.0]
    assert dlbridge.arange(-(2**63), -(2**63) + 2).tolist() == [-(2**63), -(2**63) + 1]
    assert dlbridge.arange(2**63 - 2, 2**63 - 1, 5).tolist() == [2**63 - 2]
    assert dlbridge.arange(-(2**63), 2**63 - 1, 2**62).tolist() == [-(2**63), -(2**62), 0, 2**62]
    assert dlbridge.arange(np.int32(3)).tolist() == [0, 1, 2]
    assert dlbridge.arange(0, 3, dtype="uint8").tolist() == [0, 1, 2]


def test_arange_errors():
    with pytest.raises(ValueError):
        dlbridge.arange(0, 5, 0)
    with pytest.raises(ValueError):
        dlbridge.arange(0.0, 1.0, 0.0)
    with pytest.raises(ValueError):
        dlbridge.arange(0, math.inf)
    with pytest.raises(ValueError):
        dlbridge.arange(math.nan)
    with pytest.raises(OverflowError):
        dlbridge.arange(250, 260, dtype="uint8")
    with pytest.raises(OverflowError, match="-2 is out of range for uint8"):
        dlbridge.arange(-2, 1, dtype="uint8")
    with pytest.raises(OverflowError, match="-129 is out of range for int8"):
        dlbridge.arange(-129, 0, dtype="int8")
    with pytest.raises(TypeError):
        dlbridge.arange("3")
    with pytest.raises(TypeError):
        dlbridge.arange()
    with pytest.raises(TypeError):
        dlbridge.arange(3, dtype="float8_e4m3fn")
    # 2**64 - 1 integers: more than any shape can hold.
    with pytest.raises(ValueError, match="too many elements"):
        dlbridge.arange(-(2**63), 2**63 - 1)
    with pytest.raises(ValueError, match="too many elements"):
        dlbridge.arange(2**63 - 1, -(2**63), -1)
    with pytest.raises(ValueError, match="too many elements"):
        dlbridge.arange(-1e300, 1e300)


def test_full_infers_the_kind_of_numpy_scalars_and_0d_arrays():
    # A NumPy complex scalar is no Python complex: read as a float it lost
    # its imaginary part (NumPy only warns).
    c = dlbridge.full(2, np.complex64(1 + 2j))
    assert (c.dtype, c.tolist()) == ("complex64", [1 + 2j, 1 + 2j])
    assert dlbridge.full(1, np.True_).dtype == "bool"
    assert dlbridge.full(1, np.uint8(3)).dtype == "int64"
    # A 0-d float array has __index__ (its type's), which refuses it.
    f = dlbridge.full(2, np.array(1.5))
    assert (f.dtype, f.tolist()) == ("float32", [1.5, 1.5])
    assert dlbridge.full(1, np.array(7)).tolist() == [7]


def test_full_infers_complex_for_a_number_with___complex___but_no___float__():
    class IntAndComplex:
        def __int__(self):
            return 3

        def __complex__(self):
            return 1 + 2j

    t = dlbridge.full(2, IntAndComplex())
    assert (t.dtype, t.tolist()) == ("complex64", [1 + 2j, 1 + 2j])


@pytest.mark.parametrize("dtype", [None, "int32", "uint8"])
def test_full_passes_on_what_reading_the_value_raises(dtype):
    # An __index__ that fails other than with TypeError (which means "not
    # an integer") is the caller's error, whether the dtype is inferred or
    # named; so is a buffer that cannot be read for its dtype.
    class BadIndex:
        def __index__(self):
            raise ZeroDivisionError("no index")

    with pytest.raises(ZeroDivisionError, match="no index"):
        dlbridge.full(2, BadIndex(), dtype=dtype)
    m = memoryview(b"x")
    m.release()
    with pytest.raises(ValueError if dtype is None else TypeError,
                       match="released" if dtype is None else "must be a number"):
        dlbridge.full(2, m, dtype=dtype)


@needs_torch
def test_full_and_arange_take_0d_float_tensors_as_floats():
    f = dlbridge.full(1, torch.tensor(1.5))
    assert (f.dtype, f.tolist()) == ("float32", [1.5])
    assert dlbridge.arange(torch.tensor(2.5)).tolist() == [0.0, 1.0, 2.0]
    assert dlbridge.arange(torch.tensor(3)).dtype == "int64"


def test_numpy_complex_scalars_are_complex_for_real_dtypes():
    for dtype in ("float32", "int32", "int4"):
        with pytest.raises(TypeError, match=f"cannot store a complex number as {dtype}"):
            dlbridge.full(1, np.complex64(1 + 2j), dtype=dtype)
    t = dlbridge.zeros(2)
    with pytest.raises(TypeError, match="cannot store a complex number as float32"):
        t[0] = np.complex128(3 + 4j)
    # A NumPy float scalar (a buffer too) is still a float.
    t[1] = np.float32(2.5)
    assert t.tolist() == [0.0, 2.5]


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int4"])
def test_0d_float_arrays_convert_to_integer_dtypes_as_floats_do(dtype):
    # Their __index__ refuses them: truncated as a float is, not refused.
    assert dlbridge.full(2, np.array(2.5), dtype=dtype).tolist() == [2, 2]
    assert dlbridge.full(1, np.array(3), dtype=dtype).tolist() == [3]


@pytest.mark.parametrize("value", ["1", None, [1], b"1"], ids=repr)
def test_full_names_a_fill_value_that_is_no_number(value):
    with pytest.raises(TypeError, match=f"full\\(\\): fill_value must be a number, not {type(value).__name__}"):
        dlbridge.full(2, value)
    with pytest.raises(TypeError, match="fill_value must be a number"):
        dlbridge.full(2, value, dtype="int8")
    # For bool any value has a truth, as in NumPy.
    assert dlbridge.full(1, value, dtype="bool").tolist() == [bool(value)]


@pytest.mark.parametrize("args", [(0, "BAD"), ("BAD",), (0, 5, "BAD"), (0.5, "BAD")])
def test_arange_passes_on_what_an___index___raises(args):
    # Other than TypeError ("not an integer"), the bound's error is the
    # caller's.
    class BadIndex:
        def __index__(self):
            raise ZeroDivisionError("no index")

    with pytest.raises(ZeroDivisionError, match="no index"):
        dlbridge.arange(*[BadIndex() if a == "BAD" else a for a in args])


@pytest.mark.skipif(SANITIZED, reason="AddressSanitizer aborts on an allocation past its maximum")
def test_arange_of_2_63_minus_1_elements_fails_at_the_allocation():
    # 2**63 - 1 elements fit a shape: the allocation is what fails.
    with pytest.raises(MemoryError):
        dlbridge.arange(2**63 - 1, dtype="int8")
    with pytest.raises(MemoryError):
        dlbridge.arange(-(2**63), -1, dtype="int8")


def test_arange_edges_of_the_count():
    # Empty ranges whatever the step: the count of an empty span is 0,
    # not (0 - 1) / step + 1 wrapped around.
    for args in ((0, 0, 2), (5, 0, 3), (0, 5, -2), (3, 3, -1), (0.0, 0.0, 2.0)):
        assert dlbridge.arange(*args).shape == (0,)
    # 2**63 elements: one past what a shape holds.
    with pytest.raises(ValueError, match="too many elements"):
        dlbridge.arange(-(2**63), 0)
    with pytest.raises(ValueError, match="too many elements"):
        dlbridge.arange(2**63 - 1, -1, -1)
    # An infinite step is refused as an infinite bound is.
    for step in (math.inf, -math.inf, math.nan):
        with pytest.raises(ValueError, match="must be finite"):
            dlbridge.arange(0, 5, step)
    # A float count is refused from 9.2e18 on (below 2**63, where a double
    # no longer converts to int64 exactly).
    for stop in (9.2e18, 9.3e18, 2.0**63):
        with pytest.raises(ValueError, match="too many elements"):
            dlbridge.arange(0.0, stop, dtype="int8")
    # A float step of 0 is refused by name, whatever the bounds (0 / 0 is
    # NaN, which would count as 0 elements).
    for args in ((0.0, 1.0, 0.0), (1.0, 1.0, 0.0), (1.0, 0.0, -0.0)):
        with pytest.raises(ValueError, match="step must not be zero"):
            dlbridge.arange(*args)
    # -1.0 is also what a failed float conversion returns.
    assert dlbridge.arange(-1.0, 1.0).tolist() == [-1.0, 0.0]
    assert dlbridge.arange(1.0, -1.0, -1.0).tolist() == [1.0, 0.0]
    assert dlbridge.arange(0.5, -1.0, -0.5).tolist() == [0.5, 0.0, -0.5]
    # stop=None: the one bound given is the stop.
    assert dlbridge.arange(3, None).tolist() == [0, 1, 2]
    assert dlbridge.arange(2.5, None, None).tolist() == [0.0, 1.0, 2.0]
    assert dlbridge.arange(3, None, 2).tolist() == [0, 2]


def test_none_is_the_default_dtype_and_device_of_every_constructor():
    # None means "not given": float32 (or the value's kind for full and
    # arange) on the CPU.
    made = {
        "empty": dlbridge.empty(2, None, None),
        "zeros": dlbridge.zeros(2, dtype=None, device=None),
        "full": dlbridge.full(2, 7, None, None),
        "arange": dlbridge.arange(3, dtype=None, device=None),
    }
    assert {k: (t.dtype, t.device) for k, t in made.items()} == {
        "empty": ("float32", "cpu"), "zeros": ("float32", "cpu"),
        "full": ("int64", "cpu"), "arange": ("int64", "cpu")}
    assert dlbridge.full(1, True, dtype=None).dtype == "bool"
    assert dlbridge.full(1, 1j, dtype=None).dtype == "complex64"


def test_zeros_writes_every_byte_of_fresh_memory():
    # Fresh memory holds a pattern (MALLOC_PERTURB_), not zeros: every
    # byte is written, a tensor of one byte included.
    code = (
        "import dlbridge\n"
        "for shape, dtype in ((1, 'uint8'), (1, 'bool'), (1, 'int4'), (2, 'int8'), (1, 'int16'), (3, 'float32')):\n"
        "    t = dlbridge.zeros(shape, dtype=dtype)\n"
        "    assert t.tolist() == [0] * shape, (shape, dtype, t.tolist())\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, MALLOC_PERTURB_="165"))
    assert r.stdout == "ok\n", r.stdout + r.stderr


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("dtype, value", [("int8", 7), ("int64", -1), ("complex128", 1j), ("float32", 2.5)])
def test_full_of_no_elements_writes_nothing(dtype, value, shared):
    # The value is converted (and refused when it does not fit), but the
    # byte behind a tensor without elements stays zero.
    t = dlbridge.full((0, 3), value, dtype=dtype, shared=shared)
    assert t.shape == (0, 3) and ctypes.string_at(t.data_ptr, 1) == b"\0"


def test_arange_reads_bools_and_0d_arrays_as_numpy_does():
    assert dlbridge.arange(True, 3).tolist() == [1, 2]
    assert dlbridge.arange(0, 4, True).tolist() == [0, 1, 2, 3]
    f = dlbridge.arange(False, 2)
    assert (f.dtype, f.tolist()) == ("int64", [0, 1])
    assert dlbridge.arange(-3, 0, True).tolist() == [-3, -2, -1]
    a = dlbridge.arange(np.array(2.5))
    assert (a.dtype, a.tolist()) == ("float32", [0.0, 1.0, 2.0])
    assert dlbridge.arange(0, np.array(3)).tolist() == [0, 1, 2]
    assert dlbridge.arange(0, 2.5, np.array(1)).tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize(
    "args, match",
    [
        (("3",), r"arange\(\): stop must be a real number, not str"),
        ((1j,), r"arange\(\): stop must be a real number, not complex"),
        (("0", 3), r"arange\(\): start must be a real number, not str"),
        ((0, 3, "1"), r"arange\(\): step must be a real number, not str"),
        ((0.5, [3]), r"arange\(\): stop must be a real number, not list"),
        ((None,), r"arange\(\): stop must be an int, not NoneType"),
    ],
)
def test_arange_names_the_bound_that_is_no_real_number(args, match):
    with pytest.raises(TypeError, match=match):
        dlbridge.arange(*args)


def test_arange_passes_on_the_error_of_float():
    class Unfloatable:
        def __float__(self):
            raise ZeroDivisionError("no float")

    for args in ((Unfloatable(),), (Unfloatable(), 3), (0, 3, Unfloatable())):
        with pytest.raises(ZeroDivisionError, match="no float"):
            dlbridge.arange(*args)


@needs_torch
def test_asarray_converts_array_data_into_another_dtype():
    # As numpy.asarray: a new tensor of the values converted, never sharing.
    a = np.arange(3, dtype=np.int32)
    for x in (a, dlbridge.asarray(a), torch.arange(3, dtype=torch.int32), memoryview(a)):
        for copy in (None, True):
            t = dlbridge.asarray(x, dtype="float64", copy=copy)
            assert t.dtype == "float64" and t.tolist() == [0.0, 1.0, 2.0]
            assert t.data_ptr != a.ctypes.data and not t.readonly
    assert dlbridge.asarray(np.float32(2.5), dtype=np.float64).tolist() == 2.5
    assert dlbridge.asarray(np.array([1.5, -2.5]), dtype="int8").tolist() == [1, -2]
    assert dlbridge.asarray(a, dtype="bfloat16", device="cpu").dtype == "bfloat16"
    # copy=False: the standard's ValueError for a copy that would be needed,
    # as NumPy raises it.
    with pytest.raises(ValueError, match="copy=False, but the data is int32 and dtype is int64"):
        dlbridge.asarray(a, dtype="int64", copy=False)
    with pytest.raises(ValueError, match="copy=False, but the data is float32 and dtype is int32"):
        dlbridge.asarray(dlbridge.zeros(2), dtype="int32", copy=False)
    with pytest.raises(ValueError):
        np.asarray(a, dtype="int64", copy=False)
    # A dtype without Python numbers to go through is refused.
    with pytest.raises(TypeError, match="float8_e4m3fn has no Python number type"):
        dlbridge.asarray(np.zeros(2, np.float32), dtype="float8_e4m3fn")


def test_asarray_from_values():
    assert dlbridge.asarray([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert dlbridge.asarray([[1, 2], [3, 4]]).dtype == "int64"
    assert dlbridge.asarray([1, 2.5]).dtype == "float32"
    assert dlbridge.asarray([True, 2]).dtype == "int64"
    assert dlbridge.asarray([True, False]).dtype == "bool"
    assert dlbridge.asarray([1, 2j]).dtype == "complex64"
    assert dlbridge.asarray((1, 2), dtype="uint16").tolist() == [1, 2]
    assert dlbridge.asarray(3.5).shape == ()
    assert dlbridge.asarray([]).shape == (0,)
    assert dlbridge.asarray([[], []]).shape == (2, 0)
    # No number to say otherwise: the float default, as torch.tensor([]).
    assert dlbridge.asarray([]).dtype == "float32"
    assert dlbridge.asarray([[], []]).dtype == "float32"
    assert dlbridge.asarray([], dtype="int8").dtype == "int8"
    with pytest.raises(ValueError, match="inhomogeneous"):
        dlbridge.asarray([[1, 2], [3]])
    with pytest.raises(ValueError, match="inhomogeneous"):
        dlbridge.asarray([1, [2]])
    with pytest.raises(TypeError):
        dlbridge.asarray(["a"])
    with pytest.raises(TypeError):
        dlbridge.asarray("abc")
    with pytest.raises(TypeError):
        dlbridge.asarray(object())
    with pytest.raises(ValueError, match="copy=False"):
        dlbridge.asarray([1, 2], copy=False)


def test_asarray_survives_values_that_resize_their_list():
    values = [1, 2, 3]

    class Shrinks:
        def __index__(self):
            values.clear()
            return 1

    values[1] = Shrinks()
    with pytest.raises(ValueError, match="changed size"):
        dlbridge.asarray(values, dtype="int64")


def test_asarray_of_producers():
    a = np.arange(4, dtype=np.float32)
    t = dlbridge.asarray(a)
    assert t.data_ptr == a.ctypes.data
    assert dlbridge.asarray(t) is t
    assert dlbridge.asarray(t, device="cpu", dtype="float32") is t
    c = dlbridge.asarray(t, copy=True)
    assert c is not t and c.data_ptr != t.data_ptr
    assert dlbridge.asarray(a.__dlpack__()).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert dlbridge.asarray(a, dtype="float64").dtype == "float64"
    assert dlbridge.asarray(t, dtype="int32").tolist() == [0, 1, 2, 3]


def test_asarray_gives_a_capsule_back_when_it_refuses_the_result():
    # copy=False with a conversion or with another device leaves the
    # capsule unconsumed: it can still be imported.
    a = np.arange(3, dtype=np.float32)
    for kwargs, exc in (({"dtype": "int8", "copy": False}, ValueError), ({"device": "cuda:0", "copy": False}, ValueError)):
        cap = capsule_of(a)
        with pytest.raises(exc):
            dlbridge.asarray(cap, **kwargs)
        assert "used_" not in repr(cap)
        assert dlbridge.from_dlpack(cap).tolist() == [0.0, 1.0, 2.0]
        assert "used_" in repr(cap)


@pytest.mark.parametrize("args", [(0,), (3,), (0.0, 2.0)])
def test_arange_refuses_a_dtype_without_numbers_before_any_element(args):
    # Refused by name even when there is no element to write.
    with pytest.raises(TypeError, match=r"^arange\(\): dtype float8_e4m3fn has no Python number type"):
        dlbridge.arange(*args, dtype="float8_e4m3fn")


def test_asarray_takes_none_as_no_dtype_and_no_device():
    t = dlbridge.arange(3)
    assert dlbridge.asarray(t, dtype=None, device=None, copy=None) is t
    u = dlbridge.asarray([1, 2], dtype=None, device=None)
    assert (u.dtype, u.device, u.tolist()) == ("int64", "cpu", [1, 2])


@pytest.mark.parametrize("copy", [None, True, False])
def test_asarray_refuses_a_str_as_no_array_whatever_copy_says(copy):
    with pytest.raises(TypeError, match=r"^asarray\(\): a str is not a DLPack producer, a buffer or a number$"):
        dlbridge.asarray("12", copy=copy)

"""asarray of nested sequences: Python numbers and arrays (DLPack
producers, buffer exporters, dlbridge Tensors) at any depth, in lists,
tuples or any sequence, with NumPy's shapes and dtypes; ragged input named
where it is ragged; hostile sequences raise, never crash or hang."""

import array
import collections
import ctypes
import itertools
import tracemalloc

import pytest

from support import capsule_of, dlbridge, helper, np


def same(t, expected):
    """t holds what NumPy makes of the same input, with its dtype."""
    e = np.asarray(expected)
    assert t.shape == e.shape
    assert t.dtype == e.dtype.name
    assert t.tolist() == e.tolist()


class Producer:
    """An array known only by its __dlpack__."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class Seq:
    """A sequence by __len__ and __getitem__ only, as the array API's
    NestedSequence."""

    def __init__(self, *items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def test_a_list_of_one_array_is_a_stack_of_it():
    same(dlbridge.asarray([np.array([1, 2])]), [[1, 2]])


@pytest.mark.parametrize(
    "make",
    [
        lambda a, b: [a, b],
        lambda a, b: (a, list(b)),
        lambda a, b: [list(a), b],
        lambda a, b: [dlbridge.asarray(a), dlbridge.asarray(b)],
        lambda a, b: [Producer(a), memoryview(b)],
        lambda a, b: [array.array("q", a), b],
        lambda a, b: Seq(a, Seq(*b)),
        lambda a, b: collections.deque([a, b]),
    ],
    ids=["arrays", "mixed", "list_first", "tensors", "producer_buffer",
         "array_module", "sequences", "deque"],
)
def test_rows_of_any_kind_stack(make):
    a, b = np.array([1, 2]), np.array([3, 4])
    same(dlbridge.asarray(make(a, b)), [[1, 2], [3, 4]])


def test_arrays_at_any_depth():
    a = np.arange(6).reshape(2, 3)
    same(dlbridge.asarray([a, [[6, 7, 8], np.array([9, 10, 11])]]),
         np.arange(12).reshape(2, 2, 3))
    same(dlbridge.asarray([[a], [a + 6]]), np.arange(12).reshape(2, 1, 2, 3))
    same(dlbridge.asarray(((a,),)), a.reshape(1, 1, 2, 3))
    # Views of any strides, read in their own order.
    same(dlbridge.asarray([a.T, a[::-1].T, a.T[::-2][::-1].repeat(2, 0)[1:]]),
         [a.T, a[::-1].T, a.T[::-2][::-1].repeat(2, 0)[1:]])


def test_zero_d_arrays_and_numpy_scalars_keep_their_dtype():
    same(dlbridge.asarray([np.float32(1), np.array(2, dtype=np.float32)]),
         np.array([1, 2], dtype=np.float32))
    same(dlbridge.asarray([np.int8(1), np.int8(2)]), np.array([1, 2], np.int8))
    t = dlbridge.asarray([dlbridge.asarray(1.5), dlbridge.full((), 2, dtype="float16")])
    assert t.dtype == "float32" and t.tolist() == [1.5, 2.0]


def test_empty_and_sequence_types():
    same(dlbridge.asarray(range(3)), [0, 1, 2])
    same(dlbridge.asarray([range(2), (5, 6)]), [[0, 1], [5, 6]])
    same(dlbridge.asarray([np.zeros((0, 2)), np.zeros((0, 2))]), np.zeros((2, 0, 2)))
    same(dlbridge.asarray([[], np.zeros(0)]), np.zeros((2, 0)))
    assert dlbridge.asarray([np.zeros(0, np.int8)]).dtype == "int8"
    # bytes are a buffer, as at the top level: an array of uint8.
    assert dlbridge.asarray([b"ab", bytearray(b"cd")]).tolist() == [[97, 98], [99, 100]]


NUMPY_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                np.int64, np.uint64, np.float16, np.float32, np.float64,
                np.complex64, np.complex128]


@pytest.mark.parametrize("a", NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_arrays_promote_as_numpy_promotes_them(a):
    for b in NUMPY_DTYPES:
        x, y = np.ones(2, dtype=a), np.zeros(2, dtype=b)
        same(dlbridge.asarray([x, y]), [x, y])
        same(dlbridge.asarray([[x], (y,)]), [[x], (y,)])


def test_python_numbers_promote_with_arrays_at_their_default_dtypes():
    # The defaults are dlbridge's (int64, float32, complex64): NumPy would
    # give float64 for the floats.
    i8 = np.array([1, 2], dtype=np.int8)
    assert dlbridge.asarray([i8, [3, 4]]).dtype == "int64"
    assert dlbridge.asarray([i8, [True, False]]).dtype == "int8"
    assert dlbridge.asarray([np.zeros(2, np.float16), [0.5, 1]]).dtype == "float32"
    assert dlbridge.asarray([np.zeros(2, np.float64), [0.5, 1]]).dtype == "float64"
    assert dlbridge.asarray([np.zeros(2, np.int64), [0.5, 1]]).dtype == "float64"
    assert dlbridge.asarray([i8, [1j, 1]]).dtype == "complex64"
    assert dlbridge.asarray([np.zeros(2, np.int32), [1j, 1]]).dtype == "complex128"


def test_dtype_converts_arrays_too():
    t = dlbridge.asarray([np.array([1.5, -2.5]), [3, 4]], dtype="int32")
    assert t.dtype == "int32" and t.tolist() == [[1, -2], [3, 4]]
    t = dlbridge.asarray([dlbridge.asarray([1, 2], dtype="int4")], dtype="float32")
    assert t.tolist() == [[1.0, 2.0]]
    with pytest.raises(OverflowError):
        dlbridge.asarray([np.array([300])], dtype="uint8")


BFLOAT16 = (4, 16, 1)


def bfloat16(values):
    """A bfloat16 producer (NumPy has no such dtype) of float32 values'
    upper halves."""
    bits = (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return dlbridge.from_dlpack(capsule_of(bits, dtype=BFLOAT16))


def test_dtypes_numpy_lacks_stack_only_with_themselves():
    t = dlbridge.asarray([bfloat16([1, 2]), bfloat16([3, 4])])
    assert t.dtype == "bfloat16" and t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    with pytest.raises(TypeError, match=r"obj\[1\] is int8.*no common dtype"):
        dlbridge.asarray([bfloat16([1, 2]), np.array([3, 4], np.int8)])
    with pytest.raises(TypeError, match="no common dtype with int64; pass dtype="):
        dlbridge.asarray([bfloat16([1, 2]), [3, 4]])
    t = dlbridge.asarray([bfloat16([1, 2]), [3, 4]], dtype="float32")
    assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    # Arrays with no common dtype convert to a given one, as the message
    # says: the scan does not refuse them.
    t = dlbridge.asarray([bfloat16([1, 2]), np.array([3, 4], np.int8)], dtype="float32")
    assert t.dtype == "float32" and t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    t = dlbridge.asarray([np.array([5, 6], np.int8), bfloat16([1, 2])], dtype="int16")
    assert t.dtype == "int16" and t.tolist() == [[5, 6], [1, 2]]


@pytest.mark.parametrize(
    "values, where, found",
    [
        ([np.array([1, 2]), [1, 2, 3]], r"obj\[1\]", "has length 3"),
        ([[1, 2], np.array([1, 2, 3])], r"obj\[1\]", r"is an array of shape \(3,\)"),
        ([[1, 2], [3, np.array([4])]], r"obj\[1\]\[1\]", r"is an array of shape \(1,\)"),
        ([[1, 2], [3, [4]]], r"obj\[1\]\[1\]", "is a sequence"),
        ([np.zeros((2, 2)), 5], r"obj\[1\]", "is a number"),
        ([[1, 2], Seq(1, 2, 3)], r"obj\[1\]", "has length 3"),
        ([[[1], [2]], [[3], [4, 5]]], r"obj\[1\]\[1\]", "has length 2"),
        # An empty sequence is (0,), whatever an empty array beside it is.
        ([np.zeros((0, 2)), []], r"obj\[1\]", r"has length 0, where obj\[0\] has shape \(0, 2\)"),
        ([[], np.zeros((0, 2))], r"obj\[1\]", r"is an array of shape \(0, 2\)"),
    ],
)
def test_ragged_input_names_where(values, where, found):
    with pytest.raises(ValueError, match="inhomogeneous shape: " + where + " " + found):
        dlbridge.asarray(values)


def test_refusals():
    with pytest.raises(ValueError, match="copy=False"):
        dlbridge.asarray([np.array([1, 2])], copy=False)
    with pytest.raises(TypeError, match=r"obj\[0\]\[1\] is str"):
        dlbridge.asarray([[1, "2"]])
    with pytest.raises(TypeError, match=r"obj\[1\] is dict"):
        dlbridge.asarray([1, {}])
    # Elements that are not numbers (opaque handles) are copied as they
    # are, never converted.
    handles = dlbridge.from_dlpack(capsule_of(np.arange(2, dtype=np.uint64), dtype=(3, 64, 1)))
    assert dlbridge.asarray([handles, handles]).dtype == "handle"
    with pytest.raises(TypeError, match="handle elements have no Python number type"):
        dlbridge.asarray([handles, [1, 2]], dtype="float32")
    # Float8 elements are numbers: they convert.
    f8 = dlbridge.from_dlpack(capsule_of(np.array([0x30, 0x40], np.uint8), dtype=(10, 8, 1)))
    assert f8.dtype == "float8_e4m3fn" and f8.tolist() == [0.5, 2.0]
    assert dlbridge.asarray([f8, [1, 2]], dtype="float32").tolist() == [[0.5, 2.0], [1.0, 2.0]]


# ---- hostile input --------------------------------------------------------


def test_self_referential_sequences_raise():
    loop = [1]
    loop.append(loop)
    with pytest.raises(ValueError, match="inhomogeneous"):
        dlbridge.asarray(loop)
    deep = []
    deep.append(deep)
    with pytest.raises(ValueError, match="deeper than 64"):
        dlbridge.asarray(deep)

    class Itself(Seq):
        def __getitem__(self, i):
            return self

    with pytest.raises(ValueError, match="deeper than 64"):
        dlbridge.asarray(Itself(0))


def test_huge_nesting_depth_raises():
    nest = 1
    for _ in range(100000):
        nest = [nest]
    with pytest.raises(ValueError, match="deeper than 64"):
        dlbridge.asarray(nest)
    # Arrays count their dimensions too.
    with pytest.raises(ValueError, match="deeper than 64"):
        dlbridge.asarray([[np.zeros((1,) * 63)]])


def test_a_len_that_lies_raises_or_is_read_as_far_as_it_says():
    class Longer(Seq):
        def __len__(self):
            return 2**62

    with pytest.raises(ValueError, match=r"obj\[0\] has length 4611686018427387904 "
                                         r"by its __len__, but its item 2 raised IndexError"):
        dlbridge.asarray([Longer(1, 2), [1, 2]])
    # Where the shape is known, the length alone is ragged: nothing is read.
    with pytest.raises(ValueError, match=r"obj\[1\] has length 4611686018427387904, "):
        dlbridge.asarray([[1, 2], Longer(1, 2)])

    class Shorter(Seq):
        def __len__(self):
            return 1

    assert dlbridge.asarray(Shorter(1, 2)).tolist() == [1]

    class Negative(Seq):
        def __len__(self):
            return -1

    with pytest.raises(ValueError):
        dlbridge.asarray(Negative())


def test_errors_of_a_sequence_propagate():
    class Broken(Seq):
        def __getitem__(self, i):
            raise RuntimeError("getitem")

    class NoLen(Seq):
        def __len__(self):
            raise RuntimeError("len")

    class BadProducer:
        def __dlpack__(self, **kwargs):
            raise RuntimeError("dlpack")

        def __dlpack_device__(self):
            return (1, 0)

    for bad, match in [(Broken(1), "getitem"), (NoLen(1), "len"), (BadProducer(), "dlpack")]:
        with pytest.raises(RuntimeError, match=match):
            dlbridge.asarray([[1], bad])


def test_a_sequence_is_read_once():
    # Each read gives other items: one snapshot decides shape, dtype and
    # values, and no item is asked for twice.
    class Fickle(Seq):
        reads = 0

        def __getitem__(self, i):
            Fickle.reads += 1
            if i >= 2:
                raise IndexError(i)
            return [1] * Fickle.reads

    with pytest.raises(ValueError, match=r"obj\[1\] has length 2, where obj\[0\] has shape \(1,\)"):
        dlbridge.asarray(Fickle(None, None))
    Fickle.reads = 0
    assert dlbridge.asarray([[[5]], Fickle(None)]).tolist() == [[[5]], [[1]]]
    assert Fickle.reads == 1


@pytest.mark.parametrize("how", ["clear", "replace_array", "replace_row", "grow"])
def test_producers_that_change_the_lists_are_read_safely(how):
    rows = [np.array([1, 2]), [3, 4], np.array([5, 6])]

    class Changer(Producer):
        def __dlpack__(self, **kwargs):
            if how == "clear":
                rows.clear()
            elif how == "replace_array":
                rows[2] = np.array([7, 8])
            elif how == "replace_row":
                rows[0] = [9, 9]
            else:
                rows.append([0, 0])
            return super().__dlpack__(**kwargs)

    rows[1] = Changer(np.array([3, 4]))
    # Lists are read live: an item not read yet is read as it is then; a
    # new size, or an array read already and replaced, raises.
    if how == "replace_array":
        assert dlbridge.asarray(rows).tolist() == [[1, 2], [3, 4], [7, 8]]
    else:
        with pytest.raises(ValueError, match="changed size or items"):
            dlbridge.asarray(rows)


def test_many_combinations_of_kinds_agree_with_numpy():
    kinds = [
        lambda r: r,
        lambda r: list(r),
        lambda r: tuple(r),
        lambda r: dlbridge.asarray(r),
        lambda r: Seq(*r),
        lambda r: Producer(r),
    ]
    rows = [np.array([1, 2], np.int16), np.array([3, 4], np.int16)]
    for f, g in itertools.product(kinds, repeat=2):
        t = dlbridge.asarray([f(rows[0]), g(rows[1])])
        # The items of the array are NumPy scalars: 0-d int16 arrays.
        assert t.tolist() == [[1, 2], [3, 4]] and t.dtype == "int16"


@pytest.mark.parametrize("how", ["grow_at_the_end", "shrink", "deepen", "a_number_emptied", "array_moved_deeper",
                                 "replaced_by_a_number"])
def test_conversions_that_change_the_lists_during_the_fill(how):
    # The fill converts numbers (an item's __float__ runs Python code) after
    # the scan decided the shape: each list's size is checked before each
    # item and after the last, a list where a number was raises, and an
    # array met again elsewhere is checked against the shape there (read
    # at another depth, it would write past the values).
    arr = np.array([7.0, 8.0])

    class Changer:
        def __float__(self):
            if how == "grow_at_the_end":
                outer.append([0.0, 0.0])
            elif how == "shrink":
                outer[0].clear()
            elif how == "deepen":
                outer[1] = [[1.0], [2.0]]
            elif how == "a_number_emptied":
                # An empty list where a number was: nothing to write there.
                outer[1][1] = []
            elif how == "array_moved_deeper":
                outer[0][1] = arr
                outer[1] = [5.0, 6.0]
            else:
                # A row not read yet is read as it is then: here a number,
                # which the shape cannot hold.
                outer[1] = np.float64(3.0)
            return 1.0

    if how == "grow_at_the_end":
        outer = [[1.0, 2.0], [3.0, Changer()]]
    elif how == "array_moved_deeper":
        outer = [[Changer(), 2.0], arr]
    else:
        outer = [[Changer(), 2.0], [3.0, 4.0]]
    with pytest.raises(ValueError, match="changed size or items"):
        dlbridge.asarray(outer)


def test_zero_d_buffers_that_are_not_numbers_are_arrays():
    # A 0-d buffer is read as a number of its dtype only when it is a number
    # (NumPy's scalars): a ctypes scalar or a memoryview is a 0-d array, as
    # in NumPy.
    t = dlbridge.asarray([ctypes.c_int16(5), ctypes.c_int16(-6)])
    assert (t.dtype, t.tolist()) == ("int16", [5, -6])
    t = dlbridge.asarray([memoryview(np.float32(1.5)), 2])
    assert (t.dtype, t.tolist()) == ("float64", [1.5, 2.0])
    assert t.dtype == np.asarray([np.array(1.5, np.float32), 2]).dtype.name


def test_dtypes_without_python_numbers_stack_only_alike():
    # Arrays of a dtype without Python numbers (opaque handles) copy as they
    # are only when they all have it; a bool array beside them promotes to
    # it but would need converting, which no number can do.
    handles = dlbridge.from_dlpack(capsule_of(np.arange(2, dtype=np.uint64), dtype=(3, 64, 1)))
    with pytest.raises(TypeError, match="asarray\\(\\): dtype handle has no Python number type"):
        dlbridge.asarray([handles, np.array([True, False])])
    assert dlbridge.asarray([handles, handles]).dtype == "handle"


def test_nothing_past_64_dimensions_is_read():
    # The 65th level is refused before its sequence's __len__ runs.
    class Unreadable(Seq):
        def __len__(self):
            raise RuntimeError("read")

    deep = [Unreadable()]
    for _ in range(62):
        deep = [deep]
    # At depth 63 it is read; at 64 (a 65th dimension) it is not.
    with pytest.raises(RuntimeError, match="read"):
        dlbridge.asarray(deep)
    with pytest.raises(ValueError, match="deeper than 64"):
        dlbridge.asarray([deep])


def test_arrays_in_gpu_memory_are_copied_never_read_in_place():
    # A device address is no host memory: the array is copied to the CPU
    # first (which needs the GPU's runtime), not read where it points.
    from support import helper

    t = dlbridge.from_dlpack(helper.make_capsule(data=0x1000, shape=(2,), dtype=(2, 32, 1), device=(2, 0)))
    for values in ([t, t], [[1.0, 2.0], t]):
        with pytest.raises(BufferError, match="cannot copy a tensor from cuda:0 to cpu"):
            dlbridge.asarray(values)


def test_converting_arrays_keeps_no_python_number():
    # Each element converted goes through a Python number, released once
    # written (strided or packed): 40000 leaked floats would hold 960 kB.
    for a in (np.arange(20000, dtype=np.float32), dlbridge.zeros(20000, dtype="float4_e2m1fn")):
        tracemalloc.start()
        try:
            dlbridge.asarray([a, a], dtype="float64")
            kept, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert kept < 100000


def test_an_empty_list_past_64_dimensions_is_too_deep():
    # The 65th level is refused even when it is empty (it would end the
    # first path with 65 dimensions).
    def nested(levels):
        v = []
        for _ in range(levels - 1):
            v = [v]
        return v

    assert dlbridge.asarray(nested(64)).shape == (1,) * 63 + (0,)
    with pytest.raises(ValueError, match="deeper than 64"):
        dlbridge.asarray(nested(65))


def test_a_sequence_of_the_wrong_length_is_not_read():
    # Its length is checked against the shape before any item is read,
    # an expected length of 0 included.
    read = []

    class Counted(Seq):
        def __getitem__(self, i):
            read.append(i)
            return super().__getitem__(i)

    for first, other, length in (([], Counted(1, 2), "has length 2"), ([1], Counted(), "has length 0")):
        with pytest.raises(ValueError, match=length):
            dlbridge.asarray([first, other])
    assert read == []


def test_objects_with_index_are_integers_among_values():
    class Idx:
        def __index__(self):
            return 3

    t = dlbridge.asarray([Idx(), 1])
    assert (t.dtype, t.tolist()) == ("int64", [3, 1])
    assert dlbridge.asarray([Idx(), 1.5]).dtype == "float32"


def test_subclasses_of_python_numbers_keep_their_kind():
    class C(complex):
        pass

    class F(float):
        pass

    t = dlbridge.asarray([C(1 + 2j), 1])
    assert (t.dtype, t.tolist()) == ("complex64", [1 + 2j, 1 + 0j])
    assert dlbridge.asarray([F(0.5), 1]).dtype == "float32"


def test_a_failed_asarray_gives_the_capsules_among_the_values_back():
    # A capsule is consumed only when the whole call succeeds: a ragged
    # list, or a device array that cannot be copied to the CPU, gives it
    # back.
    cap = capsule_of(np.arange(2.0))
    with pytest.raises(ValueError, match="inhomogeneous"):
        dlbridge.asarray([cap, [1]])
    assert "used_" not in repr(cap)
    assert dlbridge.asarray([cap]).tolist() == [[0.0, 1.0]]
    assert "used_" in repr(cap)
    dev = helper.make_capsule(data=0x10000, shape=(2,), dtype=(2, 32, 1), device=(2, 0))
    with pytest.raises((BufferError, RuntimeError), match="cannot copy a tensor from cuda:0 to cpu"):
        dlbridge.asarray([dev])
    assert "used_" not in repr(dev)


def test_packed_arrays_of_one_dtype_stack_by_value():
    # Packed sub-byte elements are written one by one, not copied as
    # bytes; those without Python numbers (float4, float6) are refused.
    a = dlbridge.asarray([-3, 5, 7], dtype="int4")
    u = dlbridge.asarray([1, 2, 3], dtype="uint2")
    for x, values in ((a, [-3, 5, 7]), (u, [1, 2, 3])):
        t = dlbridge.asarray([x, x[::-1]])
        assert (t.dtype, t.tolist()) == (x.dtype, [values, values[::-1]])
    f = dlbridge.empty(3, "float4_e2m1fn")
    with pytest.raises(TypeError, match=r"^asarray\(\): dtype float4_e2m1fn has no Python number type"):
        dlbridge.asarray([f, f])


def test_a_list_grown_by_a_conversion_stops_the_fill_at_once():
    # The size is checked before each item: the items after the one whose
    # conversion grew the list are not converted.
    converted = []

    class Grows:
        def __init__(self, name, grow=False):
            self.name, self.grow = name, grow

        def __float__(self):
            converted.append(self.name)
            if self.grow:
                values.append(0.0)
            return 1.0

    values = [Grows("a", grow=True), Grows("b"), Grows("c")]
    with pytest.raises(ValueError, match="changed size"):
        dlbridge.asarray(values, dtype="float32")
    assert converted == ["a"]

"""Property-based tests: random NumPy layouts through dlbridge, NumPy as the
reference.

Arrays of random shape and dtype are viewed with random slices (negative
steps included), transposes and broadcasts (zero strides), so dlbridge sees
layouts NumPy itself makes; every import, view, index and conversion must
give what NumPy gives for the same operation. The examples are derived
from a fixed seed (derandomize) so a CI run is repeatable; the count stays
small enough for make check, and DLBRIDGE_HYPOTHESIS_EXAMPLES raises it
for a longer search.
"""

import os

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

import dlbridge  # noqa: E402

EXAMPLES = int(os.environ.get("DLBRIDGE_HYPOTHESIS_EXAMPLES", "30"))
if os.environ.get("DLBRIDGE_SANITIZED"):
    EXAMPLES = max(EXAMPLES // 4, 10)

PROFILE = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                   database=None)

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "float16", "float32", "float64", "complex64",
          "complex128"]


def _elements(dtype):
    kind = np.dtype(dtype).kind
    if kind == "f":
        return st.floats(allow_nan=False, width=np.dtype(dtype).itemsize * 8)
    if kind == "c":
        return st.complex_numbers(allow_nan=False, allow_infinity=False,
                                  width=np.dtype(dtype).itemsize * 8)
    return None


@st.composite
def layouts(draw, max_dims=4):
    """An array and a view of it with strides NumPy can make."""
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0,
                                  max_side=5))
    base = draw(hnp.arrays(dtype, shape, elements=_elements(dtype)))
    view = base
    # Slices with any step, negative ones included.
    if view.ndim and draw(st.booleans()):
        key = tuple(
            slice(draw(st.none() | st.integers(-6, 6)),
                  draw(st.none() | st.integers(-6, 6)),
                  draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3])))
            for _ in range(view.ndim))
        view = view[key]
    if view.ndim > 1 and draw(st.booleans()):
        view = view.transpose(draw(st.permutations(range(view.ndim))))
    # Broadcasts: new leading dimensions and size-1 ones get stride 0.
    if draw(st.integers(0, 3)) == 0:
        target = tuple(draw(st.integers(0, 3)) for _ in
                       range(draw(st.integers(0, 2)))) + tuple(
            draw(st.integers(0, 3)) if n == 1 else n for n in view.shape)
        view = np.broadcast_to(view, target)
    # A stride-0 axis made by hand, as NumPy's own as_strided allows.
    if view.ndim and draw(st.integers(0, 5)) == 0:
        axis = draw(st.integers(0, view.ndim - 1))
        strides = list(view.strides)
        strides[axis] = 0
        view = np.lib.stride_tricks.as_strided(view, view.shape, strides,
                                               writeable=False)
    return view


def _same(t_array, reference):
    assert t_array.shape == reference.shape
    assert t_array.dtype == reference.dtype
    np.testing.assert_array_equal(t_array, reference)


@PROFILE
@given(layouts())
def test_import_matches_numpy(a):
    t = dlbridge.from_dlpack(a)
    assert t.shape == a.shape
    assert t.ndim == a.ndim
    assert t.size == a.size
    assert t.dtype == str(a.dtype)
    assert t.itemsize == a.itemsize
    assert t.nbytes == a.nbytes
    if a.size > 1:
        # Strides of size-1 dimensions are free; NumPy's count in bytes.
        for n, mine, theirs in zip(a.shape, t.strides, a.strides):
            if n > 1:
                assert mine * a.itemsize == theirs
    assert t.readonly == (not a.flags.writeable)
    _same(np.asarray(t), a)
    assert t.tolist() == a.tolist()


@PROFILE
@given(layouts())
def test_round_trip_shares_memory(a):
    t = dlbridge.from_dlpack(a)
    back = np.from_dlpack(t)
    _same(back, a)
    if a.size:
        assert np.shares_memory(back, a)
    c = t.copy()
    assert np.asarray(c).flags.c_contiguous
    _same(np.asarray(c), a)
    assert not c.readonly
    if a.size:
        assert not np.shares_memory(np.asarray(c), a)


def _index_keys(shape):
    parts = []
    for n in shape:
        parts.append(st.integers(-n, n - 1) if n else st.nothing())
        parts[-1] = parts[-1] | st.builds(
            slice, st.none() | st.integers(-7, 7), st.none() | st.integers(-7, 7),
            st.sampled_from([None, 1, 2, -1, -3]))
    return st.tuples(*parts).flatmap(
        lambda key: st.integers(0, len(key)).map(lambda k: key[:k]))


def _check_key(t, a, key):
    """t[key] gives NumPy's a[key], or raises IndexError where NumPy does."""
    try:
        expected = np.asarray(a[key])
    except IndexError:
        with pytest.raises(IndexError):
            t[key]
        return
    got = t[key]
    assert isinstance(got, dlbridge.Tensor)
    _same(np.asarray(got), expected)
    assert got.tolist() == expected.tolist()


@PROFILE
@given(layouts().flatmap(lambda a: st.tuples(st.just(a), _index_keys(a.shape))))
def test_indexing_matches_numpy(case):
    a, key = case
    t = dlbridge.from_dlpack(a)
    _check_key(t, a, key)
    # With Ellipsis in front the key applies to the last dimensions.
    _check_key(t, a, (Ellipsis,) + key)


@PROFILE
@given(layouts(), st.integers(-10, 10))
def test_out_of_range_index_raises_as_numpy(a, i):
    t = dlbridge.from_dlpack(a)
    if a.ndim == 0:
        with pytest.raises(IndexError):
            t[0]
        return
    n = a.shape[0]
    if -n <= i < n:
        _same(np.asarray(t[i]), a[i])
    else:
        with pytest.raises(IndexError):
            t[i]


@PROFILE
@given(layouts().flatmap(lambda a: st.tuples(
    st.just(a), st.permutations(range(a.ndim)))))
def test_permute_matches_transpose(case):
    a, axes = case
    t = dlbridge.from_dlpack(a)
    p = t.permute(*axes)
    _same(np.asarray(p), a.transpose(axes))
    assert p.readonly == t.readonly
    _same(np.asarray(t.T), a.T)


def _reshapes(a):
    n = a.size
    divisors = [d for d in range(1, max(n, 1) + 1) if n % d == 0] or [1]

    @st.composite
    def shape(draw):
        if n == 0:
            return draw(st.sampled_from([(0,), (0, 3), (2, 0, 1), (1, 0)]))
        dims, left = [], n
        for _ in range(draw(st.integers(0, 3))):
            d = draw(st.sampled_from([x for x in divisors if left % x == 0]))
            dims.append(d)
            left //= d
        dims.append(left)
        if draw(st.booleans()):
            dims[draw(st.integers(0, len(dims) - 1))] = -1
        return tuple(dims)
    return shape()


@PROFILE
@given(layouts().flatmap(lambda a: st.tuples(st.just(a), _reshapes(a))))
def test_reshape_matches_numpy(case):
    a, shape = case
    t = dlbridge.from_dlpack(a)
    r = t.reshape(*shape)
    expected = a.reshape(shape)
    _same(np.asarray(r), expected)
    if np.shares_memory(expected, a) and a.size:
        # Where NumPy manages a view, so does dlbridge.
        assert np.shares_memory(np.asarray(r), a)


@PROFILE
@given(layouts())
def test_iteration_and_membership(a):
    t = dlbridge.from_dlpack(a)
    if a.ndim == 0:
        with pytest.raises(TypeError):
            iter(t)
        assert t.item() == a.item()
    else:
        rows = [np.asarray(x) for x in t]
        assert len(rows) == len(a) == len(t)
        for got, want in zip(rows, a):
            _same(got, want)
    if a.size:
        assert a.flat[0].item() in t
        assert a.flat[a.size - 1].item() in t


@PROFILE
@given(layouts(max_dims=2))
def test_reimport_chains_keep_values(a):
    t = dlbridge.from_dlpack(a)
    for _ in range(3):
        t = dlbridge.from_dlpack(t)
        if t.ndim:
            t = t[::-1]
            a = a[::-1]
    _same(np.asarray(t), a)


class _Producer:
    """A producer whose answers are drawn: the real capsule, junk, or an
    exception, from __dlpack__ and from __dlpack_device__."""

    def __init__(self, array, answer, device):
        self.array, self.answer, self.device_answer = array, answer, device

    def __dlpack__(self, **kwargs):
        if self.answer == "capsule":
            return self.array.__dlpack__(**kwargs)
        if self.answer == "legacy":
            return self.array.__dlpack__()
        if isinstance(self.answer, type) and issubclass(self.answer, BaseException):
            raise self.answer("refused")
        return self.answer

    def __dlpack_device__(self):
        if isinstance(self.device_answer, type):
            raise self.device_answer("no device")
        return self.device_answer


ANSWERS = st.sampled_from(["capsule", "legacy", None, 0, "dltensor", b"x", (),
                           BufferError, TypeError, ValueError, RuntimeError,
                           KeyError])
DEVICE_ANSWERS = st.sampled_from([(1, 0), (1, 3), (2, 0), (1,), None, "cpu",
                                  (1.5, 0), (-1, 0), (2**40, 0), ValueError])


@PROFILE
@given(layouts(max_dims=3), ANSWERS, DEVICE_ANSWERS)
def test_hostile_producers(a, answer, device):
    """A producer's answer is either imported faithfully or refused with an
    exception; the exception it raised itself comes through unchanged."""
    producer = _Producer(a, answer, device)
    try:
        t = dlbridge.from_dlpack(producer)
    except Exception as e:  # noqa: BLE001 - the kind is checked below
        if isinstance(answer, type):
            assert isinstance(e, (answer, TypeError, ValueError, BufferError,
                                  RuntimeError))
        else:
            assert isinstance(e, (TypeError, ValueError, BufferError,
                                  RuntimeError, AttributeError)), repr(e)
        return
    # Accepted: only a real capsule can have been imported.
    assert answer in ("capsule", "legacy")
    _same(np.asarray(t), a)


@PROFILE
@given(layouts(), st.booleans())
def test_buffer_protocol_import_matches_numpy(a, readonly):
    """asarray of a memoryview (the buffer protocol, not DLPack) gives
    NumPy's values, shares the memory, and never widens access."""
    if readonly:
        a = a.view()
        a.flags.writeable = False
    t = dlbridge.asarray(memoryview(a))
    _same(np.asarray(t), a)
    assert t.readonly == (not a.flags.writeable)
    if a.size:
        assert np.shares_memory(np.asarray(t), a)
    # And back out through the buffer protocol.
    _same(np.asarray(memoryview(t)), a)


@st.composite
def _assignments(draw):
    """A writable strided view (of a copy of a drawn layout), a key, and a
    value for view[key]: an element as a Python number, an array of the
    selection's shape or one broadcast to it (NumPy, a Tensor, a nested
    list), or a view of the same memory (overlapping the destination)."""
    a = draw(layouts())
    base = np.array(a)  # writable, compact
    steps = [draw(st.sampled_from([1, 2, -1])) for _ in range(base.ndim)]
    view_key = tuple(slice(None, None, s) for s in steps)
    axes = draw(st.permutations(range(base.ndim)))

    def view(b):
        return b[view_key].transpose(axes) if b.ndim else b
    key = draw(_index_keys(view(base).shape))
    try:
        target = view(base)[key]
    except IndexError:
        return base, view, key, "bad-key", None
    shape = np.shape(target)
    kind = draw(st.sampled_from(["number", "array", "broadcast", "tensor",
                                 "list", "overlap"]))
    if kind == "number" or (kind == "overlap" and base.size == 0):
        flat = base.reshape(-1)
        value = flat[draw(st.integers(0, flat.size - 1))].item() if flat.size \
            else 0
        return base, view, key, "number", value
    if kind == "overlap":
        # The same shape, from the reversed memory of base.
        n = int(np.prod(shape))
        if n > base.size:
            return base, view, key, "number", base.reshape(-1)[0].item()
        return base, view, key, "overlap", (n, shape)
    src = draw(hnp.arrays(base.dtype, shape, elements=_elements(str(base.dtype))))
    if kind == "broadcast" and len(shape) and src.size:
        cut = draw(st.integers(0, len(shape)))
        src = np.ascontiguousarray(src[(0,) * cut][None] if cut else src[:1])
        src = src.reshape(src.shape[1:]) if cut else src
    return base, view, key, kind, src


@PROFILE
@given(_assignments())
def test_assignment_matches_numpy(case):
    """t[key] = value writes what NumPy's a[key] = value writes, through
    strided views, broadcasts and overlapping memory, or both refuse."""
    base, view, key, kind, value = case
    reference = base.copy()
    t = dlbridge.from_dlpack(view(base))
    if kind == "bad-key":
        with pytest.raises(IndexError):
            t[key] = 0
        return
    if kind == "overlap":
        n, shape = value
        value_of = lambda b: b.reshape(-1)[::-1][:n].reshape(shape)
        want = value_of(reference).copy()
        view(reference)[key] = want
        t[key] = dlbridge.from_dlpack(value_of(base))
    else:
        given_value = dlbridge.from_dlpack if kind == "tensor" else \
            (lambda v: v)
        if kind == "list":
            value = value.tolist()
        try:
            view(reference)[key] = value
        except ValueError:
            with pytest.raises(ValueError):
                t[key] = given_value(value)
            return
        t[key] = given_value(value)
    np.testing.assert_array_equal(base, reference)

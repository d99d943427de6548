"""Every entry point that parses its own arguments accepts exactly the
signature its docstring declares, and names the offending argument when a
call does not fit it."""

import inspect
import re
import sys

import numpy as np
import pytest

from support import dlbridge

P = inspect.Parameter


def parsed_entry_points():
    """(name, callable) for each function that parses vectorcall arguments;
    Tensor methods are bound, so that their signatures drop self."""
    t = dlbridge.zeros(2)
    names = ["empty", "zeros", "full", "arange", "asarray", "from_dlpack", "pin", "prefetch",
             "advise"]
    found = [(n, getattr(dlbridge, n)) for n in names]
    found += [("to", t.to), ("__dlpack__", t.__dlpack__)]
    return found


def params_of(fn):
    return list(inspect.signature(fn).parameters.values())


def is_required(p):
    return p.default is P.empty


ENTRY_POINTS = parsed_entry_points()
IDS = [name for name, _ in ENTRY_POINTS]


def having(pred):
    """The entry points with a parameter for which pred holds, and ids."""
    chosen = [(n, fn) for n, fn in ENTRY_POINTS if any(pred(p) for p in params_of(fn))]
    return {"argvalues": chosen, "ids": [n for n, _ in chosen]}


def message(name, text):
    return "^" + re.escape(name + "() " + text) + "$"


@pytest.mark.parametrize("name,fn", ENTRY_POINTS, ids=IDS)
def test_one_positional_argument_too_many_is_refused(name, fn):
    npos = sum(p.kind != P.KEYWORD_ONLY for p in params_of(fn))
    given = npos + 1
    if npos == 0:
        expected = "takes no positional arguments (1 given)"
    else:
        expected = "takes at most %d positional argument%s (%d given)" % (
            npos, "" if npos == 1 else "s", given)
    with pytest.raises(TypeError, match=message(name, expected)):
        fn(*[object()] * given)


def required_call(fn, leave_out=None):
    """args, kwargs giving every required parameter but leave_out: the
    positional-only ones by position, the others by keyword."""
    args, kwargs = [], {}
    for p in params_of(fn):
        if not is_required(p) or p.name == leave_out:
            continue
        if p.kind == P.POSITIONAL_ONLY:
            args.append(object())
        else:
            kwargs[p.name] = object()
    return args, kwargs


@pytest.mark.parametrize("name,fn", ENTRY_POINTS, ids=IDS)
def test_an_unknown_keyword_is_named(name, fn):
    args, kwargs = required_call(fn)
    with pytest.raises(TypeError,
                       match=message(name, "got an unexpected keyword argument 'bogus'")):
        fn(*args, bogus=1, **kwargs)


@pytest.mark.parametrize("name,fn", **having(lambda p: p.kind == P.POSITIONAL_ONLY))
def test_a_positional_only_parameter_is_no_keyword(name, fn):
    posonly = [p.name for p in params_of(fn) if p.kind == P.POSITIONAL_ONLY]
    _, kwargs = required_call(fn)
    kwargs[posonly[0]] = object()
    with pytest.raises(TypeError, match=message(
            name, "got an unexpected keyword argument '%s'" % posonly[0])):
        fn(**kwargs)


@pytest.mark.parametrize("name,fn", **having(lambda p: p.kind == P.POSITIONAL_OR_KEYWORD))
def test_an_argument_given_twice_is_named(name, fn):
    params = params_of(fn)
    either = [i for i, p in enumerate(params) if p.kind == P.POSITIONAL_OR_KEYWORD]
    for i in either:
        with pytest.raises(TypeError, match=message(
                name, "got multiple values for argument '%s'" % params[i].name)):
            fn(*[object()] * (i + 1), **{params[i].name: object()})


@pytest.mark.parametrize("name,fn", **having(is_required))
def test_each_missing_required_argument_is_named(name, fn):
    required = [p for p in params_of(fn) if is_required(p)]
    for p in required:
        args, kwargs = required_call(fn, leave_out=p.name)
        with pytest.raises(TypeError,
                           match=message(name, "missing required argument '%s'" % p.name)):
            fn(*args, **kwargs)


def test_keywords_reach_the_parameters_they_name():
    t = dlbridge.full(fill_value=3, device="cpu", dtype="int16", shape=2)
    assert (t.shape, str(t.dtype), t.tolist()) == ((2,), "int16", [3, 3])
    r = dlbridge.arange(1, step=2, stop=7, device="cpu", dtype="int32")
    assert (str(r.dtype), r.tolist()) == ("int32", [1, 3, 5])
    a = dlbridge.asarray([1, 2], copy=True, device="cpu", dtype="int8")
    assert (str(a.dtype), a.tolist()) == ("int8", [1, 2])


# ------------------------------------------------------ shared converters


@pytest.mark.parametrize("call, exc, words", [
    # A bool is no int, in a shape or a device tuple.
    (lambda: dlbridge.zeros([2, True]), TypeError, "shape entry must be an int, not bool"),
    (lambda: dlbridge.zeros(2, device=(True, 0)), TypeError, "device_type must be an int, not bool"),
    (lambda: dlbridge.zeros(2, device=(1, False)), TypeError, "device_id must be an int, not bool"),
    # Numbers outside 32 bits are refused, not cut to the cpu's 1 or id 0.
    (lambda: dlbridge.zeros(2, device=(1 - 2**32, 0)), ValueError, "is out of range for DLPack"),
    (lambda: dlbridge.zeros(2, device=(1 + 2**32, 0)), ValueError, "is out of range for DLPack"),
    (lambda: dlbridge.zeros(2, device=(1, -(2**32))), ValueError, "is out of range for DLPack"),
    (lambda: dlbridge.zeros(2, device=(1, 2**32)), ValueError, "is out of range for DLPack"),
    (lambda: dlbridge.arange(2**64), OverflowError, "stop does not fit in 64 bits"),
    # An element past the dtype's range names the call, the element and
    # its value (arange refuses where NumPy and PyTorch wrap around).
    (lambda: dlbridge.arange(0, 300, dtype="int8"), OverflowError,
     "arange(): element 128 of the range: 128 is out of range for int8"),
    (lambda: dlbridge.arange(250, 260, dtype="uint8"), OverflowError,
     "arange(): element 6 of the range: 256 is out of range for uint8"),
    (lambda: dlbridge.arange(0, 20, dtype="int4"), OverflowError,
     "arange(): element 8 of the range: 8 is out of range for int4 (-8 to 7)"),
    # More list items than memory holds: a message, not CPython's bare
    # MemoryError.
    (lambda: dlbridge.zeros((2**62, 0)).tolist(), MemoryError,
     "tolist(): a list of 4611686018427387904 items does not fit in memory"),
    (lambda: dlbridge.zeros((2**62, 0), dtype="int4").tolist(), MemoryError,
     "tolist(): a list of 4611686018427387904 items does not fit in memory"),
    # A name is read up to its end, not to a NUL inside it.
    (lambda: dlbridge.zeros(2, device="cpu\0:1"), ValueError, "NUL character at byte 3"),
    (lambda: dlbridge.zeros(2, dtype="int8\0"), ValueError, "NUL character at byte 4"),
    # A lone surrogate has no UTF-8: the field and the text are named.
    (lambda: dlbridge.zeros(2, dtype="\ud800"), ValueError, "dtype '\\ud800' holds a lone surrogate"),
    (lambda: dlbridge.zeros(2, device="cu\udcffda"), ValueError, "device 'cu\\udcffda' holds a lone surrogate"),
])
def test_shared_converters_refuse(call, exc, words):
    with pytest.raises(exc, match=re.escape(words)):
        call()


class _Indexed:
    """A sequence read through __getitem__ alone, of n ones."""

    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return 1


class _Sized(_Indexed):
    def __len__(self):
        return self.n


@pytest.mark.parametrize("shape, exc, words", [
    ((1,) * 65, ValueError, "shape has 65 dimensions; at most 64"),
    ([1] * 65, ValueError, "shape has 65 dimensions; at most 64"),
    (_Sized(65), ValueError, "shape has 65 dimensions; at most 64"),
    (_Indexed(65), ValueError, "shape has more than 64 dimensions (it has no length"),
    ("ab", TypeError, "shape must be an int or a sequence of ints, not str"),
    (b"\x01", TypeError, "shape must be an int or a sequence of ints, not bytes"),
    ((2**40, 2**40), ValueError, "the element count exceeds INT64_MAX"),
    ((-1,), ValueError, "negative dimensions are not allowed (got -1)"),
    ((2**64,), OverflowError, "shape entry does not fit in 64 bits"),
    ((2, -(2**64)), OverflowError, "shape entry does not fit in 64 bits"),
])
def test_shapes_refused(shape, exc, words):
    with pytest.raises(exc, match=re.escape(words)):
        dlbridge.zeros(shape)


def test_shapes_at_the_limits():
    for shape in ((1,) * 64, [1] * 64, _Sized(64), _Indexed(64)):
        assert dlbridge.zeros(shape).shape == (1,) * 64
    # An empty array of ints is an empty shape, as NumPy reads it; a 0-d
    # one is one int.
    assert dlbridge.zeros(np.array([], dtype=np.int64)).shape == np.zeros(np.array([], dtype=np.int64)).shape
    assert dlbridge.zeros(np.array(3)).shape == (3,)
    assert dlbridge.zeros((0,)).shape == (0,)


def test_shape_items_read_by_index_are_not_kept():
    class Two:
        def __index__(self):
            return 2

    two = Two()

    class Shape:
        def __len__(self):
            return 3

        def __getitem__(self, i):
            if i >= 3:
                raise IndexError(i)
            return two

    before = sys.getrefcount(two)
    for _ in range(10):
        assert dlbridge.zeros(Shape()).shape == (2, 2, 2)
    assert sys.getrefcount(two) == before


def test_a_shape_is_refused_before_the_arguments_after_it_are_read():
    # Arguments are read in order: the shape's element count is checked as
    # the shape is read, before a bad dtype or device.
    with pytest.raises(ValueError, match="the element count exceeds INT64_MAX"):
        dlbridge.zeros((2**40, 2**40), dtype="float31")
    with pytest.raises(ValueError, match="the element count exceeds INT64_MAX"):
        dlbridge.full((2**40, 2**40), 1, device="nowhere")


def test_device_numbers_at_the_32_bit_limits_are_read():
    # The limits themselves are no range error: the largest id is read (and
    # refused for the cpu, which takes only 0, as "cpu:1" is), and the core
    # names a negative one.
    with pytest.raises(ValueError, match="device_id is 2147483647; cpu memory"):
        dlbridge.zeros(2, device=(1, 2**31 - 1))
    with pytest.raises(ValueError, match="cuda:2147483647"):
        dlbridge.from_dlpack(dlbridge.arange(2), device=(2, 2**31 - 1), copy=False)
    with pytest.raises(ValueError, match="device_id is -2147483648; must be >= 0"):
        dlbridge.zeros(2, device=(1, -(2**31)))
    with pytest.raises(ValueError, match="device_type is 2147483647; not a DLPack"):
        dlbridge.zeros(2, device=(2**31 - 1, 0))

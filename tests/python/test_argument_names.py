"""A refused argument is named by the call and the parameter it was given
as, not by the converter that read it: a device kind given as pin()'s
`kind` or share_import()'s `pin` is no `device`, the ints of reshape() and
permute() are the shape's and the axes' items, and a handle or a path of
the wrong type names its call."""

import re

import pytest

from support import dlbridge, np


class Junk:
    pass


@pytest.mark.parametrize("call, exc, words", [
    # pin(obj, kind): the kind is a device kind, named as kind.
    (lambda: dlbridge.pin(np.zeros(2), kind=1.5), TypeError, "pin(): kind must be a str"),
    (lambda: dlbridge.pin(np.zeros(2), kind=(3, 0, 0)), TypeError,
     "pin(): kind must be (device_type, device_id), a tuple of 2 ints, not of 3 items"),
    (lambda: dlbridge.pin(np.zeros(2), kind=(True, 0)), TypeError,
     "pin(): kind[0] (device_type) must be an int, not bool"),
    (lambda: dlbridge.pin(np.zeros(2), kind="bogus"), ValueError, "pin(): kind: "),
    (lambda: dlbridge.pin(np.zeros(2), kind=(3, 1)), ValueError,
     "pin(): kind (3, 1): device_id is 1; cuda_host memory is not tied to one device"),
    (lambda: dlbridge.pin(np.zeros(2), kind=(3, 2**40)), ValueError,
     "pin(): kind (3, 1099511627776) is out of range for DLPack"),
    # share_import(handle, fd, *, pin): the pin, named as pin.
    (lambda: dlbridge.share_import(b"x", 3, pin=Junk()), TypeError,
     "share_import(): pin must be a str"),
    (lambda: dlbridge.share_import(b"x", 3, pin=(11,)), TypeError,
     "share_import(): pin must be (device_type, device_id), a tuple of 2 ints, not of 1 items"),
    # The handle and the path of the wrong type.
    (lambda: dlbridge.share_import(Junk(), 3), TypeError,
     "share_import(): handle must be a bytes-like object (what share_export() gave), not Junk"),
    (lambda: dlbridge.share_import(1.5, 3), TypeError,
     "share_import(): handle must be a bytes-like object (what share_export() gave), not float"),
    (lambda: dlbridge.load_npy(Junk()), TypeError,
     "load_npy(): path must be a str, bytes or os.PathLike object, not Junk"),
    (lambda: dlbridge.load_npy(3), TypeError,
     "load_npy(): path must be a str, bytes or os.PathLike object, not int"),
    # reshape() and permute(): each int is an item of the shape or axes.
    (lambda: dlbridge.zeros(4).reshape(2, 1.5), TypeError, "reshape(): shape[1] must be an int, not float"),
    (lambda: dlbridge.zeros(4).reshape((2, Junk())), TypeError, "reshape(): shape[1] must be an int, not Junk"),
    (lambda: dlbridge.zeros(4).reshape(2**70), OverflowError, "reshape(): shape[0] does not fit in 64 bits"),
    (lambda: dlbridge.zeros((2, 2)).permute(0, "1"), TypeError, "permute(): axes[1] must be an int, not str"),
    (lambda: dlbridge.zeros((2, 2)).permute([2**70, 0]), OverflowError,
     "permute(): axes[0] does not fit in 64 bits"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_a_refused_argument_is_named_as_given(call, exc, words):
    with pytest.raises(exc, match="^" + re.escape(words)):
        call()


def test_a_producer_s_reported_device_is_named_as_its_answer():
    # synchronize(x) reads x.__dlpack_device__(): what it refuses is that
    # answer, not a device argument.
    class Reports:
        def __init__(self, answer):
            self.answer = answer

        def __dlpack_device__(self):
            return self.answer

        def __dlpack__(self, **kwargs):
            raise AssertionError("synchronize() imports nothing")

    prefix = "synchronize(): Reports.__dlpack_device__()"
    for answer, exc, words in [
        ((2,), TypeError, " must be (device_type, device_id), a tuple of 2 ints, not of 1 items"),
        ((2, 1.5), TypeError, "[1] (device_id) must be an int, not float"),
        ((2**40, 0), ValueError, " (1099511627776, 0) is out of range for DLPack"),
    ]:
        with pytest.raises(exc, match="^" + re.escape(prefix + words)):
            dlbridge.synchronize(Reports(answer))


def test_the_device_parameters_keep_their_names():
    # What names a device argument as device still does.
    with pytest.raises(TypeError, match=r"^device must be a str such as 'cpu'"):
        dlbridge.zeros(2, device=1.5)
    with pytest.raises(TypeError, match=re.escape("device_type must be an int, not bool")):
        dlbridge.zeros(2, device=(True, 0))
    with pytest.raises(ValueError, match=r"^device \(1, 1\): device_id is 1; cpu memory"):
        dlbridge.zeros(2, device=(1, 1))


def test_a_long_producer_type_name_still_names_the_item():
    # The answer's name holds up to 100 characters of the type's name; the
    # item's name after it is not cut short.
    Long = type("R" * 100, (), {"__dlpack_device__": lambda self: (2, 1.5)})
    with pytest.raises(TypeError) as e:
        dlbridge.synchronize(Long())
    assert str(e.value) == ("synchronize(): " + "R" * 100 + ".__dlpack_device__()[1] (device_id) "
                            "must be an int, not float")

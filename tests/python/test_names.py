"""Names (dtype, device, advice) parse whole or are refused: text after a NUL
character must not be dropped by the C parsers."""

import pytest

import dlbridge

DTYPES = ["float32", "int4", "bfloat16"]
DEVICES = ["cpu", "cuda_host", "cuda:1"]


class FrameworkDevice:
    def __init__(self, type_, index):
        self.type = type_
        self.index = index


class NamedDtype:
    def __init__(self, name):
        self.name = name


def _dtype_calls(name):
    return {
        "empty": lambda: dlbridge.empty(2, dtype=name),
        "zeros": lambda: dlbridge.zeros(2, dtype=name),
        "full": lambda: dlbridge.full(2, 1, dtype=name),
        "arange": lambda: dlbridge.arange(2, dtype=name),
        "asarray": lambda: dlbridge.asarray([1, 0], dtype=name),
        "empty_obj": lambda: dlbridge.empty(2, dtype=NamedDtype(name)),
    }


def _device_calls(name):
    t = dlbridge.zeros(2)
    return {
        "empty": lambda: dlbridge.empty(2, device=name),
        "zeros": lambda: dlbridge.zeros(2, device=name),
        "full": lambda: dlbridge.full(2, 1.0, device=name),
        "arange": lambda: dlbridge.arange(2, device=name),
        "asarray": lambda: dlbridge.asarray([1.0], device=name),
        "from_dlpack": lambda: dlbridge.from_dlpack(t, device=name),
        "to": lambda: t.to(name),
        "pin": lambda: dlbridge.pin(bytearray(8), kind=name),
        "prefetch": lambda: dlbridge.prefetch(t, name),
        "advise": lambda: dlbridge.advise(t, "set_accessed_by", device=name),
        "synchronize": lambda: dlbridge.synchronize(name),
        "framework": lambda: dlbridge.empty(
            2, device=FrameworkDevice(name, None)),
    }


def _outcome(call):
    try:
        call()
    except Exception as e:  # the outcome is compared, whatever it is
        return type(e), str(e)
    return None


@pytest.mark.parametrize("entry", sorted(_dtype_calls("x")))
@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("tail", ["junk", "", "\0"])
def test_dtype_name_with_nul_is_refused(entry, name, tail):
    whole = _outcome(_dtype_calls(name)[entry])
    assert whole is None or "NUL" not in whole[1]
    with pytest.raises(ValueError, match="NUL character at byte %d" % len(name)):
        _dtype_calls(name + "\0" + tail)[entry]()


@pytest.mark.parametrize("entry", sorted(_device_calls("x")))
@pytest.mark.parametrize("name", DEVICES)
def test_device_name_with_nul_is_refused(entry, name):
    whole = _outcome(_device_calls(name)[entry])
    assert whole is None or "NUL" not in whole[1]
    with pytest.raises(ValueError, match="NUL character at byte %d" % len(name)):
        _device_calls(name + "\0x")[entry]()


def test_nul_only_name_is_refused():
    with pytest.raises(ValueError, match="NUL character at byte 0"):
        dlbridge.empty(1, dtype="\0")
    with pytest.raises(ValueError, match="NUL character at byte 0"):
        dlbridge.empty(1, device="\0")


def test_advice_name_with_nul_is_refused():
    t = dlbridge.zeros(2)
    whole = _outcome(lambda: dlbridge.advise(t, "set_read_mostly"))
    assert whole is None or "NUL" not in whole[1]
    with pytest.raises(ValueError, match="NUL character at byte 15"):
        dlbridge.advise(t, "set_read_mostly\0junk")


def test_framework_device_with_index_and_nul_is_refused():
    with pytest.raises(ValueError, match="NUL character at byte 4"):
        dlbridge.empty(2, device=FrameworkDevice("cuda\0x", 0))


def test_names_without_nul_still_parse():
    assert dlbridge.empty(2, dtype="int4").dtype == "int4"
    assert dlbridge.empty(2, device=FrameworkDevice("cpu", None)).device == "cpu"

"""The legacy (unversioned) struct says nothing about writability, so data
imported through it is read-only, as NumPy imports it; no export of it,
versioned or through the buffer protocol, offers writes its producer never
offered."""

import numpy as np
import pytest

import dlbridge
from support import READ_ONLY, capsule_of, needs_torch, torch


class OldProducer:
    """A producer from before max_version: legacy capsules only."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def check_read_only_everywhere(t, helper):
    assert t.readonly
    assert memoryview(t).readonly
    assert not np.asarray(t).flags.writeable
    assert not np.from_dlpack(t).flags.writeable
    assert helper.exchange_flags(t)[0] & READ_ONLY
    assert dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0))).readonly
    assert dlbridge.from_dlpack(t).readonly
    assert t[1:].readonly and t.reshape(-1).readonly
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()
    # A copy is the consumer's own.
    c = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True))
    assert not c.readonly and c.tolist() == t.tolist()


def test_numpy_legacy_capsule_imports_read_only(helper):
    a = np.arange(4.0)
    cap = a.__dlpack__()
    assert '"dltensor"' in repr(cap)
    t = dlbridge.from_dlpack(cap)
    assert t.data_ptr == a.ctypes.data
    check_read_only_everywhere(t, helper)


def test_old_producer_imports_read_only(helper):
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = dlbridge.from_dlpack(OldProducer(a))
    assert t.tolist() == a.tolist() and t.data_ptr == a.ctypes.data
    check_read_only_everywhere(t, helper)


def test_versioned_capsules_keep_their_own_flags():
    a = np.arange(3.0)
    assert not dlbridge.from_dlpack(capsule_of(a)).readonly
    assert dlbridge.from_dlpack(capsule_of(a, flags=READ_ONLY)).readonly
    assert not dlbridge.from_dlpack(a).readonly


@needs_torch
def test_torch_legacy_capsule_imports_read_only(helper):
    x = torch.arange(5, dtype=torch.float32)
    t = dlbridge.from_dlpack(torch.utils.dlpack.to_dlpack(x))
    assert t.data_ptr == x.data_ptr()
    check_read_only_everywhere(t, helper)


@needs_torch
def test_torch_versioned_import_stays_writable():
    x = torch.zeros(3)
    t = dlbridge.from_dlpack(x)
    assert not t.readonly
    np.from_dlpack(t)[1] = 5
    assert x.tolist() == [0.0, 5.0, 0.0]


@needs_torch
def test_torch_ignores_read_only_on_import():
    # PyTorch 2.13 takes READ_ONLY data without a warning and writably:
    # dlbridge sets the flag; it cannot make PyTorch honour it.
    t = dlbridge.from_dlpack(np.arange(3.0).__dlpack__())
    assert t.readonly
    y = torch.from_dlpack(t)
    assert y.data_ptr() == t.data_ptr and y.tolist() == [0.0, 1.0, 2.0]

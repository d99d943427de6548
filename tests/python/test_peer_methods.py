"""The methods PyTorch users reach for (element_size, numel, dim,
is_contiguous, stride) answer as PyTorch's do, next to the NumPy-style
properties."""

import numpy as np
import pytest

from support import dlbridge, needs_torch, torch

SHAPES = [(), (5,), (2, 3), (3, 1, 4), (0, 3), (1, 1)]
VIEWS = [lambda x: x, lambda x: x.permute(tuple(reversed(range(x.ndim)))),
         lambda x: x[..., ::2] if x.ndim else x, lambda x: x[None]]


@needs_torch
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("view", range(len(VIEWS)))
@pytest.mark.parametrize("dtype", ["int8", "int16", "float32", "float64", "complex128"])
def test_methods_answer_as_torch(shape, view, dtype):
    a = np.zeros(shape, dtype=dtype)
    t = VIEWS[view](dlbridge.asarray(a))
    p = VIEWS[view](torch.from_numpy(a))
    assert t.element_size() == p.element_size() == t.itemsize
    assert t.numel() == p.numel() == t.size
    assert t.dim() == p.dim() == t.ndim
    assert t.is_contiguous() == p.is_contiguous()
    assert t.stride() == t.strides
    # The stride of an extent of 1 is free: None gives NumPy's 0, PyTorch's
    # unsqueeze another.
    for d in range(-t.ndim, t.ndim):
        if t.shape[d] != 1:
            assert t.stride(d) == p.stride(d)
            assert t.stride(dim=d) == p.stride(dim=d)
        assert t.stride(d) == t.strides[d]


def test_is_contiguous_follows_the_layout():
    t = dlbridge.zeros((3, 4))
    assert t.is_contiguous() and t[1:].is_contiguous()
    assert not t[:, 1:].is_contiguous() and not t.T.is_contiguous()
    assert not t[:, :1].is_contiguous() and t[1:2].is_contiguous()
    # Extents of 1 may have any stride, the 0 of a new axis included.
    assert dlbridge.zeros((3, 1))[None, ..., None].is_contiguous()


def test_stride_refuses_bad_dims():
    t = dlbridge.zeros((2, 3))
    for bad in (2, -3, 1 << 70):
        with pytest.raises((IndexError, OverflowError)):
            t.stride(bad)
    with pytest.raises(TypeError):
        t.stride(1.0)
    with pytest.raises(TypeError):
        t.stride("0")
    with pytest.raises(IndexError, match="out of range"):
        dlbridge.full((), 1).stride(0)
    assert dlbridge.full((), 1).stride() == ()
    assert t.stride(None) == (3, 1)


def test_data_ptr_points_at_the_data():
    a = np.arange(6, dtype=np.int32)
    t = dlbridge.asarray(a)
    assert t.data_ptr + t.byte_offset == a.__array_interface__["data"][0]
    v = t[2:]
    assert v.data_ptr + v.byte_offset == a.__array_interface__["data"][0] + 8

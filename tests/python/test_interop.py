"""Round trips with real NumPy 2.x and PyTorch 2.x: every dtype both sides
support, zero copy proven by writing on one side and reading the other."""

import pytest

from support import dlbridge, needs_torch, np, torch

NUMPY_DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]


def numpy_sample(dtype, shape=(3, 4)):
    n = int(np.prod(shape))
    if dtype == "bool":
        return (np.arange(n) % 3 == 0).reshape(shape)
    return (np.arange(n) % 7 + 1).astype(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_numpy_round_trip_both_ways(dtype):
    a = numpy_sample(dtype)
    t = dlbridge.from_dlpack(a)
    assert t.dtype == dtype
    assert t.shape == a.shape
    b = np.from_dlpack(t)
    assert b.dtype == a.dtype
    assert np.array_equal(a, b)
    assert b.ctypes.data == a.ctypes.data
    # Written through NumPy's view of our tensor, read in the original.
    b[1, 2] = b[0, 0] if dtype != "bool" else not a[1, 2]
    assert a[1, 2] == b[1, 2]
    # And the other way: a dlbridge tensor exported to NumPy and back.
    z = dlbridge.zeros((2, 2), dtype=dtype)
    np.from_dlpack(z)[0, 1] = 1
    assert dlbridge.from_dlpack(np.from_dlpack(z)).tolist()[0][1] in (1, True)
    assert z.tolist()[0][1] in (1, True)


@pytest.mark.parametrize("legacy", [False, True])
def test_numpy_capsules_both_structs(legacy):
    a = np.arange(6, dtype=np.int32)
    cap = a.__dlpack__() if legacy else a.__dlpack__(max_version=(1, 0))
    t = dlbridge.from_dlpack(cap)
    assert t.data_ptr == a.ctypes.data
    if legacy:
        # The legacy struct cannot say writes are allowed: read-only.
        assert t.readonly and not np.from_dlpack(t).flags.writeable
    else:
        np.from_dlpack(t)[0] = 42
        assert a[0] == 42


def test_numpy_views_with_negative_and_non_unit_strides():
    base = np.arange(120, dtype=np.float64).reshape(4, 5, 6)
    for view in (base[::-1], base[:, ::-2, 1::3], base.transpose(2, 0, 1), base[1:3, 4, ::-1], base[..., 5]):
        t = dlbridge.from_dlpack(view)
        assert t.tolist() == view.tolist()
        assert t.strides == tuple(s // 8 for s in view.strides)
        back = np.from_dlpack(t)
        assert back.strides == view.strides
        assert back.__array_interface__["data"][0] == view.__array_interface__["data"][0]
        back[(0,) * back.ndim] = -1.0
        assert view[(0,) * view.ndim] == -1.0


def test_numpy_broadcast_zero_strides():
    row = np.arange(3.0)
    view = np.broadcast_to(row, (4, 3))
    t = dlbridge.from_dlpack(view)
    assert t.strides == (0, 1)
    assert t.readonly  # NumPy marks broadcast views read-only
    assert np.from_dlpack(t).tolist() == view.tolist()


@pytest.mark.parametrize("ndim", [0, 1, 32])
def test_numpy_ndim_extremes(ndim):
    shape = (1,) * (ndim - 2) + (2, 3) if ndim >= 2 else (5,) * ndim
    a = np.arange(int(np.prod(shape)), dtype=np.int16).reshape(shape)
    t = dlbridge.from_dlpack(a)
    assert t.ndim == ndim and t.shape == a.shape
    b = np.from_dlpack(t)
    assert b.shape == a.shape and np.array_equal(a, b)


def test_numpy_size_zero():
    for shape in ((0,), (3, 0, 2), (0, 0)):
        a = np.zeros(shape, dtype=np.float32)
        t = dlbridge.from_dlpack(a)
        assert t.size == 0 and t.shape == shape
        assert np.from_dlpack(t).shape == shape


def test_numpy_read_only_arrays():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    assert t.readonly
    assert not np.from_dlpack(t).flags.writeable
    with pytest.raises(BufferError):
        t.__dlpack__()  # the legacy struct cannot say read-only


def test_numpy_byte_offset_through_views():
    a = np.arange(10, dtype=np.int64)
    t = dlbridge.from_dlpack(a)[3:]
    assert t.data_ptr + t.byte_offset == a[3:].ctypes.data
    assert np.from_dlpack(t).tolist() == list(range(3, 10))


# ---------------------------------------------------------------------------
# PyTorch
# ---------------------------------------------------------------------------

TORCH_DTYPES = [
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
]


def torch_sample(name, shape=(3, 4)):
    dt = getattr(torch, name, None)
    if dt is None:
        pytest.skip(f"this PyTorch has no {name}")
    n = 1
    for s in shape:
        n *= s
    raw = (torch.arange(n, dtype=torch.int64) % 7 + 1).to(torch.uint8)
    size = torch.empty(0, dtype=dt).element_size()
    # Arbitrary bit patterns, so every type's bytes are tested alike.
    x = torch.empty(shape, dtype=dt)
    x.view(torch.uint8).reshape(-1)[:] = raw.repeat_interleave(size)[: n * size] if size > 1 else raw
    return x


def same_bytes(x, y):
    return torch.equal(x.contiguous().view(torch.uint8), y.contiguous().view(torch.uint8))


@needs_torch
@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_round_trip_both_ways(name):
    x = torch_sample(name)
    try:
        torch.from_dlpack(x)
    except Exception as e:  # pragma: no cover - depends on the PyTorch build
        pytest.skip(f"PyTorch cannot export {name}: {e}")
    t = dlbridge.from_dlpack(x)
    assert t.dtype == name
    assert t.data_ptr + t.byte_offset == x.data_ptr()
    y = torch.from_dlpack(t)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert y.data_ptr() == x.data_ptr()
    assert same_bytes(x, y)
    # Written through our tensor's export, read in the original.
    y.view(torch.uint8)[1, 0] = 0x3C
    assert x.view(torch.uint8)[1, 0].item() == 0x3C
    # A dlbridge-made tensor read by PyTorch.
    z = dlbridge.empty((2, 2), dtype=name)
    zt = torch.from_dlpack(z)
    assert zt.dtype == x.dtype and zt.data_ptr() == z.data_ptr
    zt.view(torch.uint8)[0, 0] = 1
    w = torch.from_dlpack(dlbridge.from_dlpack(zt))
    assert w.data_ptr() == z.data_ptr and w.view(torch.uint8)[0, 0].item() == 1


@needs_torch
def test_torch_goes_through_its_exchange_table():
    cap = type(torch.empty(0)).__dlpack_c_exchange_api__
    assert "dlpack_exchange_api" in repr(cap)

    calls = []

    class Spy(torch.Tensor):
        def __dlpack__(self, *args, **kwargs):  # pragma: no cover - must not run
            calls.append(kwargs)
            return super().__dlpack__(*args, **kwargs)

    s = torch.arange(4.0).as_subclass(Spy)
    t = dlbridge.from_dlpack(s)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert calls == []


@needs_torch
def test_torch_views_with_non_unit_strides_and_offsets():
    base = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    for view in (base[:, ::2, 1::2], base.permute(2, 0, 1), base[1:, 2], base[..., 3], base.as_strided((2, 2), (0, 7), 3)):
        t = dlbridge.from_dlpack(view)
        assert t.tolist() == view.tolist()
        assert t.strides == view.stride()
        back = torch.from_dlpack(t)
        assert back.stride() == view.stride() and back.data_ptr() == view.data_ptr()


@needs_torch
@pytest.mark.parametrize("ndim", [0, 32])
def test_torch_ndim_extremes(ndim):
    shape = (1,) * (ndim - 2) + (2, 3) if ndim else ()
    x = torch.arange(6 if ndim else 1, dtype=torch.int32).reshape(shape)
    t = dlbridge.from_dlpack(x)
    assert t.ndim == ndim
    y = torch.from_dlpack(t)
    assert y.shape == x.shape and torch.equal(x, y)


@needs_torch
def test_torch_size_zero():
    x = torch.empty((2, 0, 3))
    t = dlbridge.from_dlpack(x)
    assert t.shape == (2, 0, 3) and t.size == 0
    assert torch.from_dlpack(t).shape == (2, 0, 3)


@needs_torch
def test_torch_legacy_and_versioned_capsules():
    x = torch.arange(4)
    for cap in (torch.utils.dlpack.to_dlpack(x), x.__dlpack__(max_version=(1, 0))):
        t = dlbridge.from_dlpack(cap)
        torch.from_dlpack(t)[0] = 7
        assert x[0].item() == 7
        x[0] = 0


@needs_torch
def test_torch_consumes_a_read_only_tensor_without_crashing():
    a = np.arange(3.0)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    # PyTorch ignores READ_ONLY (it has no read-only tensors); the data is
    # still the same memory.
    assert torch.from_dlpack(t).tolist() == [0.0, 1.0, 2.0]


def test_numpy_to_torch_through_dlbridge():
    if torch is None:
        pytest.skip("PyTorch is not installed")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = torch.from_dlpack(dlbridge.from_dlpack(a))
    x[0, 0] = 100
    assert a[0, 0] == 100
    b = np.from_dlpack(dlbridge.from_dlpack(x))
    assert b.ctypes.data == a.ctypes.data

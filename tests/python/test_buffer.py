"""The buffer protocol (both ways) and __cuda_array_interface__."""

import array
import ctypes
import gc
import re
import sys
import weakref

import pytest

from support import (
    BUF,
    KDLCUDA,
    KDLCUDAHOST,
    KDLCUDAMANAGED,
    KDLROCM,
    KDLROCMHOST,
    READ_ONLY,
    capsule_of,
    dlbridge,
    helper,
    np,
)

LE = "<" if sys.byteorder == "little" else ">"


def on(kind, a, **fields):
    return dlbridge.from_dlpack(capsule_of(a, device=(kind, 0), **fields))


# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype, fmt",
    [
        ("bool", "?"),
        ("int8", "b"),
        ("int16", "h"),
        ("int32", "i"),
        ("int64", "q"),
        ("uint8", "B"),
        ("uint16", "H"),
        ("uint32", "I"),
        ("uint64", "Q"),
        ("float16", "e"),
        ("float32", "f"),
        ("float64", "d"),
        ("complex64", "Zf"),
        ("complex128", "Zd"),
    ],
)
def test_formats(dtype, fmt):
    t = dlbridge.full((2, 3), 1, dtype=dtype)
    m = memoryview(t)
    assert m.format == fmt
    assert m.shape == (2, 3)
    assert m.itemsize == t.itemsize
    n = np.asarray(t)
    assert n.dtype == np.dtype(dtype) and n.tolist() == t.tolist()
    # ... and back, through the buffer protocol.
    assert dlbridge.asarray(m).dtype == dtype


def test_buffer_is_zero_copy_and_writable():
    t = dlbridge.zeros(4, dtype="int32")
    np.asarray(t)[2] = 5
    memoryview(t)[3] = 6
    assert t.tolist() == [0, 0, 5, 6]
    info = helper.get_buffer(t, BUF.WRITABLE | BUF.RECORDS_RO)
    assert info["buf"] == t.data_ptr and not info["readonly"] and info["obj_is_exporter"]


def test_strided_buffers_carry_byte_strides():
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    t = dlbridge.from_dlpack(a)[::-1, 1::2]
    m = memoryview(t)
    assert m.strides == (-48, 16)
    assert np.asarray(t).tolist() == a[::-1, 1::2].tolist()
    info = helper.get_buffer(t, BUF.RECORDS_RO)
    assert info["buf"] == t.data_ptr + t.byte_offset


def test_contiguity_requests():
    t = dlbridge.arange(12, dtype="int32").reshape(3, 4)
    for flags in (BUF.SIMPLE, BUF.ND, BUF.C_CONTIGUOUS, BUF.ANY_CONTIGUOUS):
        assert helper.get_buffer(t, flags)["len"] == 48
    simple = helper.get_buffer(t, BUF.SIMPLE)
    assert simple["shape"] is None and simple["format"] is None and simple["ndim"] == 1
    # Shape without strides when strides are not asked for.
    nd = helper.get_buffer(t, BUF.ND)
    assert (nd["ndim"], nd["shape"], nd["strides"]) == (2, (3, 4), None)
    assert helper.get_buffer(t, BUF.STRIDES)["strides"] == (16, 4)
    with pytest.raises(BufferError, match="contiguous"):
        helper.get_buffer(t, BUF.F_CONTIGUOUS)
    tt = t.T
    assert helper.get_buffer(tt, BUF.F_CONTIGUOUS)["strides"] == (4, 16)
    assert helper.get_buffer(tt, BUF.ANY_CONTIGUOUS)["len"] == 48
    for flags in (BUF.SIMPLE, BUF.ND, BUF.C_CONTIGUOUS):
        with pytest.raises(BufferError, match="contiguous"):
            helper.get_buffer(tt, flags)
    s = t[:, ::2]
    for flags in (BUF.SIMPLE, BUF.ANY_CONTIGUOUS):
        with pytest.raises(BufferError):
            helper.get_buffer(s, flags)
    assert helper.get_buffer(s, BUF.STRIDES)["strides"] == (16, 8)


def test_read_only_buffers(helper):
    t = dlbridge.from_dlpack(capsule_of(np.arange(3, dtype=np.float32), flags=READ_ONLY))
    assert memoryview(t).readonly
    assert not np.asarray(t).flags.writeable
    with pytest.raises(BufferError, match="read-only"):
        helper.get_buffer(t, BUF.WRITABLE)


def test_scalar_and_empty_buffers():
    m = memoryview(dlbridge.full((), 3.0, dtype="float64"))
    assert m.ndim == 0 and m.shape == () and m.tobytes() == np.float64(3.0).tobytes()
    e = dlbridge.zeros((0, 5))
    assert memoryview(e).shape == (0, 5)
    assert bytes(e) == b""


def test_empty_tensors_with_wild_strides_export_a_buffer(helper):
    t = dlbridge.from_dlpack(helper.make_capsule(data=None, shape=(0, 3), strides=(1 << 61, 1 << 61)))
    m = memoryview(t)
    assert m.shape == (0, 3) and m.nbytes == 0
    # No data pointer: the buffer's is still not NULL, which some consumers
    # refuse even for no bytes.
    assert helper.get_buffer(t, BUF.RECORDS_RO)["buf"] != 0
    cai_t = dlbridge.from_dlpack(
        helper.make_capsule(data=None, shape=(3, 0), strides=(1 << 61, 5), device=(KDLCUDAHOST, 0))
    )
    assert cai_t.__cuda_array_interface__["shape"] == (3, 0)


def test_extent_one_dimensions_with_wild_strides_export_a_buffer(helper):
    # A dimension of extent 1 is never stepped: its stride may be anything,
    # even one whose byte count overflows, and goes out as one item.
    a = np.arange(3.0)
    for wild in (1 << 61, -(1 << 62)):
        t = dlbridge.from_dlpack(
            helper.make_capsule(data=a.ctypes.data, shape=(1, 3), strides=(wild, 1), dtype=(2, 64, 1))
        )
        m = memoryview(t)
        assert m.strides == (8, 8) and m.tolist() == [[0.0, 1.0, 2.0]]
        assert np.asarray(t).tolist() == [[0.0, 1.0, 2.0]]


def test_host_type_memory_exports_a_buffer():
    a = np.arange(3, dtype=np.float32)
    for kind in (KDLCUDAHOST, KDLCUDAMANAGED, KDLROCMHOST):
        m = memoryview(on(kind, a))
        assert m.tolist() == [0.0, 1.0, 2.0]


def test_device_memory_refuses_the_buffer_protocol():
    for kind in (KDLCUDA, KDLROCM):
        t = dlbridge.from_dlpack(helper.make_capsule(data=0x1000, shape=(2,), device=(kind, 0)))
        # __cuda_array_interface__ is offered for CUDA memory only.
        with pytest.raises(BufferError, match="^the tensor is in %s:0 memory, which the CPU cannot read; "
                           "use __dlpack__%s$" % (("cuda", " or __cuda_array_interface__") if kind == KDLCUDA
                                                  else ("rocm", ""))):
            memoryview(t)


def test_dtypes_without_a_format_refuse_the_buffer_protocol():
    for dtype in ("bfloat16", "float8_e4m3fn", "float32x4", "int4"):
        with pytest.raises(BufferError, match="format"):
            memoryview(dlbridge.empty(4, dtype=dtype))


def test_get_buffer_returns_zero():
    # The protocol's contract is 0 on success; some consumers test for it
    # exactly.
    view = ctypes.create_string_buffer(256)
    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int]
    get.restype = ctypes.c_int
    t = dlbridge.arange(3)
    assert get(t, ctypes.addressof(view), BUF.RECORDS_RO) == 0
    ctypes.pythonapi.PyBuffer_Release.argtypes = [ctypes.c_void_p]
    ctypes.pythonapi.PyBuffer_Release(ctypes.addressof(view))


def test_buffer_keeps_the_tensor_alive():
    t = dlbridge.arange(4)
    m = memoryview(t)
    del t
    assert m.tolist() == [0, 1, 2, 3]


# ---------------------------------------------------------------------------
# __cuda_array_interface__
# ---------------------------------------------------------------------------


def test_cuda_array_interface_for_cuda_memory():
    t = dlbridge.from_dlpack(
        helper.make_capsule(data=0x10000, shape=(2, 3), dtype=(2, 32, 1), device=(KDLCUDA, 0), byte_offset=8)
    )
    cai = t.__cuda_array_interface__
    assert cai == {
        "shape": (2, 3),
        "typestr": LE + "f4",
        "data": (0x10008, False),
        "version": 3,
        "strides": None,
        "stream": None,
    }


def test_cuda_array_interface_strides_read_only_and_empty(helper):
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    t = dlbridge.from_dlpack(capsule_of(a[:, ::-2], device=(KDLCUDAMANAGED, 0), flags=READ_ONLY))
    cai = t.__cuda_array_interface__
    assert cai["strides"] == (8, -4)
    assert cai["data"] == (t.data_ptr + t.byte_offset, True)
    assert cai["typestr"] == LE + "i2"
    empty = dlbridge.from_dlpack(helper.make_capsule(data=None, shape=(0,), device=(KDLCUDAHOST, 0)))
    assert empty.__cuda_array_interface__["data"] == (0, False)
    # The pointer of an empty array is 0 whatever the tensor's data is.
    placed = dlbridge.from_dlpack(
        helper.make_capsule(data=0x10000, shape=(2, 0), device=(KDLCUDA, 0), byte_offset=8)
    )
    assert placed.__cuda_array_interface__["data"] == (0, False)
    assert on(KDLCUDAHOST, np.zeros(2, np.bool_)).__cuda_array_interface__["typestr"] == "|b1"
    assert on(KDLCUDAHOST, np.zeros(2, np.complex128)).__cuda_array_interface__["typestr"] == LE + "c16"


def test_cuda_array_interface_is_absent_elsewhere(helper):
    assert not hasattr(dlbridge.arange(3), "__cuda_array_interface__")
    assert not hasattr(on(KDLROCMHOST, np.zeros(2, np.float32)), "__cuda_array_interface__")
    t = dlbridge.from_dlpack(helper.make_capsule(data=0x1000, shape=(2,), dtype=(4, 16, 1), device=(KDLCUDA, 0)))
    with pytest.raises(AttributeError, match="type string"):
        t.__cuda_array_interface__


# ---------------------------------------------------------------------------
# Import (asarray)
# ---------------------------------------------------------------------------


def test_asarray_of_buffers():
    ba = bytearray(b"\x01\x02\x03")
    t = dlbridge.asarray(ba)
    assert (t.dtype, t.readonly, t.tolist()) == ("uint8", False, [1, 2, 3])
    np.from_dlpack(t)[0] = 9
    assert ba[0] == 9
    with pytest.raises(BufferError):
        ba.append(1)  # exported: it may not move
    del t
    ba.append(1)
    assert dlbridge.asarray(b"ab").readonly
    f = dlbridge.asarray(array.array("d", [1.5, 2.5]))
    assert (f.dtype, f.tolist()) == ("float64", [1.5, 2.5])
    assert dlbridge.asarray(memoryview(b"abcd").cast("B", (2, 2))).shape == (2, 2)
    i = dlbridge.asarray(array.array("l", [1, -2]))
    assert i.dtype == f"int{8 * array.array('l').itemsize}" and i.tolist() == [1, -2]


def test_asarray_shares_bytes_and_numpy_scalars_even_with_copy_false():
    # Buffers, as the standard's asarray reads them (NumPy 2 refuses both).
    b = b"ab"
    t = dlbridge.asarray(b, copy=False)
    assert t.readonly and t.tolist() == [97, 98]
    assert t.data_ptr + t.byte_offset == ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p).value
    s = np.float32(1.5)
    u = dlbridge.asarray(s, copy=False)
    assert u.readonly and u.shape == () and u.item() == 1.5
    assert dlbridge.asarray(b, copy=True).readonly is False


def test_asarray_of_a_buffer_its_exporter_refuses():
    # A released memoryview refuses both requests (with ValueError, which
    # also answers a writable request for read-only memory): the second
    # refusal is the error.
    m = memoryview(b"ab")
    m.release()
    with pytest.raises(ValueError, match="released memoryview"):
        dlbridge.asarray(m)


def test_asarray_of_strided_buffers():
    a = np.arange(12, dtype=np.uint8).reshape(3, 4)
    t = dlbridge.asarray(memoryview(a[::-1, ::2]))
    assert t.data_ptr == a[::-1, ::2].ctypes.data
    assert t.strides == (-4, 2)
    assert t.tolist() == [[8, 10], [4, 6], [0, 2]]


def test_asarray_of_ctypes_buffers():
    arr = (ctypes.c_int16 * 3)(1, 2, 3)
    t = dlbridge.asarray(arr)
    assert t.dtype == "int16" and t.tolist() == [1, 2, 3]


def test_asarray_refuses_buffers_dlpack_cannot_describe():
    rec = np.zeros(3, dtype=[("a", "i4"), ("b", "f8")])
    with pytest.raises((BufferError, TypeError)):
        dlbridge.asarray(memoryview(rec))
    with pytest.raises(BufferError, match="not a multiple"):
        dlbridge.asarray(memoryview(rec["b"]))
    foreign = ">" if sys.byteorder == "little" else "<"
    for code in ("f8", "i2", "u2", "f2"):
        with pytest.raises(BufferError, match="byte order"):
            dlbridge.asarray(memoryview(np.zeros(2, dtype=foreign + code)))
    # One byte has no order.
    assert dlbridge.asarray(memoryview(np.arange(2, dtype=foreign + "i1"))).tolist() == [0, 1]
    with pytest.raises(BufferError):
        dlbridge.asarray(memoryview(np.zeros(2, dtype="O")))


class _Stamp(np.datetime64):
    pass


@pytest.mark.parametrize(
    "value",
    [
        np.datetime64("2020-01-01"),
        np.timedelta64(5, "s"),
        _Stamp("2021-03-04"),
        [np.datetime64("2020-01-01", "s")],
    ],
    ids=["datetime64", "timedelta64", "subclass", "in-a-list"],
)
def test_asarray_refuses_numpy_time_scalars(value):
    # NumPy exports their 8 bytes as unsigned bytes; they are no uint8 vector.
    with pytest.raises(BufferError, match=r"numpy\.(datetime|timedelta)64 scalars"):
        dlbridge.asarray(value)
    # Bytes scalars stay bytes, as bytes do.
    assert dlbridge.asarray(np.bytes_(b"ab")).tolist() == [97, 98]


@pytest.mark.parametrize("itemsize", [2, 3, 4, 5, 8, 16])
def test_buffer_without_a_format_is_bytes(helper, itemsize):
    # No format means 'B': an exporter that leaves it out with items of
    # another size is refused by name (the message printed the absent format
    # as a C string, a NULL dereference; items of 2, 4 or 8 bytes were read
    # as uint16, uint32 or uint64), wherever a buffer is read.
    buf = helper.careless_buffer(itemsize)
    for read in (dlbridge.asarray, lambda b: dlbridge.asarray([b, b]),
                 lambda b: dlbridge.zeros(64 // itemsize).__setitem__(..., b)):
        with pytest.raises(BufferError, match="format 'B' with item size %d" % itemsize):
            read(buf)
    t = dlbridge.asarray(helper.careless_buffer(1))
    assert t.dtype == "uint8" and t.shape == (64,)


def test_buffer_import_releases_the_buffer_when_the_last_view_goes():
    ba = bytearray(8)
    t = dlbridge.asarray(ba)
    v = t[2:]
    del t
    with pytest.raises(BufferError):
        ba.append(0)
    del v
    ba.append(0)


@pytest.mark.parametrize(
    "fmt, itemsize",
    [("b", 4), ("B", 8), ("c", 2), ("=h", 8), ("i", 2), ("<i", 8), ("q", 4), ("Q", 2), ("n", 4), ("N", 1),
     ("?", 2), ("e", 4), ("f", 8), ("d", 4), ("Zf", 4), ("Zd", 8), ("l", 2), ("<L", 16)],
)
def test_buffer_items_must_have_their_format_letters_size(helper, fmt, itemsize):
    # An exporter saying 'b' with 4-byte items describes no int32 (NumPy and
    # memoryview refuse it too); integer letters were read at whatever size
    # the exporter gave.
    buf = helper.careless_buffer(itemsize, fmt, (2,), (itemsize,))
    with pytest.raises(BufferError, match=re.escape("format '%s' with item size %d" % (fmt, itemsize))):
        dlbridge.asarray(buf)


@pytest.mark.parametrize(
    "fmt, itemsize, dtype",
    [("b", 1, "int8"), ("c", 1, "uint8"), (LE + "h", 2, "int16"), ("=I", 4, "uint32"),
     ("n", 8, "int64"), ("N", 8, "uint64"), ("l", 4, "int32"), (LE + "l", 8, "int64"), ("L", 8, "uint64"),
     ("=e", 2, "float16"), ("?", 1, "bool"), (">?", 1, "bool"), (">B", 1, "uint8"), ("!b", 1, "int8"),
     ("Ze", 4, "complex32"), ("@Zd", 16, "complex128")],
)
def test_buffer_formats_and_item_sizes_taken(helper, fmt, itemsize, dtype):
    # Byte order matters only past one byte; 'l' and 'L' are 4 or 8 bytes
    # (a C long's size varies), 'n' and 'N' a size_t's.
    t = dlbridge.asarray(helper.careless_buffer(itemsize, fmt, (2,), (itemsize,)))
    assert (t.dtype, t.shape) == (dtype, (2,))


@pytest.mark.parametrize("fmt", ["", "<", "@", "Z", "Z?", "Zb", "ZZf", "ff", "2f", "x", "f:a:", "@@f", "<>f", "P", "s"])
def test_buffer_formats_without_one_number_per_item(helper, fmt):
    with pytest.raises(BufferError, match="format '%s' has no DLPack type" % re.escape(fmt)):
        dlbridge.asarray(helper.careless_buffer(4, fmt, (2,), (4,)))


def test_buffer_fields_an_exporter_gives_regardless_of_the_request(helper):
    # Suboffsets (an indirect, PIL-style array), 65 dimensions, extents that
    # overflow, strides left out, a read-only buffer handed to a writable
    # request: each as NumPy takes or refuses it.
    with pytest.raises(BufferError, match="suboffsets"):
        dlbridge.asarray(helper.careless_buffer(1, "B", (2, 2), (2, 1), (-1, -1)))
    with pytest.raises(BufferError, match="buffer has 65 dimensions; at most 64"):
        dlbridge.asarray(helper.careless_buffer(1, "B", (1,) * 65, (1,) * 65))
    assert dlbridge.asarray(helper.careless_buffer(1, "B", (1,) * 64)).ndim == 64
    with pytest.raises(BufferError, match="exceeds INT64_MAX"):
        dlbridge.asarray(helper.careless_buffer(1, "B", (2**62, 4), (1, 1)))
    with pytest.raises(BufferError, match=r"shape\[0\] is -1"):
        dlbridge.asarray(helper.careless_buffer(1, "B", (-1,), (1,)))
    t = dlbridge.asarray(helper.careless_buffer(2, "h", (2, 3)))
    assert (t.shape, t.strides) == ((2, 3), (3, 1))
    ro = dlbridge.asarray(helper.careless_buffer(1, "B", (4,), (1,), readonly=True))
    assert ro.readonly
    with pytest.raises(ValueError, match="read-only"):
        ro[0] = 1
    with pytest.raises(BufferError, match=r"stride\[1\] is -3 bytes, not a multiple of the item size 2"):
        dlbridge.asarray(helper.careless_buffer(2, "h", (2, 2), (4, -3)))


class _NoDlpack(np.ndarray):
    # An exporter that is no DLPack producer (NumPy before 1.22).
    def __getattribute__(self, name):
        if name in ("__dlpack__", "__dlpack_device__"):
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_read_only_exporters_refusing_a_writable_request_with_value_error():
    # NumPy answers a writable request for a read-only array with
    # ValueError, not BufferError: the import asks again for a read-only
    # buffer (it raised "buffer source array is read-only").
    a = np.arange(3.0).view(_NoDlpack)
    a.flags.writeable = False
    t = dlbridge.asarray(a)
    assert t.readonly and t.tolist() == [0.0, 1.0, 2.0] and t.data_ptr == a.ctypes.data
    assert dlbridge.asarray([a, a]).tolist() == [[0.0, 1.0, 2.0]] * 2
    z = dlbridge.zeros(3)
    z[...] = a
    assert z.tolist() == [0.0, 1.0, 2.0]
    w = np.arange(2.0).view(_NoDlpack)
    assert not dlbridge.asarray(w).readonly


class _DlpackNone(np.ndarray):
    # __dlpack__ = None says "not a producer", as __hash__ = None does.
    __dlpack__ = None


def test_dlpack_set_to_none_is_no_producer():
    # The buffer protocol reads it, zero-copy, wherever a value is taken.
    a = np.arange(4.0).view(_DlpackNone)
    t = dlbridge.asarray(a)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0] and t.data_ptr == a.ctypes.data
    assert dlbridge.asarray([a, a]).shape == (2, 4)
    z = dlbridge.zeros(4)
    z[...] = a
    assert z.tolist() == [0.0, 1.0, 2.0, 3.0]
    # from_dlpack calls it, as the standard's x.__dlpack__() does.
    with pytest.raises(TypeError, match="'NoneType' object is not callable"):
        dlbridge.from_dlpack(a)


def test_strided_one_dimensional_tensors_export_their_strides():
    # One dimension is enough to need shape and strides in the buffer.
    for t, values in ((dlbridge.arange(6)[::2], [0, 2, 4]), (dlbridge.arange(4)[::-1], [3, 2, 1, 0])):
        m = memoryview(t)
        assert (m.ndim, m.shape, m.strides) == (1, t.shape, (8 * t.strides[0],))
        assert m.tolist() == values and np.asarray(t).tolist() == values


def test_an_exporters_other_refusal_of_a_writable_request_is_the_error():
    # Only BufferError and ValueError answer "read-only" to a writable
    # request; anything else is the exporter's own error, not asked again.
    asked = []

    def on_request(flags):
        asked.append(flags)
        if flags & BUF.WRITABLE:
            raise ZeroDivisionError("no writable buffer")

    with pytest.raises(ZeroDivisionError, match="no writable buffer"):
        dlbridge.asarray(helper.careless_buffer(1, "B", on_request=on_request))
    assert len(asked) == 1


def test_a_tensor_imported_through_a_memoryview_does_not_keep_the_tensor():
    # The memoryview's Tensor shares its owner: the Tensor (and the
    # memoryview) may go while the import lives.
    t = dlbridge.arange(4)
    ref = weakref.ref(t)
    u = dlbridge.asarray(memoryview(t)[1:])
    del t
    gc.collect()
    assert ref() is None and u.tolist() == [1, 2, 3]


def test_full_reads_a_0d_buffer_without_a_dlpack_format_as_no_number():
    # A 0-d buffer whose format has no DLPack type is no scalar of a
    # dtype: it is refused as no number, with no other error left set.
    m = memoryview(np.zeros((), dtype="i4,f8"))
    assert m.ndim == 0
    with pytest.raises(TypeError, match="must be a number"):
        dlbridge.full(2, m)

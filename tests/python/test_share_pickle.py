"""Tensor pickled by value (every dtype and layout, protocols 2 to 5,
out-of-band buffers) and copy.copy / copy.deepcopy."""

import copy
import ctypes
import gc
import os
import pickle
import weakref

import pytest

from support import IS_COPIED, KDLCUDA, KDLROCM, READ_ONLY, SUBBYTE_PADDED, capsule_of, dlbridge, helper, np

# Every dtype name the core knows, a vector type and sub-byte ones.
DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "bfloat16", "complex64", "complex128",
    "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn",
    "float4_e2m1fn", "int4", "uint1", "uint2", "float32x4", "handle",
]
PROTOCOLS = range(2, pickle.HIGHEST_PROTOCOL + 1)


def raw(t):
    """The stored bytes of a compact tensor."""
    assert t.device == "cpu"
    return ctypes.string_at(t.data_ptr + t.byte_offset, t.nbytes)


def random_tensor(dtype, shape=(3, 5)):
    t = dlbridge.empty(shape, dtype=dtype)
    data = os.urandom(t.nbytes)
    ctypes.memmove(t.data_ptr + t.byte_offset, data, len(data))
    return t, data


def flags_of(t):
    return helper.capi_to_managed(t)["flags"]


def roundtrip(t, protocol, out_of_band=False):
    if not out_of_band:
        return pickle.loads(pickle.dumps(t, protocol=protocol))
    buffers = []
    data = pickle.dumps(t, protocol=protocol, buffer_callback=buffers.append)
    return pickle.loads(data, buffers=buffers)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_dtype_round_trips_its_bytes(dtype, protocol):
    t, data = random_tensor(dtype)
    for oob in (False, True) if protocol >= 5 else (False,):
        r = roundtrip(t, protocol, oob)
        assert (r.dtype, r.shape, r.device, r.readonly) == (dtype, (3, 5), "cpu", False)
        assert raw(r) == data
        # Out of band in one process, the buffer handed back is the
        # tensor's own memory: the result shares it.
        assert (r.data_ptr == t.data_ptr) == oob


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_padded_sub_byte_elements_keep_a_byte_each(protocol):
    buf = bytearray([1, 2, 3, 4, 5, 6])
    t = dlbridge.from_dlpack(helper.make_capsule(data=buf, shape=[2, 3], dtype=(0, 4, 1), flags=SUBBYTE_PADDED))
    r = roundtrip(t, protocol)
    assert r.nbytes == 6 and r.dtype == "int4" and r.shape == (2, 3)
    assert raw(r) == bytes(buf)
    assert flags_of(r) & SUBBYTE_PADDED


def numpy_layouts():
    base = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    return {
        "compact": base,
        "strided": base[::2, 1::2],
        "negative": base[::-1, :, ::-2],
        "transposed": base.transpose(2, 0, 1),
        "zero-size": base[:, 4:, :],
        "0-d": base[1, 2, 3],
    }


@pytest.mark.parametrize("layout", list(numpy_layouts()))
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_layout_round_trips_its_values(layout, protocol):
    a = numpy_layouts()[layout]
    t = dlbridge.from_dlpack(capsule_of(a))
    for oob in (False, True) if protocol >= 5 else (False,):
        r = roundtrip(t, protocol, oob)
        assert r.shape == a.shape and r.dtype == "int32"
        np.testing.assert_array_equal(np.from_dlpack(r), a)


def test_a_broadcast_tensor_pickles_its_expanded_values_read_only():
    a = np.arange(3, dtype=np.float64)
    t = dlbridge.from_dlpack(capsule_of(a, shape=(4, 3), strides=(0, 1), flags=READ_ONLY))
    for protocol in PROTOCOLS:
        r = roundtrip(t, protocol)
        assert r.readonly and r.shape == (4, 3)
        np.testing.assert_array_equal(np.asarray(memoryview(r)), np.broadcast_to(a, (4, 3)))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_read_only_tensors_stay_read_only(protocol):
    a = np.arange(6, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a, flags=READ_ONLY))
    for oob in (False, True) if protocol >= 5 else (False,):
        r = roundtrip(t, protocol, oob)
        assert r.readonly and flags_of(r) & READ_ONLY
        assert memoryview(r).readonly
    assert not roundtrip(dlbridge.from_dlpack(capsule_of(a)), protocol).readonly


def test_out_of_band_buffers_of_a_read_only_tensor_are_read_only():
    a = np.arange(6, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a, flags=READ_ONLY))
    buffers = []
    pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert [b.raw().readonly for b in buffers] == [True]
    buffers = []
    pickle.dumps(dlbridge.from_dlpack(capsule_of(a)), protocol=5, buffer_callback=buffers.append)
    assert [b.raw().readonly for b in buffers] == [False]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_only_the_read_only_and_padded_flags_travel(protocol):
    # IS_COPIED says something of the sender's memory, not the data: a
    # pickle of such a tensor loads, without it.
    a = np.arange(4, dtype=np.int16)
    t = dlbridge.from_dlpack(capsule_of(a, flags=IS_COPIED | READ_ONLY))
    assert t.__reduce_ex__(protocol)[1][3] == READ_ONLY
    r = roundtrip(t, protocol)
    assert r.tolist() == [0, 1, 2, 3] and flags_of(r) & (IS_COPIED | READ_ONLY) == READ_ONLY


def test_protocol_5_hands_out_the_tensors_own_memory():
    t, _ = random_tensor("float32", (64,))
    buffers = []
    pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1
    view = buffers[0].raw()
    assert view.nbytes == t.nbytes and not view.readonly
    assert np.frombuffer(view, np.uint8).ctypes.data == t.data_ptr + t.byte_offset
    # A strided tensor hands out one compact copy of its elements.
    buffers.clear()
    pickle.dumps(t[::2], protocol=5, buffer_callback=buffers.append)
    assert buffers[0].raw().nbytes == 32 * 4
    assert np.frombuffer(buffers[0].raw(), np.uint8).ctypes.data != t.data_ptr + t.byte_offset


def test_protocol_5_in_band_pickles_bytes_with_no_buffer():
    t, _ = random_tensor("float64", (8,))
    assert b"PickleBuffer" not in pickle.dumps(t, protocol=5)
    assert pickle.dumps(t, protocol=4).count(raw(t)) == 1


def test_unpickling_maps_a_writable_buffer_without_copying():
    t, data = random_tensor("int16", (10,))
    buffers = []
    blob = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    received = bytearray(buffers[0].raw())  # what a transport would hand back
    r = pickle.loads(blob, buffers=[received])
    address = np.frombuffer(received, np.uint8).ctypes.data
    assert r.data_ptr + r.byte_offset == address and not r.readonly
    received[0:2] = b"\x07\x00"
    assert r[0].item() == 7
    # Read-only bytes for a writable tensor: one copy, writable.
    frozen = bytes(data)
    r = pickle.loads(blob, buffers=[frozen])
    assert not r.readonly and raw(r) == data
    # Read-only bytes for a read-only tensor: no copy.
    ro = dlbridge.from_dlpack(capsule_of(np.arange(4, dtype=np.int64), flags=READ_ONLY))
    buffers.clear()
    blob = pickle.dumps(ro, protocol=5, buffer_callback=buffers.append)
    frozen = bytes(buffers[0].raw())
    r = pickle.loads(blob, buffers=[frozen])
    assert r.readonly and np.from_dlpack(r).ctypes.data == np.frombuffer(frozen, np.uint8).ctypes.data


def test_out_of_band_round_trips_in_one_process_do_not_chain():
    # Each round trip maps the bytes the one before handed out; the result
    # must share the memory's owner, not hold the previous tensor (and its
    # PickleBuffer's tensor) alive, a link more at every trip.
    t, data = random_tensor("int32", (6,))
    address = t.data_ptr
    handed_out = []
    for _ in range(4):
        buffers = []
        blob = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
        handed_out.append(weakref.ref(buffers[0].raw().obj))
        t = pickle.loads(blob, buffers=buffers)
        del buffers
    gc.collect()
    assert [ref() for ref in handed_out] == [None] * 4
    assert t.data_ptr == address and raw(t) == data


@pytest.mark.parametrize(("dtype", "align"), [("float64", 8), ("complex128", 16), ("float64x4", 16), ("int16", 2)])
def test_a_misaligned_buffer_is_copied_to_aligned_memory(dtype, align):
    t, data = random_tensor(dtype, (4,))
    blob = pickle.dumps(t, protocol=5, buffer_callback=lambda b: None)
    store = np.zeros(len(data) + 64, dtype=np.uint8)
    # Aligned to half the element's alignment, but not to all of it: copied;
    # aligned to it, but not to twice it (at most 16 is asked): mapped.
    half = (align // 2 - store.ctypes.data) % align
    view = memoryview(store)[half : half + len(data)]
    view[:] = data
    r = pickle.loads(blob, buffers=[view])
    addr = r.data_ptr + r.byte_offset
    assert addr % align == 0 and addr != store.ctypes.data + half and raw(r) == data
    whole = (align - store.ctypes.data) % (2 * align)
    view = memoryview(store)[whole : whole + len(data)]
    view[:] = data
    r = pickle.loads(blob, buffers=[view])
    assert r.data_ptr + r.byte_offset == store.ctypes.data + whole and raw(r) == data


@pytest.mark.parametrize("kind", [KDLCUDA, KDLROCM])
def test_device_memory_is_refused_by_value(kind):
    t = dlbridge.from_dlpack(helper.make_capsule(data=0x10000, shape=[4], dtype=(2, 32, 1), device=(kind, 0)))
    with pytest.raises(TypeError, match=r"cannot pickle a tensor in (cuda|rocm):0 memory by value"):
        pickle.dumps(t)


def test_rebuild_refuses_data_that_disagrees_with_the_description():
    rebuild = dlbridge._dlbridge._rebuild
    with pytest.raises(ValueError, match="data holds 7 bytes, but 2 elements of float32 take 8"):
        rebuild(b"\0" * 7, "float32", (2,), 0)
    with pytest.raises(ValueError, match="flags 2 has bits other than"):
        rebuild(b"\0" * 8, "float32", (2,), 2)
    with pytest.raises(ValueError, match="flags -1"):
        rebuild(b"\0" * 8, "float32", (2,), -1)
    with pytest.raises(ValueError):
        rebuild(b"\0" * 8, "float33", (2,), 0)
    with pytest.raises(ValueError):
        rebuild(b"\0" * 8, "float32", (-2,), 0)
    with pytest.raises(TypeError):
        rebuild(object(), "float32", (2,), 0)
    with pytest.raises(BufferError):
        rebuild(memoryview(b"\0" * 16)[::2], "float32", (2,), 0)
    assert rebuild(b"\1\0\0\0\2\0\0\0", "int32", (2,), READ_ONLY).tolist() == [1, 2]


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy])
def test_copies_copy_the_data(how):
    t, data = random_tensor("bfloat16", (2, 3))
    c = how(t)
    assert c.data_ptr != t.data_ptr and raw(c) == data and c.dtype == "bfloat16" and not c.readonly
    ctypes.memset(t.data_ptr, 0, t.nbytes)
    assert raw(c) == data
    s = how(dlbridge.from_dlpack(capsule_of(np.arange(12, dtype=np.int8).reshape(3, 4)))[:, ::-2])
    assert s.tolist() == [[3, 1], [7, 5], [11, 9]] and s.strides == (2, 1)
    ro = how(dlbridge.from_dlpack(capsule_of(np.arange(3.0), flags=READ_ONLY)))
    assert ro.readonly and ro.tolist() == [0.0, 1.0, 2.0]


def test_deepcopy_inside_a_container_keeps_identity_shared():
    t = dlbridge.arange(4)
    a, b = copy.deepcopy([t, t])
    assert a is b and a is not t and a.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("kind", [3, 11, 13])  # cuda_host, rocm_host, cuda_managed
def test_host_readable_kinds_pickle_as_cpu(kind):
    a = np.arange(6, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a, device=(kind, 0)))
    assert t.device != "cpu"
    r = pickle.loads(pickle.dumps(t, protocol=5))
    assert r.device == "cpu" and r.tolist() == a.tolist()


@pytest.mark.parametrize("protocol", [4, 5])
def test_a_pickle_without_rebuild_raises_and_keeps_nothing(protocol):
    # _rebuild is looked up on the module each time; when it is gone the
    # pickle fails with the look-up's error, and the bytes it had copied
    # out (or the buffer it had made) go again.
    import tracemalloc

    t = dlbridge.zeros(1 << 20, dtype="uint8")
    module = dlbridge._dlbridge
    rebuild = module._rebuild
    del module._rebuild
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(4):
            with pytest.raises(AttributeError, match="_rebuild"):
                pickle.dumps(t, protocol=protocol)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        module._rebuild = rebuild
    assert kept < (1 << 20)
    assert pickle.loads(pickle.dumps(t, protocol=protocol)).shape == (1 << 20,)

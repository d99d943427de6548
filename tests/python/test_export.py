"""Tensor.__dlpack__ and __dlpack_device__: the producer side."""

import ctypes
import gc

import pytest

from dlpack_ctypes import DLManagedTensorVersioned
from support import (
    IS_COPIED,
    KDLCPU,
    KDLCUDA,
    KDLCUDAHOST,
    KDLCUDAMANAGED,
    KDLROCM,
    KDLROCMHOST,
    READ_ONLY,
    SUBBYTE_PADDED,
    capsule_of,
    deleted,
    dlbridge,
    helper,
    np,
)


def capsule_name(cap):
    return repr(cap).split('"')[1]


def tensor_on(kind, device_id=0, data=None, shape=(4,)):
    """A tensor labelled with any device. Host-type kinds get real host
    memory; device kinds a pointer nothing dereferences."""
    if data is None:
        data = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    if kind in (KDLCUDA, KDLROCM):
        return dlbridge.from_dlpack(
            helper.make_capsule(data=0x10000, shape=shape, dtype=(2, 32, 1), device=(kind, device_id))
        )
    return dlbridge.from_dlpack(capsule_of(data, device=(kind, device_id)))


def test_max_version_selects_the_struct():
    t = dlbridge.arange(3)
    assert capsule_name(t.__dlpack__()) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=None)) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert capsule_name(t.__dlpack__(max_version=(100, 3))) == "dltensor_versioned"
    # Versions past 64 bits are large versions, not negative ones.
    assert capsule_name(t.__dlpack__(max_version=(2**70, 0))) == "dltensor_versioned"
    assert capsule_name(t.__dlpack__(max_version=(0, 2**70))) == "dltensor"
    with pytest.raises(ValueError, match="versions are >= 0"):
        t.__dlpack__(max_version=(-(2**70), 0))


def test_versioned_struct_carries_version_and_flags(helper):
    t = dlbridge.arange(3)
    flags, major, minor = helper.exchange_flags(t)
    assert (major, minor) == (dlbridge.DLPACK_MAJOR_VERSION, dlbridge.DLPACK_MINOR_VERSION)
    assert flags == 0


def test_both_structs_share_memory():
    t = dlbridge.zeros(4, dtype="int32")
    for kwargs in (dict(), dict(max_version=(1, 0))):
        u = dlbridge.from_dlpack(t.__dlpack__(**kwargs))
        assert u.data_ptr == t.data_ptr
        # A legacy struct cannot say writes are allowed, but dlbridge makes
        # one only of a writable tensor, so its own comes back writable.
        assert not u.readonly
        np.from_dlpack(u)[len(kwargs) + 1] += 7
    assert t.tolist() == [0, 7, 7, 0]


def test_another_producers_legacy_struct_imports_read_only():
    # Another producer's legacy struct stays read-only (see
    # test_legacy_access.py); only dlbridge's own keeps its writability.
    u = dlbridge.from_dlpack(np.zeros(3, dtype=np.int32).__dlpack__())
    assert u.readonly


def test_read_only_refuses_the_legacy_struct_and_flags_the_versioned(helper):
    t = dlbridge.from_dlpack(capsule_of(np.arange(3, dtype=np.float32), flags=READ_ONLY))
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__(max_version=(0, 8))
    cap = t.__dlpack__(max_version=(1, 0))
    u = dlbridge.from_dlpack(cap)
    assert u.readonly
    assert helper.exchange_flags(t)[0] & READ_ONLY
    assert not np.from_dlpack(t).flags.writeable


def test_read_only_with_copy_may_go_legacy(helper):
    a = np.arange(3, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a, flags=READ_ONLY))
    u = dlbridge.from_dlpack(t.__dlpack__(copy=True))
    # The copy is the consumer's own: dlbridge's legacy struct of it comes
    # back writable.
    assert not u.readonly
    assert u.data_ptr != a.ctypes.data
    assert u.tolist() == [0.0, 1.0, 2.0]


def test_copy_true_copies_and_sets_is_copied():
    t = dlbridge.arange(4, dtype="float64")
    # IS_COPIED is visible to a consumer that refuses copies.
    with pytest.raises(ValueError, match="IS_COPIED"):
        dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True), copy=False)
    c = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True))
    assert c.data_ptr != t.data_ptr
    assert c.tolist() == t.tolist()


def test_shares_never_claim_to_be_copies(helper):
    # A tensor that came from a copy still shares its memory when exported.
    t = dlbridge.from_dlpack(np.arange(3.0), copy=True)
    assert helper.exchange_flags(t)[0] & IS_COPIED == 0
    # What a foreign consumer reads in the struct, as well as what an
    # import of it concludes.
    cap = t.__dlpack__(max_version=(1, 0))
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    m = DLManagedTensorVersioned.from_address(get(cap, b"dltensor_versioned"))
    assert m.flags & IS_COPIED == 0
    u = dlbridge.from_dlpack(cap, copy=False)
    assert u.data_ptr == t.data_ptr


def test_copy_false_and_none_share_memory():
    t = dlbridge.arange(3)
    for copy in (None, False):
        u = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=copy))
        assert u.data_ptr == t.data_ptr


def test_dl_device_equal_to_own_device_shares():
    t = dlbridge.arange(3)
    for dev in ((KDLCPU, 0), (dlbridge.DLDeviceType.kDLCPU, 0)):
        u = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), dl_device=dev))
        assert u.data_ptr == t.data_ptr


def test_dl_device_host_type_id_is_normalised():
    t = tensor_on(KDLCUDAHOST)
    u = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), dl_device=(KDLCUDAHOST, 5), copy=False))
    assert u.data_ptr == t.data_ptr


def test_dl_device_another_device_copies():
    t = tensor_on(KDLCUDAMANAGED)
    u = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), dl_device=(KDLCPU, 0)))
    assert u.device == "cpu"
    assert u.data_ptr != t.data_ptr
    assert u.tolist() == t.tolist()


def test_dl_device_with_copy_false_is_a_buffer_error():
    t = tensor_on(KDLCUDAMANAGED)
    with pytest.raises(BufferError, match="copy=False"):
        t.__dlpack__(max_version=(1, 0), dl_device=(KDLCPU, 0), copy=False)


def test_dl_device_unknown_is_a_buffer_error():
    t = dlbridge.arange(3)
    # Numbers past 64 bits name no device either: the same error, not an
    # OverflowError.
    for dev in ((5, 0), (99, 0), (KDLCUDA, -1), (1 << 40, 0), (1 << 64, 0),
                (KDLCPU, -(1 << 70))):
        with pytest.raises(BufferError, match=r"dl_device \(") as info:
            t.__dlpack__(dl_device=dev)
        assert str(dev[0]) in str(info.value)


def test_dl_device_the_core_cannot_reach_is_a_buffer_error():
    t = dlbridge.arange(3)
    try:
        u = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), dl_device=(KDLCUDA, 0)))
    except BufferError as e:
        assert "cuda:0" in str(e)
    else:  # pragma: no cover - only with a CUDA GPU
        assert u.device == "cuda:0"


def test_dlpack_device():
    # The array API standard's (Enum, int): the member equals the plain int
    # other producers give, and pickles by name.
    import enum
    import pickle

    assert dlbridge.arange(3).__dlpack_device__() == (KDLCPU, 0)
    for kind, did, name in ((KDLCUDAHOST, 0, "kDLCUDAHost"), (KDLCUDAMANAGED, 0, "kDLCUDAManaged"),
                            (KDLROCMHOST, 0, "kDLROCMHost"), (KDLCUDA, 3, "kDLCUDA"),
                            (KDLROCM, 1, "kDLROCM"), (4, 2, "kDLOpenCL"), (KDLCPU, 0, "kDLCPU"),
                            (18, 0, "kDLTrn")):
        dev = tensor_on(kind, did).__dlpack_device__()
        assert type(dev) is tuple and dev == (kind, did)
        assert isinstance(dev[0], enum.IntEnum) and dev[0] is dlbridge.DLDeviceType[name]
        assert type(dev[1]) is int
        assert pickle.loads(pickle.dumps(dev[0])) is dev[0]
    assert dlbridge.DLDeviceType.__module__ == "dlbridge"
    assert "Tensor.__dlpack_device__()[0]" in dlbridge.DLDeviceType.__doc__
    assert [m.value for m in dlbridge.DLDeviceType] == [
        1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]


# ---------------------------------------------------------------------------
# stream
# ---------------------------------------------------------------------------


def test_cpu_accepts_only_stream_none():
    t = dlbridge.arange(3)
    t.__dlpack__(stream=None)
    for s in (0, 1, 2, -1, 12345):
        with pytest.raises(ValueError, match="stream"):
            t.__dlpack__(stream=s)


@pytest.mark.parametrize("kind", [KDLCUDA, KDLCUDAHOST, KDLCUDAMANAGED])
def test_cuda_stream_rules(kind):
    t = tensor_on(kind)
    # Stream handles need a runtime that knows them: test_gpu_emulated.py.
    for s in (None, -1, 1, 2):
        t.__dlpack__(stream=s, max_version=(1, 0))
    with pytest.raises(ValueError, match="ambiguous"):
        t.__dlpack__(stream=0)
    with pytest.raises(ValueError):
        t.__dlpack__(stream=-2)


@pytest.mark.parametrize("kind", [KDLROCM, KDLROCMHOST])
def test_rocm_stream_rules(kind):
    t = tensor_on(kind)
    for s in (None, 0, -1):
        t.__dlpack__(stream=s, max_version=(1, 0))
    for s in (1, 2):
        with pytest.raises(ValueError, match="not allowed"):
            t.__dlpack__(stream=s)


def test_stream_is_checked_against_the_requested_device():
    t = tensor_on(KDLCUDAMANAGED)
    # The consumer's stream belongs to dl_device: cpu takes no stream.
    with pytest.raises(ValueError, match="cpu"):
        t.__dlpack__(stream=1, dl_device=(KDLCPU, 0))


# Every stream value the rules refuse, as (memory kind, stream, dl_device).
REFUSED_STREAMS = [
    (KDLCPU, s, None) for s in (0, 1, 2, -1, -2, 12345)
] + [
    (KDLCUDA, 0, None),
    (KDLCUDAHOST, 0, None),
    (KDLCUDAMANAGED, 0, None),
    (KDLCUDA, -2, None),
    (KDLCUDAMANAGED, -(1 << 63), None),
    (KDLROCM, 1, None),
    (KDLROCM, 2, None),
    (KDLROCMHOST, 1, None),
    (KDLROCMHOST, 2, None),
    (KDLROCM, -7, None),
    (KDLCUDAMANAGED, 1, (KDLCPU, 0)),
]


@pytest.mark.parametrize("kind,stream,dl_device", REFUSED_STREAMS)
def test_refused_streams_raise_stream_error(kind, stream, dl_device):
    t = dlbridge.arange(3) if kind == KDLCPU else tensor_on(kind)
    kwargs = dict(stream=stream, max_version=(1, 0))
    if dl_device is not None:
        kwargs["dl_device"] = dl_device
    with pytest.raises(dlbridge.StreamError, match="stream") as info:
        t.__dlpack__(**kwargs)
    assert type(info.value) is dlbridge.StreamError
    # Consumers written against either convention catch it.
    with pytest.raises(ValueError):
        t.__dlpack__(**kwargs)
    with pytest.raises(RuntimeError):
        t.__dlpack__(**kwargs)


def test_prefetch_refuses_streams_with_stream_error():
    # The stream is checked before the tensor, so no GPU is needed. Every
    # value below 1 names no stream, -2**63 too (the core's marker for no
    # stream given, which must not read as None), and the message names the
    # value and offers only what prefetch() takes (not -1).
    for s in (0, -1, -2, -(2**63)):
        with pytest.raises(dlbridge.StreamError, match=r"stream is %d, which names no stream" % s) as info:
            dlbridge.prefetch(dlbridge.arange(3), "cpu", stream=s)
        offered = str(info.value).split(";")[1]
        assert "None or 1" in offered and "-1" not in offered


def test_stream_error_class():
    err = dlbridge.StreamError
    assert err.__module__ == "dlbridge" and err.__name__ == "StreamError"
    assert ValueError in err.__mro__ and RuntimeError in err.__mro__
    assert issubclass(err, ValueError) and issubclass(err, RuntimeError)
    assert err.__doc__ and "stream" in err.__doc__
    assert "StreamError" in dlbridge.__all__
    assert dlbridge._dlbridge.StreamError is err


def test_stream_type_errors_stay_type_errors():
    for s in ("1", 1.0, True):
        with pytest.raises(TypeError) as info:
            dlbridge.arange(3).__dlpack__(stream=s)
        assert not isinstance(info.value, dlbridge.StreamError)
        with pytest.raises(TypeError) as info:
            dlbridge.prefetch(dlbridge.arange(3), "cpu", stream=s)
        assert not isinstance(info.value, dlbridge.StreamError)


def test_stream_overflow_is_overflow_error():
    with pytest.raises(OverflowError):
        dlbridge.arange(3).__dlpack__(stream=1 << 64)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(stream="1"),
        dict(stream=1.0),
        dict(stream=True),
        dict(max_version=1),
        dict(max_version=[1, 0]),
        dict(max_version=(1,)),
        dict(max_version=(1, 0, 0)),
        dict(max_version=(1.0, 0)),
        dict(max_version=("1", "0")),
        dict(dl_device=1),
        dict(dl_device=[1, 0]),
        dict(dl_device=(1,)),
        dict(dl_device=("cpu", 0)),
        dict(copy=1),
        dict(copy="no"),
    ],
)
def test_bad_argument_types_are_type_errors(kwargs):
    with pytest.raises(TypeError):
        dlbridge.arange(3).__dlpack__(**kwargs)


@pytest.mark.parametrize("name", ["max_version", "dl_device"])
@pytest.mark.parametrize("value", [(), (1,), (1, 0, 0)])
def test_tuples_of_another_length_are_named_by_their_length(name, value):
    with pytest.raises(TypeError, match=r"^%s must be None or a .* tuple of 2 ints, not a tuple of %d items$"
                       % (name, len(value))):
        dlbridge.arange(3).__dlpack__(**{name: value})
    with pytest.raises(TypeError, match=r"^%s must be None or a .* tuple of ints, not list$" % name):
        dlbridge.arange(3).__dlpack__(**{name: [1, 0]})


def test_bad_argument_values():
    t = dlbridge.arange(3)
    with pytest.raises(ValueError):
        t.__dlpack__(max_version=(-1, 0))
    with pytest.raises(ValueError):
        t.__dlpack__(max_version=(-(1 << 70), 0))
    # Any future version, however large, gets the versioned struct.
    cap = t.__dlpack__(max_version=(1 << 70, 1 << 70))
    assert "dltensor_versioned" in repr(cap)


def test_arguments_are_keyword_only():
    t = dlbridge.arange(3)
    with pytest.raises(TypeError):
        t.__dlpack__(None)
    with pytest.raises(TypeError):
        t.__dlpack__(streams=None)


def test_unconsumed_capsules_release_the_tensor(helper):
    a = np.arange(4, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a))
    caps = [t.__dlpack__(), t.__dlpack__(max_version=(1, 0))]
    del t
    gc.collect()
    assert deleted() == 0
    del caps
    assert deleted() == 1


def test_numpy_consumes_every_export_form():
    t = dlbridge.arange(6, dtype="int16").reshape(2, 3)
    assert np.from_dlpack(t).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert np.from_dlpack(t, device="cpu").tolist() == [[0, 1, 2], [3, 4, 5]]
    c = np.from_dlpack(t, copy=True)
    c[0, 0] = 9
    assert t.tolist()[0][0] == 0


def test_numpy_reads_host_type_memory_zero_copy():
    a = np.arange(4, dtype=np.float32)
    for kind in (KDLCUDAHOST, KDLCUDAMANAGED):
        t = tensor_on(kind, data=a)
        n = np.from_dlpack(t)
        assert n.ctypes.data == a.ctypes.data


def test_copies_of_padded_sub_byte_tensors_keep_a_byte_per_element():
    # int4 values, one per byte: the producer says so with the flag.
    buf = bytearray([1, 2, 3, 4, 5])
    t = dlbridge.from_dlpack(helper.make_capsule(data=buf, shape=[5], dtype=(0, 4, 1), flags=SUBBYTE_PADDED))
    assert t.nbytes == 5
    copies = [
        dlbridge.from_dlpack(t, copy=True),
        dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True)),
        t.copy(),
        t.to("cpu", copy=True),
    ]
    for c in copies:
        assert c.data_ptr != t.data_ptr + t.byte_offset
        assert c.nbytes == 5 and c.dtype == t.dtype
        assert bytes(ctypes.string_at(c.data_ptr + c.byte_offset, 5)) == bytes(buf)
        assert helper.capi_to_managed(c)["flags"] & SUBBYTE_PADDED


def test_padded_sub_byte_tensors_go_legacy_packed_with_copy_true(helper):
    # The legacy struct cannot say that each element takes a byte: copy=True
    # (always a copy, the standard says) packs the copy, as the legacy
    # struct reads sub-byte data; without it the export is refused.
    for dtype, buf, values in [
        ((0, 4, 1), bytearray([1, 2, 3, 4, 5]), [1, 2, 3, 4, 5]),
        ((1, 2, 1), bytearray([3, 0, 1, 2, 3, 1]), [3, 0, 1, 2, 3, 1]),
        ((17, 4, 1), bytearray([1, 2, 3]), [0.5, 1.0, 1.5]),  # float4_e2m1fn
    ]:
        t = dlbridge.from_dlpack(helper.make_capsule(data=buf, shape=[len(buf)], dtype=dtype, flags=SUBBYTE_PADDED))
        with pytest.raises(BufferError, match="IS_SUBBYTE_TYPE_PADDED"):
            t.__dlpack__()
        cap = t.__dlpack__(copy=True)
        assert capsule_name(cap) == "dltensor"
        c = dlbridge.from_dlpack(cap)
        assert c.tolist() == values and c.nbytes == (len(buf) * dtype[1] + 7) // 8
        assert not helper.capi_to_managed(c)["flags"] & SUBBYTE_PADDED
    # A view that is not compact is packed from its compact copy.
    t = dlbridge.from_dlpack(helper.make_capsule(data=bytearray(range(8)), shape=[2, 4], dtype=(1, 4, 1),
                                                 flags=SUBBYTE_PADDED))
    assert dlbridge.from_dlpack(t[:, 1::2].__dlpack__(copy=True)).tolist() == [[1, 3], [5, 7]]

"""t[key] with None and Ellipsis, and t[key] = value, against NumPy's
results."""

import numpy as np
import pytest

from support import KDLCUDA, dlbridge, needs_torch, torch

E = Ellipsis

KEYS = [
    (None,), (E, None), (None, E), (None, None), (0, None), (None, 0), (E, 0), (0, E),
    (0, None, E, None, 1), (None, slice(None, None, -1)), (slice(1, None), None, 2),
    (None, 1, slice(None, None, 2), None, -1), (E,), (), (None, E, None, 0, 0, 0),
    (1, 2, 3, None), (None, None, None, 1, E, None), (slice(None), None, slice(None)),
    (None, slice(0, 0)),
]


def pair(shape=(2, 3, 4)):
    a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    return dlbridge.asarray(a.copy()), a


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_none_and_ellipsis_match_numpy(key):
    t, a = pair()
    v, e = t[key], a[key]
    assert v.shape == e.shape
    assert v.tolist() == e.tolist()
    # New axes get stride 0, as NumPy gives them; the rest are views.
    assert v.strides == tuple(s // a.itemsize for s in e.strides)
    assert v.data_ptr == t.data_ptr
    assert not v.readonly


def test_a_view_with_new_axes_writes_through():
    t, a = pair()
    v = t[None, 1, ..., None]
    v[0, 2, 3, 0] = -1
    assert t[1, 2, 3].item() == -1


def test_new_axes_on_a_0d_tensor():
    t = dlbridge.full((), 5)
    assert t[None].shape == (1,) and t[None].tolist() == [5]
    assert t[None, None, ...].shape == (1, 1)
    assert t[...].shape == () and t[()].shape == ()


def test_too_many_dimensions_from_new_axes():
    t = dlbridge.zeros((1,) * 60)
    assert t[(None,) * 4].ndim == 64
    with pytest.raises(IndexError, match="the index makes 65 dimensions; at most 64"):
        t[(None,) * 5]
    with pytest.raises(IndexError, match="the index makes 130 dimensions; at most 64"):
        t[(None,) * 70]
    # An Ellipsis after the new axes that fill the limit still counts.
    for key in ((None,) * 10 + (E,), (None,) * 64 + (E,), (E,) + (None,) * 64):
        with pytest.raises(IndexError, match="dimensions; at most 64"):
            t[key]
    assert t[(None,) * 5 + (0,)].ndim == 64


@pytest.mark.parametrize("key, words", [
    ((E, E), "single ellipsis"), ((None, E, None, E), "single ellipsis"),
    ((0, 0, 0, 0), "too many indices"), ((None, 0, None, 0, 0, 0), "too many indices"),
    ((True,), "bool"), ((False, 0), "bool"), ((np.bool_(True),), "only integers"),
    ((1.5,), "only integers"), (([0, 1],), "only integers"),
])
def test_hostile_keys(key, words):
    t, a = pair()
    with pytest.raises(IndexError, match=words):
        t[key]
    with pytest.raises(IndexError, match=words):
        t[key] = 0


def test_numpy_refuses_the_same_keys():
    _, a = pair()
    for key in ((E, E), (0, 0, 0, 0), (None, 0, None, 0, 0, 0)):
        with pytest.raises(IndexError):
            a[key]


# ---------------------------------------------------------------- setitem


SET_CASES = [
    (0, 7), ((slice(None), 1), -3), ((E, 0), 9), ((None, 1), 5), ((0, slice(None, None, 2)), 1),
    ((slice(None, None, -1),), 2), ((), 4), ((E,), 6), ((1, 2, 3), 8),
]


@pytest.mark.parametrize("key, value", SET_CASES, ids=repr)
def test_scalar_assignment_matches_numpy(key, value):
    t, a = pair()
    t[key] = value
    a[key] = value
    assert t.tolist() == a.tolist()


@pytest.mark.parametrize("value_shape", [(), (1,), (4,), (3, 1), (3, 4), (1, 3, 4), (1, 1, 4)])
def test_broadcast_assignment_matches_numpy(value_shape):
    t, a = pair()
    v = -np.arange(int(np.prod(value_shape)), dtype=np.int64).reshape(value_shape) - 1
    t[0] = v
    a[0] = v
    assert t.tolist() == a.tolist()
    t2, a2 = pair()
    t2[0] = dlbridge.asarray(v.copy())
    assert t2.tolist() == a.tolist()


@pytest.mark.parametrize("value_shape", [(2,), (2, 4), (3, 3), (2, 3, 4), (2, 1, 4)])
def test_shapes_that_do_not_broadcast(value_shape):
    t, a = pair()
    v = np.zeros(value_shape, dtype=np.int64)
    with pytest.raises(ValueError, match="could not broadcast"):
        a[0] = v
    before = t.tolist()
    with pytest.raises(ValueError, match="could not broadcast"):
        t[0] = v
    assert t.tolist() == before


def test_lists_and_nested_sequences():
    t, a = pair((2, 3))
    t[:] = [1, 2, 3]
    a[:] = [1, 2, 3]
    assert t.tolist() == a.tolist()
    t[...] = [[4], [5]]
    a[...] = [[4], [5]]
    assert t.tolist() == a.tolist()
    f = dlbridge.zeros(3, dtype="float32")
    f[1:] = [0.5, 1.5]
    assert f.tolist() == [0.0, 0.5, 1.5]


@pytest.mark.parametrize("key_dst, key_src", [
    (slice(1, None), slice(None, -1)), (slice(None, -1), slice(1, None)),
    (slice(None, None, -1), slice(None)), (slice(0, 6, 2), slice(3, 9, 2))])
def test_overlapping_source_and_destination(key_dst, key_src):
    t = dlbridge.arange(10)
    a = np.arange(10)
    t[key_dst] = t[key_src]
    a[key_dst] = a[key_src]
    assert t.tolist() == a.tolist()


def test_overlapping_2d_transpose():
    t = dlbridge.arange(9).reshape(3, 3)
    a = np.arange(9).reshape(3, 3)
    t[...] = t.T
    a[...] = a.T
    assert t.tolist() == a.tolist()


def test_buffer_and_dlpack_sources():
    t = dlbridge.zeros(4, dtype="uint8")
    t[:] = memoryview(bytearray(b"\x01\x02\x03\x04"))
    assert t.tolist() == [1, 2, 3, 4]
    t[:2] = bytes([9, 8])
    assert t.tolist() == [9, 8, 3, 4]
    t[2:] = np.array([5, 6], dtype=np.uint8)
    assert t.tolist() == [9, 8, 5, 6]


@needs_torch
def test_torch_source():
    t = dlbridge.zeros((2, 2), dtype="bfloat16")
    t[1] = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
    assert t.tolist() == [[0.0, 0.0], [1.5, -2.0]]
    # A non-contiguous source (negative strides through a dlbridge view).
    u = dlbridge.zeros(4, dtype="float32")
    u[:] = torch.arange(8, dtype=torch.float32)[::2]
    assert u.tolist() == [0.0, 2.0, 4.0, 6.0]


def test_other_dtypes_convert_through_python_numbers():
    t = dlbridge.zeros(3, dtype="float64")
    t[:] = np.array([1, 2, 3], dtype=np.int32)
    assert t.tolist() == [1.0, 2.0, 3.0]
    t[0] = np.float32(0.5)
    assert t.tolist() == [0.5, 2.0, 3.0]
    b = dlbridge.zeros(2, dtype="bfloat16")
    b[:] = np.array([1.0, 2.5])
    assert b.tolist() == [1.0, 2.5]


@pytest.mark.parametrize("shape", [(0, 3), (2, 0, 3), (3, 0)])
def test_empty_values_of_other_dtypes_keep_their_shape(shape):
    # The conversion goes through lists, which stop at the first empty
    # dimension: a (0, 3) value was assigned as [], shape (0,), which does
    # not broadcast to (0, 3).
    for value in (np.zeros(shape, np.int32), dlbridge.zeros(shape, dtype="bfloat16"),
                  dlbridge.zeros(shape, dtype="int4")):
        t = dlbridge.zeros((2,) + shape, dtype="float64")
        t[...] = value
        t[1] = value
    with pytest.raises(ValueError, match=r"broadcast input of shape \(0, 4\) into shape \(0, 3\)"):
        dlbridge.zeros((0, 3))[...] = np.zeros((0, 4), np.int32)


def test_conversions_dlbridge_lacks_are_type_errors():
    t = dlbridge.zeros(2, dtype="float32x4")
    with pytest.raises(TypeError):
        t[0] = 1.0
    with pytest.raises(TypeError, match="no conversion"):
        t[:] = np.zeros(2, dtype=np.float32)
    s = dlbridge.zeros(2, dtype="int16")
    with pytest.raises(TypeError):
        s[0] = "a"


def test_values_in_gpu_memory_of_another_dtype_are_read_through_a_host_copy(helper):
    # The CPU reads the value's numbers from a copy on the host, as a value
    # of the tensor's own dtype is copied there (test_gpu_emulated.py has
    # the copies that work): without the runtime, that copy is what fails.
    if dlbridge.runtimes()[0]["available"]:
        pytest.skip("the CUDA runtime is here: the value's fake address would be copied")
    gpu = dlbridge.from_dlpack(helper.make_capsule(data=0x1000, shape=(2,), dtype=(2, 32, 1),
                                                   device=(KDLCUDA, 0)))
    t = dlbridge.zeros(2, dtype="int64")
    with pytest.raises(BufferError, match="cannot copy a tensor from cuda:0 to cpu: CUDA driver not found"):
        t[:] = gpu
    assert t.tolist() == [0, 0]


def test_read_only_destination():
    t = dlbridge.arange(3)
    a = np.arange(3)
    a.flags.writeable = False
    ro = dlbridge.from_dlpack(a)
    assert ro.readonly
    with pytest.raises(ValueError, match="assignment destination is read-only"):
        ro[0] = 1
    with pytest.raises(ValueError, match="assignment destination is read-only"):
        ro[...] = t
    assert ro.tolist() == [0, 1, 2]


def test_delete_is_refused():
    t = dlbridge.arange(3)
    with pytest.raises(ValueError, match="cannot delete"):
        del t[0]


def test_value_errors_leave_the_tensor_unchanged():
    t = dlbridge.arange(3, dtype="int8")
    with pytest.raises(OverflowError):
        t[0] = 1000
    with pytest.raises(IndexError):
        t[5] = 1
    assert t.tolist() == [0, 1, 2]


def test_packed_subbyte_elements_inside_a_byte_are_refused():
    t = dlbridge.zeros((3, 3), dtype="int4")
    with pytest.raises(ValueError, match="start of a byte"):
        t[1] = dlbridge.zeros(3, dtype="int4")
    with pytest.raises(ValueError, match="compact run"):
        t[:, 0] = dlbridge.zeros(3, dtype="int4")
    # Row 0 starts on a byte: a view, written from a Python number.
    t[0] = 1
    assert t.tolist() == [[1, 1, 1], [0, 0, 0], [0, 0, 0]]


def test_assignment_keeps_the_tensor_identity_and_views():
    t = dlbridge.zeros((2, 2))
    v = t[1]
    ptr = t.data_ptr
    t[1] = 3.0
    assert t.data_ptr == ptr and v.tolist() == [3.0, 3.0]


def test_new_axes_on_packed_copies():
    t = dlbridge.asarray([[1, 2, 3], [4, 5, 6], [7, 0, 1]], dtype="int8")
    p = dlbridge.zeros((3, 3), dtype="int4")
    # Row 1 of a packed 3 x 3 int4 tensor starts inside a byte: a copy,
    # with the new axis all the same.
    for key in ((None, 1), (1, None), (None, 1, None, ...)):
        v = p[key]
        assert v.shape == np.zeros((3, 3))[key].shape and v.readonly
        assert v.tolist() == np.zeros((3, 3), dtype=np.int64)[key].tolist()
    assert t[None, 1].tolist() == [[4, 5, 6]]

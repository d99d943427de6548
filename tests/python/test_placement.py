"""device= puts the result on that device or fails: memory a device can
read is not memory placed on it. in_place=True is the explicit way to take
such memory where it is, under the device's name. Runs without a GPU:
pinned and managed memory are host memory labelled so."""

import ctypes
import gc

import numpy as np
import pytest

import dlbridge
from dlpack_ctypes import DLDataType, DLDevice, DLManagedTensorVersioned
from support import KDLCUDAHOST, KDLCUDAMANAGED, capsule_of

HOST_KINDS = [(KDLCUDAHOST, "cuda_host"), (KDLCUDAMANAGED, "cuda_managed")]


def labelled(a, kind):
    return capsule_of(a, device=(kind, 0))


@pytest.mark.parametrize("kind,name", HOST_KINDS)
def test_device_cpu_copies_pinned_and_managed_memory(kind, name):
    a = np.arange(4.0)
    t = dlbridge.from_dlpack(labelled(a, kind), device="cpu")
    assert t.device == "cpu" and t.data_ptr != a.ctypes.data
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    # The same through the keyword-less form and asarray.
    assert dlbridge.from_dlpack(labelled(a, kind), device="cpu", copy=None).device == "cpu"
    u = dlbridge.asarray(labelled(a, kind), device="cpu")
    assert u.device == "cpu" and u.data_ptr != a.ctypes.data


@pytest.mark.parametrize("kind,name", HOST_KINDS)
def test_copy_false_refuses_another_device(kind, name):
    a = np.arange(4.0)
    with pytest.raises(ValueError, match="copy=False, but the data is in %s memory, not on cpu" % name):
        dlbridge.from_dlpack(labelled(a, kind), device="cpu", copy=False)
    with pytest.raises(ValueError, match="copy=False"):
        dlbridge.asarray(labelled(a, kind), device="cpu", copy=False)


@pytest.mark.parametrize("kind,name", HOST_KINDS)
def test_in_place_relabels_memory_the_device_can_address(kind, name):
    a = np.arange(4.0)
    t = dlbridge.from_dlpack(labelled(a, kind), device="cpu", in_place=True)
    assert t.device == "cpu" and t.__dlpack_device__() == (1, 0)
    assert t.data_ptr == a.ctypes.data
    a[2] = 9.0
    assert t.tolist() == [0.0, 1.0, 9.0, 3.0]
    # It goes on as cpu memory: NumPy takes it.
    assert np.from_dlpack(t).ctypes.data == a.ctypes.data
    t2 = dlbridge.from_dlpack(labelled(a, kind), device="cpu", in_place=True, copy=False)
    assert t2.data_ptr == a.ctypes.data


@pytest.mark.parametrize("kind,name", HOST_KINDS)
def test_in_place_leaves_the_producer_s_struct_as_it_made_it(kind, name):
    # A producer's deleter may read its struct's device to know how to free
    # the memory (cudaFreeHost for pinned memory): the relabelling is the
    # import's, never written into the producer's struct.
    a = np.arange(4.0)
    dims = (ctypes.c_int64 * 2)(4, 1)
    m = DLManagedTensorVersioned(major=1, minor=3)
    m.dl_tensor.data = a.ctypes.data
    m.dl_tensor.device = DLDevice(kind, 0)
    m.dl_tensor.ndim = 1
    m.dl_tensor.dtype = DLDataType(2, 64, 1)
    m.dl_tensor.shape = ctypes.addressof(dims)
    m.dl_tensor.strides = ctypes.addressof(dims) + 8
    seen = []

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    def deleter(p):
        seen.append(DLManagedTensorVersioned.from_address(p).dl_tensor.device.device_type)

    m.deleter = ctypes.cast(deleter, ctypes.c_void_p).value
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = new_capsule(ctypes.addressof(m), b"dltensor_versioned", None)
    t = dlbridge.from_dlpack(capsule, device="cpu", in_place=True)
    assert t.device == "cpu" and t.data_ptr == a.ctypes.data
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert m.dl_tensor.device.device_type == kind
    assert np.from_dlpack(t).ctypes.data == a.ctypes.data
    del t, capsule
    gc.collect()
    assert seen == [kind]


def test_in_place_refuses_what_the_device_cannot_address():
    a = np.arange(2.0)
    with pytest.raises(ValueError, match="in_place=True, but the data is in cpu memory, which cuda:0 cannot address"):
        dlbridge.from_dlpack(a, device="cuda:0", in_place=True)


def test_in_place_arguments():
    a = np.arange(2.0)
    with pytest.raises(ValueError, match="cannot go with copy=True"):
        dlbridge.from_dlpack(a, device="cpu", in_place=True, copy=True)
    with pytest.raises(TypeError, match="in_place must be a bool"):
        dlbridge.from_dlpack(a, in_place=1)
    # Without device= or on the tensor's own device it changes nothing.
    t = dlbridge.from_dlpack(a, in_place=True)
    assert t.device == "cpu" and t.data_ptr == a.ctypes.data
    t = dlbridge.from_dlpack(a, device="cpu", in_place=True)
    assert t.data_ptr == a.ctypes.data
    t = dlbridge.from_dlpack(a, in_place=False)
    assert t.data_ptr == a.ctypes.data


def test_to_follows_copy():
    t = dlbridge.from_dlpack(labelled(np.arange(3.0), KDLCUDAHOST))
    assert t.device == "cuda_host"
    assert t.to("cuda_host") is t and t.to("cuda_host", copy=False) is t
    # (copy=True would allocate pinned memory, which needs the driver.)
    c = t.to("cpu")
    assert c.device == "cpu" and c.data_ptr != t.data_ptr
    with pytest.raises(ValueError, match="to\\(\\): copy=False, but the tensor is in cuda_host memory, not on cpu"):
        t.to("cpu", copy=False)


def test_dlpack_export_follows_dl_device_and_copy():
    t = dlbridge.from_dlpack(labelled(np.arange(3.0), KDLCUDAHOST))
    with pytest.raises(BufferError, match="copy=False"):
        t.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)
    u = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), dl_device=(1, 0)))
    assert u.device == "cpu" and u.data_ptr != t.data_ptr
    v = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), dl_device=(KDLCUDAHOST, 0), copy=False))
    assert v.device == "cuda_host" and v.data_ptr == t.data_ptr


@pytest.mark.parametrize("name", ["cuda_host", "cuda_managed", "rocm_host"])
def test_in_place_name_stays_through_views(name):
    # A dlbridge tensor, and its capsule, taken in place under another
    # name: the name stays on the tensor and on every view of it.
    src = dlbridge.arange(6, dtype="float32")
    for source in (src, src.__dlpack__(max_version=(1, 0))):
        r = dlbridge.from_dlpack(source, device=name, in_place=True)
        assert r.device == name
        v = r[1:3]
        assert v.device == name and r.device == name
        assert v.tolist() == [1.0, 2.0]
        assert r.T.device == name and r.reshape(2, 3).device == name
    assert src.device == "cpu" and src[1:].device == "cpu"

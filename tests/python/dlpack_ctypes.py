"""The DLPack ABI structs in ctypes, for tests that build hostile
tensors and capsules by hand."""

import ctypes


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
    ]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


# DLDataTypeCode of each NumPy dtype kind a hand-made tensor may hold.
_CODES = {"f": 2, "i": 0, "u": 1, "b": 6, "c": 5}


def describe(tensor, array, data, room=8):
    """Fills the DLTensor `tensor` to describe `array`'s elements at address
    `data` on the CPU. Returns the shape and strides arrays it points to
    (each `room` entries long, so that a test may raise ndim), which the
    caller keeps alive as long as the tensor."""
    shape = (ctypes.c_int64 * room)(*array.shape)
    strides = (ctypes.c_int64 * room)(
        *(s // array.itemsize for s in array.strides))
    tensor.data = data
    tensor.device = DLDevice(1, 0)
    tensor.ndim = array.ndim
    tensor.dtype = DLDataType(_CODES[array.dtype.kind], array.itemsize * 8, 1)
    tensor.shape = ctypes.addressof(shape)
    tensor.strides = ctypes.addressof(strides)
    tensor.byte_offset = 0
    return shape, strides

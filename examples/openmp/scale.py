"""Python hands a tensor to the OpenMP kernel of scale.c, which works on it
in place: CPU memory here, CUDA managed memory when a CUDA GPU is present,
so GPU code, Python and OpenMP share one buffer. Run:

    cc -shared -fPIC -fopenmp -O2 -Iinclude examples/openmp/scale.c -o scale.so
    python examples/openmp/scale.py ./scale.so
"""

import ctypes
import sys

import numpy as np

import dlbridge

kernel = ctypes.CDLL(sys.argv[1])
kernel.scale_inplace.argtypes = [ctypes.c_void_p, ctypes.c_float]
capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
capsule_pointer.restype = ctypes.c_void_p
capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def scale(t, factor):
    """Multiplies t's elements by factor in place, on every core."""
    # The capsule keeps the tensor alive while the kernel borrows it; it
    # releases it when it goes, since no consumer took it.
    capsule = t.__dlpack__(max_version=(1, 0))
    if kernel.scale_inplace(capsule_pointer(capsule, b"dltensor_versioned"), factor) != 0:
        raise ValueError("scale_inplace needs CPU-readable, writable float32 data")


kind = "cuda_managed" if dlbridge.runtimes()[0]["available"] else "cpu"
t = dlbridge.from_dlpack(np.arange(12, dtype=np.float32).reshape(3, 4)).to(kind)
scale(t[:, 1::2], 10.0)                  # a strided view: only the odd columns
print(f"{t.device}: {t.tolist()}")

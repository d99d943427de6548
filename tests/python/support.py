"""What the dlbridge Python tests share: the test helper extension, capsule
builders and DLPack constants.

`helper` is dlbridge._testhelper, a C extension built with the package: it
makes DLPack capsules with any field set to anything (and a deleter that
counts its calls), drives exchange tables from C, and releases tensors on
other threads or after the interpreter is gone.
"""

import gc
import os

import pytest

# OpenBLAS worker threads spin on the shared CPUs and slow everything.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import dlbridge  # noqa: E402
from dlbridge import _testhelper as helper  # noqa: E402

try:
    import torch  # noqa: E402

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - torch is a test dependency
    torch = None


needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

# Set by tests/python/run_sanitized.sh, which runs the suite against a
# module built with AddressSanitizer: its quarantine keeps freed memory, so
# process memory grows without a leak, and everything runs several times
# slower.
SANITIZED = bool(os.environ.get("DLBRIDGE_SANITIZED"))
measures_process_memory = pytest.mark.skipif(
    SANITIZED, reason="AddressSanitizer keeps freed memory in quarantine")
measures_time = pytest.mark.skipif(SANITIZED, reason="timings under AddressSanitizer mean nothing")


def deleted():
    """Deleter calls counted by the helper since the last reset."""
    gc.collect()
    return helper.counters()["deleted"]


def capsule_of(array, **fields):
    """A helper capsule describing numpy array `array` (which it keeps
    alive), with any field overridden."""
    a = np.asarray(array)
    desc = dict(
        data=a,
        shape=a.shape,
        strides=tuple(s // a.itemsize for s in a.strides),
        dtype=DTYPES[a.dtype.str[1:]],
    )
    desc.update(fields)
    return helper.make_capsule(**desc)


# numpy dtype string (without byte order) -> DLPack (code, bits, lanes)
DTYPES = {
    "b1": (6, 8, 1),
    "i1": (0, 8, 1),
    "i2": (0, 16, 1),
    "i4": (0, 32, 1),
    "i8": (0, 64, 1),
    "u1": (1, 8, 1),
    "u2": (1, 16, 1),
    "u4": (1, 32, 1),
    "u8": (1, 64, 1),
    "f2": (2, 16, 1),
    "f4": (2, 32, 1),
    "f8": (2, 64, 1),
    "c8": (5, 64, 1),
    "c16": (5, 128, 1),
}

KDLCPU, KDLCUDA, KDLCUDAHOST, KDLROCM, KDLROCMHOST, KDLCUDAMANAGED = 1, 2, 3, 10, 11, 13
READ_ONLY, IS_COPIED, SUBBYTE_PADDED = 1, 2, 4



class BUF:
    """PyBUF_* request flags (inspect.BufferFlags from Python 3.12)."""

    SIMPLE = 0
    WRITABLE = 0x1
    FORMAT = 0x4
    ND = 0x8
    STRIDES = 0x10 | ND
    C_CONTIGUOUS = 0x20 | STRIDES
    F_CONTIGUOUS = 0x40 | STRIDES
    ANY_CONTIGUOUS = 0x80 | STRIDES
    INDIRECT = 0x100 | STRIDES
    RECORDS_RO = STRIDES | FORMAT
    FULL_RO = INDIRECT | FORMAT

"""dlbridge: DLPack tensor exchange for every kind of memory.

``from_dlpack`` imports a tensor from any DLPack producer (NumPy, PyTorch,
capsules, anything with ``__dlpack__``) without copying; ``Tensor`` exports
itself through ``__dlpack__``, the C exchange API, the buffer protocol and
``__cuda_array_interface__``.

Accelerator memory: ``empty``, ``zeros``, ``full`` and ``arange`` take any
kind as ``device`` ("cuda:1", "cuda_host", "cuda_managed", "rocm:0",
"rocm_host"); ``Tensor.to`` copies between any two kinds; ``pin`` pins CPU
memory in place; ``device_of`` says what memory a pointer really is;
``prefetch`` and ``advise`` steer CUDA managed memory; ``synchronize``
waits for a device. The CUDA driver and the HIP runtime are loaded on first
use (``DLBRIDGE_CUDA_LIBRARY`` and ``DLBRIDGE_HIP_LIBRARY`` name other
files); without them the module works on CPU memory, ``device_of`` answers
"cpu" and asking for GPU memory raises an error naming what was looked for.

Between processes: ``empty``, ``zeros`` and ``full`` take ``shared=True``
and ``Tensor.share_memory()`` moves a tensor into shared memory; such
tensors travel through ``multiprocessing`` by handle (no copy), pinned on
receipt after ``set_sharing_pin``; ``share_export``/``share_import`` give
the handle to other transports. Plain ``pickle`` carries data by value.
"""

import os as _os

from ._dlbridge import (
    DLDeviceType,
    DLPACK_MAJOR_VERSION,
    DLPACK_MINOR_VERSION,
    StreamError,
    Tensor,
    advise,
    arange,
    asarray,
    device_of,
    empty,
    from_dlpack,
    full,
    load_npy,
    pin,
    prefetch,
    runtimes,
    share_export,
    share_import,
    synchronize,
    zeros,
)
from ._sharing import get_sharing_pin, set_sharing_pin

# The core's version, which the build takes from meson.build.
from ._dlbridge import core_version as __version__  # noqa: E402


def get_include() -> str:
    """Returns the folder holding ``dlbridge_capi.h`` (and the
    ``dlpack/dlpack.h`` it includes), for building C extensions."""
    return _os.path.dirname(_os.path.abspath(__file__))


__all__ = [
    "DLDeviceType",
    "DLPACK_MAJOR_VERSION",
    "DLPACK_MINOR_VERSION",
    "StreamError",
    "Tensor",
    "advise",
    "arange",
    "asarray",
    "device_of",
    "empty",
    "from_dlpack",
    "full",
    "get_include",
    "get_sharing_pin",
    "load_npy",
    "pin",
    "prefetch",
    "runtimes",
    "set_sharing_pin",
    "share_export",
    "share_import",
    "synchronize",
    "zeros",
]

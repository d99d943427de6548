"""The Python half of `make demo`: NumPy, PyTorch and dlbridge sharing memory
without copies, a .npy file mapped as a tensor, and what the GPU runtimes
report. Runs with or without a GPU."""

import os
import tempfile

import numpy as np

import dlbridge

try:
    import torch
except ImportError:  # the tour works without PyTorch too
    torch = None

print(f"dlbridge {dlbridge.__version__}, DLPack "
      f"{dlbridge.DLPACK_MAJOR_VERSION}.{dlbridge.DLPACK_MINOR_VERSION}")

a = np.arange(12, dtype=np.float32).reshape(3, 4)
t = dlbridge.from_dlpack(a)
print(f"from NumPy:        {t.shape} {t.dtype} on {t.device}, "
      f"same memory: {np.from_dlpack(t).ctypes.data == a.ctypes.data}")
a[0, 0] = 42.0
print(f"NumPy writes, dlbridge reads: t[0, 0] = {float(t[0, 0])}")
v = t[:, ::2]
print(f"a strided view:    {v.shape}, strides {v.strides}, {v.tolist()}")
if torch is not None:
    u = torch.from_dlpack(v)
    print(f"to PyTorch:        {tuple(u.shape)}, same memory: "
          f"{u.data_ptr() == np.from_dlpack(v).ctypes.data}")

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "weights.npy")
    np.save(path, np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)))
    w = dlbridge.load_npy(path)
    print(f"load_npy (mapped): {w.shape} {w.dtype}, strides {w.strides}, "
          f"{w.tolist()}")

for rt in dlbridge.runtimes():
    if rt["available"]:
        gpus = ", ".join(g["device"] for g in rt["devices"])
        print(f"{rt['name']}: version {rt['version']}, {gpus}")
    else:
        print(f"{rt['name']}: not available ({rt['status']})")

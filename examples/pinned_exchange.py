"""PyTorch <-> NumPy through pinned host memory, without a copy.

Pinned (page-locked) host memory is what a GPU copies to and from at full
speed and asynchronously. dlbridge gives it two ways: allocated pinned
(device="cuda_host") or ordinary memory pinned where it is (dlbridge.pin).
NumPy reads cuda_host tensors directly; PyTorch's from_dlpack takes CPU
tensors only, so it gets the same memory under the name "cpu"
(from_dlpack(..., device="cpu", in_place=True): no copy). Each side's
writes are then seen by the other.

Without a CUDA GPU the same code runs on ordinary CPU memory, and says so.

    python examples/pinned_exchange.py
"""

import numpy as np
import torch

import dlbridge


def cuda_gpus():
    """The CUDA GPUs dlbridge found (none when the driver is missing)."""
    for r in dlbridge.runtimes():
        if r["name"] == "cuda" and r["available"]:
            return [d["device"] for d in r["devices"]]
    return []


def main():
    gpus = cuda_gpus()
    kind = "cuda_host" if gpus else "cpu"
    if gpus:
        print(f"CUDA GPUs {', '.join(gpus)}: host memory pinned for them")
    else:
        print("no CUDA GPU: ordinary CPU memory, not pinned")

    # 1. Allocated pinned, then viewed by NumPy and PyTorch.
    buf = dlbridge.arange(12, dtype="float32").reshape((3, 4)).to(kind)
    print(f"allocated: {buf.shape} {buf.dtype} on {buf.device}, "
          f"the driver says {dlbridge.device_of(buf)}")
    a = np.from_dlpack(buf)
    t = torch.from_dlpack(dlbridge.from_dlpack(buf, device="cpu", in_place=True))
    same = a.ctypes.data == buf.data_ptr == t.data_ptr()
    print(f"NumPy and PyTorch view it: same memory: {same}")
    t.mul_(10)                    # PyTorch writes ...
    a[0, 0] = -1.0                # ... NumPy writes ...
    print(f"each sees the other's writes: {buf.tolist()[0]}")

    # 2. NumPy's memory pinned where it is, then viewed by PyTorch.
    b = np.linspace(0.0, 1.0, 5, dtype=np.float32)
    pinned = dlbridge.pin(b) if gpus else dlbridge.from_dlpack(b)
    u = torch.from_dlpack(dlbridge.from_dlpack(pinned, device="cpu", in_place=True))
    u += 1
    print(f"NumPy array pinned in place: {dlbridge.device_of(pinned)}, PyTorch adds 1: "
          f"{b.tolist()}, same memory: {u.data_ptr() == b.ctypes.data}")
    if torch.cuda.is_available():
        # What pinned memory is for: an asynchronous copy to the GPU.
        print(f"to the GPU without waiting: {u.to('cuda', non_blocking=True).device}")
    del u, pinned                 # the last holder unpins b's memory
    print(f"after the last holder is gone: {dlbridge.device_of(b)}")


if __name__ == "__main__":
    main()

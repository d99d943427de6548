"""The Python half of `make demo`: NumPy, PyTorch and dlbridge sharing memory
without copies, one tensor shared by several processes (pinned in each when
a GPU runtime is present), a .npy file mapped as a tensor, and what the GPU
runtimes report. Runs with or without a GPU."""

import concurrent.futures
import multiprocessing as mp
import os
import tempfile

import numpy as np

import dlbridge


def between_frameworks():
    try:
        import torch
    except ImportError:  # the tour works without PyTorch too
        torch = None
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


def pin_kind():
    """'cuda_host' or 'rocm_host' when that runtime can pin memory here,
    else None."""
    for kind in ("cuda_host", "rocm_host"):
        try:
            dlbridge.pin(dlbridge.zeros(1), kind)
            return kind
        except RuntimeError:
            pass
    return None


def fill_row(grid, row):
    """A worker: writes its process id into its row of the shared grid,
    which arrived by handle (the same pages, pinned here when asked)."""
    np.asarray(memoryview(grid))[row] = os.getpid()
    return os.getpid(), grid.device


def between_processes(workers=3):
    grid = dlbridge.zeros((workers, 4), dtype="int64", shared=True)
    kind = pin_kind()
    with concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=mp.get_context("spawn"),
            initializer=dlbridge.set_sharing_pin, initargs=(kind,)) as pool:
        done = list(pool.map(fill_row, [grid] * workers, range(workers)))
    seen = np.asarray(memoryview(grid))
    wrote = all((seen[row] == pid).all() for row, (pid, _) in enumerate(done))
    kinds = sorted({device for _, device in done})
    print(f"shared memory:     {workers} processes wrote their rows into this "
          f"process's tensor: {wrote}; each saw it as {', '.join(kinds)}"
          f"{'' if kind else ' (no GPU runtime to pin it for)'}")


def mapped_file():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "weights.npy")
        np.save(path, np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)))
        w = dlbridge.load_npy(path)
        print(f"load_npy (mapped): {w.shape} {w.dtype}, strides {w.strides}, "
              f"{w.tolist()}")


def runtimes():
    for rt in dlbridge.runtimes():
        if rt["available"]:
            gpus = ", ".join(g["device"] for g in rt["devices"])
            print(f"{rt['name']}: version {rt['version']}, {gpus}")
        else:
            print(f"{rt['name']}: not available ({rt['status']})")


if __name__ == "__main__":
    print(f"dlbridge {dlbridge.__version__}, DLPack "
          f"{dlbridge.DLPACK_MAJOR_VERSION}.{dlbridge.DLPACK_MINOR_VERSION}")
    between_frameworks()
    between_processes()
    mapped_file()
    runtimes()

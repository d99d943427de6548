"""dlbridge tensors through Dask distributed: scattered to two worker
processes, changed there, gathered back.

Dask moves data between processes with pickle protocol 5 and a
buffer_callback. A dlbridge.Tensor pickles its elements as an out-of-band
pickle.PickleBuffer over its own memory (a compact copy first when it is
strided), so Dask sends the bytes straight from the tensor as a frame of
their own: the pickle stream holds only dtype, shape and flags. Tensors
travel by value: a worker changes its own copy, and gathering brings that
copy back. A read-only tensor arrives read-only; a shared tensor
(shared=True) arrives as an ordinary one, since Dask's workers may be on
other machines (multiprocessing is the way to share one between the
processes of one machine; see docs/sharing.md).

    python examples/distributed/dask_exchange.py
"""

import ctypes
import os
import sys

import numpy as np

import dlbridge


def stored_bytes(t):
    """The elements of a tensor the CPU can read, as bytes in row-major
    order (copy() is compact)."""
    c = t.copy()
    return ctypes.string_at(c.data_ptr + c.byte_offset, c.nbytes)


def add_one(t):
    """Runs on a worker: adds 1 (mod 256) to every stored byte of t, in
    place when t is writable, else in a copy. Returns the changed tensor
    and what the worker saw."""
    seen = {"pid": os.getpid(), "dtype": t.dtype, "shape": t.shape, "readonly": t.readonly,
            "is_shared": t.is_shared}
    if t.readonly:
        # The flag travelled with the data: NumPy refuses to write too.
        if t.dtype == "uint8":
            seen["numpy_writeable"] = np.from_dlpack(t).flags.writeable
        t = t.copy()
    # Unpickled tensors are compact: nbytes from the start are all of it.
    raw = (ctypes.c_ubyte * t.nbytes).from_address(t.data_ptr + t.byte_offset)
    for i in range(t.nbytes):
        raw[i] = (raw[i] + 1) & 0xFF
    return t, seen


def tensors():
    """Several dtypes and layouts: strided views, read-only, shared."""
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    ro = np.arange(10, dtype=np.uint8)
    ro.flags.writeable = False
    shared = dlbridge.full((3, 5), 2.5, dtype="float64", shared=True)
    return {
        "float32": dlbridge.from_dlpack(a),
        "int16 transposed": dlbridge.from_dlpack(np.arange(12, dtype=np.int16).reshape(3, 4)).T,
        "float64 reversed": dlbridge.from_dlpack(np.linspace(0, 1, 7))[::-2],
        "bfloat16": dlbridge.full((2, 3), 1.5, dtype="bfloat16"),
        "uint8 read-only": dlbridge.from_dlpack(ro),
        "float64 shared": shared,
        "int64 0-d": dlbridge.from_dlpack(np.array(7, dtype=np.int64)),
    }


def run(client):
    """Scatters tensors() over client's workers, adds 1 to every byte on
    the workers, gathers; returns {name: (sent, returned, seen)}."""
    if __name__ != "__main__":
        # Workers need not find this file: its functions travel by value.
        import cloudpickle
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    sent = tensors()
    names = list(sent)
    futures = client.scatter([sent[n] for n in names])
    results = client.gather(client.map(add_one, futures, pure=False))
    return {n: (sent[n], back, seen) for n, (back, seen) in zip(names, results)}


def main():
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for name, (sent, back, seen) in run(client).items():
            want = bytes((b + 1) & 0xFF for b in stored_bytes(sent))
            same = stored_bytes(back) == want
            print(f"{name}: worker saw {seen['dtype']} {seen['shape']}"
                  f"{' read-only' if seen['readonly'] else ''}, every byte back: {same}")


if __name__ == "__main__":
    main()

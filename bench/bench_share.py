"""Cost of handing a tensor to another process, and of a DataLoader ring.

1. Send: the median time for a worker process to receive a tensor through
   a multiprocessing Pipe and answer (the answer's round trip included;
   the "empty message" row is that round trip alone). dlbridge shared
   tensors (handle + descriptor) beside PyTorch's share_memory_() path
   (torch.multiprocessing) and a NumPy array pickled by value.
2. Ring: time per batch and bytes copied after the worker produced the
   batch, for a ring of shared batch buffers filled in place
   (examples/share_loader_ring.py) and for PyTorch's default DataLoader
   path (the batch tensor a worker returns is copied into shared memory
   to be sent).

Run: python bench/bench_share.py [--big MiB] [--numpy-max MiB] [--reps N]
"""

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time

import numpy as np

import dlbridge

HERE = os.path.dirname(os.path.abspath(__file__))


def echo(conn):
    import torch.multiprocessing  # noqa: F401 (registers torch's reducers)

    while True:
        obj = conn.recv()
        if obj is None:
            return
        conn.send(1)
        del obj


def time_sends(conn, objs, reps):
    """Median round trip per object; the objects take turns, so that all
    of them see the same load on the machine."""
    times = [[] for _ in objs]
    for _ in range(reps):
        for k, obj in enumerate(objs):
            t0 = time.perf_counter()
            conn.send(obj)
            conn.recv()
            times[k].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def bench_send(sizes, reps, numpy_max, numpy_reps):
    import torch
    import torch.multiprocessing  # noqa: F401

    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    p = ctx.Process(target=echo, args=(there,))
    p.start()
    rows = []
    try:
        rows.append(("empty message", "-", time_sends(here, [0], reps)[0]))
        shared = [dlbridge.zeros((n,), dtype="uint8", shared=True) for n in sizes]
        for n, t in zip(sizes, time_sends(here, shared, reps)):
            rows.append(("dlbridge shared", n, t))
        del shared
        tt = [torch.zeros(n, dtype=torch.uint8).share_memory_() for n in sizes]
        for n, t in zip(sizes, time_sends(here, tt, reps)):
            rows.append(("torch share_memory_()", n, t))
        del tt
        # Pickling by value holds several copies at once: capped, and one
        # size at a time (a small send after a large one waits for the
        # worker to free the large one).
        for n in sizes:
            arr = np.zeros(min(n, numpy_max), dtype=np.uint8)
            rows.append(("numpy pickled", arr.nbytes, time_sends(here, [arr], numpy_reps if n > 1 << 20 else reps)[0]))
            del arr
    finally:
        here.send(None)
        p.join()
    return rows


class DefaultDataset:
    """PyTorch's usual shape: a worker makes each batch and returns it."""

    def __init__(self, batches, batch, features):
        self.batches, self.batch, self.features = batches, batch, features

    def __len__(self):
        return self.batches

    def __getitem__(self, i):
        import torch

        x = torch.empty((self.batch, self.features), dtype=torch.float32)
        x.numpy()[:] = np.arange(self.features, dtype=np.float32) + i
        return i, x


def bench_ring(batches, batch, features, workers=2, prefetch=2):
    import torch
    from torch.utils.data import DataLoader

    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    import share_loader_ring as ring_example

    ctx = mp.get_context("fork")
    nbytes = batch * features * 4
    ring, _ = ring_example.make_ring(workers * prefetch + 1, batch, features)
    loader = DataLoader(ring_example.RingDataset(ring, batches), batch_size=None, num_workers=workers,
                        prefetch_factor=prefetch, multiprocessing_context=ctx, persistent_workers=True)
    results = []
    for _ in loader:  # workers started, pages touched
        break

    def run_ring():
        t0 = time.perf_counter()
        for i in loader:
            x = torch.from_dlpack(ring[i % len(ring)])
            float(x[0, 0])
        return (time.perf_counter() - t0) / batches

    per = min(run_ring() for _ in range(2))
    results.append(("dlbridge shared ring", per, 0))
    default = DataLoader(DefaultDataset(batches, batch, features), batch_size=None, num_workers=workers,
                         prefetch_factor=prefetch, multiprocessing_context=ctx, persistent_workers=True)
    for _ in default:
        break

    def run_default():
        t0 = time.perf_counter()
        for i, x in default:
            float(x[0, 0])
        return (time.perf_counter() - t0) / batches

    per = min(run_default() for _ in range(2))
    # share_memory_() of the worker's batch tensor: one copy of the batch.
    results.append(("torch default DataLoader", per, nbytes))
    return results, nbytes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--big", type=int, default=1024, help="large tensor size in MiB (default 1024)")
    ap.add_argument("--numpy-max", type=int, default=256, help="largest NumPy array pickled, MiB (default 256)")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--numpy-reps", type=int, default=5)
    ap.add_argument("--batches", type=int, default=64)
    args = ap.parse_args()
    sizes = [1024, args.big << 20]
    print(f"send a tensor to a worker (median of {args.reps}; NumPy {args.numpy_reps}):")
    print(f"{'path':26} {'bytes':>12} {'median':>12}")
    rows = bench_send(sizes, args.reps, args.numpy_max << 20, args.numpy_reps)
    for name, size, t in rows:
        print(f"{name:26} {size:>12} {t * 1e6:>10.1f} us")
    print(f"\nDataLoader, 2 workers, {args.batches} batches of 256 x 4096 float32:")
    results, nbytes = bench_ring(args.batches, 256, 4096)
    for name, per, copied in results:
        print(f"{name:26} {per * 1e6:>10.1f} us/batch  {copied:>10} bytes copied per batch")


if __name__ == "__main__":
    main()

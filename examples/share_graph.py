"""Four sampler processes read one graph held once in shared memory.

The graph is in CSR form (indptr, indices). It is put in shared memory
once; each sampler receives it by handle (no copy) and, when a GPU
runtime is present, pins it in its own process on receipt, so that GPU
kernels there could read it in place. Each sampler draws neighbours of
seed nodes and returns a checksum, which the parent recomputes.

Run: python examples/share_graph.py [nodes]
"""

import concurrent.futures
import multiprocessing as mp
import sys

import numpy as np

import dlbridge


def gpu_pin_kind():
    """'cuda_host' or 'rocm_host' when that runtime can pin memory here,
    else None."""
    probe = dlbridge.zeros(1)
    for kind in ("cuda_host", "rocm_host"):
        try:
            dlbridge.pin(probe, kind)
            return kind
        except RuntimeError:
            pass
    return None


def host_array(t):
    """A NumPy view of a tensor in host memory (cpu or pinned)."""
    return np.asarray(memoryview(t))


def sample(indptr_t, indices_t, seeds, fanout):
    indptr, indices = host_array(indptr_t), host_array(indices_t)
    rng = np.random.default_rng(int(seeds[0]))
    total = 0
    for s in seeds:
        lo, hi = indptr[s], indptr[s + 1]
        if hi > lo:
            total += int(indices[rng.integers(lo, hi, size=fanout)].sum())
    return total, indptr_t.device, indices_t.is_shared


def main(nodes=100_000, degree=8, workers=4):
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 2 * degree, size=nodes)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    indices = rng.integers(0, nodes, size=int(indptr[-1])).astype(np.int64)
    # One copy each into shared memory; the samplers map these pages.
    indptr_t = dlbridge.asarray(indptr).share_memory()
    indices_t = dlbridge.asarray(indices).share_memory()
    kind = gpu_pin_kind()
    batches = [rng.integers(0, nodes, size=512) for _ in range(workers * 4)]
    ctx = mp.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=dlbridge.set_sharing_pin, initargs=(kind,)
    ) as pool:
        futures = [pool.submit(sample, indptr_t, indices_t, seeds, 10) for seeds in batches]
        results = [f.result() for f in futures]
    expected = [sample(indptr_t, indices_t, seeds, 10)[0] for seeds in batches]
    assert [r[0] for r in results] == expected
    assert all(r[1] == (kind or "cpu") and r[2] for r in results)
    print(f"{workers} samplers, {len(batches)} batches over one shared graph of {nodes} nodes "
          f"({indptr_t.nbytes + indices_t.nbytes} bytes), pinned as {kind or 'nothing (no GPU runtime)'}: ok")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)

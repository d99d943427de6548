"""A ring of shared batch buffers that DataLoader workers fill in place.

PyTorch's default path copies each batch a worker makes into new shared
memory to send it (and once more into pinned memory with
pin_memory=True). Here the trainer allocates the batch buffers once, in
shared memory (pinned in the trainer when a GPU runtime exists); workers
receive them by handle with the dataset, write batch i into slot
i % len(ring), and send back only the batch number. The trainer wraps the
slot with torch.from_dlpack: no byte is copied after the worker wrote it.

A slot is reused only after the trainer is done with it: the loader keeps
at most workers * prefetch_factor batches in flight beyond the one the
trainer holds, so a ring of workers * prefetch_factor + 1 slots suffices.

Run: python examples/share_loader_ring.py
"""

import multiprocessing as mp

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

import dlbridge


class RingDataset(Dataset):
    """Batch i: rows of features whose values say which batch they are."""

    def __init__(self, ring, batches):
        self.ring = ring  # travels to each worker by handle
        self.batches = batches

    def __len__(self):
        return self.batches

    def __getitem__(self, i):
        slot = self.ring[i % len(self.ring)]
        np.from_dlpack(slot)[:] = np.arange(slot.shape[1], dtype=np.float32) + i  # in place
        return i


def make_ring(slots, batch, features, pin_kind=None):
    ring = [dlbridge.empty((batch, features), dtype="float32", shared=True) for _ in range(slots)]
    # Pinned in this process only (each process pins its own mapping); the
    # tensors given to the workers stay the shared cpu ones.
    pins = [dlbridge.pin(t, pin_kind) for t in ring] if pin_kind else []
    return ring, pins


def train(batches=64, batch=256, features=1024, workers=2, prefetch=2, pin_kind=None, method="spawn"):
    ring, pins = make_ring(workers * prefetch + 1, batch, features, pin_kind)
    loader = DataLoader(
        RingDataset(ring, batches),
        batch_size=None,
        num_workers=workers,
        prefetch_factor=prefetch,
        multiprocessing_context=mp.get_context(method),
    )
    seen = 0
    for i in loader:
        slot = ring[i % len(ring)]
        x = torch.from_dlpack(slot)  # the worker's bytes, not a copy
        assert x.data_ptr() == slot.data_ptr + slot.byte_offset
        assert x[0, 0].item() == i and x[-1, -1].item() == features - 1 + i
        seen += 1
    assert seen == batches
    return ring, pins


if __name__ == "__main__":
    from share_graph import gpu_pin_kind

    train(pin_kind=gpu_pin_kind())
    print("ring of shared batches: every batch read in place: ok")

"""Worker functions for test_share_mp.py: importable by spawned and
forkserver children without importing pytest or the test helper."""

import ctypes
import os
import time

import numpy as np

import dlbridge


def pattern(n):
    return (np.arange(n, dtype=np.int64) * 7 % 251).astype(np.uint8)


def rw_worker(whole, index, inbox, outbox):
    """Checks every byte of whole, writes its row through the view it
    receives, then reports what it reads after the sender's later write."""
    rows, n = whole.shape
    a = np.from_dlpack(whole)
    outbox.put(("read", index, bool(np.array_equal(a.reshape(-1), pattern(rows * n))), whole.is_shared))
    row = inbox.get()  # whole[index], a view, through a Queue
    r = np.from_dlpack(row)
    r[:] = (pattern(rows * n).reshape(rows, n)[index].astype(np.int64) + 1 + index) % 256
    outbox.put(("written", index, row.byte_offset, row.is_shared))
    assert inbox.get() == "go"
    outbox.put(("seen", index, int(a[index, 0]), int(r[-1])))


def holder(t, counters, index):
    """Writes index + 1 into its own block of t and reads it back, counting
    rounds in counters[index], until counters[-1] is set."""
    a = np.from_dlpack(t)
    c = np.from_dlpack(counters)
    block = a.reshape(4, -1)[index]
    while c[-1] == 0:
        block[::4096] = index + 1
        if not np.all(block[::4096] == index + 1):
            os._exit(3)
        c[index] += 1
    os._exit(0)


def add_one(t, where):
    """Pool task: t[where] += 1 in place, returns t's sum as this process
    sees it and whether t is shared here."""
    a = np.from_dlpack(t)
    a[where] += 1
    return int(a.sum()), t.is_shared


def echo_write(conn):
    """Receives a tensor on conn, reports what it got, writes 9 into its
    element 0, and sends what it sees back."""
    t = conn.recv()
    info = {"shared": t.is_shared, "readonly": t.readonly, "device": t.device, "values": t.tolist()}
    if not t.readonly:
        np.from_dlpack(t)[0] = 9
    info["after"] = t.tolist()
    conn.send(info)
    conn.recv()  # the sender has looked


def poke_read_only(conn):
    """Receives a read-only shared tensor and writes to it behind NumPy's
    back: the mapping itself must refuse (the process dies of SIGSEGV)."""
    t = conn.recv()
    a = np.from_dlpack(t)
    conn.send((t.readonly, bool(a.flags.writeable)))
    time.sleep(0.05)
    ctypes.memset(t.data_ptr + t.byte_offset, 0x55, 1)
    conn.send("wrote")


def pinned_receipt(t):
    """Pool task under set_sharing_pin: what the received tensor is, the
    registrations the emulated driver holds, and a write the sender must
    see."""
    lib = ctypes.CDLL(os.environ["DLBRIDGE_CUDA_LIBRARY"])
    lib.emu_live_kind.restype = ctypes.c_long
    lib.emu_live_kind.argtypes = [ctypes.c_int]
    ctypes.c_uint8.from_address(t.data_ptr + t.byte_offset + 1).value = 42
    return t.device, t.is_shared, lib.emu_live_kind(4), dlbridge.get_sharing_pin()


def device_reader(conn, pin):
    """Receives a device tensor with set_sharing_pin(pin), reports it, and
    reads it again after the sender's later write."""
    dlbridge.set_sharing_pin(pin)
    t = conn.recv()
    conn.send((t.device, t.is_shared, t.to("cpu").tolist()))
    conn.recv()
    conn.send(t.to("cpu").tolist())
    conn.recv()


def pickle_shared(q):
    """Sends the bytes of a shared tensor pickled for another process, then
    ends: its resource sharer, which would hand the descriptor over, goes
    with it."""
    from multiprocessing.reduction import ForkingPickler
    q.put(bytes(ForkingPickler.dumps(dlbridge.zeros(4, shared=True))))


def receive_with_few_descriptors(q, out, frees):
    """For each count in frees: fills this process's descriptor table (a
    limit of 64) but for that many slots, receives a shared tensor from q,
    and reports what came (the exception's type and text, or "ok")."""
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    for free in frees:
        fill = []
        try:
            while True:
                fill.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
        for _ in range(free):
            os.close(fill.pop())
        try:
            t = q.get(timeout=60)
            got = ("ok", t.tolist())
            del t
        except Exception as e:  # noqa: BLE001 - reported to the test
            got = (type(e).__name__, str(e))
        for fd in fill:
            os.close(fd)
        out.put(got)


class ViewOnPickling:
    """Pickles as a view of its tensor made while pickling: the view is
    gone again before the child being started has its descriptor."""

    def __init__(self, t):
        self.t = t

    def __reduce__(self):
        return (ViewOnPickling, (self.t[1:],))


def add_one_to_view(holder, q):
    """Adds one to the first element of holder's tensor; reports it."""
    holder.t[0] = holder.t[0].item() + 1
    q.put((holder.t.is_shared, holder.t.tolist()))


def receive_views_with_64_descriptors(q, out):
    """Receives a list of shared tensors under a descriptor limit of 64;
    reports their values and how many descriptors this process holds."""
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    try:
        views = q.get(timeout=60)
        out.put(("ok", [v.item() for v in views], len(os.listdir("/proc/self/fd"))))
    except Exception as e:  # noqa: BLE001 - reported to the test
        out.put((type(e).__name__, str(e), 0))


def sum_items(views, q):
    """Reports the sum of the elements of views (0-d tensors)."""
    q.put(sum(v.item() for v in views))

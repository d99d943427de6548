"""Shared tensors between processes: multiprocessing (spawn, forkserver,
fork), Queue, Pipe and ProcessPoolExecutor pass them by handle; a holder
killed with SIGKILL harms no one; nothing is left once all are gone;
hostile handles are refused."""

import concurrent.futures
import errno
import gc
import multiprocessing as mp
import os
import pickle
import signal
import sys
import tempfile
import time

import shutil
import subprocess
from pathlib import Path

import pytest

import share_workers as w
from support import READ_ONLY, SANITIZED, capsule_of, dlbridge, measures_process_memory, np

METHODS = [m for m in ("spawn", "forkserver", "fork") if m in mp.get_all_start_methods()]


def drain(q, n, timeout=30):
    return [q.get(timeout=timeout) for _ in range(n)]


@pytest.mark.parametrize("method", METHODS)
def test_four_processes_read_and_write_one_tensor(method):
    ctx = mp.get_context(method)
    rows, n = 4, 1 << 16
    t = dlbridge.empty((rows, n), dtype="uint8", shared=True)
    a = np.from_dlpack(t)
    a[:] = w.pattern(rows * n).reshape(rows, n)
    inboxes = [ctx.Queue() for _ in range(rows)]
    outbox = ctx.Queue()
    procs = [ctx.Process(target=w.rw_worker, args=(t, i, inboxes[i], outbox)) for i in range(rows)]
    for p in procs:
        p.start()
    try:
        reads = drain(outbox, rows)
        assert sorted(reads) == [("read", i, True, True) for i in range(rows)]
        for i in range(rows):
            inboxes[i].put(t[i])
        written = drain(outbox, rows)
        assert sorted(written) == [("written", i, i * n, True) for i in range(rows)]
        # Every byte as the workers left it: each row written by its worker.
        expect = (w.pattern(rows * n).reshape(rows, n).astype(np.int64) + 1 + np.arange(rows)[:, None]) % 256
        np.testing.assert_array_equal(a, expect)
        # The sender writes after the workers received: they see it.
        a[:, 0] = 200 + np.arange(rows)
        a[:, -1] = 100 + np.arange(rows)
        for q in inboxes:
            q.put("go")
        seen = drain(outbox, rows)
        assert sorted(seen) == [("seen", i, 200 + i, 100 + i) for i in range(rows)]
    finally:
        for p in procs:
            p.join(30)
    assert [p.exitcode for p in procs] == [0] * rows


def shmem_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1])
    raise AssertionError("no Shmem in /proc/meminfo")


@measures_process_memory
def test_a_holder_killed_mid_use_harms_no_one_and_nothing_is_left():
    ctx = mp.get_context("spawn")
    size = 256 << 20
    dev_shm = set(os.listdir("/dev/shm"))
    before = shmem_kib()
    t = dlbridge.empty((size,), dtype="uint8", shared=True)
    np.from_dlpack(t)[:] = 1  # every page in memory
    counters = dlbridge.zeros((4,), dtype="int64", shared=True)
    c = np.from_dlpack(counters)
    assert shmem_kib() - before > (size >> 10) * 3 // 4
    procs = [ctx.Process(target=w.holder, args=(t, counters, i)) for i in range(3)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 60
    while not np.all(c[:3] > 0) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert np.all(c[:3] > 0), c
    os.kill(procs[0].pid, signal.SIGKILL)
    procs[0].join(10)
    assert procs[0].exitcode == -signal.SIGKILL
    # The others keep going over the same memory.
    rounds = c[1:3].copy()
    while not np.all(c[1:3] > rounds + 10) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert np.all(c[1:3] > rounds + 10), (c, rounds)
    c[-1] = 1
    for p in procs[1:]:
        p.join(30)
        assert p.exitcode == 0
    a = np.from_dlpack(t).reshape(4, -1)
    assert a[1, 0] == 2 and a[2, 0] == 3
    handle, fd = dlbridge.share_export(t)
    memory = os.fstat(fd)
    os.close(fd)
    assert holders(memory) == [os.getpid()]
    held = shmem_kib()
    del a, c, t, counters
    gc.collect()
    # Once every holder is gone the memory is: no process holds a
    # descriptor or a mapping of it, no name, and its pages are freed.
    assert holders(memory) == []
    assert set(os.listdir("/dev/shm")) == dev_shm
    assert held - shmem_kib() > (size >> 10) * 3 // 4


def holders(memory):
    """Processes holding a descriptor or a mapping of the file memory
    (an os.stat_result), found by device and inode in /proc."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    st = os.stat(f"/proc/{pid}/fd/{fd}")
                except OSError:  # closed since (listdir's own, for one)
                    continue
                if (st.st_dev, st.st_ino) == (memory.st_dev, memory.st_ino):
                    found.add(int(pid))
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    fields = line.split()
                    if len(fields) >= 5 and fields[4] == str(memory.st_ino) and "memfd:" in line:
                        found.add(int(pid))
        except OSError:
            continue
    return sorted(found)


def test_queue_pipe_and_pool_carry_shared_tensors_by_handle():
    ctx = mp.get_context("spawn")
    t = dlbridge.zeros((8,), dtype="int32", shared=True)
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as pool:
        results = list(pool.map(w.add_one, [t] * 8, range(8)))
    assert t.tolist() == [1] * 8
    assert all(shared for _, shared in results) and max(s for s, _ in results) == 8
    # A Pipe: the worker's write reaches the sender.
    here, there = ctx.Pipe()
    p = ctx.Process(target=w.echo_write, args=(there,))
    p.start()
    here.send(t[2:6])
    info = here.recv()
    assert info == {"shared": True, "readonly": False, "device": "cpu", "values": [1] * 4, "after": [9, 1, 1, 1]}
    assert t.tolist() == [1, 1, 9, 1, 1, 1, 1, 1]
    here.send("done")
    p.join(30)
    assert p.exitcode == 0


def open_fds():
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("method", [m for m in METHODS if m != "fork"])
def test_starting_children_with_a_kept_tensor_leaves_no_descriptor_behind(method):
    # The descriptor a child inherits at its start is the child's Popen's,
    # not the tensor's: a parent that keeps a shared tensor and starts
    # child after child with it must not hold one descriptor more for each.
    ctx = mp.get_context(method)
    t = dlbridge.zeros((4,), dtype="int32", shared=True)

    def start_and_join():
        p = ctx.Process(target=w.add_one, args=(t, 0))
        p.start()
        p.join(60)
        assert p.exitcode == 0
        p.close()

    start_and_join()  # the resource tracker (and forkserver) start once
    gc.collect()
    before = open_fds()
    for _ in range(3):
        start_and_join()
    gc.collect()
    assert open_fds() == before
    assert t.tolist() == [4, 0, 0, 0]


@pytest.mark.parametrize("method", [m for m in METHODS if m != "fork"])
def test_a_view_made_while_pickling_a_childs_arguments_reaches_the_child(method):
    # A __reduce__ that returns a new view: the view goes when the pickler
    # does, before the child is launched. Its descriptor closed then, the
    # number was reused (a pipe of the launch) and the child took that
    # file for the memory ("fd 10 is not shared memory") and closed it.
    ctx = mp.get_context(method)
    t = dlbridge.arange(5, dtype="int32").share_memory()
    q = ctx.Queue()

    def start_and_join():
        p = ctx.Process(target=w.add_one_to_view, args=(w.ViewOnPickling(t), q))
        p.start()
        p.join(60)
        assert p.exitcode == 0
        p.close()
        return q.get(timeout=30)

    assert start_and_join() == (True, [2, 2, 3, 4])
    gc.collect()
    before = open_fds()
    assert start_and_join() == (True, [3, 2, 3, 4])
    gc.collect()
    assert open_fds() == before
    assert t.tolist() == [0, 3, 2, 3, 4]


@pytest.mark.parametrize("method", [m for m in METHODS if m != "fork"])
def test_a_child_started_with_many_views_of_one_memory_inherits_one_descriptor(method):
    # One descriptor per view went with the child's start-up data: 300
    # views made forkserver refuse the start ("too many fds"; it passes
    # 256 at most), and spawn held 300 descriptors until the child went.
    ctx = mp.get_context(method)
    n = 300
    t = dlbridge.arange(n, dtype="int64").share_memory()
    q = ctx.Queue()

    def start_and_join():
        p = ctx.Process(target=w.sum_items, args=([t[i] for i in range(n)], q))
        p.start()
        p.join(60)
        assert p.exitcode == 0
        p.close()
        return q.get(timeout=30)

    assert start_and_join() == n * (n - 1) // 2
    gc.collect()
    before = open_fds()
    assert start_and_join() == n * (n - 1) // 2
    gc.collect()
    assert open_fds() == before


def test_tensors_not_in_shared_memory_travel_by_value():
    ctx = mp.get_context("spawn")
    t = dlbridge.arange(4, dtype="int16")
    here, there = ctx.Pipe()
    p = ctx.Process(target=w.echo_write, args=(there,))
    p.start()
    here.send(t)
    info = here.recv()
    here.send("done")
    p.join(30)
    assert info["shared"] is False and info["values"] == [0, 1, 2, 3] and info["after"] == [9, 1, 2, 3]
    assert t.tolist() == [0, 1, 2, 3]


def test_packed_sub_byte_copies_of_a_shared_tensor_are_private():
    # Elements that do not start a byte have no view: the copy made of
    # them lives in the process's own memory, and travels by value.
    from multiprocessing.reduction import ForkingPickler

    t = dlbridge.zeros((3, 3), dtype="int4", shared=True)
    row = t[0]
    for copy in (t[1], t[:, 0], t[::2]):
        assert copy.readonly and not copy.is_shared
        with pytest.raises(ValueError, match="not shared memory"):
            dlbridge.share_export(copy)
        sent = pickle.loads(ForkingPickler.dumps(copy))
        assert not sent.is_shared and sent.tolist() == copy.tolist()
    column = t[:, 0]
    assert row.is_shared and not row.readonly
    t[0] = [1, 2, 3]
    assert row.tolist() == [1, 2, 3] and column.tolist() == [0, 0, 0]


@pytest.mark.skipif(SANITIZED, reason="the child's SIGSEGV is reported by AddressSanitizer instead")
def test_read_only_shared_tensors_are_read_only_in_the_receiver():
    ctx = mp.get_context("spawn")
    ro = dlbridge.from_dlpack(capsule_of(np.arange(4, dtype=np.uint8), flags=READ_ONLY)).share_memory()
    assert ro.is_shared and ro.readonly
    here, there = ctx.Pipe()
    p = ctx.Process(target=w.poke_read_only, args=(there,))
    p.start()
    here.send(ro)
    assert here.recv() == (True, False)
    p.join(30)
    # The mapping is read-only: the write behind NumPy's back faults.
    assert p.exitcode == -signal.SIGSEGV
    assert ro.tolist() == [0, 1, 2, 3]


def test_a_read_only_share_cannot_be_reopened_writable():
    import mmap

    ro = dlbridge.from_dlpack(capsule_of(np.arange(4, dtype=np.uint8), flags=READ_ONLY)).share_memory()
    handle, fd = dlbridge.share_export(ro)
    try:
        # What a receiver holding the read-only descriptor could try.
        rw = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
        try:
            with pytest.raises(PermissionError):
                mmap.mmap(rw, mmap.PAGESIZE, offset=mmap.PAGESIZE)
            with pytest.raises(PermissionError):
                os.pwrite(rw, b"\x09", mmap.PAGESIZE)
        finally:
            os.close(rw)
        got = dlbridge.share_import(handle, fd)
        assert got.readonly and got.tolist() == [0, 1, 2, 3]
    finally:
        os.close(fd)


def test_share_memory_copies_once_and_keeps_shared_tensors():
    t = dlbridge.asarray([[1, 2, 3], [4, 5, 6]], dtype="int32")
    assert not t.is_shared
    s = t.T.share_memory()
    assert s.is_shared and s.tolist() == [[1, 4], [2, 5], [3, 6]] and s.data_ptr != t.data_ptr
    assert s.share_memory() is s and s[1:].is_shared and s[1:].share_memory() is not None
    assert dlbridge.full((2,), 7, shared=True).tolist() == [7, 7]
    z = dlbridge.zeros((3,), dtype="float64", shared=True)
    assert z.is_shared and z.tolist() == [0.0] * 3
    assert dlbridge.empty(0, shared=True).is_shared
    assert not dlbridge.zeros(2, shared=False).is_shared and not dlbridge.full(2, 1, shared=None).is_shared
    # Through versioned DLPack the tensor stays what it is.
    assert dlbridge.from_dlpack(s.__dlpack__(max_version=(1, 0))).is_shared and dlbridge.from_dlpack(s).is_shared
    with pytest.raises(ValueError, match="shared=True allocates cpu memory"):
        dlbridge.zeros(2, device="cuda:0", shared=True)
    with pytest.raises(TypeError, match="shared must be True or False"):
        dlbridge.empty(2, shared=1)


def test_share_memory_keeps_device_tensors_and_refuses_padded_sub_bytes():
    from support import KDLCUDA, SUBBYTE_PADDED, helper

    d = dlbridge.from_dlpack(helper.make_capsule(data=0x10000, shape=[4], dtype=(2, 32, 1), device=(KDLCUDA, 0)))
    assert d.share_memory() is d
    buf = bytearray(4)
    p = dlbridge.from_dlpack(helper.make_capsule(data=buf, shape=[4], dtype=(0, 4, 1), flags=SUBBYTE_PADDED))
    with pytest.raises(ValueError, match="padded sub-byte elements"):
        p.share_memory()
    packed = dlbridge.empty((5,), dtype="int4")
    assert packed.share_memory().is_shared and packed.share_memory().nbytes == 3


def test_set_sharing_pin_returns_the_previous_setting():
    assert dlbridge.set_sharing_pin("rocm_host") is None
    try:
        assert dlbridge.get_sharing_pin() == "rocm_host"
        assert dlbridge.set_sharing_pin("cuda_host") == "rocm_host"
    finally:
        assert dlbridge.set_sharing_pin(None) == "cuda_host"
    assert dlbridge.get_sharing_pin() is None


# ---------------------------------------------------------------------------
# Hostile handles through share_import


def exported(t):
    handle, fd = dlbridge.share_export(t)
    return bytearray(handle), fd


@pytest.fixture
def victim():
    t = dlbridge.zeros((4, 8), dtype="float32", shared=True)
    handle, fd = exported(t)
    yield t, handle, fd
    os.close(fd)


def refused(handle, fd, match):
    with pytest.raises(ValueError, match=match):
        dlbridge.share_import(bytes(handle), fd)


def put(handle, offset, value, size):
    h = bytearray(handle)
    h[offset:offset + size] = value.to_bytes(size, "little", signed=value < 0)
    return h


def test_a_good_handle_imports_the_same_memory(victim):
    t, handle, fd = victim
    u = dlbridge.share_import(bytes(handle), fd)
    np.from_dlpack(u)[1, 2] = 5
    assert t.tolist()[1][2] == 5 and u.shape == (4, 8) and u.is_shared


def test_truncated_oversized_foreign_and_newer_handles_are_refused(victim):
    _, handle, fd = victim
    for cut in (0, 8, 15, 100, len(handle) - 1):
        refused(handle[:cut], fd, "share handle")
    refused(handle + b"\0", fd, "share handle")
    refused(b"NOTSHARE" + handle[8:], fd, "magic")
    refused(put(handle, 8, 2, 2), fd, "version")


@pytest.mark.parametrize(
    "field, offset, value, size",
    [
        ("ndim", 24, 33, 4),
        ("ndim", 24, -1, 4),
        ("dtype", 17, 99, 1),
        ("flags", 32, 1 << 40, 8),
        ("shape", 208, 1 << 40, 8),
        ("shape", 208, -4, 8),
        ("strides", 208 + 16, -8, 8),
        ("strides", 208 + 16, 1 << 62, 8),
        ("byte_offset", 56, 1 << 20, 8),
        ("size", 40, 1 << 30, 8),
        ("identity", 64, 0x5A5A, 2),
    ],
)
def test_tampered_handles_are_refused(victim, field, offset, value, size):
    _, handle, fd = victim
    with pytest.raises(ValueError) as e:
        dlbridge.share_import(bytes(put(handle, offset, value, size)), fd)
    assert "share_import()" in str(e.value)


def test_a_handle_replayed_with_other_memory_is_refused(victim):
    _, handle, fd = victim
    other = dlbridge.zeros((4, 8), dtype="float32", shared=True)
    other_handle, other_fd = exported(other)
    try:
        refused(handle, other_fd, "identity")
    finally:
        os.close(other_fd)


def test_descriptors_that_are_not_sealed_shared_memory_are_refused(victim):
    _, handle, fd = victim
    with tempfile.TemporaryFile() as f:
        f.truncate(4096)
        refused(handle, f.fileno(), "share handle")
    r, wr = os.pipe()
    try:
        refused(handle, r, "share handle")
    finally:
        os.close(r)
        os.close(wr)
    unsealed = os.memfd_create("unsealed", os.MFD_CLOEXEC)
    try:
        os.ftruncate(unsealed, os.fstat(fd).st_size)
        refused(handle, unsealed, "seal")
    finally:
        os.close(unsealed)
    ro = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
    try:
        refused(handle, ro, "share handle")
    finally:
        os.close(ro)
    refused(handle, -1, "share handle")
    with pytest.raises(ValueError, match="fd -2 is not a file descriptor"):
        dlbridge.share_import(bytes(handle), -2)


def test_share_export_and_import_refuse_what_they_cannot_carry():
    with pytest.raises(ValueError, match="not shared memory"):
        dlbridge.share_export(dlbridge.zeros(3))
    with pytest.raises(TypeError, match="takes a dlbridge.Tensor"):
        dlbridge.share_export(np.zeros(3))
    t = dlbridge.zeros(3, shared=True)
    handle, fd = dlbridge.share_export(t)
    try:
        with pytest.raises(ValueError, match="pin is 'cuda:0'"):
            dlbridge.share_import(handle, fd, pin="cuda:0")
        with pytest.raises(TypeError):
            dlbridge.share_import(handle, "3")
    finally:
        os.close(fd)
    with pytest.raises(ValueError, match="set_sharing_pin"):
        dlbridge.set_sharing_pin("cuda:0")
    assert dlbridge.get_sharing_pin() is None


# ---------------------------------------------------------------------------
# Pinned on receipt, against the emulated CUDA driver


def build_emulator(tmp_path_factory, name, source, *extra):
    """One of tests/emu's runtimes, built as test_gpu_emulated builds it."""
    repo = Path(__file__).resolve().parents[2]
    emu = repo / "tests" / "emu"
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        pytest.skip("needs a C compiler")
    out = tmp_path_factory.mktemp("emu") / name
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-D_GNU_SOURCE", *extra, f"-I{repo / 'src'}", f"-I{emu}",
         str(emu / source), str(emu / "emu_core.c"), str(repo / "src" / "backend" / "host_maps.c"),
         "-fvisibility=hidden", "-Wl,-Bsymbolic",
         "-lpthread", "-o", str(out)],
        check=True,
    )
    return str(out)


@pytest.fixture(scope="module")
def emulated_cuda(tmp_path_factory):
    return build_emulator(tmp_path_factory, "libcuda.so.1", "emu_cuda.c", "-DEMU_PROC_ADDRESS")


@pytest.fixture(scope="module")
def emulated_hip(tmp_path_factory):
    return build_emulator(tmp_path_factory, "libamdhip64.so.6", "emu_hip.c")


PIN_SCRIPT = """
import concurrent.futures, ctypes, gc, multiprocessing as mp, os, sys
sys.path.insert(0, {tests!r})
import dlbridge, share_workers as w

lib = ctypes.CDLL(os.environ["DLBRIDGE_CUDA_LIBRARY"])
lib.emu_live_kind.restype = ctypes.c_long
lib.emu_live_kind.argtypes = [ctypes.c_int]
t = dlbridge.zeros((4096,), dtype="uint8", shared=True)
ctx = mp.get_context({method!r})
with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx, initializer=dlbridge.set_sharing_pin,
                                            initargs=("cuda_host",)) as pool:
    print(pool.submit(w.pinned_receipt, t).result())
print(t[1].item(), lib.emu_live_kind(4))
# In this process too: pinned on import, unpinned when the last tensor goes.
handle, fd = dlbridge.share_export(t)
u = dlbridge.share_import(handle, fd, pin="cuda_host")
os.close(fd)
v = u[8:]
print(u.device, v.device, u.is_shared, lib.emu_live_kind(4))
del u
print(lib.emu_live_kind(4))
del v
gc.collect()
print(lib.emu_live_kind(4))
"""


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_worker_pins_what_it_receives(emulated_cuda, method):
    script = PIN_SCRIPT.format(tests=str(Path(__file__).parent), method=method)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, DLBRIDGE_CUDA_LIBRARY=emulated_cuda))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines == [
        "('cuda_host', True, 1, 'cuda_host')",
        "42 0",
        "cuda_host cuda_host True 1",
        "1",
        "0",
    ]


DEVICE_SCRIPT = """
import ctypes, multiprocessing as mp, os, sys
sys.path.insert(0, {tests!r})
import dlbridge, share_workers as w

lib = ctypes.CDLL(os.environ[{var!r}])
lib.emu_shadow.restype = ctypes.c_void_p
lib.emu_shadow.argtypes = [ctypes.c_void_p]
t = dlbridge.asarray([1.0, 2.0, 3.0, 4.0], device={device!r})
ctx = mp.get_context({method!r})
here, there = ctx.Pipe()
p = ctx.Process(target=w.device_reader, args=(there, {pin!r}))
p.start()
here.send(t[1:])
print(here.recv())
# The sender writes the device memory after the worker opened it.
ctypes.c_float.from_address(lib.emu_shadow(t.data_ptr) + 8).value = 30.0
here.send("again")
print(here.recv())
here.send("done")
p.join()
print(p.exitcode)
"""


@pytest.mark.parametrize(("device", "pin"), [("cuda:0", None), ("cuda:0", "cuda_host"), ("rocm:0", "rocm_host")])
@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_device_tensors_travel_by_ipc_handle(request, device, pin, method):
    # A receiver that pins the host tensors it receives gets device ones
    # as they are: pinning is for host memory.
    cuda = device.startswith("cuda")
    var, lib = ("DLBRIDGE_CUDA_LIBRARY", "emulated_cuda") if cuda else ("DLBRIDGE_HIP_LIBRARY", "emulated_hip")
    script = DEVICE_SCRIPT.format(tests=str(Path(__file__).parent), method=method, device=device, pin=pin,
                                  var=var)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, **{var: request.getfixturevalue(lib)}))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [f"('{device}', True, [2.0, 3.0, 4.0])", "[2.0, 30.0, 4.0]", "0"]


EMPTY_DEVICE_SCRIPT = """
import multiprocessing as mp, pickle
from multiprocessing.reduction import ForkingPickler
import dlbridge

for shape in [(0,), (3, 0)]:
    t = dlbridge.zeros(shape, dtype="float32", device="cuda:0")
    r = pickle.loads(ForkingPickler.dumps(t))
    print(r.device, r.shape, r.dtype)
"""


def test_empty_cuda_tensors_travel_too(emulated_cuda):
    # An empty device tensor has no allocation to send by IPC handle; it
    # must still travel, as empty host tensors do, not fail the send (a
    # Queue's feeder thread drops what it cannot pickle, and the receiver
    # waits forever).
    r = subprocess.run([sys.executable, "-c", EMPTY_DEVICE_SCRIPT], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, DLBRIDGE_CUDA_LIBRARY=emulated_cuda))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["cuda:0 (0,) float32", "cuda:0 (3, 0) float32"]


def test_a_fork_while_another_thread_sets_the_pin_leaves_the_child_free():
    # The lock set_sharing_pin takes may be held by another thread when the
    # process forks; the child gets a lock of its own.
    from dlbridge import _sharing
    with _sharing._pin_lock:
        pid = os.fork()
        if pid == 0:
            signal.alarm(10)
            code = 0 if dlbridge.set_sharing_pin(None) is None else 1
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_more_shared_memory_than_the_system_has_is_a_memory_error():
    # Reserved, it would run the system out of memory, whose killer picks
    # any process: it is refused before anything is reserved.
    with pytest.raises(MemoryError, match="exceeds the memory this system has available"):
        dlbridge.zeros((1 << 50,), dtype="uint8", shared=True)


def test_shared_memory_past_the_file_size_limit_is_an_os_error():
    # The system's refusal, named; SIGXFSZ, which ftruncate would raise
    # past the limit, would have ended the process.
    script = (
        "import resource, dlbridge\n"
        "hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))\n"
        "try:\n"
        "    dlbridge.zeros((2 << 20,), dtype='uint8', shared=True)\n"
        "except OSError as e:\n"
        "    print('OSError', e)\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "OSError cannot allocate shared memory" in r.stdout
    assert "file size limit, 1048576 bytes (RLIMIT_FSIZE)" in r.stdout


def test_a_pickle_loaded_outside_the_senders_processes_is_a_named_os_error():
    # A process multiprocessing did not start lacks the sender's
    # authentication key, so the resource sharer refuses it the descriptor.
    from multiprocessing.reduction import ForkingPickler
    t = dlbridge.arange(6, dtype="int32").share_memory()
    b = bytes(ForkingPickler.dumps(t))
    load = ("import pickle, sys\n"
            "try:\n"
            "    pickle.loads(sys.stdin.buffer.read())\n"
            "except OSError as e:\n"
            "    print(type(e.__cause__).__name__, e)\n")
    r = subprocess.run([sys.executable, "-c", load], input=b, capture_output=True, timeout=120)
    out = r.stdout.decode()
    assert r.returncode == 0 and out.startswith("AuthenticationError a shared dlbridge.Tensor could not "
                                                "be received: this process does not hold the "
                                                "authentication key"), out + r.stderr.decode()
    assert "dlbridge.share_export()" in out


def test_a_descriptor_no_longer_offered_is_a_named_os_error():
    from multiprocessing.reduction import ForkingPickler
    b = bytes(ForkingPickler.dumps(dlbridge.zeros(4, shared=True)))
    assert pickle.loads(b).is_shared
    # Loaded a second time: the resource sharer handed it over already.
    with pytest.raises(OSError, match="its sender no longer offers the memory's "
                       r"descriptor \(EOFError\); a pickle made for another process loads once") as e:
        pickle.loads(b)
    assert isinstance(e.value.__cause__, EOFError)
    # Made by a process that has ended.
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=w.pickle_shared, args=(q,))
    p.start()
    b = q.get(timeout=60)
    p.join(60)
    with pytest.raises(OSError, match=r"could not be received.*\((FileNotFoundError|ConnectionRefusedError)"):
        pickle.loads(b)


def test_a_receiver_without_free_descriptors_is_told_so():
    # A receiver whose descriptor table is full cannot connect to the
    # sender's resource sharer (EMFILE), or connects but the kernel drops
    # the descriptor sent (recvfds' RuntimeError "received 0 items of
    # ancdata"): neither is the sender's leaving, which the text said, nor
    # a bare RuntimeError.
    import multiprocessing.resource_sharer  # noqa: F401 - loaded before the fork
    ctx = mp.get_context("fork")
    q, out = ctx.Queue(), ctx.Queue()
    frees = list(range(1, 8))
    p = ctx.Process(target=w.receive_with_few_descriptors, args=(q, out, frees))
    p.start()
    try:
        got = []
        for i in frees:
            q.put(dlbridge.full(3, i, dtype="int32", shared=True))
            got.append(out.get(timeout=60))
    finally:
        p.join(60)
    assert p.exitcode == 0
    refused = [g for g in got if g[0] != "ok"]
    assert refused, got
    for kind, text in refused:
        assert kind == "OSError", got
        assert "could not be received" in text and "RLIMIT_NOFILE is 64" in text, got
        assert "no longer offers" not in text, got
    # Once a few descriptors are free, the tensor arrives whole.
    assert got[-1] == ("ok", [len(frees)] * 3)


def test_many_views_of_one_memory_in_a_message_take_one_descriptor():
    # Each view sent took a descriptor of its own: one duplicate each in
    # the sender's resource sharer (a list of 1500 views ran the sender out
    # of descriptors, and the message was dropped), one connection each,
    # and one descriptor and mapping each in the receiver, which a limit
    # of 64 stopped short.
    from multiprocessing.reduction import ForkingPickler
    n = 600
    t = dlbridge.arange(n, dtype="int32").share_memory()
    pickle.loads(ForkingPickler.dumps(t))  # the resource sharer starts once
    gc.collect()
    before = open_fds()
    views = [t[i] for i in range(n)] + [t[::-1], t.share_memory()]
    b = ForkingPickler.dumps(views)
    assert open_fds() == before + 1
    got = pickle.loads(b)
    assert [v.item() for v in got[:n]] == list(range(n)) and got[n].tolist() == list(range(n))[::-1]
    assert all(v.is_shared for v in got)
    del got, b
    gc.collect()
    deadline = time.monotonic() + 30
    while open_fds() != before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert open_fds() == before
    # Across processes, to a receiver allowed 64 descriptors.
    ctx = mp.get_context("fork")
    q, out = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=w.receive_views_with_64_descriptors, args=(q, out))
    p.start()
    q.put(views[:n])
    kind, values, fds = out.get(timeout=60)
    p.join(60)
    assert (kind, values) == ("ok", list(range(n))), values
    assert fds < 64


def test_sending_and_receiving_leave_no_descriptor_behind():
    # The sender's exported descriptor and the receiver's received one are
    # closed once the memory is mapped (the resource sharer closes its own
    # duplicate after handing it over, in its thread: waited for).
    from multiprocessing.reduction import ForkingPickler
    t = dlbridge.arange(24, dtype="int32").reshape(4, 6).share_memory()
    pickle.loads(ForkingPickler.dumps(t))  # the resource sharer starts once
    gc.collect()
    before = open_fds()
    for v in (t, t[1:, ::2], t[::-1, ::-2], t[2, 3], t.T, dlbridge.empty((3, 0), shared=True)):
        r = pickle.loads(ForkingPickler.dumps(v))
        assert r.is_shared and (r.shape, r.strides, r.byte_offset, r.tolist()) == (
            v.shape, v.strides, v.byte_offset, v.tolist())
    del r, v
    gc.collect()
    deadline = time.monotonic() + 30
    while open_fds() != before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert open_fds() == before


def memory_fds(memory):
    """This process's descriptors of the file memory (an os.stat_result)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            st = os.stat(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (memory.st_dev, memory.st_ino):
            found.append(int(fd))
    return found


@pytest.mark.parametrize("method", [m for m in METHODS if m != "fork"])
def test_a_kept_child_lets_the_tensor_go_and_closes_nothing_twice(method):
    # The descriptor a child inherited at its start closes when the tensor
    # goes, also while the child's Process object is kept; when that goes
    # later, the number (reused since) is not closed again.
    ctx = mp.get_context(method)
    t = dlbridge.zeros((4,), dtype="int32", shared=True)
    handle, fd = dlbridge.share_export(t)
    memory = os.fstat(fd)
    os.close(fd)
    own = memory_fds(memory)
    p = ctx.Process(target=w.add_one, args=(t, 0))
    p.start()
    p.join(60)
    assert p.exitcode == 0 and t.tolist() == [1, 0, 0, 0]
    [inherited] = set(memory_fds(memory)) - set(own)
    del t
    gc.collect()
    assert holders(memory) == []
    r, wr = os.pipe()
    try:
        os.dup2(r, inherited)
        p.close()
        gc.collect()
        os.fstat(inherited)
    finally:
        for fd in {r, wr, inherited}:
            os.close(fd)


@pytest.mark.parametrize("starting_a_child", [False, True])
def test_a_failing_send_leaves_no_descriptor_behind(monkeypatch, starting_a_child):
    from multiprocessing import context, reduction

    def refuse(fd):
        raise OSError(errno.EMFILE, "Too many open files")

    class Popen:  # what set_spawning_popen holds while a child starts
        pass

    t = dlbridge.zeros((4,), dtype="int32", shared=True)
    monkeypatch.setattr(reduction, "DupFd", refuse)
    popen = Popen()
    gc.collect()
    before = open_fds()
    if starting_a_child:
        context.set_spawning_popen(popen)
    try:
        with pytest.raises(OSError, match="Too many open files"):
            reduction.ForkingPickler.dumps(t)
    finally:
        context.set_spawning_popen(None)
    assert open_fds() == before


def test_set_sharing_pin_swaps_under_its_lock(monkeypatch):
    # Threads setting it at once each get the setting they replaced.
    from dlbridge import _sharing
    seen = []

    class Recording:
        def __enter__(self):
            seen.append(("enter", dlbridge.get_sharing_pin()))

        def __exit__(self, *exc):
            seen.append(("exit", dlbridge.get_sharing_pin()))

    monkeypatch.setattr(_sharing, "_pin_lock", Recording())
    try:
        assert dlbridge.set_sharing_pin("rocm_host") is None
    finally:
        monkeypatch.undo()
        dlbridge.set_sharing_pin(None)
    assert seen == [("enter", None), ("exit", "rocm_host")]


def test_set_sharing_pin_keeps_a_plain_str_and_names_what_it_refuses():
    # A str subclass is kept as the str it holds (numpy's str_ is one); one
    # that claims equality with anything, and an array (compared element
    # by element), are refused by name.
    class Anything(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    try:
        assert dlbridge.set_sharing_pin(np.str_("cuda_host")) is None
        assert type(dlbridge.get_sharing_pin()) is str and dlbridge.get_sharing_pin() == "cuda_host"
    finally:
        dlbridge.set_sharing_pin(None)
    refusal = r"set_sharing_pin\(\): kind is .*; it is None, 'cuda_host' or 'rocm_host'"
    for kind in ("CUDA_HOST", b"cuda_host", np.str_("cuda"), Anything("junk"), np.array(["cuda_host", "x"])):
        with pytest.raises(ValueError, match=refusal):
            dlbridge.set_sharing_pin(kind)
    assert dlbridge.get_sharing_pin() is None

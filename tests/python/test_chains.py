"""No sequence of imports, exports and views builds a chain: whatever
dlbridge produced (a Tensor, its capsules of either struct, its buffer) is
recognised on import and the result references the one owner of the data,
so a loop of round trips keeps memory flat, keeps no earlier link alive,
and the last release frees the data once, without recursing through the
loop's history."""

import gc
import random
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import dlbridge
from support import SANITIZED, capsule_of, deleted, helper, measures_process_memory

# Under AddressSanitizer every step is several times slower; a chain would
# still show in the weak references and the release.
N = 30_000 if SANITIZED else 150_000


def via_table(x):
    return dlbridge.from_dlpack(x)


def via_versioned(x):
    return dlbridge.from_dlpack(x.__dlpack__(max_version=(1, 0)))


def via_legacy(x):
    return dlbridge.from_dlpack(x.__dlpack__())


def via_legacy_with_stream(x):
    # Keywords take the general path, which made a core legacy struct.
    return dlbridge.from_dlpack(x.__dlpack__(stream=None))


def via_legacy_copy(x):
    return dlbridge.from_dlpack(x.__dlpack__(copy=True))


def via_buffer(x):
    return dlbridge.asarray(memoryview(x))


def via_sliced_buffer(x):
    return dlbridge.asarray(memoryview(x)[1:]).reshape(-1)


def view(x):
    return x[...]


STEPS = {f.__name__: f for f in (via_table, via_versioned, via_legacy,
                                 via_legacy_with_stream, via_buffer)}


def fresh():
    helper.reset()
    # Foreign data: its deleter counts, so freeing it is seen.
    return dlbridge.from_dlpack(capsule_of(np.arange(12, dtype=np.int32)))


def assert_no_earlier_link_survives(refs):
    gc.collect()
    alive = [i for i, r in enumerate(refs) if r() is not None]
    assert alive == []


@pytest.mark.parametrize("name", sorted(STEPS))
@pytest.mark.parametrize("with_view", [False, True], ids=["plain", "viewed"])
def test_round_trips_keep_no_earlier_tensor_alive(name, with_view):
    step = STEPS[name]
    x = fresh()
    refs = []
    for i in range(N):
        x = step(x)
        if with_view:
            x = view(x)
        if i < 20:
            refs.append(weakref.ref(x))
    assert x.tolist() == list(range(12))
    assert_no_earlier_link_survives(refs)
    assert deleted() == 0
    # With a chain, this release would recurse N levels deep.
    del x
    assert deleted() == 1


def test_viewing_the_kept_tensor_between_imports_builds_no_chain():
    # x[0] replaces x's share by a core one; the next import must share
    # x's source, not x (which would keep each x alive through the next).
    x = fresh()
    refs = []
    for i in range(N):
        x = dlbridge.from_dlpack(x)
        x[0]
        if i < 20:
            refs.append(weakref.ref(x))
    assert_no_earlier_link_survives(refs)
    del x
    assert deleted() == 1


def test_sliced_buffers_share_the_owner_and_read_the_slice():
    x = dlbridge.arange(6, dtype="int32")
    y = via_sliced_buffer(x)
    assert y.tolist() == [1, 2, 3, 4, 5]
    assert y.data_ptr + y.byte_offset == x.data_ptr + x.byte_offset + 4
    r = dlbridge.asarray(memoryview(x).toreadonly())
    assert r.readonly and not x.readonly
    with pytest.raises(ValueError, match="read-only"):
        np.from_dlpack(r)[0] = 1
    # The buffer is released at once: the Tensor has no export left.
    wr = weakref.ref(x)
    del x
    assert y.tolist() == [1, 2, 3, 4, 5]
    assert wr() is None


def test_a_rewritten_legacy_share_is_read_as_it_now_says():
    import ctypes

    from dlpack_ctypes import DLManagedTensor

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    x = dlbridge.arange(6, dtype="int32")
    cap = x.__dlpack__()
    m = DLManagedTensor.from_address(get(cap, b"dltensor"))
    # A consumer's own view: element 1 as a scalar.
    m.dl_tensor.ndim = 0
    m.dl_tensor.byte_offset = 4
    y = dlbridge.from_dlpack(cap)
    assert y.shape == () and y.item() == 1
    del x, cap
    assert y.item() == 1


def test_mixed_random_sequences_keep_memory_bounded_and_free_once():
    rng = random.Random(8)
    ops = list(STEPS.values()) + [view, lambda x: x.reshape(1, -1).T.T.reshape(-1),
                                  via_legacy_copy, via_sliced_buffer]
    x = fresh()
    refs = []
    for i in range(N // 3):
        x = rng.choice(ops)(x)
        if x.size < 4:
            x = fresh()
        if i % 997 == 0:
            refs.append(weakref.ref(x))
    assert_no_earlier_link_survives(refs[:-1])
    del x
    gc.collect()


@measures_process_memory
@pytest.mark.parametrize("name", sorted(STEPS))
def test_round_trip_loops_keep_process_memory_flat(name):
    step = STEPS[name]

    def rss_kib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4

    x = fresh()
    for _ in range(2000):
        x = view(step(x))
    before = rss_kib()
    for _ in range(N):
        x = view(step(x))
    grown = rss_kib() - before
    # A chain costs hundreds of bytes a link: tens of MiB here.
    assert grown < 4096, f"{grown} KiB"


def test_a_chain_through_another_library_is_freed_without_deep_recursion():
    # Round trips through NumPy do build a chain (NumPy's array holds the
    # Tensor before it), and the last release frees every link, each inside
    # the release of the one after it. On a thread with a small stack that
    # nesting overflowed it: a crash, in a child process here.
    code = textwrap.dedent(f"""
        import threading, weakref
        import numpy as np
        import dlbridge

        def run():
            t = dlbridge.arange(10)
            first = weakref.ref(t)
            for i in range({N // 5}):
                if i % 2:
                    t = dlbridge.from_dlpack(np.from_dlpack(t))
                else:
                    t = dlbridge.asarray(np.asarray(t))
            assert t.tolist() == list(range(10))
            assert first() is not None
            del t
            assert first() is None
            print("freed")

        threading.stack_size(1 << 20)
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["freed"]

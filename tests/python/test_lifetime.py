"""Deleters: exactly once, from any thread, with or without the GIL, never
after the interpreter is gone, keeping pending exceptions; and no leaks."""

import gc
import os
import subprocess
import sys
import textwrap
import weakref

import pytest

from support import SANITIZED, capsule_of, deleted, dlbridge, helper, needs_torch, np, torch


def test_deleter_called_once_across_many_shares(helper):
    a = np.arange(8, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a))
    caps = [t.__dlpack__(max_version=(1, 0)) for _ in range(3)] + [t.__dlpack__()]
    imported = [dlbridge.from_dlpack(c) for c in caps[:2]]
    numpys = [np.from_dlpack(t), np.from_dlpack(imported[0])]
    views = [t[::2], imported[1].T]
    del t, caps, imported
    assert deleted() == 0
    del numpys
    assert deleted() == 0
    del views
    assert deleted() == 1


def test_release_on_a_thread_without_the_gil_takes_the_gil(helper):
    a = np.arange(4, dtype=np.float32)
    # The list holds the only reference: the helper drops it after taking
    # an owned tensor through the exchange table.
    helper.release_in_thread([dlbridge.from_dlpack(capsule_of(a))])
    counts = helper.counters()
    assert counts["deleted"] == 1
    # The helper's deleter found the GIL held on a thread that had none:
    # dlbridge took it before calling into the producer.
    assert counts["with_gil"] == 1 and counts["without_gil"] == 0


def test_release_of_a_viewed_tensor_on_another_thread(helper):
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    helper.release_in_thread([dlbridge.from_dlpack(capsule_of(a))[1:, ::2]])
    assert helper.counters() == {"deleted": 1, "with_gil": 1, "without_gil": 0}


def test_share_of_a_dlbridge_tensor_released_on_another_thread():
    lst = [dlbridge.zeros(1000)]
    ref = weakref.ref(lst[0])
    helper.release_in_thread(lst)
    gc.collect()
    assert ref() is None


def test_buffer_import_released_on_another_thread():
    ba = bytearray(16)
    helper.release_in_thread([dlbridge.asarray(ba)])
    # A bytearray with a buffer export held refuses to resize (BufferError).
    ba.append(1)
    assert len(ba) == 17


@needs_torch
def test_torch_import_released_on_another_thread():
    x = torch.arange(8.0)
    before = sys.getrefcount(x)
    helper.release_in_thread([dlbridge.from_dlpack(x)])
    gc.collect()
    assert sys.getrefcount(x) == before


SHUTDOWN = textwrap.dedent(
    """
    import dlbridge, numpy as np
    from dlbridge import _testhelper as h
    a = np.arange(4, dtype=np.float32)
    t = dlbridge.from_dlpack(h.make_capsule(data=a, shape=(4,), dtype=(2, 32, 1)))
    {extra}
    # Released by a C atexit handler, after Py_Finalize.
    h.release_at_exit([t])
    print("armed", flush=True)
    """
)


def run_script(source):
    """Runs source in a fresh interpreter; returns it done, exit status 0."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    r = subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    return r


@pytest.mark.parametrize(
    "extra",
    [
        "",
        "t = t[1:]",
        "t = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0)))",
        "t = dlbridge.asarray(bytearray(8))",
    ],
)
def test_release_after_the_interpreter_is_gone_does_nothing_python(extra):
    r = run_script(SHUTDOWN.format(extra=extra))
    assert "armed" in r.stdout
    assert "released after finalization" in r.stderr


EXITING = textwrap.dedent(
    """
    import atexit

    def late():
        # Runs after dlbridge's own exit callback (atexit is last in, first
        # out): the exit has begun, and a thread's release leaves what it
        # holds instead of waiting for the GIL this thread keeps.
        lst = [dlbridge.from_dlpack(h.make_capsule(data=a, shape=(4,), dtype=(2, 32, 1)))]
        print("late", h.release_in_thread_holding_gil(lst, 5000), flush=True)

    atexit.register(late)

    import dlbridge, numpy as np
    from dlbridge import _testhelper as h
    a = np.arange(4, dtype=np.float32)
    # Before the exit the release waits for the GIL, and runs once it has it.
    lst = [dlbridge.from_dlpack(h.make_capsule(data=a, shape=(4,), dtype=(2, 32, 1)))]
    print("early", h.release_in_thread_holding_gil(lst, 300), h.counters(), flush=True)
    """
)


def test_release_on_a_thread_once_the_exit_began_does_not_wait_for_the_gil():
    r = run_script(EXITING)
    assert "early False {'deleted': 1, 'with_gil': 1, 'without_gil': 0}" in r.stdout
    assert "late True" in r.stdout


SUBINTERPRETER = textwrap.dedent(
    """
    try:
        import _xxsubinterpreters as interpreters
    except ImportError:
        import _interpreters as interpreters
    import dlbridge, numpy as np
    from dlbridge import _testhelper as h

    sub = interpreters.create()
    if {imports}:
        interpreters.run_string(sub, "import dlbridge")
    interpreters.destroy(sub)
    a = np.arange(4, dtype=np.float32)
    h.release_in_thread([dlbridge.from_dlpack(h.make_capsule(data=a, shape=(4,), dtype=(2, 32, 1)))])
    print(h.counters(), flush=True)
    """
)


@pytest.mark.parametrize("imports", [False, True], ids=["existed", "imported and ended"])
def test_release_on_a_thread_after_a_subinterpreter_takes_the_gil(imports):
    # Once a subinterpreter has existed, PyGILState_Check() answers 1 on
    # every thread: a release on a thread without the GIL must still take
    # it. One that imported dlbridge runs its exit callbacks when it ends:
    # that is not the process's exit, so the release still runs.
    try:
        import _xxsubinterpreters  # noqa: F401
    except ImportError:
        pytest.importorskip("_interpreters")
    r = run_script(SUBINTERPRETER.format(imports=imports))
    assert "{'deleted': 1, 'with_gil': 1, 'without_gil': 0}" in r.stdout


def test_tensor_dropped_while_an_exception_is_pending_keeps_it(helper):
    a = np.arange(3, dtype=np.float32)
    lst = [dlbridge.from_dlpack(capsule_of(a, deleter="clear_error"))]
    with pytest.raises(ValueError, match="kept"):
        helper.decref_with_error(lst)
    assert deleted() == 1


def test_capsule_dropped_while_an_exception_is_pending_keeps_it(helper):
    a = np.arange(3, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a, deleter="clear_error"))
    caps = [t.__dlpack__(max_version=(1, 0)), t.__dlpack__()]
    del t
    with pytest.raises(ValueError, match="kept"):
        helper.decref_with_error(caps)
    assert deleted() == 1


def test_view_dropped_while_an_exception_is_pending_keeps_it(helper):
    a = np.arange(6, dtype=np.float32)
    lst = [dlbridge.from_dlpack(capsule_of(a, deleter="clear_error"))[::2]]
    with pytest.raises(ValueError, match="kept"):
        helper.decref_with_error(lst)
    assert deleted() == 1


def test_deleter_that_raises_is_reported_not_propagated(helper, monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    a = np.arange(3, dtype=np.float32)
    lst = [dlbridge.from_dlpack(capsule_of(a, deleter="leave_error"))]
    with pytest.raises(ValueError, match="kept"):
        helper.decref_with_error(lst)
    assert [str(e) for e in seen] == ["left set by the deleter"]
    seen.clear()
    t = dlbridge.from_dlpack(capsule_of(a, deleter="leave_error"))
    del t
    assert [str(e) for e in seen] == ["left set by the deleter"]


def test_refused_capsule_is_freed_by_its_own_destructor_once(helper):
    cap = capsule_of(np.zeros(2, np.float32), dtype=(99, 8, 1))
    for _ in range(3):
        with pytest.raises(BufferError):
            dlbridge.from_dlpack(cap)
    assert deleted() == 0
    del cap
    assert deleted() == 1


# ---------------------------------------------------------------------------
# Leaks
# ---------------------------------------------------------------------------


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def refcounts(watched):
    """Reference counts of the watched objects and of the types whose
    instances an exchange makes: a leaked reference shows here even where
    memory would not."""
    types = [dlbridge.Tensor, np.ndarray] + ([torch.Tensor] if torch else [])
    return [sys.getrefcount(o) for o in list(watched) + types]


def grows(loop, n=100_000, watched=()):
    """Memory growth over n exchanges after a warm-up of the same loop. The
    loop must also leave every reference count where it found it, and leave
    no objects behind for the collector (a handful may come and go: one
    per exchange would be n)."""
    if SANITIZED:
        pytest.skip("AddressSanitizer keeps freed memory in quarantine")
    loop(n // 10)
    gc.collect()
    objects = len(gc.get_objects())
    refs = refcounts(watched)
    before = rss_bytes()
    loop(n)
    gc.collect()
    growth = rss_bytes() - before
    assert refcounts(watched) == refs
    assert len(gc.get_objects()) - objects < 16
    return growth


# 100,000 exchanges leaking even 16 bytes each would grow by 1.6 MB.
LIMIT = 1_000_000


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_numpy_exchanges_do_not_leak():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)

    def loop(n):
        for _ in range(n):
            t = dlbridge.from_dlpack(a)
            np.from_dlpack(t)
            dlbridge.from_dlpack(t.__dlpack__())

    assert grows(loop, watched=[a]) < LIMIT


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_number_conversions_do_not_leak():
    # Each reads the element as a Python number first (a new float here)
    # and converts that: the number read must be let go.
    t = dlbridge.full((), 2.5)
    z = dlbridge.full((), 1.5 - 2j)

    def loop(n):
        for _ in range(n):
            int(t), float(t), bool(t), complex(t), t.item(), complex(z), bool(z)

    assert grows(loop, watched=[t, z]) < LIMIT


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_dlbridge_exchanges_do_not_leak():
    t = dlbridge.arange(12).reshape(3, 4)

    def loop(n):
        for _ in range(n):
            u = dlbridge.from_dlpack(t)
            u[1:, ::2]
            dlbridge.from_dlpack(u.__dlpack__(max_version=(1, 0)))

    assert grows(loop, watched=[t]) < LIMIT


@needs_torch
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_torch_exchanges_do_not_leak():
    x = torch.arange(12.0).reshape(3, 4)

    def loop(n):
        for _ in range(n):
            t = dlbridge.from_dlpack(x)
            torch.from_dlpack(t)

    assert grows(loop, watched=[x]) < LIMIT


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_buffer_exchanges_do_not_leak():
    t = dlbridge.arange(12, dtype="int32").reshape(3, 4)[:, ::2]
    ba = bytearray(16)

    def loop(n):
        for _ in range(n):
            memoryview(t).release()
            np.asarray(t)
            dlbridge.asarray(ba)

    assert grows(loop, watched=[t, ba]) < LIMIT


def test_reimporting_in_a_loop_builds_no_chain():
    t = dlbridge.arange(10)
    first = weakref.ref(t)
    for _ in range(3):
        t = dlbridge.from_dlpack(t)
    # Each import refers to the first tensor, not to the one before.
    middle = weakref.ref(t)
    t = dlbridge.from_dlpack(t)
    gc.collect()
    assert first() is not None and middle() is None
    refs = []
    for _ in range(5):
        refs.append(weakref.ref(t))
        t = dlbridge.from_dlpack(t)[1:]
    gc.collect()
    # Views hold the data through the owner, not the Python objects.
    assert [r() for r in refs] == [None] * 5
    assert first() is None
    assert t.tolist() == [5, 6, 7, 8, 9]


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_reimport_and_view_loops_do_not_leak():
    def loop(n):
        t = dlbridge.arange(4)
        for _ in range(n):
            t = dlbridge.from_dlpack(t)
            t = dlbridge.from_dlpack(t)[:]
            t = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0)))

    assert grows(loop) < LIMIT


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_refused_imports_do_not_leak():
    class Bad:
        def __dlpack__(self, **kwargs):
            return helper.make_capsule(data=None, shape=(3,))

    bad = Bad()
    # NULL data with elements: every import must be refused.
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(bad)
    before = sys.getrefcount(bad)

    def loop(n):
        for _ in range(n):
            try:
                dlbridge.from_dlpack(bad)
            except BufferError:
                pass

    assert grows(loop, 50_000, watched=[bad]) < LIMIT
    assert sys.getrefcount(bad) == before



def test_a_dropped_tensor_and_share_serve_the_next_ones():
    # The memory of the last Tensor and of the last share dropped is kept
    # for the next: a tensor imported and dropped at once, as an exchange
    # often is, neither gives its allocator's pool back nor takes it again.
    # So the second of two new ones allocates what the first took back.
    import tracemalloc

    a = np.arange(4, dtype=np.float32)
    t = dlbridge.from_dlpack(a)
    tracemalloc.start()
    try:
        def stays(make, out, i):
            before = tracemalloc.get_traced_memory()[0]
            out[i] = make()
            return tracemalloc.get_traced_memory()[0] - before

        for _ in range(3):  # fills both spares
            dlbridge.from_dlpack(a).__dlpack__(max_version=(1, 0))
        tensors, capsules = [None, None], [None, None]
        first = stays(lambda: dlbridge.from_dlpack(a), tensors, 0)
        second = stays(lambda: dlbridge.from_dlpack(a), tensors, 1)
        assert second - first == type(t).__basicsize__
        first = stays(lambda: t.__dlpack__(max_version=(1, 0)), capsules, 0)
        second = stays(lambda: t.__dlpack__(max_version=(1, 0)), capsules, 1)
        assert 0 < first < second
    finally:
        tracemalloc.stop()
    # Nothing of the ones before: weak references, tensors, sources.
    assert all(weakref.getweakrefcount(x) == 0 and x.tolist() == [0.0, 1.0, 2.0, 3.0]
               for x in tensors)
    assert [dlbridge.from_dlpack(c).tolist() for c in capsules] == [t.tolist()] * 2

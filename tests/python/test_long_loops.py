"""Loops over a tensor's index space finish at once when it has no
elements, whatever its other extents, and long ones notice a signal
(Ctrl-C) while they run.

Each case runs in a child process with a time limit (and a memory limit
where the loop builds objects), so a loop that never ends fails the test
instead of hanging the suite."""

import subprocess
import sys
import textwrap

import pytest

from support import SANITIZED

PRELUDE = """
import resource, signal, sys, time
import numpy as np
import dlbridge

def limit_memory(gib):
    b = gib << 30
    resource.setrlimit(resource.RLIMIT_AS, (b, b))

def interrupted(fn, after=0.2):
    # What fn raised when a handler raised KeyboardInterrupt `after`
    # seconds in, and how long it ran.
    def handler(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, after)
    start = time.monotonic()
    try:
        fn()
        what = "returned"
    except BaseException as e:
        what = type(e).__name__
    signal.setitimer(signal.ITIMER_REAL, 0)
    return what, time.monotonic() - start

def broadcast(shape, value=0):
    return dlbridge.from_dlpack(np.broadcast_to(np.array(value, np.int8), shape))
"""


def run(code, timeout=60):
    """Runs PRELUDE + code in a child and returns its stdout's last line."""
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


EMPTY_SHAPES = [(2**40, 0), (0, 2**40), (2**20, 2**20, 0), (2**62, 0),
                (3, 2**20, 0, 2**40)]


@pytest.mark.parametrize("shape", EMPTY_SHAPES)
def test_contains_on_an_empty_tensor_is_immediate(shape):
    out = run(f"""
        t = dlbridge.empty({shape!r}, dtype="int8")
        start = time.monotonic()
        found = 0 in t
        print(found, time.monotonic() - start < 1.0)
        """, timeout=30)
    assert out == "False True"


@pytest.mark.parametrize("shape", EMPTY_SHAPES)
def test_repr_of_an_empty_tensor_is_immediate(shape):
    out = run(f"""
        t = dlbridge.empty({shape!r}, dtype="int8")
        start = time.monotonic()
        r = repr(t)
        print("dtype=int8" in r, time.monotonic() - start < 1.0)
        """, timeout=30)
    assert out == "True True"


def test_contains_on_an_empty_tensor_compares_nothing():
    class Probe:
        calls = 0

        def __eq__(self, other):
            Probe.calls += 1
            return True

        __hash__ = None

    import dlbridge

    t = dlbridge.empty((5, 0, 3), dtype="int8")
    assert (Probe() in t) is False
    assert Probe.calls == 0
    t = dlbridge.zeros((2, 3), dtype="int8")
    assert (Probe() in t) is True
    assert Probe.calls == 1


@pytest.mark.skipif(SANITIZED, reason="timings under AddressSanitizer mean nothing")
@pytest.mark.parametrize("shape", [(2**40,), (2**20, 2**20), (2**14, 2**13, 2**13)])
def test_contains_over_2_40_elements_notices_a_signal(shape):
    # Every element is 0, so looking for 1 visits all 2**40 of them: years.
    out = run(f"""
        t = broadcast({shape!r})
        what, took = interrupted(lambda: 1 in t)
        print(what, took < 10)
        """)
    assert out == "KeyboardInterrupt True"


@pytest.mark.skipif(SANITIZED, reason="memory limits do not work under AddressSanitizer")
def test_tolist_of_a_huge_tensor_notices_a_signal():
    # 2**40 elements would fill any memory; the limit turns a loop that
    # ignores the signal into a MemoryError instead of a machine-wide
    # shortage.
    out = run("""
        t = broadcast((2**20, 2**20))
        limit_memory(2)
        what, took = interrupted(t.tolist)
        print(what, took < 10)
        """)
    assert out == "KeyboardInterrupt True"


@pytest.mark.skipif(SANITIZED, reason="memory limits do not work under AddressSanitizer")
def test_iterating_rows_of_an_empty_tensor_in_c_notices_a_signal():
    # deque(maxlen=0) drives the iterator from C, where no bytecode loop
    # checks for signals; the tensor has 2**40 rows, each of them empty.
    out = run("""
        import collections
        t = dlbridge.empty((2**40, 0), dtype="int8")
        limit_memory(2)
        what, took = interrupted(lambda: collections.deque(t, maxlen=0))
        print(what, took < 10)
        """)
    assert out == "KeyboardInterrupt True"


def test_tolist_and_contains_still_give_every_value():
    import numpy as np

    import dlbridge

    a = np.arange(3 * 40000, dtype=np.int32).reshape(3, 40000)
    t = dlbridge.from_dlpack(a)
    assert t.tolist() == a.tolist()
    assert (3 * 40000 - 1) in t
    assert -1 not in t
    assert list(t)[2].tolist() == a[2].tolist()


@pytest.mark.skipif(SANITIZED, reason="memory limits do not work under AddressSanitizer")
def test_sub_byte_buffers_too_large_for_memory_say_so():
    # Packed int4 elements go through a buffer of a byte each, twice the
    # tensor's bytes: with room for the tensor and not for that buffer,
    # full() and t[...] = value raise a MemoryError that says what did
    # not fit (CPython's own has no message).
    out = run("""
        def vm_bytes():
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmSize:"):
                        return int(line.split()[1]) << 10

        t = dlbridge.empty((2**30,), dtype="int4")  # 512 MiB
        base = vm_bytes() + (768 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (base, base))
        said = []
        for call in (lambda: dlbridge.full((2**30,), 1, dtype="int4"),
                     lambda: t.__setitem__(Ellipsis, 1)):
            try:
                call()
                said.append("returned")
            except MemoryError as e:
                said.append(str(e))
        print(said)
        """)
    assert out == str([
        "1073741824 bytes to hold 1073741824 sub-byte elements a byte each, "
        "before they are packed, do not fit in memory",
        "t[...] = value: 1073741825 bytes to hold the sub-byte elements a byte "
        "each, before they are packed, do not fit in memory"])

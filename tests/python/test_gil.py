"""Large copies run without the GIL, so other Python threads keep going."""

import sys
import threading
import time

import numpy as np

import dlbridge
from support import measures_time


@measures_time
def test_large_copy_releases_the_gil():
    # 256 MiB: long enough (tens of ms) that the scheduler's own gaps on
    # a busy 2-core machine stay well below one copy.
    a = np.arange(16384 * 4096, dtype=np.float32).reshape(16384, 4096)
    t = dlbridge.from_dlpack(a).permute((1, 0))
    t.copy()  # warm the pool and the allocator
    durations = []

    def copies():
        for _ in range(3):
            t0 = time.perf_counter()
            t.copy()
            durations.append(time.perf_counter() - t0)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        worker = threading.Thread(target=copies)
        wakeups = [time.perf_counter()]
        worker.start()
        while worker.is_alive():
            time.sleep(0.0005)
            wakeups.append(time.perf_counter())
        worker.join()
    finally:
        sys.setswitchinterval(old)
    longest_gap = max(b - a for a, b in zip(wakeups, wakeups[1:]))
    # A copy that held the GIL would keep this thread from waking for the
    # whole copy; released, it wakes every few ms at worst (the copy's own
    # threads share the 2 cores with it).
    assert longest_gap < 0.5 * min(durations), (longest_gap, durations)
    np.testing.assert_array_equal(np.from_dlpack(t.copy()), a.T)

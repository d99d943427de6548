"""A fixed slice of the random API-call fuzzer (tests/fuzz/py_api_fuzz.py):
a few seeds, a fixed number of calls each, so that every run of the suite
(plainly and against the module built with ASan + UBSan) makes the same
calls. Every public function and Tensor method is called with hostile
arguments; each call must return or raise an Exception that is not a
SystemError, leave no exception set behind it, call no producer's deleter
twice, and leave the reference counts of its inputs as they were."""

import os
import sys

import pytest

from support import dlbridge, helper  # noqa: F401 - the helper is built

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz"))

import py_api_fuzz  # noqa: E402


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_call_returns_or_raises_an_exception_and_keeps_its_inputs(seed):
    calls, findings, raised = py_api_fuzz.run(seed, calls=1000, hang=120)
    assert calls == 1000
    assert findings == []
    # The slice reaches past the argument checks: many calls return, and
    # the refusals are of several kinds.
    stats = py_api_fuzz.run.stats
    assert stats.ok > 200, stats.ok
    assert len(raised) >= 4, raised


def test_the_slice_is_the_same_each_run():
    first = py_api_fuzz.run(4, calls=100, hang=120)
    second = py_api_fuzz.run(4, calls=100, hang=120)
    assert first[0] == second[0] == 100
    assert first[2] == second[2]

"""Fixtures for the dlbridge Python tests (shared code is in support.py)."""

import gc

import pytest

import support


@pytest.fixture
def helper():
    """The test helper extension, its deleter counters reset."""
    gc.collect()
    support.helper.reset()
    yield support.helper
    gc.collect()

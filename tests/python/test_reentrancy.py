"""Python code that runs while dlbridge is in the middle of a call (a
producer's metaclass answering a look-up, a finalizer of something dlbridge
lets go of, a subclass's __iter__, a dtype-like object's __repr__, a buffer
exporter's release) may change or free what the call still uses. Each test
here reached freed or overrun memory (under AddressSanitizer), a freed
exchange table, or a message of another call before its fix."""

import gc

import numpy as np
import pytest

import dlbridge
from support import capsule_of, helper


# ---------------------------------------------------------------------------
# The per-type route of from_dlpack
# ---------------------------------------------------------------------------


class Collecting:
    """Collects garbage when dropped: whatever lost its last reference but
    a cycle's goes at that moment."""

    def __del__(self):
        gc.collect()


def test_producer_type_dropped_during_its_own_look_up_stays_alive():
    # The look-up of the exchange table runs the metaclass's __getattr__,
    # which gives the producer another class: the instance held the last
    # reference to its old class but the class's own cycle, and what the
    # look-up returns collects garbage as it is dropped. The route was then
    # looked up, and cached, on the freed class.
    class Plain:
        def __dlpack__(self, **kwargs):
            return dlbridge.arange(3).__dlpack__(**kwargs)

    def make(box):
        class Meta(type):
            def __getattr__(cls, name):
                if name != "__dlpack_c_exchange_api__":
                    raise AttributeError(name)
                box.pop().__class__ = Plain
                return Collecting()

        class Producer(metaclass=Meta):
            def __dlpack__(self, **kwargs):
                return dlbridge.arange(3).__dlpack__(**kwargs)

        return Producer()

    box = []
    box.append(make(box))
    x = box[0]
    gc.collect()
    # Asked on the object, as x.__dlpack__ is: Plain's now.
    assert dlbridge.from_dlpack(x).tolist() == [0, 1, 2]
    assert type(x) is Plain
    assert dlbridge.from_dlpack(x).tolist() == [0, 1, 2]


def test_route_entry_renewed_while_its_old_method_dies_keeps_its_table():
    # A type's cache entry is renewed after the type changed. Dropping the
    # entry's old __dlpack__ runs a finalizer that gives the class a new
    # exchange table and imports again, which renews the same entry: the
    # capsule of the table found first went with that, and the entry was
    # then finished with the freed table and the new table's capsule, which
    # every later import used.
    a = np.arange(3, dtype=np.int32)
    retired_before, calls_before = helper.retired_counts()

    class Producer:
        __dlpack_c_exchange_api__ = helper.fake_exchange_owned()

        @property
        def capsule(self):
            return capsule_of(a)

    inner = []

    class Finalizer:
        def __del__(self):
            Producer.__dlpack_c_exchange_api__ = helper.fake_exchange_owned()
            inner.append(dlbridge.from_dlpack(Producer()).tolist())
            gc.collect()

    def old_method():
        held = Finalizer()

        def __dlpack__(self, **kwargs):
            assert held is not None
            return capsule_of(a)

        return __dlpack__

    Producer.__dlpack__ = old_method()
    assert dlbridge.from_dlpack(Producer()).tolist() == [0, 1, 2]
    # A new method changes the type: the entry is renewed, and the old
    # method's last reference, the entry's, goes meanwhile.
    Producer.__dlpack__ = lambda self, **kwargs: capsule_of(a)
    assert dlbridge.from_dlpack(Producer()).tolist() == [0, 1, 2]
    assert inner == [[0, 1, 2]]
    assert dlbridge.from_dlpack(Producer()).tolist() == [0, 1, 2]
    retired, calls = helper.retired_counts()
    # The first table was let go of and never called after.
    assert retired == retired_before + 1
    assert calls == calls_before

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


# ---------------------------------------------------------------------------
# Shapes from subclasses of list and tuple
# ---------------------------------------------------------------------------


class LongIter(list):
    """A list whose iteration gives far more items than it holds."""

    def __iter__(self):
        return iter([1] * 100)


class LongIterTuple(tuple):
    def __iter__(self):
        return iter([1] * 100)


class LongLen(list):
    """A list whose __len__ says more than it holds."""

    def __len__(self):
        return 100


@pytest.mark.parametrize("kind", [LongIter, LongIterTuple])
@pytest.mark.parametrize("read", [
    lambda s: dlbridge.zeros(s),
    lambda s: dlbridge.empty(s, dtype="int8"),
    lambda s: dlbridge.full(s, 1),
    lambda s: dlbridge._dlbridge._rebuild(b"\0" * 24, "float32", s, 0),
    lambda s: dlbridge.arange(6).reshape(s),
], ids=["zeros", "empty", "full", "_rebuild", "reshape"])
def test_shapes_of_subclasses_are_read_by_length_and_index(kind, read):
    # Their size was checked from what they hold, and their items taken
    # from their __iter__: 100 extents were written into room for 64.
    assert read(kind([2, 3])).shape == (2, 3)


@pytest.mark.parametrize("kind", [LongIter, LongIterTuple])
def test_permute_axes_of_subclasses_are_read_by_length_and_index(kind):
    assert dlbridge.zeros((2, 3)).permute(kind([1, 0])).shape == (3, 2)


def test_shape_subclass_whose_length_says_too_much_is_refused():
    with pytest.raises(ValueError, match="shape has 100 dimensions; at most 64"):
        dlbridge.zeros(LongLen([2, 3]))


# ---------------------------------------------------------------------------
# The core's message, read after Python code ran
# ---------------------------------------------------------------------------


def other_core_failure():
    """Fails a call into the core, which writes its message."""
    with pytest.raises(ValueError, match="bfloat17"):
        dlbridge.empty(1, dtype="bfloat17")


def test_dtype_reason_is_its_own_when_the_dtype_s_repr_calls_dlbridge():
    # The reason was read from the core's message after the dtype-like
    # object's __repr__ ran, which had failed a call of its own.
    class DtypeLike:
        name = "int3"

        def __repr__(self):
            other_core_failure()
            return "DtypeLike()"

    with pytest.raises(ValueError) as info:
        dlbridge.empty(1, dtype=DtypeLike())
    message = str(info.value)
    assert message.startswith("dtype DtypeLike() is not known (dtype.bits is 3;")
    assert "17" not in message


def test_share_import_reason_is_its_own_when_the_handle_s_release_calls_dlbridge():
    # The handle's buffer was released before the refusal read the core's
    # message; its exporter's release code had failed a call of its own.
    handle = helper.careless_buffer(1, on_release=other_core_failure)
    with pytest.raises(ValueError) as info:
        dlbridge.share_import(handle, -1)
    assert str(info.value) == (
        'share_import(): share handle: magic is not "DLBSHARE"; not a '
        "dlbridge handle")

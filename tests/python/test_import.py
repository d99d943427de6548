"""dlbridge.from_dlpack: every producer, every field, every misuse."""

import contextlib
import ctypes
import gc
import sys
import types
import weakref

import pytest

from support import (
    BUF,
    IS_COPIED,
    KDLCPU,
    KDLCUDA,
    KDLCUDAHOST,
    KDLCUDAMANAGED,
    READ_ONLY,
    capsule_of,
    deleted,
    dlbridge,
    helper,
    needs_torch,
    np,
    torch,
)


# ---------------------------------------------------------------------------
# Capsules
# ---------------------------------------------------------------------------


def test_versioned_capsule_is_read_zero_copy(helper):
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = dlbridge.from_dlpack(capsule_of(a))
    assert t.shape == (2, 3)
    assert t.strides == (3, 1)
    assert t.dtype == "float64"
    assert t.data_ptr == a.ctypes.data
    assert t.tolist() == a.tolist()


def test_legacy_capsule_is_read(helper):
    a = np.arange(4, dtype=np.int32)
    t = dlbridge.from_dlpack(capsule_of(a, legacy=True))
    assert t.tolist() == [0, 1, 2, 3]
    # The legacy struct cannot say the producer allows writes.
    assert t.readonly
    del t
    assert deleted() == 1


def test_capsule_is_renamed_and_deleter_runs_once_after_the_tensor(helper):
    a = np.arange(3, dtype=np.float32)
    cap = capsule_of(a)
    t = dlbridge.from_dlpack(cap)
    assert "used_dltensor_versioned" in repr(cap)
    del cap
    assert deleted() == 0
    del t
    assert deleted() == 1


def test_legacy_capsule_is_renamed(helper):
    cap = capsule_of(np.zeros(2, np.float32), legacy=True)
    t = dlbridge.from_dlpack(cap)
    assert '"used_dltensor"' in repr(cap)
    del t, cap
    assert deleted() == 1


def test_capsule_consumed_twice_is_refused(helper):
    a = np.arange(3.0)
    for cap in (a.__dlpack__(max_version=(1, 0)), a.__dlpack__()):
        dlbridge.from_dlpack(cap)
        with pytest.raises(BufferError, match="already consumed"):
            dlbridge.from_dlpack(cap)


def test_capsule_with_used_name_is_refused_and_not_deleted(helper):
    cap = capsule_of(np.zeros(2, np.float32), name="used_dltensor_versioned")
    with pytest.raises(BufferError, match="already consumed"):
        dlbridge.from_dlpack(cap)
    del cap
    assert deleted() == 0


def test_capsule_with_foreign_name_is_a_type_error(helper):
    cap = capsule_of(np.zeros(2, np.float32), name="not_a_tensor")
    with pytest.raises(TypeError, match="not_a_tensor"):
        dlbridge.from_dlpack(cap)
    # Still the producer's: its own destructor frees it, once.
    del cap
    assert deleted() == 1


def test_major_version_mismatch_touches_only_the_deleter(helper):
    cap = capsule_of(np.zeros(2, np.float32), version=(2, 0), ndim=-5)
    with pytest.raises(BufferError, match="version is 2.0"):
        dlbridge.from_dlpack(cap)
    assert "used_" not in repr(cap)
    assert deleted() == 0
    del cap
    assert deleted() == 1


def test_higher_minor_version_is_accepted(helper):
    t = dlbridge.from_dlpack(capsule_of(np.ones(2, np.float32), version=(1, 99)))
    assert t.tolist() == [1.0, 1.0]


@pytest.mark.parametrize(
    "fields, field",
    [
        (dict(ndim=-1), "ndim"),
        (dict(ndim=65, shape=(1,) * 65), "ndim"),
        (dict(shape=(2, -3), strides=(1, 1)), "shape"),
        (dict(shape_null=True), "shape"),
        (dict(dtype=(99, 32, 1)), "code"),
        (dict(dtype=(15, 8, 1)), "bits"),
        (dict(dtype=(2, 32, 0)), "lanes"),
        (dict(device=(5, 0)), "device"),
        (dict(device=(KDLCUDA, -1)), "device"),
        (dict(data=None), "data"),
        (dict(flags=1 << 7), "flags"),
        (dict(strides=(1 << 62, 1)), "strides"),
        (dict(byte_offset=1 << 63), "byte_offset"),
    ],
)
@pytest.mark.parametrize("legacy", [False, True])
def test_invalid_fields_raise_buffer_error_naming_the_field(helper, fields, field, legacy):
    if legacy and "flags" in fields:
        pytest.skip("the legacy struct has no flags")
    a = np.zeros((4, 4), np.float32)
    cap = capsule_of(a, legacy=legacy, **fields)
    with pytest.raises(BufferError, match=field):
        dlbridge.from_dlpack(cap)
    # Refused means not taken: the capsule still owns its tensor.
    assert "used_" not in repr(cap)
    del cap
    assert deleted() == 1


def test_read_only_flag_gives_a_read_only_tensor(helper):
    a = np.arange(4, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a, flags=READ_ONLY))
    assert t.readonly
    assert memoryview(t).readonly
    with pytest.raises(BufferError, match="read-only"):
        helper.get_buffer(t, BUF.WRITABLE)
    n = np.from_dlpack(t)
    assert not n.flags.writeable
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()
    # ... and the views of it.
    assert t[1:].readonly and t.reshape(2, 2).readonly and t.T.readonly


def test_byte_offset_is_honoured(helper):
    base = np.arange(10, dtype=np.int64)
    t = dlbridge.from_dlpack(capsule_of(base, shape=(3,), strides=(2,), byte_offset=16))
    assert t.byte_offset == 16
    assert t.data_ptr == base.ctypes.data
    assert t.tolist() == [2, 4, 6]
    assert np.from_dlpack(t).tolist() == [2, 4, 6]
    assert torch is None or torch.from_dlpack(t).tolist() == [2, 4, 6]


def test_null_strides_mean_row_major(helper):
    a = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    for legacy in (False, True):
        t = dlbridge.from_dlpack(capsule_of(a, strides=None, legacy=legacy))
        assert t.strides == (12, 4, 1)
        assert t.tolist() == a.tolist()
        assert t[1, 2].tolist() == a[1, 2].tolist()


def test_ndim_zero(helper):
    a = np.array(7.5, dtype=np.float64)
    for fields in (dict(), dict(strides=None), dict(shape_null=True, strides=None)):
        t = dlbridge.from_dlpack(capsule_of(a, **fields))
        assert t.shape == () and t.strides == () and t.ndim == 0 and t.size == 1
        assert t.tolist() == 7.5
        with pytest.raises(TypeError):
            len(t)


def test_size_zero_with_null_data(helper):
    t = dlbridge.from_dlpack(
        helper.make_capsule(data=None, shape=(0, 3), dtype=(2, 32, 1))
    )
    assert t.shape == (0, 3) and t.size == 0 and t.nbytes == 0
    assert np.from_dlpack(t).shape == (0, 3)
    assert bytes(memoryview(t)) == b""


def test_negative_and_zero_strides(helper):
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = dlbridge.from_dlpack(capsule_of(a[::-1, ::-2]))
    assert t.strides == (-4, -2)
    assert t.tolist() == a[::-1, ::-2].tolist()
    row = np.arange(4, dtype=np.int32)
    b = dlbridge.from_dlpack(capsule_of(row, shape=(3, 4), strides=(0, 1)))
    assert b.tolist() == [[0, 1, 2, 3]] * 3
    assert np.from_dlpack(b).tolist() == [[0, 1, 2, 3]] * 3


def test_host_type_device_id_is_normalised(helper):
    a = np.arange(3, dtype=np.float32)
    for kind, name in ((KDLCUDAHOST, "cuda_host"), (KDLCUDAMANAGED, "cuda_managed")):
        t = dlbridge.from_dlpack(capsule_of(a, device=(kind, 3)))
        assert t.device == name
        assert t.__dlpack_device__() == (kind, 0)
        assert t.tolist() == [0.0, 1.0, 2.0]


def test_cuda_label_is_kept_without_reading_the_memory(helper):
    # A pointer no CPU may read: dlbridge only describes it.
    t = dlbridge.from_dlpack(
        helper.make_capsule(data=0x10000, shape=(4,), dtype=(2, 32, 1), device=(KDLCUDA, 1))
    )
    assert t.device == "cuda:1"
    assert t.__dlpack_device__() == (KDLCUDA, 1)
    assert "shape=(4,)" in repr(t)


def test_deleter_runs_after_the_last_view(helper):
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    t = dlbridge.from_dlpack(capsule_of(a))
    views = [t[1:], t.T, t.reshape(16), t[::2, ::-1], t[0]]
    del t
    assert deleted() == 0
    assert views[1].tolist() == a.T.tolist()
    views.pop()
    assert deleted() == 0
    del views
    assert deleted() == 1


def test_deleter_may_be_null(helper):
    a = np.arange(3, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a, deleter="none"))
    assert t.tolist() == [0.0, 1.0, 2.0]
    del t
    assert deleted() == 0


# ---------------------------------------------------------------------------
# Producers
# ---------------------------------------------------------------------------


class VersionedProducer:
    """A producer of the current protocol that records its calls."""

    def __init__(self, array):
        self.array = array
        self.calls = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(dict(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy))
        return self.array.__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return (KDLCPU, 0)


class StreamOnlyProducer:
    """NumPy 1.x and PyTorch 1.x: __dlpack__ takes only stream."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return (KDLCPU, 0)


def test_producer_is_asked_for_the_versioned_struct():
    p = VersionedProducer(np.arange(3.0))
    t = dlbridge.from_dlpack(p)
    assert t.tolist() == [0.0, 1.0, 2.0]
    assert p.calls == [dict(stream=None, max_version=(1, 3), dl_device=None, copy=None)]


def test_stream_only_producer_works():
    a = np.arange(5, dtype=np.int64)
    t = dlbridge.from_dlpack(StreamOnlyProducer(a))
    assert t.tolist() == [0, 1, 2, 3, 4]
    # It answered with the legacy struct: shared, and read-only.
    assert t.data_ptr == a.ctypes.data and t.readonly


def test_old_producer_costs_one_type_error_per_type():
    class Old(StreamOnlyProducer):
        asked = []

        def __dlpack__(self, stream=None):
            return self.array.__dlpack__()

    def counting(self, *args, **kwargs):
        type(self).asked.append(kwargs)
        return self.array.__dlpack__()

    a = np.arange(3.0)
    assert dlbridge.from_dlpack(Old(a)).tolist() == [0.0, 1.0, 2.0]
    # The same function (so the same type) counts from here on: after the
    # one TypeError its type is asked without max_version only.
    Old.__dlpack__.__code__ = counting.__code__
    for _ in range(4):
        assert dlbridge.from_dlpack(Old(a)).tolist() == [0.0, 1.0, 2.0]
    assert Old.asked == [{}] * 4


def test_a_proxy_type_that_fronted_an_old_producer_asks_a_new_one_for_max_version():
    # A __dlpack__ that passes its keywords on may front an old producer
    # and a new one: a new one asked without max_version answers with the
    # legacy struct, read-only on import, so its type never learns to skip
    # max_version.
    class Proxy:
        def __init__(self, inner):
            self.inner = inner

        def __dlpack__(self, **kwargs):
            return self.inner.__dlpack__(**kwargs)

    assert dlbridge.from_dlpack(Proxy(StreamOnlyProducer(np.arange(2.0)))).readonly
    a = np.arange(3.0)
    for _ in range(2):
        t = dlbridge.from_dlpack(Proxy(a))
        assert not t.readonly and t.data_ptr == a.ctypes.data
        t[0] = 7.0
        assert a[0] == 7.0
    # And the old one behind it still answers, asked each time.
    assert dlbridge.from_dlpack(Proxy(StreamOnlyProducer(np.arange(2.0)))).tolist() == [0.0, 1.0]


def test_an_instance_s_own_dlpack_is_asked_for_max_version_whatever_its_type_learned():
    # The keyword-less form is learned for the method of the type; an
    # instance attribute __dlpack__ (here NumPy's) may take max_version, and
    # asked without it would answer with the legacy struct, read-only.
    class Old(StreamOnlyProducer):
        pass

    assert dlbridge.from_dlpack(Old(np.arange(2.0))).readonly
    a = np.arange(3.0)
    p = Old(np.arange(1.0))
    p.__dlpack__ = a.__dlpack__
    for _ in range(2):
        t = dlbridge.from_dlpack(p)
        assert not t.readonly and t.data_ptr == a.ctypes.data
    # The type itself still answers, and still learned nothing new.
    assert dlbridge.from_dlpack(Old(np.arange(2.0))).tolist() == [0.0, 1.0]


def test_a_type_error_is_retried_without_max_version_even_for_a_known_type():
    class Flaky(VersionedProducer):
        fail = False

        def __dlpack__(self, **kwargs):
            self.calls.append(kwargs)
            if Flaky.fail:
                raise TypeError("flaky producer")
            return self.array.__dlpack__(max_version=kwargs.get("max_version"))

    p = Flaky(np.arange(2.0))
    dlbridge.from_dlpack(p)
    Flaky.fail = True
    with pytest.raises(TypeError, match="flaky"):
        dlbridge.from_dlpack(p)
    # The standard's fallback, whatever the type answered before: the same
    # type may front an old producer.
    assert len(p.calls) == 3 and "max_version" not in p.calls[2]
    Flaky.fail = False
    dlbridge.from_dlpack(p)
    assert p.calls[3]["max_version"] == (1, 3)


def test_an_old_producer_s_own_error_is_reported_not_the_retry_s_type_error():
    # A type known to be old is asked without max_version first; its
    # failure is retried with max_version, whose TypeError only says the
    # producer is old after all: the first answer is the one raised.
    class Old(StreamOnlyProducer):
        refuse = False

        def __dlpack__(self, stream=None):
            if Old.refuse:
                raise BufferError("no export today")
            return self.array.__dlpack__()

    assert dlbridge.from_dlpack(Old(np.arange(2.0))).tolist() == [0.0, 1.0]
    Old.refuse = True
    with pytest.raises(BufferError, match="no export today"):
        dlbridge.from_dlpack(Old(np.arange(2.0)))


def test_a_type_known_to_take_max_version_keeps_it_after_one_old_answer():
    class Once(VersionedProducer):
        refuse = False

        def __dlpack__(self, **kwargs):
            self.calls.append(kwargs)
            if Once.refuse and "max_version" in kwargs:
                Once.refuse = False
                raise TypeError("not this time")
            return self.array.__dlpack__(**kwargs)

    p = Once(np.arange(2.0))
    for refuse in (False, True, False):
        Once.refuse = refuse
        assert dlbridge.from_dlpack(p).tolist() == [0.0, 1.0]
    # The one TypeError was answered without max_version; the type had
    # taken max_version first, so the next call asks with it again.
    assert ["max_version" in c for c in p.calls] == [True, True, False, True]


def test_a_type_once_answered_without_max_version_is_asked_with_it_again():
    class Picky:
        """Raises its own TypeError for one array when asked for a
        version; otherwise passes every keyword on to NumPy."""

        def __init__(self, array, fussy=False):
            self.array, self.fussy = array, fussy

        def __dlpack__(self, **kwargs):
            if self.fussy and "max_version" in kwargs:
                raise TypeError("not this one")
            return self.array.__dlpack__(**kwargs)

    assert dlbridge.from_dlpack(Picky(np.arange(2.0), fussy=True)).tolist() == [0.0, 1.0]
    # Read-only data cannot go out through the old struct: the type is
    # asked with max_version again, and the import is read-only.
    ro = np.arange(3.0)
    ro.flags.writeable = False
    t = dlbridge.from_dlpack(Picky(ro))
    assert t.readonly and t.tolist() == [0.0, 1.0, 2.0]
    assert not dlbridge.from_dlpack(Picky(np.arange(1.0))).readonly


def test_a_new_dlpack_method_is_asked_with_max_version_first():
    # The form a type answered to belongs to its __dlpack__: another method
    # put in its place starts over with the versioned struct.
    class Replaced(StreamOnlyProducer):
        pass

    assert dlbridge.from_dlpack(Replaced(np.arange(2.0))).tolist() == [0.0, 1.0]
    calls = []

    def versioned(self, **kwargs):
        calls.append(kwargs)
        return self.array.__dlpack__(**kwargs)

    Replaced.__dlpack__ = versioned
    t = dlbridge.from_dlpack(Replaced(np.arange(3.0)))
    assert t.tolist() == [0.0, 1.0, 2.0] and not t.readonly
    assert calls == [dict(max_version=(1, 3))]


# What the learned forms rest on: which methods cannot take max_version,
# whose look-up finds the method the form was learned for, and the
# references the check holds.


def _old_producer_type():
    class Old(StreamOnlyProducer):
        asked = []

        def __dlpack__(self, stream=None):
            return self.array.__dlpack__()

    return Old


def _counting(self, *args, **kwargs):
    type(self).asked.append(kwargs)
    return self.array.__dlpack__(**kwargs)


def test_a_type_with_no_dlpack_of_its_own_learns_no_form_from_one_instance():
    # Nothing in the MRO: every object's __dlpack__ is its own instance
    # attribute, so what one answered says nothing of the next.
    class Bare:
        pass

    old = Bare()
    old.__dlpack__ = lambda stream=None: np.arange(2.0).__dlpack__()
    assert dlbridge.from_dlpack(old).readonly
    a = np.arange(3.0)
    new = Bare()
    new.__dlpack__ = a.__dlpack__
    t = dlbridge.from_dlpack(new)
    assert not t.readonly and t.data_ptr == a.ctypes.data


class _PassesOn:
    """A callable descriptor that binds as a function does (as decorators'
    wrappers do), and passes its keywords on."""

    def __call__(self, obj, **kwargs):
        return obj.inner.__dlpack__(**kwargs)

    def __get__(self, obj, cls=None):
        return self if obj is None else types.MethodType(self, obj)


def test_a_callable_descriptor_proxy_that_fronted_an_old_producer_asks_a_new_one_for_max_version():
    # Only a function's parameters or a C method say that max_version
    # cannot be taken: another callable may pass its keywords on.
    class Proxy:
        __dlpack__ = _PassesOn()

        def __init__(self, inner):
            self.inner = inner

    assert dlbridge.from_dlpack(Proxy(StreamOnlyProducer(np.arange(2.0)))).readonly
    a = np.arange(3.0)
    t = dlbridge.from_dlpack(Proxy(a))
    assert not t.readonly and t.data_ptr == a.ctypes.data


def test_a_keyword_only_max_version_is_asked_for_again_after_one_type_error():
    # max_version as the first keyword-only parameter (after *args): the
    # method takes it, so one TypeError teaches its type nothing.
    class KwOnly:
        refuse = True

        def __init__(self, array):
            self.array = array

        def __dlpack__(*args, max_version=None, stream=None):
            if KwOnly.refuse and max_version is not None:
                KwOnly.refuse = False
                raise TypeError("not this time")
            return args[0].array.__dlpack__(max_version=max_version)

    assert dlbridge.from_dlpack(KwOnly(np.arange(2.0))).readonly
    assert not dlbridge.from_dlpack(KwOnly(np.arange(2.0))).readonly


def _positional_only(self, max_version=None, /, stream=None):
    return self.array.__dlpack__()


def _local_named_max_version(self, stream=None):
    max_version = None
    return self.array.__dlpack__(max_version=max_version)


@pytest.mark.parametrize("old", [_positional_only, _local_named_max_version])
def test_a_method_no_keyword_can_give_max_version_to_is_learned_as_old(old):
    # A positional-only parameter, or a local variable, named max_version
    # cannot take the keyword: the type learns the old form.
    Old = _old_producer_type()
    Old.__dlpack__ = types.FunctionType(old.__code__, old.__globals__, "__dlpack__", old.__defaults__)
    assert dlbridge.from_dlpack(Old(np.arange(2.0))).readonly
    Old.__dlpack__.__code__ = _counting.__code__
    dlbridge.from_dlpack(Old(np.arange(2.0)))
    assert Old.asked == [{}]


def test_a_type_whose_method_comes_to_take_max_version_is_asked_for_it_again():
    # The same function object, its code now taking max_version: when the
    # type changes and its entry is read again, the old form goes.
    Old = _old_producer_type()
    assert dlbridge.from_dlpack(Old(np.arange(2.0))).readonly
    Old.__dlpack__.__code__ = _counting.__code__
    Old.touched = True
    t = dlbridge.from_dlpack(Old(np.arange(3.0)))
    assert not t.readonly and Old.asked == [dict(max_version=(1, 3))]


def test_a_type_that_learned_the_old_form_learns_the_new_one_when_only_it_answers():
    Old = _old_producer_type()
    assert dlbridge.from_dlpack(Old(np.arange(2.0))).readonly

    def versioned_only(self, *args, **kwargs):
        type(self).asked.append(kwargs)
        if "max_version" not in kwargs:
            raise BufferError("versioned only now")
        return self.array.__dlpack__(**kwargs)

    Old.__dlpack__.__code__ = versioned_only.__code__
    for _ in range(2):
        assert not dlbridge.from_dlpack(Old(np.arange(2.0))).readonly
    assert ["max_version" in k for k in Old.asked] == [False, True, True]


def test_imports_through_a_learned_old_form_hold_no_references():
    Old = _old_producer_type()
    method = Old.__dict__["__dlpack__"]
    a = np.arange(2.0)
    assert dlbridge.from_dlpack(Old(a)).readonly
    before = sys.getrefcount(method)
    p = Old(a)
    alive = weakref.ref(p)
    for _ in range(2):
        assert dlbridge.from_dlpack(p).readonly
    assert sys.getrefcount(method) == before
    del p
    gc.collect()
    assert alive() is None


def test_an_error_looking_up_an_instance_s_dlpack_is_raised():
    class Old(StreamOnlyProducer):
        def __init__(self, array):
            super().__init__(array)
            self.fail = False

        def __getattribute__(self, name):
            if name == "__dlpack__" and object.__getattribute__(self, "fail"):
                self.fail = False
                raise RuntimeError("look-up failed")
            return object.__getattribute__(self, name)

    p = Old(np.arange(2.0))
    assert dlbridge.from_dlpack(p).readonly
    p.fail = True
    with pytest.raises(RuntimeError, match="look-up failed"):
        dlbridge.from_dlpack(p)
    assert dlbridge.from_dlpack(p).tolist() == [0.0, 1.0]


@pytest.mark.parametrize("bound", [False, True])
def test_an_instance_s_own_function_dlpack_is_asked_for_max_version(bound):
    # A plain function, or another function bound to the object: neither is
    # the method its type learned the old form for.
    Old = _old_producer_type()
    assert dlbridge.from_dlpack(Old(np.arange(2.0))).readonly
    a = np.arange(3.0)
    p = Old(np.arange(1.0))
    if bound:
        p.__dlpack__ = types.MethodType(lambda self, **kwargs: a.__dlpack__(**kwargs), p)
    else:
        p.__dlpack__ = lambda **kwargs: a.__dlpack__(**kwargs)
    t = dlbridge.from_dlpack(p)
    assert not t.readonly and t.data_ptr == a.ctypes.data


def test_an_instance_holding_another_s_bound_dlpack_is_asked_for_max_version_and_teaches_nothing():
    # The type's own function, bound to another object of the type: asked as
    # the standard says, and the type keeps the old form it learned.
    Old = _old_producer_type()
    assert dlbridge.from_dlpack(Old(np.arange(2.0))).readonly
    Old.__dlpack__.__code__ = _counting.__code__
    a = np.arange(3.0)
    p = Old(np.arange(1.0))
    p.__dlpack__ = Old(a).__dlpack__
    t = dlbridge.from_dlpack(p)
    assert not t.readonly and t.data_ptr == a.ctypes.data
    assert dlbridge.from_dlpack(Old(np.arange(2.0))).readonly
    assert Old.asked == [dict(max_version=(1, 3)), {}]


def test_a_c_dlpack_that_takes_stream_only_costs_one_type_error_per_type(helper):
    # NumPy 1.x's __dlpack__ is a C method of this kind; its type may have
    # no instance dict (the method is called directly) or one (each
    # object's look-up is checked).
    class Slotted(helper.OldCProducer):
        __slots__ = ()

    class WithDict(helper.OldCProducer):
        pass

    for cls in (Slotted, WithDict):
        ps = [cls(np.arange(2.0)) for _ in range(3)]
        for p in ps:
            assert dlbridge.from_dlpack(p).readonly
        assert [p.calls for p in ps] == [2, 1, 1]


def test_an_instance_holding_another_s_c_dlpack_is_asked_for_max_version(helper):
    class WithDict(helper.OldCProducer):
        pass

    assert dlbridge.from_dlpack(WithDict(np.arange(2.0))).readonly
    q, p = WithDict(np.arange(3.0)), WithDict(np.arange(1.0))
    p.__dlpack__ = q.__dlpack__
    assert dlbridge.from_dlpack(p).tolist() == [0.0, 1.0, 2.0]
    assert (q.calls, p.calls) == (2, 0)


def test_producer_changes_are_seen():
    class Changing:
        def __dlpack__(self, **kwargs):
            return np.arange(2.0).__dlpack__(**kwargs)

    assert dlbridge.from_dlpack(Changing()).tolist() == [0.0, 1.0]
    Changing.__dlpack__ = lambda self, **kw: np.arange(3.0).__dlpack__(**kw)
    assert dlbridge.from_dlpack(Changing()).tolist() == [0.0, 1.0, 2.0]


def test_changes_of_a_type_without_a_version_tag_are_seen():
    # From CPython 3.12 a class modified more than 1000 times gets no new
    # type version tag (it stays 0), so the cache cannot tell that it
    # changed: it must look again on every call. __slots__ makes the
    # class's __dlpack__ the one every instance gets, which the cache keeps.
    class Untagged:
        __slots__ = ()

        def __dlpack__(self, **kwargs):
            return np.arange(2.0).__dlpack__(**kwargs)

    for i in range(1100):
        Untagged.n = i
        getattr(Untagged, "__dlpack__")  # a look-up assigns a new tag
    assert dlbridge.from_dlpack(Untagged()).tolist() == [0.0, 1.0]
    Untagged.__dlpack__ = lambda self, **kw: np.arange(3.0).__dlpack__(**kw)
    assert dlbridge.from_dlpack(Untagged()).tolist() == [0.0, 1.0, 2.0]


def test_instance_attribute_dlpack_is_honoured():
    class WithDict:
        def __dlpack__(self, **kwargs):
            return np.arange(2.0).__dlpack__(**kwargs)

    p = WithDict()
    p.__dlpack__ = lambda **kw: np.arange(4.0).__dlpack__(**kw)
    assert dlbridge.from_dlpack(p).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_dlpack_that_getattribute_replaces_is_honoured():
    # x.__dlpack__ goes through the type's __getattribute__: the method in
    # the class is not the one to call, though no instance dict can hide it.
    class Proxying:
        __slots__ = ()

        def __dlpack__(self, **kwargs):
            return np.arange(2.0).__dlpack__(**kwargs)

        def __getattribute__(self, name):
            if name == "__dlpack__":
                return lambda **kw: np.arange(4.0).__dlpack__(**kw)
            return object.__getattribute__(self, name)

    assert dlbridge.from_dlpack(Proxying()).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_dlpack_that_getattribute_hides_is_not_a_producer():
    # asarray reads such an object as the sequence it is.
    class Hiding:
        def __dlpack__(self, **kwargs):
            raise AssertionError("hidden by __getattribute__")

        def __getattribute__(self, name):
            if name == "__dlpack__":
                raise AttributeError(name)
            return object.__getattribute__(self, name)

        def __len__(self):
            return 2

        def __getitem__(self, i):
            if i >= 2:
                raise IndexError(i)
            return float(i)

    assert dlbridge.asarray(Hiding()).tolist() == [0.0, 1.0]


def test_producer_returning_a_non_capsule_is_a_buffer_error():
    class Bad:
        def __dlpack__(self, **kwargs):
            return 42

    with pytest.raises(BufferError, match="int"):
        dlbridge.from_dlpack(Bad())


def test_producer_returning_a_foreign_capsule_is_a_buffer_error(helper):
    class Bad:
        def __dlpack__(self, **kwargs):
            return capsule_of(np.zeros(2, np.float32), name="something_else")

    with pytest.raises(BufferError, match="something_else"):
        dlbridge.from_dlpack(Bad())
    assert deleted() == 1


def test_producer_exceptions_propagate():
    class Refuses:
        def __dlpack__(self, **kwargs):
            raise BufferError("no export today")

    with pytest.raises(BufferError, match="no export today"):
        dlbridge.from_dlpack(Refuses())


def test_objects_without_dlpack_are_refused():
    with pytest.raises(AttributeError):
        dlbridge.from_dlpack(object())
    with pytest.raises((AttributeError, TypeError)):
        dlbridge.from_dlpack([1, 2, 3])


def test_exchange_table_is_used_when_the_type_has_one():
    class Borrowing:
        __dlpack_c_exchange_api__ = dlbridge.Tensor.__dlpack_c_exchange_api__

        def __dlpack__(self, **kwargs):
            raise AssertionError("__dlpack__ must not be called")

    # dlbridge's table serves dlbridge tensors only: reaching it proves the
    # table, not __dlpack__, was used.
    with pytest.raises(TypeError, match="expected a dlbridge.Tensor"):
        dlbridge.from_dlpack(Borrowing())


def test_unusable_exchange_tables_are_ignored(helper):
    good = np.arange(3.0)

    class WrongName:
        __dlpack_c_exchange_api__ = capsule_of(np.zeros(1, np.float32), name="not_a_table")

        def __dlpack__(self, **kwargs):
            return good.__dlpack__(**kwargs)

    class NotACapsule(WrongName):
        __dlpack_c_exchange_api__ = 1234

    # The 1.2 integer attribute is never dereferenced.
    class IntOnly(WrongName):
        __dlpack_c_exchange_api__ = None
        __c_dlpack_exchange_api__ = 8

    for cls in (WrongName, NotACapsule, IntOnly):
        assert dlbridge.from_dlpack(cls()).tolist() == [0.0, 1.0, 2.0]


def _rewritten_table(helper, offset, ctype, value):
    """The helper's fake exchange table, in memory of its own, with the
    field at byte offset rewritten."""
    capsule = helper.fake_exchange_owned()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    ctype.from_address(get(capsule, b"dlpack_exchange_api") + offset).value = value
    return capsule


@pytest.mark.parametrize("field", ["major 2", "no managed_tensor_from_py_object_no_sync"])
def test_exchange_tables_of_another_major_or_without_the_import_are_ignored(helper, field):
    # The fake table would import obj.capsule (zeros): the result says
    # which route answered. header.version.major is at offset 0, the
    # import function after the header's prev_api and the allocator.
    offset, ctype, value = {"major 2": (0, ctypes.c_uint32, 2),
                            "no managed_tensor_from_py_object_no_sync":
                                (24, ctypes.c_void_p, None)}[field]

    class Unusable:
        __dlpack_c_exchange_api__ = _rewritten_table(helper, offset, ctype, value)

        def __init__(self):
            self.capsule = capsule_of(np.zeros(1, np.float32))

        def __dlpack__(self, **kwargs):
            return np.arange(3.0).__dlpack__(**kwargs)

    p = Unusable()
    assert dlbridge.from_dlpack(p).tolist() == [0.0, 1.0, 2.0]


def test_type_lookups_are_cached_per_type():
    lookups = []

    class Meta(type):
        def __getattribute__(cls, name):
            if name in ("__dlpack_c_exchange_api__", "__dlpack__"):
                lookups.append(name)
            return super().__getattribute__(name)

    class Counted(metaclass=Meta):
        def __dlpack__(self, **kwargs):
            return np.arange(2.0).__dlpack__(**kwargs)

    for _ in range(5):
        assert dlbridge.from_dlpack(Counted()).tolist() == [0.0, 1.0]
    # One look at the type for its table, then none. __dlpack__ is found
    # as instances find it, in the class's MRO: never through the
    # metaclass.
    assert lookups == ["__dlpack_c_exchange_api__"]


def _table_producer(table, a):
    """A producer type with the exchange table given, whose instances the
    table's fake exports as a capsule of a on the device given, and whose
    __dlpack__ records its keywords and answers with a in managed memory."""

    class Producer:
        __dlpack_c_exchange_api__ = table

        def __init__(self, device):
            self.calls = []
            self.capsule = capsule_of(a, device=device)

        def __dlpack__(self, **kwargs):
            self.calls.append(kwargs)
            return capsule_of(a, device=(KDLCUDAMANAGED, 0))

    return Producer


def test_exchange_table_with_pending_device_work_falls_back_to_dlpack(helper):
    a = np.arange(3, dtype=np.float32)
    OnAStream = _table_producer(helper.fake_exchange(0x5000), a)

    # CPU memory has no streams: the table's tensor is used.
    p = OnAStream((KDLCPU, 0))
    assert dlbridge.from_dlpack(p).tolist() == [0.0, 1.0, 2.0]
    assert p.calls == []
    # Device memory with work on another stream: the table's tensor goes
    # back, and __dlpack__ gets stream=None spelled out, which PyTorch
    # needs to synchronise (it reads a missing stream as -1).
    p = OnAStream((KDLCUDAMANAGED, 0))
    t = dlbridge.from_dlpack(p)
    assert t.device == "cuda_managed" and t.tolist() == [0.0, 1.0, 2.0]
    assert p.calls == [dict(max_version=(1, 3), stream=None)]
    del p
    gc.collect()
    assert helper.counters()["deleted"] == 2
    # On the default stream (NULL) the table's tensor is fine.
    OnAStream.__dlpack_c_exchange_api__ = helper.fake_exchange(0)
    p = OnAStream((KDLCUDAMANAGED, 0))
    assert dlbridge.from_dlpack(p).device == "cuda_managed"
    assert p.calls == []


def test_exchange_table_without_current_work_stream_sends_device_memory_to_dlpack(helper):
    # DLPack lets only dltensor_from_py_object_no_sync be NULL. A table
    # without current_work_stream (at offset 48) cannot say on which stream
    # its device memory's work is pending: that memory is asked for through
    # __dlpack__, which orders the work before the default stream, as on a
    # non-default stream; CPU memory, which has no streams, still takes the
    # table.
    a = np.arange(3, dtype=np.float32)
    NoStreamQuery = _table_producer(
        _rewritten_table(helper, 48, ctypes.c_void_p, None), a)

    p = NoStreamQuery((KDLCPU, 0))
    assert dlbridge.from_dlpack(p).tolist() == [0.0, 1.0, 2.0]
    assert p.calls == []
    before = helper.counters()["deleted"]
    p = NoStreamQuery((KDLCUDAMANAGED, 0))
    t = dlbridge.from_dlpack(p)
    assert t.device == "cuda_managed" and t.tolist() == [0.0, 1.0, 2.0]
    assert p.calls == [dict(max_version=(1, 3), stream=None)]
    # The table's tensor went back at once, exactly once.
    assert helper.counters()["deleted"] == before + 1
    del p, t
    gc.collect()
    assert helper.counters()["deleted"] == before + 2


def test_exchange_table_tensor_given_back_with_a_deleter_that_raises(helper, monkeypatch):
    # The table's tensor goes back (device memory with work on another
    # stream) through a deleter that leaves an exception set: it is
    # reported, and __dlpack__ is not called with it pending (which raised
    # SystemError, "returned a result with an exception set").
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    a = np.arange(3, dtype=np.float32)

    class OnAStream:
        __dlpack_c_exchange_api__ = helper.fake_exchange(0x5000)

        def __init__(self):
            self.capsule = capsule_of(a, device=(KDLCUDAMANAGED, 0),
                                      deleter="leave_error")

        def __dlpack__(self, **kwargs):
            return capsule_of(a, device=(KDLCUDAMANAGED, 0))

    t = dlbridge.from_dlpack(OnAStream())
    assert t.device == "cuda_managed" and t.tolist() == [0.0, 1.0, 2.0]
    assert [str(e) for e in seen] == ["left set by the deleter"]


@pytest.mark.parametrize("stream", [0, 0x5000])
def test_exchange_table_stream_query_that_leaves_an_exception_is_refused(helper, stream):
    # current_work_stream succeeding with an exception set is a broken
    # producer, as the table's own export doing so is: the import returned
    # a tensor with the exception set, or called __dlpack__ with it
    # pending (SystemError either way).
    a = np.arange(3, dtype=np.float32)

    class Broken:
        __dlpack_c_exchange_api__ = helper.fake_exchange(stream, True)

        def __init__(self):
            self.capsule = capsule_of(a, device=(KDLCUDAMANAGED, 0))

        def __dlpack__(self, **kwargs):
            return capsule_of(a, device=(KDLCUDAMANAGED, 0))

    try:
        with pytest.raises(BufferError, match="current_work_stream .* exception set"):
            dlbridge.from_dlpack(Broken())
        assert deleted() == 1
    finally:
        helper.fake_exchange(0)
    # The interpreter is left clean: the next import works.
    assert dlbridge.from_dlpack(np.arange(2.0)).tolist() == [0.0, 1.0]


@pytest.mark.parametrize("during", ["table", "requires_grad"])
def test_exchange_table_dropped_by_the_producer_mid_import_stays_alive(helper, during):
    # Producer code that runs during an import through its table (the
    # table's own call, which reads obj.capsule here; the requires_grad
    # look-up of a float tensor) removes the table from the class and
    # imports another instance, so the cache lets go of the table's
    # capsule. The import under way still asks the table for the device's
    # stream: the table must outlive it.
    a = np.arange(3, dtype=np.float32)
    retired_before, calls_before = helper.retired_counts()

    class Dropping:
        __dlpack_c_exchange_api__ = helper.fake_exchange_owned()
        dropped = False

        def __dlpack__(self, **kwargs):
            return capsule_of(a, device=(KDLCUDAMANAGED, 0))

        @staticmethod
        def drop(now):
            if now and not Dropping.dropped:
                Dropping.dropped = True
                del Dropping.__dlpack_c_exchange_api__
                # Found through __dlpack__ now; the cache entry is renewed.
                assert dlbridge.from_dlpack(Dropping()).tolist() == [0.0, 1.0, 2.0]
                gc.collect()

        @property
        def capsule(self):
            Dropping.drop(during == "table")
            return capsule_of(a, device=(KDLCUDAMANAGED, 0))

        @property
        def requires_grad(self):
            Dropping.drop(during == "requires_grad")
            return False

    t = dlbridge.from_dlpack(Dropping())
    assert Dropping.dropped
    assert t.device == "cuda_managed" and t.tolist() == [0.0, 1.0, 2.0]
    del t
    gc.collect()
    retired, calls = helper.retired_counts()
    # The table was let go of (its capsule died) and never called after.
    assert retired == retired_before + 1
    assert calls == calls_before


@pytest.mark.parametrize(
    "dtype,floating",
    [((2, 32, 1), True), ((4, 16, 1), True), ((7, 8, 1), True), ((17, 4, 1), True),
     ((5, 64, 1), True), ((0, 32, 1), False), ((1, 8, 1), False), ((6, 8, 1), False)],
    ids=["float32", "bfloat16", "float8_e3m4", "float4_e2m1fn", "complex64", "int32", "uint8",
         "bool"],
)
def test_exchange_table_tensor_that_may_skip_a_check_goes_to_dlpack(helper, dtype, floating):
    # A foreign table skips the checks of __dlpack__ (PyTorch's refuses a
    # tensor that requires grad): for every floating dtype, whose tensors
    # can require grad, and complex ones, __dlpack__ answers instead.
    data = np.zeros(4, np.uint32)
    refs = sys.getrefcount(data)

    class Grad:
        __dlpack_c_exchange_api__ = helper.fake_exchange(0)
        requires_grad = True

        def __init__(self):
            self.capsule = helper.make_capsule(data=data, shape=(2,), dtype=dtype)

        def __dlpack__(self, **kwargs):
            raise BufferError("refused by __dlpack__")

    p = Grad()
    if floating:
        with pytest.raises(BufferError, match="refused by __dlpack__"):
            dlbridge.from_dlpack(p)
    else:
        assert dlbridge.from_dlpack(p).shape == (2,)
    # The table's tensor is released either way (its capsule held data).
    del p
    gc.collect()
    assert sys.getrefcount(data) == refs


def test_exchange_table_requires_grad_that_raises_is_raised(helper):
    a = np.arange(3, dtype=np.float32)
    refs = sys.getrefcount(a)

    class Broken:
        __dlpack_c_exchange_api__ = helper.fake_exchange(0)

        def __init__(self):
            self.capsule = capsule_of(a)

        @property
        def requires_grad(self):
            raise RuntimeError("no gradient today")

        def __dlpack__(self, **kwargs):
            return a.__dlpack__(**kwargs)

    p = Broken()
    with pytest.raises(RuntimeError, match="no gradient today"):
        dlbridge.from_dlpack(p)
    # The table's tensor (its capsule held a) is released.
    del p
    gc.collect()
    assert sys.getrefcount(a) == refs


@pytest.mark.parametrize("on", ["class", "metaclass"])
def test_exchange_table_added_later_is_used(on):
    # The table is looked up on the class, so its metaclass's attributes
    # count: a change of the metaclass is a change of the class's table.
    class Meta(type):
        pass

    class Late(metaclass=Meta):
        def __dlpack__(self, **kwargs):
            return np.arange(2.0).__dlpack__(**kwargs)

    assert dlbridge.from_dlpack(Late()).tolist() == [0.0, 1.0]
    setattr(Late if on == "class" else Meta, "__dlpack_c_exchange_api__",
            dlbridge.Tensor.__dlpack_c_exchange_api__)
    with pytest.raises(TypeError, match="expected a dlbridge.Tensor"):
        dlbridge.from_dlpack(Late())


def test_exchange_table_look_up_that_raises_is_raised():
    # Only an AttributeError says the type has no table; any other error of
    # the look-up is the import's.
    class Meta(type):
        def __getattribute__(cls, name):
            if name == "__dlpack_c_exchange_api__":
                raise RuntimeError("table look-up failed")
            return super().__getattribute__(name)

    class Failing(metaclass=Meta):
        def __dlpack__(self, **kwargs):
            return np.arange(2.0).__dlpack__(**kwargs)

    with pytest.raises(RuntimeError, match="table look-up failed"):
        dlbridge.from_dlpack(Failing())


def test_many_producer_types_do_not_break_the_cache():
    arrays = [np.full(2, i, dtype=np.int64) for i in range(40)]
    types = [type(f"P{i}", (VersionedProducer,), {}) for i in range(40)]
    for _ in range(2):
        for cls, a in zip(types, arrays):
            assert dlbridge.from_dlpack(cls(a)).tolist() == a.tolist()


def test_dlbridge_tensor_goes_through_its_exchange_table():
    a = np.arange(4.0)
    t = dlbridge.from_dlpack(a)
    u = dlbridge.from_dlpack(t)
    assert u is not t
    assert u.data_ptr == t.data_ptr
    assert u.tolist() == [0.0, 1.0, 2.0, 3.0]


# ---------------------------------------------------------------------------
# copy= and device=
# ---------------------------------------------------------------------------


def test_copy_true_is_independent(helper):
    a = np.arange(4, dtype=np.float32)
    for source in (a, capsule_of(a), VersionedProducer(a), StreamOnlyProducer(a)):
        t = dlbridge.from_dlpack(source, copy=True)
        assert t.data_ptr != a.ctypes.data
        a[0] += 100
        assert t.tolist()[0] != a[0]
        assert not t.readonly


def test_copy_true_of_read_only_data_is_writable(helper):
    a = np.arange(3, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a, flags=READ_ONLY), copy=True)
    assert not t.readonly
    np.from_dlpack(t)[0] = 5
    assert a[0] == 0


def test_copy_true_of_a_read_only_producer_copy_is_writable(helper):
    # A producer's copy is taken as the copy only when the caller may write
    # it, as every copy=True import can be written.
    a = np.arange(3, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a, flags=READ_ONLY | IS_COPIED), copy=True)
    assert not t.readonly and t.data_ptr != a.ctypes.data
    t[0] = 5.0
    assert a[0] == 0 and t.tolist() == [5.0, 1.0, 2.0]
    assert deleted() == 1


def test_copy_false_never_copies(helper):
    a = np.arange(4, dtype=np.float32)
    for source in (a, VersionedProducer(a), StreamOnlyProducer(a), capsule_of(a)):
        t = dlbridge.from_dlpack(source, copy=False)
        assert t.data_ptr == a.ctypes.data


def test_copy_false_refuses_a_producer_copy(helper):
    cap = capsule_of(np.arange(2, dtype=np.float32), flags=IS_COPIED)
    with pytest.raises(ValueError, match="IS_COPIED"):
        dlbridge.from_dlpack(cap, copy=False)
    # Refused before it was consumed: the capsule is whole, and its own
    # destructor frees the struct, once.
    assert deleted() == 0 and '"dltensor_versioned"' in repr(cap)
    del cap
    assert deleted() == 1


def test_copy_true_trusts_a_producer_copy(helper):
    a = np.arange(2, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a, flags=IS_COPIED), copy=True)
    assert t.data_ptr == a.ctypes.data


def test_device_equal_to_the_source_does_not_copy():
    a = np.arange(3.0)
    for device in ("cpu", (KDLCPU, 0)):
        assert dlbridge.from_dlpack(a, device=device).data_ptr == a.ctypes.data


class FrameworkDevice:
    """A device object as torch.device spells one."""

    def __init__(self, type, index):
        self.type, self.index = type, index


def test_framework_device_objects_name_a_device():
    a = np.arange(3.0)
    assert dlbridge.from_dlpack(a, device=FrameworkDevice("cpu", None)).data_ptr == a.ctypes.data
    # cuda:1 is named, not reachable: the error says which device it tried.
    with pytest.raises(ValueError, match="cuda:1"):
        dlbridge.from_dlpack(a, device=FrameworkDevice("cuda", 1), copy=False)
    with pytest.raises(ValueError, match="cuda:0"):
        dlbridge.from_dlpack(a, device=FrameworkDevice("cuda", None), copy=False)
    with pytest.raises(ValueError, match="mps"):
        dlbridge.from_dlpack(a, device=FrameworkDevice("mps", None))
    for odd in (FrameworkDevice(3, 0), FrameworkDevice("cpu", "0"), object()):
        with pytest.raises(TypeError, match="torch.device"):
            dlbridge.from_dlpack(a, device=odd)


@needs_torch
def test_torch_devices_are_accepted():
    x = torch.arange(3.0)
    t = dlbridge.from_dlpack(x, device=x.device)
    assert t.device == "cpu" and t.data_ptr == x.data_ptr()
    assert dlbridge.zeros(2, device=torch.device("cpu")).device == "cpu"


def test_device_moves_when_the_target_differs(helper):
    a = np.arange(3, dtype=np.float32)
    t = dlbridge.from_dlpack(capsule_of(a, device=(KDLCUDAHOST, 0)), device="cpu")
    assert t.device == "cpu"
    assert t.data_ptr != a.ctypes.data
    assert t.tolist() == [0.0, 1.0, 2.0]


def test_device_without_copy_refuses_accessible_memory_elsewhere(helper):
    a = np.arange(3, dtype=np.float32)
    with pytest.raises(ValueError, match="copy=False, but the data is in cuda_managed memory"):
        dlbridge.from_dlpack(capsule_of(a, device=(KDLCUDAMANAGED, 0)), device="cpu", copy=False)
    t = dlbridge.from_dlpack(capsule_of(a, device=(KDLCUDAMANAGED, 0)), device="cpu", in_place=True)
    assert t.device == "cpu"
    assert t.data_ptr == a.ctypes.data


def test_device_that_needs_a_copy_with_copy_false_is_a_value_error():
    with pytest.raises(ValueError, match="copy=False"):
        dlbridge.from_dlpack(np.arange(3.0), device="cuda:0", copy=False)


def test_device_the_core_cannot_reach_is_a_buffer_error(helper):
    cap = helper.make_capsule(data=0x10000, shape=(4,), dtype=(2, 32, 1), device=(KDLCUDA, 0))
    try:
        dlbridge.from_dlpack(cap, device="cpu")
    except BufferError as e:
        assert "cuda:0" in str(e)
    else:  # pragma: no cover - only with a GPU runtime, which refuses the pointer
        pytest.fail("copying from a fake device pointer succeeded")


# ---------------------------------------------------------------------------
# device= and copy= reach the producer (__dlpack__(dl_device=, copy=))
# ---------------------------------------------------------------------------


class HonouringProducer:
    """A 2023.12 producer that does what dl_device and copy ask (a copy
    flagged IS_COPIED) and records every call's keywords."""

    def __init__(self, array, device=(KDLCPU, 0), refuse=None):
        self.array = array
        self.device = device
        self.refuse = refuse  # an exception to raise when copy= is given
        self.calls = []
        self.copies = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(dict(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy))
        if self.refuse is not None and (copy is not None or dl_device is not None):
            raise self.refuse
        moved = dl_device is not None and tuple(dl_device) != self.device
        if copy is False and moved:
            raise BufferError("copy=False, but dl_device needs a copy")
        if copy or moved:
            c = self.array.copy()
            self.copies.append(c)
            return capsule_of(c, flags=IS_COPIED)
        return capsule_of(self.array, device=self.device)

    def __dlpack_device__(self):
        return self.device


def test_copy_and_device_go_to_the_producer():
    a = np.arange(3.0)
    for kwargs, asked in [
        (dict(copy=False), dict(dl_device=None, copy=False)),
        (dict(copy=True), dict(dl_device=None, copy=True)),
        (dict(device="cpu"), dict(dl_device=(KDLCPU, 0), copy=None)),
        (dict(device=(KDLCPU, 0), copy=True), dict(dl_device=(KDLCPU, 0), copy=True)),
        (dict(), dict(dl_device=None, copy=None)),
    ]:
        p = VersionedProducer(a)
        dlbridge.from_dlpack(p, **kwargs)
        assert p.calls == [dict(stream=None, max_version=(1, 3), **asked)], kwargs
    # in_place keeps the memory where it is: no dl_device goes out.
    p = VersionedProducer(a)
    dlbridge.from_dlpack(p, device="cpu", in_place=True, copy=False)
    assert p.calls == [dict(stream=None, max_version=(1, 3), dl_device=None, copy=False)]


def test_asarray_passes_device_and_copy_to_the_producer(helper):
    # asarray asks a producer as from_dlpack does (the standard's asarray
    # takes the same device= and copy=), with max_version first.
    a = np.arange(3.0)
    for kwargs, asked in [
        (dict(copy=False), dict(dl_device=None, copy=False)),
        (dict(copy=True), dict(dl_device=None, copy=True)),
        (dict(device="cpu"), dict(dl_device=(KDLCPU, 0), copy=None)),
        (dict(device=(KDLCPU, 0), copy=True), dict(dl_device=(KDLCPU, 0), copy=True)),
        (dict(dtype="float64", copy=True), dict(dl_device=None, copy=True)),
        (dict(), dict(dl_device=None, copy=None)),
    ]:
        p = VersionedProducer(a)
        dlbridge.asarray(p, **kwargs)
        assert p.calls == [dict(stream=None, max_version=(1, 3), **asked)], kwargs
    # The producer's own copy (IS_COPIED) is the result, not copied again.
    a32 = np.arange(4, dtype=np.float32)
    p = HonouringProducer(a32)
    t = dlbridge.asarray(p, copy=True)
    assert [c["copy"] for c in p.calls] == [True]
    assert t.data_ptr == p.copies[0].ctypes.data != a32.ctypes.data
    # So is its move to the device asked for.
    p = HonouringProducer(a32, device=(KDLCUDAMANAGED, 0))
    t = dlbridge.asarray(p, device="cpu")
    assert p.calls[0]["dl_device"] == (KDLCPU, 0)
    assert t.device == "cpu" and t.data_ptr == p.copies[0].ctypes.data
    # Its BufferError for copy=False is final, and the standard's ValueError.
    p = HonouringProducer(a32, device=(KDLCUDAMANAGED, 0))
    with pytest.raises(ValueError, match="copy=False.*on cpu.*dl_device needs a copy") as e:
        dlbridge.asarray(p, device="cpu", copy=False)
    assert isinstance(e.value.__cause__, BufferError)
    assert len(p.calls) == 1 and p.copies == []
    # A producer without the keywords (TypeError) is asked again without them.
    p = HonouringProducer(a32, refuse=TypeError("no"))
    t = dlbridge.asarray(p, copy=True)
    assert [c["copy"] for c in p.calls] == [True, None]
    assert t.data_ptr != a32.ctypes.data and t.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_copy_true_takes_the_producers_copy_and_never_shares(helper):
    a = np.arange(4, dtype=np.float32)
    p = HonouringProducer(a)
    t = dlbridge.from_dlpack(p, copy=True)
    # The producer's copy (IS_COPIED, writable) is the result: not copied again.
    assert [c["copy"] for c in p.calls] == [True]
    assert t.data_ptr == p.copies[0].ctypes.data != a.ctypes.data
    assert not t.readonly
    t[0] = 7.0
    assert a[0] == 0.0
    # A producer that ignores copy=True is copied by dlbridge.
    v = VersionedProducer(a)
    u = dlbridge.from_dlpack(v, copy=True)
    assert v.calls[0]["copy"] is True and u.data_ptr != a.ctypes.data
    u[1] = 9.0
    assert a[1] == 1.0


def test_device_moved_by_the_producer_is_not_copied_again(helper):
    a = np.arange(3, dtype=np.float32)
    p = HonouringProducer(a, device=(KDLCUDAMANAGED, 0))
    t = dlbridge.from_dlpack(p, device="cpu")
    assert p.calls[0]["dl_device"] == (KDLCPU, 0)
    assert t.device == "cpu" and t.data_ptr == p.copies[0].ctypes.data


def test_producer_buffer_error_for_copy_false_is_a_value_error(helper):
    a = np.arange(3, dtype=np.float32)
    p = HonouringProducer(a, device=(KDLCUDAMANAGED, 0))
    with pytest.raises(ValueError, match="copy=False.*on cpu.*dl_device needs a copy") as e:
        dlbridge.from_dlpack(p, device="cpu", copy=False)
    assert isinstance(e.value.__cause__, BufferError)
    # Final: the producer is not asked again without the keywords.
    assert len(p.calls) == 1 and p.copies == []
    assert deleted() == 0


def test_producer_copy_flagged_is_copied_with_copy_false_is_refused_and_freed(helper):
    class Careless(VersionedProducer):
        def __dlpack__(self, **kwargs):
            self.calls.append(kwargs)
            return capsule_of(self.array.copy(), flags=IS_COPIED)

    p = Careless(np.arange(2.0))
    with pytest.raises(ValueError, match="IS_COPIED"):
        dlbridge.from_dlpack(p, copy=False)
    assert p.calls[0]["copy"] is False
    assert deleted() == 1


def test_producer_without_the_keywords_is_asked_again_without_them(helper):
    class NoKeywords:
        """max_version, but not dl_device nor copy (a TypeError for them)."""

        calls = []

        def __init__(self, array):
            self.array = array

        def __dlpack__(self, *, stream=None, max_version=None):
            type(self).calls.append(max_version)
            return capsule_of(self.array)

    a = np.arange(3.0)
    t = dlbridge.from_dlpack(NoKeywords(a), copy=True)
    assert t.data_ptr != a.ctypes.data and t.tolist() == [0.0, 1.0, 2.0]
    assert NoKeywords.calls == [(1, 3)]
    # Asked again without them, dlbridge applies copy=False itself.
    p = HonouringProducer(a, device=(KDLCUDAMANAGED, 0), refuse=TypeError("no"))
    with pytest.raises(ValueError, match="copy=False, but the data is in cuda_managed memory"):
        dlbridge.from_dlpack(p, device="cpu", copy=False)
    assert [c["copy"] for c in p.calls] == [False, None]
    # A producer that refuses dl_device with BufferError: dlbridge moves the
    # data itself, unless copy=False.
    p = HonouringProducer(np.arange(3, dtype=np.float32), device=(KDLCUDAHOST, 0), refuse=BufferError("no"))
    u = dlbridge.from_dlpack(p, device="cpu")
    assert u.device == "cpu" and u.tolist() == [0.0, 1.0, 2.0]
    assert [c["dl_device"] for c in p.calls] == [(KDLCPU, 0), None]


def test_old_producer_chain_still_works_with_keywords():
    class Old:
        asked = []

        def __init__(self, array):
            self.array = array

        def __dlpack__(self, stream=None):
            type(self).asked.append(stream)
            return self.array.__dlpack__()

    a = np.arange(3.0)
    t = dlbridge.from_dlpack(Old(a), copy=True)
    assert t.data_ptr != a.ctypes.data and t.tolist() == [0.0, 1.0, 2.0]
    t = dlbridge.from_dlpack(Old(a), device="cpu", copy=False)
    assert t.data_ptr == a.ctypes.data
    assert Old.asked == [None, None]


def test_device_refusals_leave_a_capsule_unconsumed(helper):
    a = np.arange(3, dtype=np.float32)
    cap = capsule_of(a, device=(KDLCUDAMANAGED, 0))
    with pytest.raises(ValueError, match="copy=False"):
        dlbridge.from_dlpack(cap, device="cpu", copy=False)
    with pytest.raises(ValueError, match="in_place=True"):
        dlbridge.from_dlpack(cap, device="rocm:0", in_place=True)
    assert '"dltensor_versioned"' in repr(cap) and deleted() == 0
    t = dlbridge.from_dlpack(cap, device="cpu", in_place=True)
    assert t.data_ptr == a.ctypes.data and "used_dltensor_versioned" in repr(cap)
    del cap, t
    assert deleted() == 1


def test_asarray_refusals_leave_a_capsule_unconsumed(helper):
    a = np.arange(3, dtype=np.float32)
    for cap in (capsule_of(a), capsule_of(a, legacy=True)):
        with pytest.raises(ValueError, match="dtype is int8"):
            dlbridge.asarray(cap, dtype="int8", copy=False)
        with pytest.raises(TypeError, match="float8_e4m3fn has no Python number"):
            dlbridge.asarray(cap, dtype="float8_e4m3fn")
        with pytest.raises(ValueError, match="copy=False"):
            dlbridge.asarray(cap, device="cuda:0", copy=False)
        assert '"used' not in repr(cap)
        assert dlbridge.asarray(cap).data_ptr == a.ctypes.data
        assert "used_dltensor" in repr(cap)
    gc.collect()
    assert deleted() == 2


def test_asarray_copy_false_names_the_call_that_shares_in_place(helper):
    # asarray has no in_place: its refusal names the call that has.
    a = np.arange(3, dtype=np.float32)
    managed = dlbridge.from_dlpack(capsule_of(a, device=(KDLCUDAMANAGED, 0)))
    for call in (dlbridge.asarray, dlbridge.from_dlpack):
        with pytest.raises(ValueError, match="only a copy puts it there \\(from_dlpack's in_place=True shares"):
            call(managed, device="cpu", copy=False)


def test_asarray_converting_a_capsule_consumes_it_and_frees_its_struct(helper):
    a = np.arange(3, dtype=np.float32)
    cap = capsule_of(a)
    t = dlbridge.asarray(cap, dtype="float64")
    assert t.tolist() == [0.0, 1.0, 2.0] and t.data_ptr != a.ctypes.data
    assert "used_dltensor_versioned" in repr(cap)
    # The values were copied: the producer's struct goes at once.
    assert deleted() == 1


def test_nested_and_assigned_capsules_are_consumed_only_on_success(helper):
    a = np.arange(3, dtype=np.float32)
    cap = capsule_of(a)
    with pytest.raises(ValueError, match="ragged|length"):
        dlbridge.asarray([cap, [1.0, 2.0]])
    with pytest.raises(ValueError, match="copy=False"):
        dlbridge.asarray([[1.0, 2.0, 3.0], cap], device="cuda:0", copy=False)
    t = dlbridge.zeros(2, dtype="float32")
    with pytest.raises(ValueError, match="broadcast"):
        t[...] = cap
    assert '"dltensor_versioned"' in repr(cap) and deleted() == 0
    assert t.tolist() == [0.0, 0.0]
    # Success consumes: the values are copied, so the struct goes at once.
    assert dlbridge.asarray([cap, [4.0, 5.0, 6.0]]).tolist() == [[0.0, 1.0, 2.0], [4.0, 5.0, 6.0]]
    assert "used_dltensor_versioned" in repr(cap) and deleted() == 1
    two = capsule_of(np.array([7.0, 8.0], dtype=np.float32))
    t[...] = two
    assert t.tolist() == [7.0, 8.0]
    assert "used_dltensor_versioned" in repr(two) and deleted() == 2


def test_host_type_device_ids_are_refused_as_pairs_and_as_names():
    a = np.arange(3.0)
    for device in ((KDLCPU, 3), "cpu:1", (KDLCUDAHOST, 2), "cuda_host:2", (KDLCUDAMANAGED, 1)):
        with pytest.raises(ValueError, match="device_id is [0-9]+; .* takes only 0"):
            dlbridge.from_dlpack(a, device=device)
        with pytest.raises(ValueError, match="takes only 0"):
            dlbridge.zeros(2, device=device)
    # What a producer reports is read as DLPack says, device_id 0.
    class Sloppy:
        def __dlpack_device__(self):
            return (KDLCPU, 5)

    dlbridge.synchronize(Sloppy())


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        (dict(copy="yes"), TypeError),
        (dict(copy=1), TypeError),
        (dict(device=3.5), TypeError),
        (dict(device="tpu"), ValueError),
        (dict(device="cuda:-1"), ValueError),
        (dict(device=(KDLCPU, 0, 0)), TypeError),
        (dict(device=(99, 0)), ValueError),
        (dict(device=(2**40, 0)), ValueError),
        (dict(device=(2**64, 0)), ValueError),
        (dict(device=(KDLCPU, -(2**70))), ValueError),
        (dict(stream=None), TypeError),
    ],
)
def test_bad_arguments(kwargs, exc):
    with pytest.raises(exc) as info:
        dlbridge.from_dlpack(np.arange(3.0), **kwargs)
    # Not a subclass that happens to match: numbers past 64 bits are out of
    # range as those past 32 are, not an OverflowError.
    assert type(info.value) is exc


def test_x_is_positional_only():
    with pytest.raises(TypeError):
        dlbridge.from_dlpack(x=np.arange(3.0))
    with pytest.raises(TypeError):
        dlbridge.from_dlpack()
    with pytest.raises(TypeError):
        dlbridge.from_dlpack(np.arange(3.0), None)


# ---------------------------------------------------------------------------
# Reference counts
# ---------------------------------------------------------------------------


def test_reference_counts_are_unchanged_after_a_round_trip():
    a = np.arange(6.0)
    before = sys.getrefcount(a)
    t = dlbridge.from_dlpack(a)
    assert sys.getrefcount(a) > before
    b = np.from_dlpack(t)
    del t, b
    gc.collect()
    assert sys.getrefcount(a) == before


def test_reference_counts_of_the_producer_method_and_table_are_unchanged():
    # The import holds the producer's __dlpack__ and its table's capsule
    # while the producer's code runs, and lets go of both after.
    class Slotted:
        __slots__ = ()

        def __dlpack__(self, **kwargs):
            return np.arange(2.0).__dlpack__(**kwargs)

    class Tabled(Slotted):
        __slots__ = ()
        __dlpack_c_exchange_api__ = dlbridge.Tensor.__dlpack_c_exchange_api__

    method = Slotted.__dict__["__dlpack__"]
    table = Tabled.__dlpack_c_exchange_api__
    for cls in (Slotted, Tabled):
        with pytest.raises(TypeError) if cls is Tabled else contextlib.nullcontext():
            dlbridge.from_dlpack(cls())
    before = sys.getrefcount(method), sys.getrefcount(table)
    for _ in range(10):
        assert dlbridge.from_dlpack(Slotted()).tolist() == [0.0, 1.0]
        with pytest.raises(TypeError, match="expected a dlbridge.Tensor"):
            dlbridge.from_dlpack(Tabled())
    assert (sys.getrefcount(method), sys.getrefcount(table)) == before


def test_reference_counts_are_unchanged_after_an_unconsumed_capsule():
    a = np.arange(6.0)
    t = dlbridge.from_dlpack(a)
    before_a, before_t = sys.getrefcount(a), sys.getrefcount(t)
    for kwargs in (dict(), dict(max_version=(1, 0))):
        cap = t.__dlpack__(**kwargs)
        del cap
    gc.collect()
    assert (sys.getrefcount(a), sys.getrefcount(t)) == (before_a, before_t)
    cap = a.__dlpack__()
    del cap
    assert sys.getrefcount(a) == before_a


@needs_torch
def test_reference_counts_with_torch():
    x = torch.arange(6.0)
    before = sys.getrefcount(x)
    t = dlbridge.from_dlpack(x)
    y = torch.from_dlpack(t)
    del t, y
    gc.collect()
    assert sys.getrefcount(x) == before


def test_keyword_imports_of_own_capsules_stay_flat():
    # A struct dlbridge made, imported with keywords that change nothing,
    # goes back to its one owner as a plain import does: a loop of exports
    # and imports keeps no intermediate tensor alive.
    for kwargs in (dict(copy=False), dict(device="cpu"), dict(device=(KDLCPU, 0), copy=None)):
        for versioned in (True, False):
            u = dlbridge.arange(4, dtype="float32")
            refs = []
            for _ in range(6):
                refs.append(weakref.ref(u))
                cap = u.__dlpack__(max_version=(1, 0)) if versioned else u.__dlpack__()
                u = dlbridge.from_dlpack(cap, **kwargs)
                del cap
            gc.collect()
            # The first holds the memory; none after it is kept.
            assert [r() is not None for r in refs] == [True] + [False] * 5, (kwargs, versioned)
            assert u.tolist() == [0.0, 1.0, 2.0, 3.0]

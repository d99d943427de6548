"""__dlpack__ and __dlpack_device__ are found as Python finds x.__dlpack__,
for every kind of descriptor, as numpy.from_dlpack and torch.from_dlpack
find them: on the object, so instance attributes and __getattr__ count and
a metaclass's attribute does not. The exchange table is a type attribute,
type(x).__dlpack_c_exchange_api__, as Python finds that."""

import numpy as np
import pytest

import dlbridge

DATA = np.arange(6, dtype=np.int32)


def export(calls, *args, **kwargs):
    calls.append((args, kwargs))
    return DATA.__dlpack__(**kwargs)


def plain_function(slots):
    class P:
        if slots:
            __slots__ = ()
        calls = []

        def __dlpack__(self, **kwargs):
            assert isinstance(self, P)
            return export(P.calls, **kwargs)

    return P


def static(slots):
    class P:
        if slots:
            __slots__ = ()
        calls = []

        @staticmethod
        def __dlpack__(*args, **kwargs):
            return export(P.calls, *args, **kwargs)

    return P


def class_method(slots):
    class P:
        if slots:
            __slots__ = ()
        calls = []

        @classmethod
        def __dlpack__(cls, *args, **kwargs):
            assert cls is P
            return export(P.calls, *args, **kwargs)

    return P


def prop(slots):
    class P:
        if slots:
            __slots__ = ()
        calls = []

        @property
        def __dlpack__(self):
            assert isinstance(self, P)
            return lambda *a, **k: export(P.calls, *a, **k)

    return P


def callable_object(slots):
    class Export:
        def __call__(self, *args, **kwargs):
            return export(P.calls, *args, **kwargs)

    class P:
        if slots:
            __slots__ = ()
        calls = []
        __dlpack__ = Export()

    return P


def custom_descriptor(slots):
    class Binder:
        def __get__(self, obj, owner=None):
            if obj is None:
                return self
            return lambda *a, **k: export(P.calls, "bound", *a, **k)

    class P:
        if slots:
            __slots__ = ()
        calls = []
        __dlpack__ = Binder()

    return P


def builtin_callable(slots):
    # A C function stored on the class is not a descriptor: no binding.
    class P:
        if slots:
            __slots__ = ()
        calls = []
        __dlpack__ = DATA.__dlpack__

    return P


def via_getattr(slots):
    class P:
        if slots:
            __slots__ = ()
        calls = []

        def __getattr__(self, name):
            if name == "__dlpack__":
                return lambda *a, **k: export(P.calls, *a, **k)
            raise AttributeError(name)

    return P


def via_getattribute(slots):
    class P:
        if slots:
            __slots__ = ()
        calls = []

        def __dlpack__(self, **kwargs):
            raise AssertionError("__getattribute__ answers first")

        def __getattribute__(self, name):
            if name == "__dlpack__":
                return lambda *a, **k: export(P.calls, "routed", *a, **k)
            return object.__getattribute__(self, name)

    return P


KINDS = {
    "function": (plain_function, ()),
    "staticmethod": (static, ()),
    "classmethod": (class_method, ()),
    "property": (prop, ()),
    "callable_object": (callable_object, ()),
    "custom_descriptor": (custom_descriptor, ("bound",)),
    "builtin": (builtin_callable, None),
    "__getattr__": (via_getattr, ()),
    "__getattribute__": (via_getattribute, ("routed",)),
}


@pytest.mark.parametrize("slots", [False, True], ids=["dict", "slots"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("entry", ["from_dlpack", "asarray"])
def test_every_descriptor_kind_is_called_as_x_dot_dlpack(kind, slots, entry):
    make, positional = KINDS[kind]
    P = make(slots)
    fn = getattr(dlbridge, entry)
    for _ in range(3):  # first call, then the cached route
        t = fn(P())
        assert t.tolist() == DATA.tolist()
    if positional is not None:
        assert len(P.calls) == 3
        for args, kwargs in P.calls:
            # The producer sees exactly what x.__dlpack__(...) passes:
            # keywords only, no object prepended.
            assert args == positional
            assert "max_version" in kwargs


@pytest.mark.parametrize("slots", [False, True], ids=["dict", "slots"])
def test_a_descriptor_replaced_after_first_use_is_called_as_the_new_kind(slots):
    P = plain_function(slots)
    assert dlbridge.from_dlpack(P()).tolist() == DATA.tolist()
    P.__dlpack__ = staticmethod(lambda *a, **k: export(P.calls, *a, **k))
    assert dlbridge.from_dlpack(P()).tolist() == DATA.tolist()
    P.__dlpack__ = classmethod(lambda cls, *a, **k: export(P.calls, cls, *a, **k))
    assert dlbridge.from_dlpack(P()).tolist() == DATA.tolist()
    assert [c[0] for c in P.calls] == [(), (), (P,)]


def test_an_instance_attribute_is_a_producer():
    class Box:
        pass

    b = Box()
    calls = []
    b.__dlpack__ = lambda *a, **k: export(calls, *a, **k)
    assert dlbridge.from_dlpack(b).tolist() == DATA.tolist()
    assert dlbridge.asarray(b).tolist() == DATA.tolist()
    assert len(calls) == 2 and calls[0][0] == ()


def test_an_instance_attribute_shadows_a_class_function():
    P = plain_function(False)
    p = P()
    own = []
    p.__dlpack__ = lambda *a, **k: export(own, *a, **k)
    for _ in range(2):
        assert dlbridge.from_dlpack(p).tolist() == DATA.tolist()
    assert len(own) == 2 and P.calls == []
    # Other instances still use the class's.
    dlbridge.from_dlpack(P())
    assert len(P.calls) == 1


def test_a_dict_slot_instance_attribute_shadows_a_class_function():
    class P:
        __slots__ = ("__dict__",)

        def __dlpack__(self, **kwargs):
            raise AssertionError("the instance's attribute comes first")

    p = P()
    own = []
    p.__dlpack__ = lambda *a, **k: export(own, *a, **k)
    assert dlbridge.from_dlpack(p).tolist() == DATA.tolist()
    assert len(own) == 1


def test_a_metaclass_dlpack_belongs_to_the_class_not_its_instances():
    class Meta(type):
        def __dlpack__(cls, **kwargs):
            raise AssertionError("not an instance's attribute")

        def __dlpack_device__(cls):
            raise AssertionError("not an instance's attribute")

    class P(metaclass=Meta):
        pass

    assert not hasattr(P(), "__dlpack__")
    with pytest.raises(AttributeError):
        dlbridge.from_dlpack(P())
    with pytest.raises(TypeError, match="not a number"):
        dlbridge.asarray(P())
    with pytest.raises(TypeError, match="synchronize"):
        dlbridge.synchronize(P())
    with pytest.raises(TypeError, match="device_of"):
        dlbridge.device_of(P())


def test_a_property_that_raises_attribute_error_is_no_producer():
    class P:
        @property
        def __dlpack__(self):
            raise AttributeError("not today")

    assert not hasattr(P(), "__dlpack__")
    with pytest.raises(TypeError, match="not a number"):
        dlbridge.asarray(P())


def test_a_property_that_raises_anything_else_propagates():
    class P:
        @property
        def __dlpack__(self):
            raise KeyError("broken")

    with pytest.raises(KeyError, match="broken"):
        dlbridge.asarray(P())
    with pytest.raises(KeyError, match="broken"):
        dlbridge.device_of(P())


def device_kinds():
    def function():
        class P:
            __slots__ = ()

            def __dlpack_device__(self):
                assert isinstance(self, P)
                return (1, 0)
        return P()

    def static():
        class P:
            __slots__ = ()

            @staticmethod
            def __dlpack_device__():
                return (1, 0)
        return P()

    def klass():
        class P:
            __slots__ = ()

            @classmethod
            def __dlpack_device__(cls):
                assert cls is P
                return (1, 0)
        return P()

    def prop():
        class P:
            @property
            def __dlpack_device__(self):
                return lambda: (1, 0)
        return P()

    def instance():
        class P:
            pass
        p = P()
        p.__dlpack_device__ = lambda: (1, 0)
        return p

    def getattr_hook():
        class P:
            def __getattr__(self, name):
                if name == "__dlpack_device__":
                    return lambda: (1, 0)
                raise AttributeError(name)
        return P()

    return {"function": function, "staticmethod": static, "classmethod": klass,
            "property": prop, "instance": instance, "__getattr__": getattr_hook}


@pytest.mark.parametrize("kind", sorted(device_kinds()))
def test_dlpack_device_is_called_as_x_dot_dlpack_device(kind):
    # (1, 0) is the CPU: synchronize waits for nothing, and returns.
    assert dlbridge.synchronize(device_kinds()[kind]()) is None


TABLE = dlbridge.Tensor.__dlpack_c_exchange_api__


def with_table(where):
    """A producer whose __dlpack__ works and whose exchange table is
    dlbridge's, which refuses anything but a dlbridge.Tensor: a TypeError
    shows the table was used."""
    ns = {"__dlpack__": lambda self, **k: DATA.__dlpack__(**k)}
    meta = type
    if where == "class":
        ns["__dlpack_c_exchange_api__"] = TABLE
    elif where == "property":
        ns["__dlpack_c_exchange_api__"] = property(lambda self: TABLE)
    elif where == "metaclass":
        meta = type("Meta", (type,), {"__dlpack_c_exchange_api__": TABLE})
    P = meta("P", (), ns)
    p = P()
    if where == "instance":
        p.__dlpack_c_exchange_api__ = TABLE
    return P, p


@pytest.mark.parametrize("where,used", [
    ("class", True), ("metaclass", True), ("property", False), ("instance", False),
])
def test_the_exchange_table_is_found_as_type_x_finds_it(where, used):
    P, p = with_table(where)
    assert (getattr(type(p), "__dlpack_c_exchange_api__", None) is TABLE) == used
    for _ in range(2):
        if used:
            with pytest.raises(TypeError, match="expected a dlbridge.Tensor"):
                dlbridge.from_dlpack(p)
        else:
            assert dlbridge.from_dlpack(p).tolist() == DATA.tolist()


def test_a_table_removed_from_the_metaclass_is_no_longer_used():
    P, p = with_table("metaclass")
    with pytest.raises(TypeError, match="expected a dlbridge.Tensor"):
        dlbridge.from_dlpack(p)
    del type(P).__dlpack_c_exchange_api__
    assert dlbridge.from_dlpack(p).tolist() == DATA.tolist()
    type(P).__dlpack_c_exchange_api__ = TABLE
    with pytest.raises(TypeError, match="expected a dlbridge.Tensor"):
        dlbridge.from_dlpack(p)


def test_a_class_function_hidden_by_getattribute_is_no_producer():
    class P:
        def __dlpack__(self, **kwargs):
            raise AssertionError("hidden")

        def __getattribute__(self, name):
            if name == "__dlpack__":
                raise AttributeError(name)
            return object.__getattribute__(self, name)

    assert not hasattr(P(), "__dlpack__")
    with pytest.raises(TypeError, match="not a number"):
        dlbridge.asarray(P())
    with pytest.raises(AttributeError):
        dlbridge.from_dlpack(P())

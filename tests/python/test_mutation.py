"""Python code that runs while dlbridge parses an argument (an item's
__index__, __float__, __complex__, __bool__, a dtype-like object's name, a
comparison's __eq__) may change what is being parsed. dlbridge reads a
snapshot or holds strong references, so such code never frees what is
still being read, and the result is what the snapshot said or a clear
error."""

import numpy as np
import pytest

import dlbridge


class Clearing:
    """An int whose __index__ empties (or otherwise changes) a container."""

    def __init__(self, value, container, action="clear"):
        self.value = value
        self.container = container
        self.action = action
        self.calls = 0

    def __index__(self):
        self.calls += 1
        if self.action == "clear":
            self.container.clear()
        elif self.action == "grow":
            self.container.extend(range(100))
        elif self.action == "replace":
            self.container[:] = [object()] * len(self.container)
        return self.value


def hostile_list(n, action="clear"):
    """[2, 2, ...]: the first item changes the list when read, and the
    others are ints only it refers to, so a reader that borrowed them reads
    freed memory once the list lets go of them."""
    items = []
    items.append(Clearing(2, items, action))
    items.extend(int("1" + "0" * 30) // int("5" + "0" * 29) for _ in range(n - 1))
    return items


ACTIONS = ["clear", "grow", "replace"]


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("make", [
    lambda s: dlbridge.empty(s),
    lambda s: dlbridge.zeros(s),
    lambda s: dlbridge.full(s, 7),
    lambda s: dlbridge.empty(shape=s, dtype="int8"),
])
def test_shape_list_changed_by_an_item_reads_the_snapshot(make, action):
    shape = hostile_list(3, action)
    t = make(shape)
    assert t.shape == (2, 2, 2)


class Endless:
    """A sequence whose __getitem__ never raises IndexError, whatever its
    __len__ says: iterating it would never end (it stops a reader that
    tries after 100000 items, so that such a reader fails, not hangs)."""

    def __init__(self, length=None):
        self.length = length

    def __len__(self):
        if self.length is None:
            raise TypeError("no length")
        return self.length

    def __getitem__(self, i):
        if i >= 100000:
            raise RuntimeError("read endlessly")
        return i


class Shorter(Endless):
    """A sequence whose __len__ promises more than __getitem__ gives."""

    def __getitem__(self, i):
        if i >= 1:
            raise IndexError(i)
        return 1


@pytest.mark.parametrize("read, shape", [
    (lambda s: dlbridge.zeros(s), (0, 1)),
    (lambda s: dlbridge.arange(0).reshape(s), (0, 1)),
    (lambda s: dlbridge.zeros((1, 2)).permute(s), (1, 2)),
])
def test_shape_sequences_are_read_as_far_as_their_length(read, shape):
    # By index, as far as __len__ says: iterating would never end.
    assert read(Endless(2)).shape == shape
    with pytest.raises(ValueError, match="length 2 by its __len__, but its item 1 raised IndexError"):
        read(Shorter(2))
    # Without a length, iteration stops past 64 items.
    with pytest.raises(ValueError, match="more than 64 dimensions"):
        read(Endless())


@pytest.mark.parametrize("action", ACTIONS)
def test_reshape_list_changed_by_an_item_reads_the_snapshot(action):
    t = dlbridge.arange(8)
    v = t.reshape(hostile_list(3, action))
    assert v.shape == (2, 2, 2)
    assert v.tolist() == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]


@pytest.mark.parametrize("action", ACTIONS)
def test_permute_list_changed_by_an_item_reads_the_snapshot(action):
    t = dlbridge.arange(24).reshape(2, 3, 4)
    axes = []
    axes.append(Clearing(2, axes, action))
    axes.extend([int("1" * 20) // int("1" * 20) - 1, 1])  # 0 and 1, fresh ints
    v = t.permute(axes)
    assert v.shape == (4, 2, 3)
    assert v.tolist() == np.arange(24).reshape(2, 3, 4).transpose(2, 0, 1).tolist()


def test_reshape_varargs_with_hostile_items():
    t = dlbridge.arange(6)
    box = []
    v = t.reshape(Clearing(2, box), 3)
    assert v.shape == (2, 3)


class Mutator:
    """A number whose conversion runs `action`."""

    def __init__(self, value, action):
        self.value = value
        self.action = action

    def _run(self):
        self.action()
        return self.value

    def __index__(self):
        return int(self._run())

    def __float__(self):
        return float(self._run())

    def __complex__(self):
        return complex(self._run())

    def __bool__(self):
        return bool(self._run())


@pytest.mark.parametrize("dtype", ["int64", "float32", "complex64", "bool"])
@pytest.mark.parametrize("how", ["clear_row", "clear_outer", "append_row",
                                 "replace_rows"])
def test_nested_values_changed_by_a_conversion_are_a_clear_error(dtype, how):
    rows = [[1, 1], [1, 1]]

    def action():
        if how == "clear_row":
            rows[1].clear()
        elif how == "clear_outer":
            rows.clear()
        elif how == "append_row":
            rows[1].append(5)
        else:
            rows[:] = [5, 5]

    rows[0][1] = Mutator(1, action)
    with pytest.raises(ValueError, match="changed size"):
        dlbridge.asarray(rows, dtype=dtype)


@pytest.mark.parametrize("dtype", ["int64", "float32", "complex64", "bool"])
def test_nested_values_replaced_by_a_conversion_are_read_safely(dtype):
    # Replacing an item not yet read keeps the sizes: the new item is read.
    rows = [[1, 1], [1, 1]]

    def action():
        rows[1][1] = 0

    rows[0][0] = Mutator(1, action)
    t = dlbridge.asarray(rows, dtype=dtype)
    assert np.asarray(t).tolist() == np.array([[1, 1], [1, 0]], dtype=dtype).tolist()


def test_dtype_name_is_read_once_before_the_values():
    values = [1, 2, 3]

    class DtypeLike:
        calls = 0

        @property
        def name(self):
            DtypeLike.calls += 1
            if DtypeLike.calls > 1:
                values.clear()
            return "int16"

    t = dlbridge.asarray(values, dtype=DtypeLike())
    assert DtypeLike.calls == 1
    assert t.dtype == "int16" and t.tolist() == [1, 2, 3]


def test_full_fill_value_conversion_may_run_anything():
    junk = [dlbridge.zeros(3) for _ in range(10)]

    def action():
        junk.clear()

    t = dlbridge.full((2, 2), Mutator(3.5, action), dtype="float64")
    assert t.tolist() == [[3.5, 3.5], [3.5, 3.5]]


class Viewing:
    """An int whose __index__ takes views of (and drops references to) a
    tensor, which replaces the struct of a tensor that came from
    from_dlpack while the tensor is being indexed."""

    def __init__(self, value, tensor):
        self.value = value
        self.tensor = tensor

    def __index__(self):
        t = self.tensor
        self.tensor = None
        if t is not None:
            t[...]
            t.reshape(-1)
            dlbridge.from_dlpack(t)[...]
        return self.value


def imported():
    """A tensor whose struct is a share of another (replaced on first view)."""
    return dlbridge.from_dlpack(dlbridge.arange(12).reshape(3, 4))


def test_indices_that_view_the_tensor_being_indexed():
    t = imported()
    assert t[Viewing(1, t), Viewing(2, t)].item() == 6
    t = imported()
    assert t[Viewing(2, t)].tolist() == [8, 9, 10, 11]
    t = imported()
    assert t[slice(Viewing(1, t), None, Viewing(1, t))].shape == (2, 4)
    t = imported()
    assert t[..., Viewing(3, t)].tolist() == [3, 7, 11]


def test_shape_args_that_view_the_tensor_being_reshaped():
    t = imported()
    assert t.reshape([Viewing(4, t), 3]).shape == (4, 3)
    t = imported()
    assert t.permute([Viewing(1, t), 0]).shape == (4, 3)


def test_dlpack_arguments_that_view_the_tensor_being_exported():
    t = imported()
    cap = t.__dlpack__(max_version=(Viewing(1, t), Viewing(0, t)),
                       dl_device=(Viewing(1, t), Viewing(0, t)))
    assert dlbridge.from_dlpack(cap).tolist() == np.arange(12).reshape(3, 4).tolist()


def test_device_tuple_items_may_run_anything():
    box = [1, 2, 3]
    t = dlbridge.zeros(2, device=(Clearing(1, box), Clearing(0, box)))
    assert t.device == "cpu" and box == []


def test_arange_bounds_may_run_anything():
    box = [1]
    t = dlbridge.arange(Clearing(1, box), Clearing(4, box), Clearing(1, box))
    assert t.tolist() == [1, 2, 3]


def test_contains_with_an_eq_that_views_the_tensor():
    t = imported()

    class Probe:
        calls = 0

        def __eq__(self, other):
            Probe.calls += 1
            t[...]
            dlbridge.from_dlpack(t).reshape(-1)
            return other == 11

        __hash__ = None

    assert Probe() in t
    assert Probe.calls == 12


def test_contains_with_an_eq_that_views_a_foreign_tensor():
    # A NumPy import keeps NumPy's struct until a view wraps it in an owner.
    t = dlbridge.from_dlpack(np.arange(12, dtype=np.int64).reshape(3, 4))

    class Probe:
        calls = 0

        def __eq__(self, other):
            Probe.calls += 1
            t[1:]
            return other == 11

        __hash__ = None

    assert Probe() in t
    assert Probe.calls == 12
    assert t.tolist() == np.arange(12).reshape(3, 4).tolist()

"""The C API of dlbridge_capi.h: the example extension, and the test
helper's direct calls."""

import ast
import ctypes
import gc
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

from dlpack_ctypes import DLManagedTensorVersioned
from support import (
    IS_COPIED,
    KDLCUDA,
    READ_ONLY,
    capsule_of,
    deleted,
    dlbridge,
    helper,
    needs_torch,
    np,
    torch,
)
from dlbridge import _capi_example as example

WRITABLE, CPU = 0x1, 0x2


def test_headers_are_installed():
    inc = dlbridge.get_include()
    assert os.path.isfile(os.path.join(inc, "dlbridge_capi.h"))
    assert os.path.isfile(os.path.join(inc, "dlpack", "dlpack.h"))
    with open(os.path.join(inc, "dlbridge_capi.h")) as f:
        assert "import_dlbridge" in f.read()


def test_example_reads_any_producer():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert example.total(a) == a.sum()
    assert example.total(a[::-1, ::2]) == a[::-1, ::2].sum()
    assert example.total(dlbridge.from_dlpack(a).T) == a.sum()
    assert example.total(np.arange(5, dtype=np.int32)) == 10
    assert example.total(a.__dlpack__()) == a.sum()
    with pytest.raises(TypeError, match="reads"):
        example.total(np.zeros(2, dtype=np.int8))
    with pytest.raises(AttributeError):
        example.total(object())


@needs_torch
def test_example_reads_torch():
    x = torch.arange(10, dtype=torch.float32)
    assert example.total(x) == 45.0
    example.scale(x, 2.0)
    assert x[3].item() == 6.0


def test_example_writes_in_place_and_refuses_read_only():
    a = np.arange(4, dtype=np.float32)
    example.scale(a, 3)
    assert a.tolist() == [0, 3, 6, 9]
    a.flags.writeable = False
    with pytest.raises(BufferError, match="read-only"):
        example.scale(a, 2)
    t = dlbridge.from_dlpack(helper.make_capsule(data=0x1000, shape=(2,), device=(KDLCUDA, 0)))
    with pytest.raises(BufferError, match="CPU"):
        example.total(t)


def test_example_makes_tensors_in_c():
    t = example.ramp(5)
    assert type(t) is dlbridge.Tensor
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert np.from_dlpack(t).sum() == 10.0
    assert example.ramp(0).shape == (0,)
    v = example.ramp(6)[::2]
    assert v.tolist() == [0.0, 2.0, 4.0]


def test_example_owned_tensors():
    assert example.owned_ndim(np.zeros((2, 3, 4))) == 3
    assert example.owned_ndim(dlbridge.zeros(())) == 0


def test_borrow_of_a_tensor_is_the_tensor_itself():
    t = dlbridge.arange(3)
    same, data, shape = helper.capi_borrow(t)
    assert same and data == t.data_ptr and shape == (3,)
    a = np.arange(3.0)
    same, data, shape = helper.capi_borrow(a)
    assert not same and data == a.ctypes.data and shape == (3,)


def churn():
    """Frees and reallocates tensor structs of another shape, so that a
    pointer into a freed one would read their fields."""
    gc.collect()
    # Same rank, so the same sizes: tensors and shares of them.
    made = [dlbridge.zeros((7, 7)) for _ in range(100)]
    return made + [dlbridge.from_dlpack(m) for m in made]


def test_borrowed_struct_outlives_a_view_of_its_tensor():
    source = [dlbridge.zeros((3, 4))]
    t = dlbridge.from_dlpack(source[0])  # a share of the first tensor

    def meanwhile():
        t[0]  # a view: t's tensor becomes a dlbridge one
        source.clear()  # the first tensor's last reference goes
        churn()

    same, data, shape = helper.capi_borrow(t, 0, meanwhile)
    assert same and shape == (3, 4) and data == t.data_ptr


def test_borrow_flags(helper):
    ro = dlbridge.from_dlpack(capsule_of(np.zeros(2, np.float32), flags=READ_ONLY))
    helper.capi_borrow(ro)
    refs = sys.getrefcount(ro)
    with pytest.raises(BufferError):
        helper.capi_borrow(ro, WRITABLE)
    # The refusal keeps no reference: to the Tensor, or to the one made
    # for a foreign producer (whose tensor is released at once).
    assert sys.getrefcount(ro) == refs
    with pytest.raises(BufferError, match="read-only"):
        helper.capi_borrow(capsule_of(np.zeros(2, np.float32), flags=READ_ONLY), WRITABLE)
    assert deleted() == 1
    with pytest.raises(ValueError, match="flags"):
        helper.capi_borrow(ro, 0x80)


def test_to_managed(helper):
    a = np.arange(6.0).reshape(2, 3)
    info = helper.capi_to_managed(a)
    assert info["data"] == a.ctypes.data and info["ndim"] == 2 and info["version"] == (1, 3)
    t = dlbridge.from_dlpack(capsule_of(np.zeros(2, np.float32), flags=READ_ONLY | IS_COPIED))
    assert helper.capi_to_managed(t)["flags"] == READ_ONLY
    with pytest.raises(BufferError):
        helper.capi_to_managed(t, WRITABLE)
    with pytest.raises(ValueError):
        helper.capi_to_managed(t, -1)
    gpu = dlbridge.from_dlpack(helper.make_capsule(data=0x1000, shape=(2,), device=(KDLCUDA, 0)))
    with pytest.raises(BufferError, match="CPU"):
        helper.capi_to_managed(gpu, CPU)
    del t, gpu
    assert deleted() == 2


def test_to_managed_of_foreign_producers_releases_anywhere(helper):
    # The owned tensor the C API hands out for a foreign producer may be
    # released without the GIL: its producer's deleter still gets it.
    a = np.arange(4, dtype=np.float32)
    cap = capsule_of(a)
    helper.capi_to_managed(cap)
    assert deleted() == 1


def test_check():
    assert helper.capi_check(dlbridge.arange(2))
    assert not helper.capi_check(np.arange(2))


def test_from_managed_and_from_legacy(helper):
    a = np.arange(4, dtype=np.int32)
    t = helper.capi_from(data=a, shape=(4,), dtype=(0, 32, 1))
    assert t.tolist() == [0, 1, 2, 3] and not t.readonly
    legacy = helper.capi_from(data=a, shape=(4,), dtype=(0, 32, 1), legacy=True, wrap_flags=READ_ONLY)
    assert legacy.readonly and legacy.tolist() == [0, 1, 2, 3]
    del t, legacy
    assert deleted() == 2
    # Refused tensors are released, for every reason they are refused.
    for version in ((0, 9), (2, 0)):
        message = r"^DLBridge_FromManaged: version is %d\.%d; dlbridge reads major version 1" % version
        with pytest.raises(BufferError, match=message):
            helper.capi_from(data=a, shape=(4,), version=version)
    with pytest.raises(BufferError, match="^DLBridge_FromManaged: shape"):
        helper.capi_from(data=a, shape=(4, -1))
    with pytest.raises(BufferError):
        helper.capi_from(data=a, shape=(4,), legacy=True, wrap_flags=1 << 9)
    with pytest.raises(BufferError, match="dtype|code"):
        helper.capi_from(data=a, shape=(4,), dtype=(77, 8, 1), legacy=True)
    assert deleted() == 7


def test_the_installed_headers_build_an_extension(tmp_path):
    # What a user does: compile against dlbridge.get_include() alone.
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        pytest.skip("needs a C compiler")
    src = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "capi_ext", "capi_example.c")
    if not os.path.exists(src):
        pytest.skip("needs the source tree")
    out = tmp_path / ("_capi_example" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(
        [cc, "-shared", "-fPIC", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{sysconfig.get_paths()['include']}",
         f"-I{dlbridge.get_include()}", src, "-o", str(out)],
        check=True,
    )
    # A buffer made in C reaches NumPy through the capsule without a copy,
    # and NumPy's array comes back to the C code the same way.
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import _capi_example as m\n"
            "import numpy as np\n"
            "t = m.ramp(5); a = np.from_dlpack(t)\n"
            "print(a.tolist(), a.ctypes.data == t.data_ptr, m.total(a))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "[0.0, 1.0, 2.0, 3.0, 4.0] True 10.0\n", r.stdout + r.stderr


def test_stub_names_the_runtime_api():
    stub = os.path.join(os.path.dirname(dlbridge.__file__), "__init__.pyi")
    with open(stub) as f:
        tree = ast.parse(f.read())
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert names == set(dlbridge.__all__) - {"DLPACK_MAJOR_VERSION", "DLPACK_MINOR_VERSION"}
    tensor = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    for node in tensor.body:
        name = getattr(node, "name", None) or getattr(getattr(node, "target", None), "id", None)
        assert name is None or hasattr(dlbridge.Tensor, name) or name == "__buffer__", name


class _CAPI(ctypes.Structure):
    # DLBridge_CAPI of dlbridge_capi.h, up to FromLegacy.
    _fields_ = [("version", ctypes.c_uint), ("size", ctypes.c_uint), ("Check", ctypes.c_void_p),
                ("ToManaged", ctypes.c_void_p), ("Borrow", ctypes.c_void_p),
                ("FromManaged", ctypes.c_void_p), ("FromLegacy", ctypes.c_void_p)]


def _from_legacy():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    api = _CAPI.from_address(get(dlbridge._dlbridge._C_API, b"dlbridge._dlbridge._C_API"))
    return ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_uint64)(api.FromLegacy)


def _take_legacy(capsule):
    # What a consumer does: it renames the capsule and owns the struct.
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    rename = ctypes.pythonapi.PyCapsule_SetName
    rename.argtypes = [ctypes.py_object, ctypes.c_char_p]
    p = get(capsule, b"dltensor")
    rename(capsule, _USED_LEGACY)
    return p


_USED_LEGACY = ctypes.c_char_p(b"used_dltensor")
PADDED = 1 << 2


def test_from_legacy_of_our_own_checks_the_flags():
    # dlbridge's own legacy struct of packed 4-bit units: padding would
    # claim twice the bytes there are, and unknown bits are no flags.
    from_legacy = _from_legacy()
    src = dlbridge.zeros(16, dtype="uint4")
    with pytest.raises(BufferError, match="IS_SUBBYTE_TYPE_PADDED, but this legacy tensor's 4-bit units are packed"):
        from_legacy(_take_legacy(src.__dlpack__()), PADDED)
    with pytest.raises(BufferError, match="not DLPack flags"):
        from_legacy(_take_legacy(src.__dlpack__()), 1 << 60)
    # Flags it can carry are kept; the data is the source's.
    back = from_legacy(_take_legacy(src.__dlpack__()), IS_COPIED)
    assert back.nbytes == src.nbytes == 8 and back.tolist() == src.tolist()
    ro = from_legacy(_take_legacy(src.__dlpack__()), READ_ONLY)
    assert ro.readonly and ro.tolist() == src.tolist()
    # Padding says nothing about whole bytes: a float32 struct takes it.
    f = dlbridge.arange(4, dtype="float32")
    assert from_legacy(_take_legacy(f.__dlpack__()), PADDED).tolist() == f.tolist()


def _capi_table():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return _CAPI.from_address(get(dlbridge._dlbridge._C_API, b"dlbridge._dlbridge._C_API"))


def test_null_arguments_and_unknown_flags_are_named():
    api = _capi_table()
    vp = ctypes.c_void_p
    to_managed = ctypes.PYFUNCTYPE(ctypes.c_int, vp, ctypes.c_int, vp)(api.ToManaged)
    borrow = ctypes.PYFUNCTYPE(ctypes.c_int, vp, ctypes.c_int, vp, vp)(api.Borrow)
    t = dlbridge.arange(3)
    slot, slot2 = ctypes.c_void_p(), ctypes.c_void_p()
    p, p2 = ctypes.addressof(slot), ctypes.addressof(slot2)
    for call, message in (
        (lambda: to_managed(None, 0, p), "DLBridge_ToManaged: obj is NULL"),
        (lambda: to_managed(id(t), 0, None), "DLBridge_ToManaged: out is NULL"),
        (lambda: borrow(None, 0, p, p2), "DLBridge_Borrow: obj is NULL"),
        (lambda: borrow(id(t), 0, None, p2), "DLBridge_Borrow: owner is NULL"),
        (lambda: borrow(id(t), 0, p, None), "DLBridge_Borrow: out is NULL"),
        (lambda: to_managed(id(t), 0x81, p), "DLBridge_ToManaged: flags is 0x81; bits 0x80 are not"),
        (lambda: borrow(id(t), -1, p, p2), "DLBridge_Borrow: flags is 0xffffffff; bits 0xfffffffc are not"),
    ):
        with pytest.raises(ValueError, match=message):
            call()
    assert slot.value is None and slot2.value is None
    assert ctypes.PYFUNCTYPE(ctypes.c_int, vp)(api.Check)(None) == 0
    with pytest.raises(ValueError, match="DLBridge_FromManaged: NULL tensor"):
        ctypes.PYFUNCTYPE(ctypes.py_object, vp)(api.FromManaged)(None)
    with pytest.raises(ValueError, match="DLBridge_FromLegacy: NULL tensor"):
        ctypes.PYFUNCTYPE(ctypes.py_object, vp, ctypes.c_uint64)(api.FromLegacy)(None, 0)
    # Both known flags together are flags.
    assert helper.capi_borrow(t, WRITABLE | CPU)[0]


def test_to_managed_of_a_foreign_producer_is_released_without_the_gil(helper):
    # ToManaged hands out a tensor of dlbridge's for a foreign producer's,
    # whose deleter takes the GIL before the producer's deleter runs: here
    # it runs through ctypes, which releases the GIL for the call.
    api = _capi_table()
    to_managed = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_int, ctypes.c_void_p)(api.ToManaged)
    slot = ctypes.c_void_p()
    assert to_managed(capsule_of(np.arange(4, dtype=np.float32)), 0, ctypes.addressof(slot)) == 0
    m = DLManagedTensorVersioned.from_address(slot.value)
    assert m.manager_ctx != 0 and helper.counters()["deleted"] == 0
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(m.deleter)(slot.value)
    assert helper.counters() == {"deleted": 1, "with_gil": 1, "without_gil": 0}


def test_a_capsule_the_requirements_refuse_is_left_unconsumed(helper):
    a = np.arange(3.0)
    for call in (lambda c: helper.capi_to_managed(c, WRITABLE), lambda c: example.scale(c, 2.0)):
        cap = capsule_of(a, flags=READ_ONLY)
        with pytest.raises(BufferError):
            call(cap)
        assert '"dltensor_versioned"' in repr(cap) and deleted() == 0
        assert dlbridge.from_dlpack(cap).data_ptr == a.ctypes.data
        assert "used_dltensor_versioned" in repr(cap)
        del cap
        gc.collect()
        assert deleted() == 1
        helper.reset()
    assert a.tolist() == [0.0, 1.0, 2.0]

"""The stub agrees with the module as mypy's stubtest reads them, and every
public function and method shows inspect a signature, methods with self
first."""

import inspect
import os
import pathlib
import subprocess
import sys

import pytest

from support import SANITIZED, dlbridge

HERE = pathlib.Path(__file__).resolve().parent


def public_callables():
    for name in dlbridge.__all__:
        obj = getattr(dlbridge, name)
        if callable(obj) and not isinstance(obj, type):
            yield name, obj


def tensor_methods():
    for name, obj in vars(dlbridge.Tensor).items():
        # __new__ only says that Tensors are made by the functions.
        if callable(obj) and name != "__new__":
            yield name, obj


@pytest.mark.skipif(SANITIZED, reason="the same stub and sources as the plain run; "
                    "mypy under the preloaded sanitizers only slows the suite")
def test_stubtest_runs_clean(tmp_path):
    try:
        import mypy.stubtest  # noqa: F401
    except ImportError:
        pytest.skip("mypy is not installed (scripts/setup.sh installs it)")
    env = dict(os.environ, MYPY_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "--mypy-config-file",
         str(HERE / "stubtest.ini"), "dlbridge"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success" in r.stdout


@pytest.mark.parametrize("name, fn", list(public_callables()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_public_function_has_a_signature(name, fn):
    sig = inspect.signature(fn)
    assert all(p.name not in ("self", "$self", "module", "$module") for p in sig.parameters.values())


@pytest.mark.parametrize("name, fn", list(tensor_methods()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_method_has_a_signature_with_self(name, fn):
    params = list(inspect.signature(fn).parameters.values())
    assert params and params[0].name == "self", name
    assert params[0].kind is inspect.Parameter.POSITIONAL_ONLY
    # Bound to a tensor, self is gone and the rest is as the stub says
    # (test_signatures.py).
    bound = getattr(dlbridge.zeros(2), name)
    assert [p.name for p in inspect.signature(bound).parameters.values()] == [
        p.name for p in params[1:]]

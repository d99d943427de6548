"""The type stub, the docstring signatures of the C functions and the
package's exports describe the same API."""

import ast
import inspect
import pathlib

import pytest

from support import dlbridge

STUB = pathlib.Path(__file__).resolve().parents[2] / "python" / "dlbridge" / "__init__.pyi"


def stub_functions():
    """name -> ast.arguments for the stub's module functions and the
    Tensor methods (as "Tensor.name")."""
    tree = ast.parse(STUB.read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = node.args
        elif isinstance(node, ast.ClassDef) and node.name == "Tensor":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not any(
                    isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list
                ):
                    found["Tensor." + item.name] = item.args
    return found


def stub_parameters(args, drop_self):
    """(name, kind) pairs in order, as inspect names the kinds."""
    P = inspect.Parameter
    out = [(a.arg, P.POSITIONAL_ONLY) for a in args.posonlyargs]
    out += [(a.arg, P.POSITIONAL_OR_KEYWORD) for a in args.args]
    if args.vararg:
        out.append((args.vararg.arg, P.VAR_POSITIONAL))
    out += [(a.arg, P.KEYWORD_ONLY) for a in args.kwonlyargs]
    if args.kwarg:
        out.append((args.kwarg.arg, P.VAR_KEYWORD))
    if drop_self:
        out = out[1:]
    return out


def runtime_parameters(fn):
    return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]


STUBS = stub_functions()


def test_the_stub_names_every_export():
    missing = [n for n in dlbridge.__all__ if n not in STUBS and callable(getattr(dlbridge, n))
               and not isinstance(getattr(dlbridge, n), type)]
    assert missing == []
    assert [n for n in STUBS if "." not in n and n not in dlbridge.__all__] == []


@pytest.mark.parametrize("name", sorted(STUBS))
def test_docstring_signature_matches_the_stub(name):
    if name.startswith("Tensor."):
        # Bound, so that methods and slot wrappers both drop self.
        fn = getattr(dlbridge.zeros(2), name.split(".", 1)[1])
        drop_self = True
    else:
        fn = getattr(dlbridge, name)
        drop_self = False
    assert runtime_parameters(fn) == stub_parameters(STUBS[name], drop_self)

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


def test_the_stub_types_set_sharing_pin_as_the_names_it_takes():
    # The stub's annotation of set_sharing_pin's kind, followed through
    # the module's aliases, names exactly the values the function accepts
    # (with None): no (device_type, device_id) tuple, which it refuses.
    tree = ast.parse(STUB.read_text())
    aliases = {
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }

    def literals(node):
        if isinstance(node, ast.Name):
            return literals(aliases[node.id]) if node.id in aliases else {node.id}
        if isinstance(node, ast.Subscript):
            head = node.value.id
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if head == "Literal":
                return {item.value for item in items}
            if head in ("Union", "Optional"):
                found = {None} if head == "Optional" else set()
                for item in items:
                    found |= literals(item)
                return found
            return {head}
        if isinstance(node, ast.Constant):
            return {node.value}
        raise AssertionError(ast.dump(node))

    kind = stub_functions()["set_sharing_pin"].args[0].annotation
    names = literals(kind)
    assert names == {None, "cuda_host", "rocm_host"}, names
    try:
        for name in names:
            dlbridge.set_sharing_pin(name)
    finally:
        dlbridge.set_sharing_pin(None)
    with pytest.raises(ValueError, match=r"kind is \(3, 0\)"):
        dlbridge.set_sharing_pin((3, 0))

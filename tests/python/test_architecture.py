"""docs/architecture.md matches the tree: every call between the folders of
src/ is in its table (and every row there is a call that exists), each
seam is declared in src/internal.h, the faces include only the public
headers, and every folder and command of the CLI is named."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text()
LAYERS = sorted(p.name for p in (ROOT / "src").iterdir() if p.is_dir())


def code_of(path):
    """The text of a C file without its comments and string literals."""
    text = re.sub(r"/\*.*?\*/", " ", path.read_text(), flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def defined_functions():
    """name -> the folder of src/ whose .c files define it."""
    found = {}
    for layer in LAYERS:
        for path in (ROOT / "src" / layer).glob("*.c"):
            for m in re.finditer(r"^[A-Za-z][\w \t\*]*?\b(dlb_\w+)\s*\([^;{]*\)\s*\{",
                                 code_of(path), re.M):
                found[m.group(1)] = layer
    return found


def calls_between_folders():
    """(from, to) for every folder of src/ that calls a function defined in,
    or includes a header of, another."""
    where = defined_functions()
    edges = set()
    for layer in LAYERS:
        for path in list((ROOT / "src" / layer).glob("*.c")) + list(
                (ROOT / "src" / layer).glob("*.h")):
            raw = path.read_text()
            for inc in re.findall(r'#include "(\w+)/[\w.]+"', raw):
                if inc != layer and inc in LAYERS:
                    edges.add((layer, inc))
            for name in set(re.findall(r"\b(dlb_\w+)\s*\(", code_of(path))):
                if where.get(name, layer) != layer:
                    edges.add((layer, where[name]))
    return edges


def documented_calls():
    """(from, to, through) for each row of the doc's table of calls."""
    rows = re.findall(r"^\| `src/(\w+)/` \| `src/(\w+)/` \| (.*) \|$", DOC, re.M)
    return [(a, b, through) for a, b, through in rows]


def test_every_call_between_folders_is_documented_and_every_row_exists():
    rows = {(a, b) for a, b, _ in documented_calls() if a in LAYERS and b in LAYERS}
    assert calls_between_folders() == rows


def test_the_calls_table_names_every_folder_of_src():
    for layer in LAYERS:
        assert "`src/%s/`" % layer in DOC


def test_each_seam_is_declared_in_internal_h_or_public():
    internal = (ROOT / "src" / "internal.h").read_text()
    public = "".join(p.read_text() for p in (ROOT / "include" / "dlbridge").glob("*.h"))
    seams = [t for _, _, t in documented_calls() if t.startswith("seam:")]
    assert seams
    for through in seams:
        for name in re.findall(r"`(dlb_\w+)`", through):
            declared_in = internal if name.startswith("dlb__") else public
            assert re.search(r"\b%s\(" % name, declared_in), name


def test_seam_calls_go_only_where_the_doc_says():
    """A seam's functions are called only from the folders its row names."""
    where = defined_functions()
    allowed = {}
    for a, b, through in documented_calls():
        if through.startswith("seam:"):
            for name in re.findall(r"`(dlb_\w+)`", through):
                assert where.get(name) == b, name
                allowed.setdefault(name, {b}).add(a)
    for layer in LAYERS:
        for path in (ROOT / "src" / layer).glob("*.c"):
            for name in set(re.findall(r"\b(dlb_\w+)\s*\(", code_of(path))):
                if name in allowed:
                    assert layer in allowed[name], (path.name, name)


def test_the_faces_include_only_public_headers():
    public = {"dlbridge.h", "dlbridge_capi.h"}
    for face in ["python/src", "tools", "bench", "examples", "examples/capi_ext"]:
        folder = ROOT / face
        local = {p.name for p in folder.glob("*.h")}
        for path in list(folder.glob("*.c")) + list(folder.glob("*.h")):
            for inc in re.findall(r'#include "([^"]+)"', path.read_text()):
                assert inc in public | local, (face, path.name, inc)


def test_every_folder_is_named():
    """Folders two levels deep at most, leaving out what the build, the
    benchmarks and Python make (and hidden ones)."""
    def made(name):
        return (name.startswith((".", "build")) or name.endswith(".egg-info")
                or name in ("__pycache__", "results", "dist"))
    top = [p for p in ROOT.iterdir() if p.is_dir() and not made(p.name)]
    folders = top + [q for p in top for q in p.iterdir() if q.is_dir() and not made(q.name)]
    assert len(folders) > 10
    for path in folders:
        rel = path.relative_to(ROOT).as_posix()
        assert rel + "/" in DOC, rel


def test_every_source_file_is_named():
    """Each file of src/, tools/, bench/ and python/ (build files and what
    Python writes left out), by its name or its path."""
    files = [p for folder in ("src", "tools", "bench", "python")
             for p in (ROOT / folder).rglob("*")
             if p.is_file() and p.name != "meson.build" and "__pycache__" not in p.parts]
    assert len(files) > 50
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        assert "`%s`" % path.name in DOC or rel in DOC, rel


def test_every_command_of_the_cli_is_named():
    text = "".join(p.read_text() for p in (ROOT / "tools").glob("*.c"))
    commands = set(re.findall(r'const cli_cmd cli_\w+ = \{\s*"([a-z][a-z-]*)"', text))
    assert commands
    row = next(line for line in DOC.splitlines() if line.startswith("| `tools/` |"))
    for command in commands:
        assert "`%s" % command in row, command

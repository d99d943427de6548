#!/usr/bin/env python3
"""check_docs.py --build BUILD_DIR --python PYTHON [--reference-only]

The documentation is true:
- the C API reference builds from the header comments with Doxygen and no
  warning (docs/Doxyfile; written to BUILD_DIR/docs/html), and every
  DLB_API function of the headers is in it with a description;
- every ```c block of README.md and docs/*.md compiles and runs against the
  build (a block without main() runs as main's body, its #include lines
  first), except an excerpt, marked ```c from=PATH, which must appear
  verbatim in PATH (a file the test suite builds and runs); every ```python
  block runs with PYTHON, as a script (so multiprocessing's spawn finds its
  functions), against the emulated
  CUDA driver and HIP runtime of the build (tests/emu), so that blocks
  showing GPU memory run too;
- every line of a ```sh block that runs the dlbridge command
  (`dlbridge ...`, `python -m dlbridge ...`) runs with the build's command
  (PYTHON's for `python -m`), against the emulated runtimes, and exits 0;
  a .npy file it names is made first, and `dlbridge bench` gets --help
  appended, so its options are parsed but no benchmark runs;
- every test README.md and docs/ name (`test_...`) exists: a Python test
  function, or a C or shell test of that name under tests/;
- every name the Python module exports is in docs/python.md;
- README.md names every page of docs/.
Other shell lines are commands to type, not run here.
"""

import argparse
import glob
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg)


def doxygen(build):
    out = os.path.join(build, "docs")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    with open(os.path.join(ROOT, "docs", "Doxyfile")) as f:
        conf = f.read() + "\nOUTPUT_DIRECTORY = %s\n" % out
    r = subprocess.run(["doxygen", "-"], input=conf, text=True, cwd=ROOT,
                       capture_output=True)
    if r.returncode != 0 or r.stderr.strip():
        fail("doxygen (warnings are errors):\n" + r.stderr + r.stdout)
        return
    declared = set()
    for h in [os.path.join(ROOT, "include", "dlbridge.h")] + glob.glob(
            os.path.join(ROOT, "include", "dlbridge", "*.h")):
        with open(h) as f:
            declared |= set(re.findall(r"DLB_API[^(;]*?\b(dlb_\w+)\s*\(", f.read()))
    documented = set()
    for x in glob.glob(os.path.join(out, "xml", "*_8h.xml")):
        for m in ET.parse(x).iter("memberdef"):
            if m.get("kind") != "function":
                continue
            text = "".join(m.find("briefdescription").itertext()) + "".join(
                m.find("detaileddescription").itertext())
            if text.strip():
                documented.add(m.findtext("name"))
    if not declared:
        fail("no DLB_API function found in the headers")
    for name in sorted(declared - documented):
        fail("the C API reference lacks a description of %s" % name)
    print("doxygen: %d functions documented" % len(declared & documented))


def blocks(path):
    with open(path) as f:
        text = f.read()
    for m in re.finditer(r"^```(\w+)([^\n]*)\n(.*?)^```", text, re.S | re.M):
        line = text.count("\n", 0, m.start()) + 1
        source = re.match(r"\s*from=(\S+)\s*$", m.group(2))
        yield (m.group(1), m.group(3), "%s:%d" % (os.path.relpath(path, ROOT), line),
               source.group(1) if source else None)


def c_program(code):
    if re.search(r"\bmain\s*\(", code):
        return code
    lines = code.splitlines()
    head = [l for l in lines if l.startswith("#include")]
    body = [l for l in lines if not l.startswith("#include")]
    return "\n".join(["#include <stdio.h>"] + head + ["int main(void) {"] + body
                     + ["return 0;", "}", ""])


def emulated_env(build):
    emu = os.path.join(build, "tests", "emu")
    return dict(os.environ, OPENBLAS_NUM_THREADS="1",
                DLBRIDGE_CUDA_LIBRARY=os.path.join(emu, "libcuda.so.1"),
                DLBRIDGE_HIP_LIBRARY=os.path.join(emu, "libamdhip64.so.6"))


def write_npy(path):
    """A 2 x 3 float32 .npy file, as NumPy writes it."""
    text = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
    text += b" " * (128 - 10 - len(text) - 1) + b"\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + bytes(24))


def run_commands(build, python, tmp):
    """The dlbridge command lines of the shell blocks, run from tmp."""
    tool = os.path.join(build, "tools", "dlbridge")
    env = emulated_env(build)
    count = 0
    docs = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    for doc in docs:
        for lang, code, where, _ in blocks(doc):
            if lang != "sh":
                continue
            path, first = where.rsplit(":", 1)
            for i, line in enumerate(code.splitlines()):
                if not re.match(r"(dlbridge|python -m dlbridge)(\s|$)", line):
                    continue
                words = shlex.split(line, comments=True)
                if words[0] == "dlbridge":
                    head, args = [tool], words[1:]
                else:
                    head, args = [python, "-m", "dlbridge"], words[3:]
                if args[:1] == ["bench"]:
                    args.append("--help")
                for w in args:
                    if w.endswith(".npy") and not os.path.exists(os.path.join(tmp, w)):
                        write_npy(os.path.join(tmp, w))
                r = subprocess.run(head + args, capture_output=True, text=True, env=env,
                                   timeout=60, cwd=tmp)
                if r.returncode != 0:
                    fail("%s:%d: `%s` exits %d:\n%s%s" % (
                        path, int(first) + 1 + i, " ".join(words), r.returncode,
                        r.stdout, r.stderr))
                count += 1
    print("commands: %d dlbridge command lines ran" % count)


def run_snippets(build, python, tmp):
    env = emulated_env(build)
    counts = {"c": 0, "python": 0, "excerpt": 0}
    docs = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    for doc in docs:
        for lang, code, where, source in blocks(doc):
            if source is not None:
                path = os.path.join(ROOT, source)
                if not os.path.isfile(path):
                    fail("%s: the excerpt's source %s does not exist" % (where, source))
                elif code not in open(path).read():
                    fail("%s: the excerpt is not in %s as shown" % (where, source))
                counts["excerpt"] += 1
            elif lang == "c":
                src = os.path.join(tmp, "snippet.c")
                exe = os.path.join(tmp, "snippet")
                with open(src, "w") as f:
                    f.write(c_program(code))
                r = subprocess.run(
                    ["cc", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Werror", "-Wno-unused-variable",
                     "-I" + os.path.join(ROOT, "include"), "-I" + os.path.join(build, "include"),
                     src, os.path.join(build, "src", "libdlbridge.a"), "-lpthread", "-ldl",
                     "-lm", "-o", exe], capture_output=True, text=True)
                if r.returncode == 0:
                    r = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=60)
                if r.returncode != 0:
                    fail("%s: the C block fails:\n%s%s" % (where, r.stdout, r.stderr))
                counts["c"] += 1
            elif lang == "python":
                script = os.path.join(tmp, "snippet.py")
                with open(script, "w") as f:
                    f.write(code)
                r = subprocess.run([python, script], capture_output=True, text=True,
                                   env=env, timeout=120, cwd=tmp)
                if r.returncode != 0:
                    fail("%s: the Python block fails:\n%s%s" % (where, r.stdout, r.stderr))
                counts["python"] += 1
            elif lang not in ("sh", "text", "console"):
                fail("%s: a ```%s block, which nothing checks" % (where, lang))
    print("snippets: %d C and %d Python blocks ran, %d excerpts found in their sources"
          % (counts["c"], counts["python"], counts["excerpt"]))


def python_names(python):
    code = ("import dlbridge, json; print(json.dumps(dlbridge.__all__ + "
            "[n for n in dir(dlbridge.Tensor) if not n.startswith('_')]))")
    r = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if r.returncode != 0:
        fail("cannot import dlbridge with %s:\n%s" % (python, r.stderr))
        return
    import json
    with open(os.path.join(ROOT, "docs", "python.md")) as f:
        doc = f.read()
    names = json.loads(r.stdout)
    for n in names:
        if not re.search(r"\b%s\b" % re.escape(n), doc):
            fail("docs/python.md does not mention %s" % n)
    print("python: %d public names in docs/python.md" % len(names))


def tests_named_exist():
    sources = ""
    for path in glob.glob(os.path.join(ROOT, "tests", "**", "*"), recursive=True):
        if path.endswith((".py", ".c", ".h", ".sh", "meson.build")) and os.path.isfile(path):
            with open(path, errors="replace") as f:
                sources += f.read() + "\n"
    docs = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    count = 0
    for doc in docs:
        with open(doc) as f:
            text = f.read()
        for m in re.finditer(r"`(test_[a-z0-9_]+)`", text):
            count += 1
            if not re.search(r"\b%s\b" % m.group(1), sources):
                fail("%s:%d: no test is named %s" % (os.path.relpath(doc, ROOT),
                                                     text.count("\n", 0, m.start()) + 1,
                                                     m.group(1)))
    print("tests: %d names of tests found under tests/" % count)


def readme_names_every_page():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    pages = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [
        os.path.join(ROOT, "docs", "dlbridge.1")]
    for page in pages:
        name = os.path.relpath(page, ROOT)
        if "`%s`" % name not in readme:
            fail("README.md's documentation list lacks %s" % name)
    print("readme: names %d pages of docs/" % len(pages))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--reference-only", action="store_true",
                    help="only build and check the C API reference")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    python = os.path.abspath(args.python) if os.sep in args.python else args.python
    doxygen(build)
    if args.reference_only:
        print("docs: %d failures; the reference is in %s" % (
            len(failures), os.path.join(build, "docs", "html", "index.html")))
        return 1 if failures else 0
    with tempfile.TemporaryDirectory() as tmp:
        run_snippets(build, python, tmp)
    with tempfile.TemporaryDirectory() as tmp:
        run_commands(build, python, tmp)
    python_names(python)
    tests_named_exist()
    readme_names_every_page()
    print("docs: %d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""pyproject.toml's `test` extra names what scripts/setup.sh installs for
the Python tests, with the same versions, so `pip install .[test]` sets up
what `make check` runs against."""

import pathlib
import re
import shlex

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11 on

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD_TOOLS = {"meson", "meson-python", "ninja"}


def setup_sh_packages():
    """The requirements of setup.sh's pip_install lines, build tools left
    out."""
    found = set()
    for line in (ROOT / "scripts" / "setup.sh").read_text().splitlines():
        if not re.match(r"\s*pip_install\s", line):
            continue
        words = shlex.split(line.strip(), comments=True)
        for word in words[1:]:
            if word.startswith("-"):
                continue
            name = re.split(r"[<>=!\[]", word, maxsplit=1)[0]
            if name not in BUILD_TOOLS:
                found.add(word)
    return found


def test_the_test_extra_is_what_setup_installs():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]["test"]
    installed = setup_sh_packages()
    assert "torch==2.13.0" in installed and "hypothesis>=6,<7" in installed
    assert set(extra) == installed

"""The sharing examples run as they are shown in docs/sharing.md."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_share_mp import emulated_cuda  # noqa: F401 (a fixture)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(code, **env):
    r = subprocess.run([sys.executable, "-c", code], cwd=EXAMPLES, capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, **env))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_four_samplers_read_one_shared_graph():
    out = run_example("import share_graph; share_graph.main(5000)")
    assert "4 samplers, 16 batches over one shared graph of 5000 nodes" in out
    assert "pinned as nothing" in out


def test_four_samplers_pin_the_graph_when_a_gpu_runtime_exists(emulated_cuda):  # noqa: F811
    out = run_example("import share_graph; share_graph.main(5000)", DLBRIDGE_CUDA_LIBRARY=emulated_cuda)
    assert "pinned as cuda_host: ok" in out


def test_the_loader_ring_hands_batches_over_in_place(emulated_cuda):  # noqa: F811
    pytest.importorskip("torch")
    code = (
        "import share_loader_ring as r\n"
        "ring, pins = r.train(batches=12, batch=4, features=8, method='fork', pin_kind='cuda_host')\n"
        "assert [p.device for p in pins] == ['cuda_host'] * 5 and all(t.is_shared for t in ring)\n"
        "print('ok')\n"
    )
    assert run_example(code, DLBRIDGE_CUDA_LIBRARY=emulated_cuda).strip().endswith("ok")


def test_the_python_snippets_of_docs_sharing_run(tmp_path):
    text = (EXAMPLES.parent / "docs" / "sharing.md").read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```python\n")[1:]]
    assert blocks, "docs/sharing.md shows Python code"
    for k, code in enumerate(blocks):
        script = tmp_path / f"snippet{k}.py"
        script.write_text(code)
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"snippet {k}:\n{code}\n{r.stdout}{r.stderr}"

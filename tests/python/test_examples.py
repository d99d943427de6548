"""The Python tour that `make demo` runs (examples/tour.py) says what it
shows."""

import subprocess
import sys
from pathlib import Path

TOUR = Path(__file__).resolve().parents[2] / "examples" / "tour.py"


def test_tour_shows_shared_memory_and_a_mapped_file():
    r = subprocess.run([sys.executable, str(TOUR)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "from NumPy:        (3, 4) float32 on cpu, same memory: True" in out
    assert "NumPy writes, dlbridge reads: t[0, 0] = 42.0" in out
    assert "strides (4, 2), [[42.0, 2.0], [4.0, 6.0], [8.0, 10.0]]" in out
    assert "to PyTorch:        (3, 2), same memory: True" in out
    assert "load_npy (mapped): (2, 3) int16, strides (1, 2), [[0, 1, 2], [3, 4, 5]]" in out
    assert "\ncuda: " in out and "\nrocm: " in out

"""The peers' hazards that docs/peers.md states, checked in child processes
(they crash the process), and the safe paths it offers."""

import signal
import subprocess
import sys
import textwrap

from support import SANITIZED, needs_torch


def child(code, tmp_path):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)


@needs_torch
def test_torch_aborts_on_negative_strides_and_a_copy_is_safe(tmp_path):
    for source in ("dlbridge.from_dlpack(np.arange(6, dtype=np.float32))[::-1]",
                   "np.arange(6, dtype=np.float32)[::-1]"):
        r = child(f"""
            import numpy as np, torch, dlbridge
            torch.from_dlpack({source})
            print("survived")
            """, tmp_path)
        assert r.returncode == -signal.SIGABRT, (r.returncode, r.stderr[-500:])
        assert "Storage size calculation overflowed" in r.stderr
        assert "survived" not in r.stdout
    r = child("""
        import numpy as np, torch, dlbridge
        t = dlbridge.from_dlpack(np.arange(6, dtype=np.float32))[::-1]
        print(torch.from_dlpack(t.copy()).tolist())
        """, tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "[5.0, 4.0, 3.0, 2.0, 1.0, 0.0]"


@needs_torch
def test_torch_ignores_read_only_and_writes_to_a_mapping_crash(tmp_path):
    r = child("""
        import numpy as np, torch, dlbridge
        np.save("w.npy", np.arange(4, dtype=np.float32))
        t = dlbridge.load_npy("w.npy")
        assert not np.from_dlpack(t).flags.writeable
        u = torch.from_dlpack(t)
        print("imported writable", flush=True)
        u[0] = 5.0
        print("survived", flush=True)
        """, tmp_path)
    assert r.stdout.splitlines() == ["imported writable"], r.stdout + r.stderr[-500:]
    if SANITIZED:
        # AddressSanitizer catches the fault, reports it and aborts.
        assert r.returncode == -signal.SIGABRT and "SEGV" in r.stderr
    else:
        assert r.returncode == -signal.SIGSEGV
    r = child("""
        import numpy as np, torch, dlbridge
        np.save("w.npy", np.arange(4, dtype=np.float32))
        w = torch.from_dlpack(dlbridge.load_npy("w.npy", mmap=False))
        w[0] = 5.0
        c = torch.from_dlpack(dlbridge.load_npy("w.npy")).clone()
        c[1] = 7.0
        print(w.tolist(), c.tolist(), np.load("w.npy").tolist())
        """, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[5.0, 1.0, 2.0, 3.0] [0.0, 7.0, 2.0, 3.0] [0.0, 1.0, 2.0, 3.0]"



@needs_torch
def test_torch_exports_negated_views_negated():
    import numpy as np
    import pytest
    import torch
    import dlbridge
    v = torch.tensor([1 + 2j, 3 - 4j]).conj().imag
    assert v.is_neg() and v.tolist() == [-2.0, 4.0]
    # Both of PyTorch's exports hand over the memory, which holds the
    # negatives: NumPy and PyTorch itself read the wrong signs.
    assert np.from_dlpack(v).tolist() == [2.0, -4.0]
    assert torch.from_dlpack(v).tolist() == [2.0, -4.0]
    with pytest.raises(RuntimeError, match="negative bit"):
        v.numpy()
    with pytest.raises(BufferError, match="negated view"):
        dlbridge.from_dlpack(v)
    assert dlbridge.from_dlpack(v.resolve_neg()).tolist() == [-2.0, 4.0]

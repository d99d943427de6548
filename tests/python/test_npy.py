"""load_npy: .npy files written by NumPy mapped without a copy or read into
a new tensor, pinned on the emulated runtimes; refused files; runtimes() and
python -m dlbridge."""

import os
import subprocess
import sys

import numpy as np
import pytest

import dlbridge
from test_gpu_emulated import emulators, run  # noqa: F401 (a fixture)

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128]


def save(path, a, version=None):
    with open(path, "wb") as f:
        np.lib.format.write_array(f, a, version=version, allow_pickle=False)
    return str(path)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("order", ["C", "F"])
def test_every_dtype_and_order_maps(tmp_path, dtype, order):
    a = np.asarray(np.arange(24).reshape(2, 3, 4) % 7, dtype=dtype, order=order)
    t = dlbridge.load_npy(save(tmp_path / "a.npy", a))
    assert t.shape == a.shape and t.dtype == np.dtype(dtype).name
    b = np.from_dlpack(t)
    assert b.strides == a.strides
    assert not b.flags.writeable
    np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_format_versions(tmp_path, version):
    a = np.linspace(0, 1, 10, dtype=np.float64)
    t = dlbridge.load_npy(save(tmp_path / "v.npy", a, version=version))
    np.testing.assert_array_equal(np.from_dlpack(t), a)


def test_scalar_empty_and_pathlike(tmp_path):
    p = tmp_path / "s.npy"
    np.save(p, np.float32(2.5))
    t = dlbridge.load_npy(p)
    assert t.shape == () and float(t) == 2.5
    np.save(p, np.zeros((0, 5), dtype=np.int16))
    assert dlbridge.load_npy(os.fsencode(p)).shape == (0, 5)


@pytest.mark.parametrize("mmap", [None, 0, 1, "no", np.False_], ids=repr)
def test_mmap_is_true_or_false_not_any_truth(tmp_path, mmap):
    # Read for its truth, mmap="no" mapped the file and None read a copy.
    p = str(tmp_path / "a.npy")
    np.save(p, np.arange(3))
    with pytest.raises(TypeError, match=r"load_npy\(\): mmap must be True or False, not \S*" + type(mmap).__name__):
        dlbridge.load_npy(p, mmap=mmap)
    assert dlbridge.load_npy(p, mmap=True).readonly
    assert not dlbridge.load_npy(p, mmap=False).readonly


def test_mapping_shares_the_file_and_a_read_copies(tmp_path):
    a = np.arange(1024, dtype=np.int32)
    p = save(tmp_path / "m.npy", a)
    mapped = dlbridge.load_npy(p)
    read = dlbridge.load_npy(p, mmap=False)
    assert read.tolist() == a.tolist()
    with open(p, "r+b") as f:
        f.seek(-4, os.SEEK_END)
        f.write(np.int32(-7).tobytes())
    # The mapping reads the file's pages; the read copy is its own memory.
    assert int(mapped[1023]) == -7
    assert int(read[1023]) == 1023
    r = np.from_dlpack(read)
    assert r.flags.writeable
    r[0] = 5
    assert int(read[0]) == 5
    # The mapping outlives the file and every other reference.
    os.remove(p)
    view = mapped[1000:]
    del mapped
    assert int(view[23]) == -7


def test_refused_files_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError):
        dlbridge.load_npy(tmp_path / "missing.npy")
    cases = [
        (np.arange(3, dtype=">f4"), "big-endian"),
        (np.array([1, "x"], dtype=object), "Python objects"),
        (np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]), "structured"),
        (np.array(["ab"]), "Unicode"),
        (np.array(["2020-01-01"], dtype="datetime64[D]"), "dates"),
    ]
    for i, (a, words) in enumerate(cases):
        p = tmp_path / f"bad{i}.npy"
        with open(p, "wb") as f:
            np.lib.format.write_array(f, a, allow_pickle=True)
        with pytest.raises(ValueError, match=words):
            dlbridge.load_npy(p)
    p = tmp_path / "short.npy"
    np.save(p, np.arange(100, dtype=np.float64))
    data = p.read_bytes()
    p.write_bytes(data[:-8])
    with pytest.raises(ValueError, match="needs 800 bytes of data but the file holds 792"):
        dlbridge.load_npy(p)
    p.write_bytes(b"\x93NUMPY\x09\x00" + data[8:])
    with pytest.raises(ValueError, match="version 9.0"):
        dlbridge.load_npy(p)
    with pytest.raises(ValueError, match="pin is 'cuda'"):
        dlbridge.load_npy(tmp_path / "bad0.npy", pin="cuda")
    with pytest.raises(TypeError):
        dlbridge.load_npy(3.5)


@pytest.mark.parametrize("pin", [1, 0, 1.5, b"cuda_host", (3, 0), object()], ids=repr)
def test_a_pin_of_another_type_is_a_type_error(tmp_path, pin):
    # As mmap is: pin is a bool or a name, and anything else is the wrong
    # type, not an unknown name (nor read for its truth).
    p = tmp_path / "a.npy"
    np.save(p, np.arange(3))
    with pytest.raises(TypeError, match=r"^load_npy\(\): pin must be False, True, 'cuda_host' or "
                       r"'rocm_host', not " + type(pin).__name__ + "$"):
        dlbridge.load_npy(p, pin=pin)


def test_pin_without_a_runtime_says_why(tmp_path):
    p = save(tmp_path / "p.npy", np.ones(4, dtype=np.float32))
    r = subprocess.run(
        [sys.executable, "-c", "import sys, dlbridge\n"
         "try:\n    dlbridge.load_npy(sys.argv[1], pin=True)\n"
         "except RuntimeError as e:\n    print('refused', e)\n", p],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, DLBRIDGE_CUDA_LIBRARY="/nonexistent/libcuda.so.1",
                 DLBRIDGE_HIP_LIBRARY="/nonexistent/libamdhip64.so.6"))
    assert r.returncode == 0, r.stderr
    assert "refused load_npy(): " in r.stdout and "/nonexistent/libcuda.so.1" in r.stdout


def test_pin_on_emulated_runtimes(emulators, tmp_path):  # noqa: F811
    p = save(tmp_path / "p.npy", np.arange(6, dtype=np.float32).reshape(2, 3), version=(2, 0))
    run(emulators, f"""
        cuda, hip = runtime("DLBRIDGE_CUDA_LIBRARY"), runtime("DLBRIDGE_HIP_LIBRARY")
        t = dlbridge.load_npy({p!r}, pin=True)
        assert t.device == "cuda_host" and dlbridge.device_of(t) == "cuda_host"
        assert cuda.emu_live_kind(LIVE_REGISTERED) == 1
        assert np.from_dlpack(t).tolist() == [[0, 1, 2], [3, 4, 5]]
        del t
        gc.collect()
        assert cuda.emu_live_kind(LIVE_REGISTERED) == 0
        r = dlbridge.load_npy({p!r}, mmap=False, pin="rocm_host")
        assert r.device == "rocm_host" and hip.emu_live_kind(LIVE_REGISTERED) == 1
        np.from_dlpack(r)[0, 0] = 9
        assert r.tolist()[0] == [9, 1, 2]
        """)


def test_pin_false_or_none_leaves_the_memory_unpinned(tmp_path):
    p = save(tmp_path / "p.npy", np.arange(3, dtype=np.int8))
    for pin in (False, None):
        for mmap in (True, False):
            t = dlbridge.load_npy(p, mmap=mmap, pin=pin)
            assert t.device == "cpu" and t.tolist() == [0, 1, 2]


def test_a_read_copy_that_cannot_be_made_is_not_pinned(emulators, tmp_path):  # noqa: F811
    # Each core allocation of a pinned read failing in turn: MemoryError,
    # with no pinning of the copy that was not made, then the pinned copy.
    p = save(tmp_path / "p.npy", np.arange(4, dtype=np.int16))
    run(emulators, f"""
        from dlbridge import _dlbridge as core
        cuda = runtime("DLBRIDGE_CUDA_LIBRARY")
        core._set_allocator(h.oom_allocator())
        for n in range(1, 100):
            h.oom_arm(n, 1)
            try:
                t = dlbridge.load_npy({p!r}, mmap=False, pin="cuda_host")
            except MemoryError:
                t = None
            finally:
                counted, failed = h.oom_disarm()
            if not failed:
                break
            assert t is None, n
        assert n > 2 and t.device == "cuda_host" and t.tolist() == [0, 1, 2, 3]
        del t
        gc.collect()
        core._set_allocator(None)
        assert cuda.emu_live_kind(LIVE_REGISTERED) == 0
    """)


def test_runtimes_without_and_with_emulators(emulators):  # noqa: F811
    r = subprocess.run(
        [sys.executable, "-c", "import dlbridge; print(repr(dlbridge.runtimes()))"],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, DLBRIDGE_CUDA_LIBRARY="/nonexistent/libcuda.so.1",
                 DLBRIDGE_HIP_LIBRARY="/nonexistent/libamdhip64.so.6"))
    got = eval(r.stdout)
    assert [x["name"] for x in got] == ["cuda", "rocm"]
    assert got[0]["available"] is False and got[0]["status"] == "DLB_E_NO_RUNTIME"
    assert "/nonexistent/libcuda.so.1" in got[0]["error"] and got[0]["devices"] == []
    assert got[1]["version"] is None and got[1]["library"] is None
    run(emulators, """
        cuda, rocm = dlbridge.runtimes()
        assert cuda["available"] and cuda["error"] is None and cuda["version"] == 13000
        assert cuda["library"] == os.environ["DLBRIDGE_CUDA_LIBRARY"]
        assert cuda["devices"][1] == {"device": "cuda:1", "name": "Emulated CUDA GPU 1",
                                      "total_memory": 1 << 30, "managed_memory": True,
                                      "concurrent_managed": True, "host_register": True,
                                      "ipc": True}
        assert rocm["status"] == "DLB_OK" and len(rocm["devices"]) == 2
        assert rocm["devices"][0]["host_register"] is None
        assert rocm["devices"][0]["concurrent_managed"] is False
        """)


def test_runtimes_when_python_allocations_fail():
    # Each allocation (raw, mem and object domains) failing in turn:
    # MemoryError, never a list with a hole in it, then the full answer.
    from support import helper

    for n in range(1, 500):
        helper.oom_arm(n, 2 | 4 | 8)
        try:
            answer = dlbridge.runtimes()
        except MemoryError:
            answer = None
        finally:
            counted, failed = helper.oom_disarm()
        if not failed:
            break
        assert answer is None, n
    assert n > 2 and [r["name"] for r in answer] == ["cuda", "rocm"]


def test_python_m_dlbridge_runs_the_command():
    from dlbridge.__main__ import find_command
    if find_command() is None:
        pytest.skip("the dlbridge command is not installed beside this Python")
    r = subprocess.run([sys.executable, "-m", "dlbridge"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.startswith(f"dlbridge {dlbridge.__version__} ")
    r = subprocess.run([sys.executable, "-m", "dlbridge", "version"], capture_output=True,
                       text=True, timeout=60)
    assert r.stdout.strip() == dlbridge.__version__
    r = subprocess.run([sys.executable, "-m", "dlbridge", "frob"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "unknown command 'frob'" in r.stderr


def test_python_m_dlbridge_without_the_command_names_where_it_looked(tmp_path, monkeypatch, capsys):
    # The scripts folder is not always beside the interpreter (a system
    # Python's is /usr/local/bin): the message names the folder searched.
    import sysconfig

    from dlbridge.__main__ import main
    scripts = tmp_path / "scripts"
    monkeypatch.setattr(sysconfig, "get_path", lambda name: str(scripts))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main([]) == 2
    assert capsys.readouterr().err == (f"python -m dlbridge: the dlbridge command is not installed in {scripts} "
                                       "(this Python's scripts) nor on PATH\n")


@pytest.mark.parametrize("mmap", [True, False])
def test_load_npy_refuses_a_fifo_at_once(tmp_path, mmap):
    # With no writer, opening a FIFO would wait for one, and with the GIL
    # held no thread of the process could ever be it. Run apart, so that
    # a wait fails the test instead of hanging the suite.
    p = tmp_path / "f.npy"
    os.mkfifo(p)
    code = ("import dlbridge, sys\n"
            f"try: dlbridge.load_npy(sys.argv[1], mmap={mmap})\n"
            "except ValueError as e: print(e)\n")
    r = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, timeout=60)
    assert "is not a regular file" in r.stdout, r.stdout + r.stderr


def test_pinning_a_runtime_refuses_is_a_runtime_error(emulators, tmp_path):  # noqa: F811
    # The machine's answer, not the file's: RuntimeError when the runtime
    # has no GPU (for a mapping and for a read) or its registration fails.
    p = save(tmp_path / "p.npy", np.arange(4, dtype=np.float32))
    run(emulators, f"""
        for mmap in (True, False):
            raises(RuntimeError, lambda: dlbridge.load_npy({p!r}, mmap=mmap, pin="cuda_host"),
                   "load_npy(): ", "no GPU")
        """, EMU_CUDA_DEVICES="0")
    run(emulators, f"""
        cuda = runtime("DLBRIDGE_CUDA_LIBRARY")
        assert dlbridge.runtimes()[0]["available"]
        # The read copy is registered once (a mapping may retry another way).
        cuda.emu_fail(b"cuMemHostRegister_v2", 1, 1)
        raises(RuntimeError, lambda: dlbridge.load_npy({p!r}, mmap=False, pin="cuda_host"),
               "load_npy(): ", "cuMemHostRegister_v2")
        # Only the copy is registered, not the mapping it is read from.
        before = cuda.emu_calls(b"cuMemHostRegister_v2")
        assert dlbridge.load_npy({p!r}, mmap=False, pin="cuda_host").tolist() == [0, 1, 2, 3]
        assert cuda.emu_calls(b"cuMemHostRegister_v2") == before + 1
        """)


def test_runtimes_reports_a_gpu_whose_query_fails(emulators):  # noqa: F811
    # The GPU is listed with the driver's error in place of its fields.
    run(emulators, """
        cuda = runtime("DLBRIDGE_CUDA_LIBRARY")
        assert dlbridge.runtimes()[0]["available"]
        cuda.emu_fail(b"cuDeviceGetName", 1, 1)
        gpu = dlbridge.runtimes()[0]["devices"][0]
        assert set(gpu) == {"device", "error"} and gpu["device"] == "cuda:0", gpu
        assert "cuDeviceGetName(cuda:0)" in gpu["error"]
        assert "name" in dlbridge.runtimes()[0]["devices"][0]
        """)

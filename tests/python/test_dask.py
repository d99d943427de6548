"""Beyond one machine with Dask distributed: dlbridge tensors scattered to a
LocalCluster's two worker processes, changed there and gathered back
(examples/distributed/dask_exchange.py), their bytes carried as pickle
protocol 5 out-of-band buffers."""

import ctypes
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from support import dlbridge, np

distributed = pytest.importorskip("distributed")
import dask  # noqa: E402 (after the skip)
from distributed.protocol import deserialize, serialize  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distributed" / "dask_exchange.py"
sys.path.insert(0, str(EXAMPLE.parent))
import dask_exchange  # noqa: E402

# A loaded two-core machine starts worker processes slowly.
TIMEOUTS = {"distributed.comm.timeouts.connect": "120s", "distributed.comm.timeouts.tcp": "240s",
            "distributed.deploy.lost-worker-timeout": "120s"}


@pytest.fixture(scope="module")
def client():
    with dask.config.set(TIMEOUTS):
        with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                      dashboard_address=None, timeout=180) as cluster:
            with distributed.Client(cluster, timeout=180) as c:
                c.wait_for_workers(2, timeout=180)
                yield c


def address_of(buffer):
    """The address of a buffer's first byte, read-only ones included."""
    return np.frombuffer(buffer, dtype=np.uint8).ctypes.data


def test_pickle_5_ships_the_tensors_own_memory_out_of_band():
    t = dlbridge.from_dlpack(np.arange(1 << 16, dtype=np.float32))
    buffers = []
    stream = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1 and isinstance(buffers[0], pickle.PickleBuffer)
    raw = buffers[0].raw()
    assert raw.nbytes == t.nbytes and address_of(raw) == t.data_ptr
    # Only the metadata is in the stream; without a buffer_callback the
    # same pickle holds the data in band.
    assert len(stream) < 200 < t.nbytes < len(pickle.dumps(t, protocol=5))


def test_dask_serializes_a_tensor_as_a_frame_of_its_own_memory():
    a = np.arange(1 << 16, dtype=np.int32)
    t = dlbridge.from_dlpack(a)
    header, frames = serialize(t)
    assert header["serializer"] == "pickle" and len(frames) == 2
    meta, data = frames
    assert len(meta) < 200 and isinstance(data, memoryview)
    assert data.nbytes == t.nbytes and address_of(data) == t.data_ptr
    # The receiving side maps the frame it is given instead of copying it.
    back = deserialize(header, frames)
    assert back.data_ptr == t.data_ptr and back.tolist()[-3:] == [65533, 65534, 65535]
    del back
    ro = np.arange(64, dtype=np.uint8)
    ro.flags.writeable = False
    header, frames = serialize(dlbridge.from_dlpack(ro))
    assert frames[1].readonly and header["writeable"] == (False,)
    assert deserialize(header, frames).readonly
    # A strided view goes as one compact copy, still out of band.
    header, frames = serialize(t[::-2])
    assert len(frames) == 2 and frames[1].nbytes == t.nbytes // 2 and len(frames[0]) < 200
    assert np.frombuffer(frames[1], dtype=np.int32).tolist() == a[::-2].tolist()


def test_the_example_runs_its_own_cluster():
    # Before the module's cluster starts: one cluster at a time.
    r = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=300,
                       cwd=EXAMPLE.parent, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(dask_exchange.tensors()), r.stdout
    assert all(line.endswith("every byte back: True") for line in lines), r.stdout
    assert "uint8 read-only: worker saw uint8 (10,) read-only, every byte back: True" in lines


def check_every_byte(name, sent, back, seen):
    # The same change made here: for sub-byte dtypes a copy keeps only the
    # bits elements use, so the last byte's spare bits are compared too.
    want = dask_exchange.stored_bytes(dask_exchange.add_one(sent.copy())[0])
    assert dask_exchange.stored_bytes(back) == want, name
    if sent.dtype not in SUBBYTE:
        assert want == bytes((b + 1) & 0xFF for b in dask_exchange.stored_bytes(sent)), name
    assert (back.dtype, back.shape, back.device) == (sent.dtype, sent.shape, "cpu"), name
    assert (seen["dtype"], seen["shape"]) == (sent.dtype, sent.shape), name
    assert seen["readonly"] == sent.readonly, name


def test_workers_change_and_return_every_byte(client):
    pids = set(client.run(os.getpid).values())
    assert len(pids) == 2 and os.getpid() not in pids
    results = dask_exchange.run(client)
    assert set(results) == set(dask_exchange.tensors())
    for name, (sent, back, seen) in results.items():
        check_every_byte(name, sent, back, seen)
    assert {seen["pid"] for _, _, seen in results.values()} == pids
    sent, back, seen = results["uint8 read-only"]
    assert seen["readonly"] and seen["numpy_writeable"] is False and not back.readonly
    # By value: the worker's writes changed its copy, not the sender's
    # tensor, and a shared tensor arrives as an ordinary one.
    sent, back, seen = results["float64 shared"]
    assert sent.is_shared and seen["is_shared"] is False
    assert sent.tolist() == [[2.5] * 5] * 3
    sent, back, seen = results["float32"]
    assert sent.tolist()[0][:3] == [0.0, 1.0, 2.0] and back.data_ptr != sent.data_ptr


SUBBYTE = {"float6_e2m3fn", "float4_e2m1fn", "int4"}
DTYPES = ["int8", "uint16", "int32", "uint64", "float16", "float64", "complex64", "complex128",
          "float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float4_e2m1fn", "int4", "float32x4"]


def random_tensor(dtype, shape):
    t = dlbridge.empty(shape, dtype=dtype)
    data = os.urandom(t.nbytes)
    ctypes.memmove(t.data_ptr + t.byte_offset, data, len(data))
    return t


def test_every_dtype_and_layout_round_trips_through_the_workers(client, tmp_path):
    sent = [random_tensor(d, (3, 5)) for d in DTYPES]
    base = random_tensor("float32", (4, 5, 6))
    sent += [base.permute((2, 0, 1)), base[::-1, 1:, ::3], base[:, 5:, :], base[1:3, 2].T,
             dlbridge.full((3, 4), 1.0, dtype="bfloat16", shared=True).T, base[1, 2, 3]]
    # A mapped .npy file in Fortran order: read-only, column-major.
    np.save(tmp_path / "f.npy", np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4)))
    sent.append(dlbridge.load_npy(tmp_path / "f.npy"))
    assert sent[-1].readonly and sent[-1].strides == (1, 3)
    futures = client.scatter(sent)
    results = client.gather(client.map(dask_exchange.add_one, futures, pure=False))
    for k, (t, (back, seen)) in enumerate(zip(sent, results)):
        check_every_byte(f"tensor {k} ({t.dtype}, {t.shape}, {t.strides})", t, back, seen)

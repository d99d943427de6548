"""Beyond one machine: dlbridge tensors between two MPI ranks (mpi4py on
Open MPI), as examples/distributed/mpi_exchange.py shows them."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distributed" / "mpi_exchange.py"


def test_two_ranks_exchange_tensors_in_place():
    pytest.importorskip("mpi4py")
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("Open MPI's mpirun is not installed")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OPENBLAS_NUM_THREADS="1", OMPI_MCA_btl="self,vader",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    r = subprocess.run([mpirun, "-n", "2", sys.executable, str(EXAMPLE)], capture_output=True,
                       text=True, timeout=180, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["rank 0: sent (3, 4), got back [16.0, 18.0, 20.0, 22.0]",
                     "rank 1: received [0.0, 1.0, 2.0, 3.0], doubled and sent back"], r.stdout

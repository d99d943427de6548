"""Two MPI ranks exchange dlbridge tensors with mpi4py, through the buffer
protocol: MPI reads the sender's tensor and writes the receiver's in
place, with no copy on the host side. Run:

    mpirun -n 2 python examples/distributed/mpi_exchange.py

Rank 0 sends a 3 x 4 float32 tensor and receives it back doubled; rank 1
receives into a tensor it allocated, doubles it through NumPy (sharing the
memory) and sends it back. Rank 0 prints a line for each rank.
"""

import numpy as np
from mpi4py import MPI

import dlbridge

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
if comm.Get_size() != 2:
    raise SystemExit("run with 2 ranks")

if rank == 0:
    t = dlbridge.from_dlpack(np.arange(12, dtype=np.float32).reshape(3, 4))
    comm.Send(t, dest=1, tag=1)
    back = dlbridge.empty((3, 4), "float32")
    # MPI writes straight into the tensor's memory.
    assert MPI.buffer(back).address == np.from_dlpack(back).ctypes.data
    comm.Recv(back, source=1, tag=2)
    lines = comm.gather(f"rank 0: sent {t.shape}, got back {back.tolist()[2]}")
    print("\n".join(lines))
else:
    r = dlbridge.zeros((3, 4), "float32")
    comm.Recv(r, source=0, tag=1)
    first = r.tolist()[0]
    np.from_dlpack(r).__imul__(2)   # in place, in r's memory
    comm.Send(r, dest=0, tag=2)
    comm.gather(f"rank 1: received {first}, doubled and sent back")

"""mpi_style.py - the mpi4py-style API: a Communicator with buffer and object methods.

Capitalised methods (Allreduce, Bcast, ...) move arrays; lower-case ones
(bcast, allgather, send, ...) move any picklable Python object. Ranks are
ranks in the communicator the method is called on.

Run: python -m omniccl.run -n 4 examples/python/mpi_style.py
Output with 4 ranks, in any order:
    rank 0: Allreduce [16, 20]
    rank 1: Allreduce [16, 20]
    rank 2: Allreduce [16, 20]
    rank 3: Allreduce [16, 20]
    rank 0: bcast {'lr': 0.1, 'steps': 3}
    rank 1: bcast {'lr': 0.1, 'steps': 3}
    rank 2: bcast {'lr': 0.1, 'steps': 3}
    rank 3: bcast {'lr': 0.1, 'steps': 3}
    rank 0: split even, sum of ranks 2
    rank 1: split odd, sum of ranks 4
    rank 2: split even, sum of ranks 2
    rank 3: split odd, sum of ranks 4
    rank 0: recv 'hello from 3'
    rank 1: recv 'hello from 0'
    rank 2: recv 'hello from 1'
    rank 3: recv 'hello from 2'
    rank 0: gather [0, 1, 4, 9]
"""
import numpy as np
import omniccl
from omniccl import ReduceOp


def main():
    comm = omniccl.COMM_WORLD  # the default group, created from env:// on first use
    rank, size = comm.rank, comm.size

    data = np.array([2 * rank + 1, 2 * rank + 2], dtype=np.int64)
    total = np.empty_like(data)
    comm.Allreduce(data, total, op=ReduceOp.SUM)
    print(f"rank {rank}: Allreduce {total.tolist()}")

    config = comm.bcast({"lr": 0.1, "steps": 3} if rank == 0 else None, root=0)
    print(f"rank {rank}: bcast {config}")

    with comm.split(color=rank % 2, key=rank) as half:
        print(f"rank {rank}: split {'odd' if rank % 2 else 'even'}, sum of ranks {half.allreduce(rank)}")

    right, left = (rank + 1) % size, (rank - 1) % size
    if rank % 2 == 0:  # order the pairs: even ranks send first
        comm.send(f"hello from {rank}", dest=right)
        message = comm.recv(source=left)
    else:
        message = comm.recv(source=left)
        comm.send(f"hello from {rank}", dest=right)
    print(f"rank {rank}: recv {message!r}")

    squares = comm.gather(rank ** 2, root=0)
    if rank == 0:
        print(f"rank {rank}: gather {squares}")
    omniccl.destroy_process_group()


if __name__ == "__main__":
    main()

"""hello_all_reduce.py - the smallest OmniCCL program: an all_reduce across the ranks.

Rank r starts with [2r+1, 2r+2]: rank 0 holds [1, 2], rank 1 [3, 4], rank 2
[5, 6], rank 3 [7, 8]. all_reduce sums them in place, so every rank ends
with the same total.

Run: python -m omniccl.run -n 4 examples/python/hello_all_reduce.py
     (or torchrun --nproc-per-node 4, mpirun -n 4 -x MASTER_ADDR -x MASTER_PORT, srun)
Output with 4 ranks, in any order:
    rank 0: [16, 20]
    rank 1: [16, 20]
    rank 2: [16, 20]
    rank 3: [16, 20]
"""
import numpy as np
import omniccl as dist

dist.init_process_group()                    # env://: rank and size from the launcher
rank = dist.get_rank()
x = np.array([2 * rank + 1, 2 * rank + 2])   # rank 0: [1, 2], rank 1: [3, 4], ...
dist.all_reduce(x)                           # in place, ReduceOp.SUM by default
print(f"rank {rank}: {x.tolist()}")
dist.destroy_process_group()

"""tutorial.py - the classic torch.distributed tutorial programs, ported to OmniCCL.

Each rank r holds [2r+1, 2r+2] (rank 0: [1, 2], rank 1: [3, 4], rank 2:
[5, 6], rank 3: [7, 8]) and runs each collective in turn; results are
written into the arrays passed in, as with torch.distributed. Only the import
differs from a torch program (and numpy arrays stand in for tensors).

Run: python -m omniccl.run -n 4 examples/python/tutorial.py
Output with 4 ranks, in any order:
    rank 0: broadcast from 0 [1, 2]
    rank 1: broadcast from 0 [1, 2]
    rank 2: broadcast from 0 [1, 2]
    rank 3: broadcast from 0 [1, 2]
    rank 0: scatter [0, 0]
    rank 1: scatter [1, 1]
    rank 2: scatter [2, 2]
    rank 3: scatter [3, 3]
    rank 0: gather to 0 [[1, 2], [3, 4], [5, 6], [7, 8]]
    rank 0: reduce SUM to 3 [1, 2]
    rank 1: reduce SUM to 3 [3, 4]
    rank 2: reduce SUM to 3 [5, 6]
    rank 3: reduce SUM to 3 [16, 20]
    rank 0: all_gather [[1, 2], [3, 4], [5, 6], [7, 8]]
    rank 1: all_gather [[1, 2], [3, 4], [5, 6], [7, 8]]
    rank 2: all_gather [[1, 2], [3, 4], [5, 6], [7, 8]]
    rank 3: all_gather [[1, 2], [3, 4], [5, 6], [7, 8]]
    rank 0: all_reduce SUM [16, 20]
    rank 1: all_reduce SUM [16, 20]
    rank 2: all_reduce SUM [16, 20]
    rank 3: all_reduce SUM [16, 20]
    rank 0: broadcast_object_list {'key1': [7, 2.72, (2+3j)], 'key2': ('abc', 'xyz')}
    rank 1: broadcast_object_list {'key1': [7, 2.72, (2+3j)], 'key2': ('abc', 'xyz')}
    rank 2: broadcast_object_list {'key1': [7, 2.72, (2+3j)], 'key2': ('abc', 'xyz')}
    rank 3: broadcast_object_list {'key1': [7, 2.72, (2+3j)], 'key2': ('abc', 'xyz')}
    rank 0: scatter_object_list ['a']
    rank 1: scatter_object_list ['b', 'b']
    rank 2: scatter_object_list ['c', 'c', 'c']
    rank 3: scatter_object_list ['d', 'd', 'd', 'd']
"""
import numpy as np
import omniccl as dist


def mine(rank):
    return np.array([2 * rank + 1, 2 * rank + 2])


def main():
    dist.init_process_group()
    rank, size = dist.get_rank(), dist.get_world_size()

    t = mine(rank)
    dist.broadcast(t, src=0)
    print(f"rank {rank}: broadcast from 0 {t.tolist()}")

    t = np.zeros(2, dtype=np.int64)
    dist.scatter(t, [np.array([i, i]) for i in range(size)] if rank == 0 else None, src=0)
    print(f"rank {rank}: scatter {t.tolist()}")

    gather_list = [np.zeros(2, dtype=np.int64) for _ in range(size)] if rank == 0 else None
    dist.gather(mine(rank), gather_list, dst=0)
    if rank == 0:
        print(f"rank {rank}: gather to 0 {[g.tolist() for g in gather_list]}")

    t = mine(rank)
    dist.reduce(t, dst=3, op=dist.ReduceOp.SUM)  # other ranks' arrays are left as they were
    print(f"rank {rank}: reduce SUM to 3 {t.tolist()}")

    tensor_list = [np.zeros(2, dtype=np.int64) for _ in range(size)]
    dist.all_gather(tensor_list, mine(rank))
    print(f"rank {rank}: all_gather {[g.tolist() for g in tensor_list]}")

    t = mine(rank)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    print(f"rank {rank}: all_reduce SUM {t.tolist()}")

    objects = [{"key1": [7, 2.72, 2 + 3j], "key2": ("abc", "xyz")}] if rank == 0 else [None]
    dist.broadcast_object_list(objects, src=0)
    print(f"rank {rank}: broadcast_object_list {objects[0]}")

    out = [None]
    letters = "abcdefghijklmnopqrstuvwxyz"
    inputs = [[letters[i % 26]] * (i + 1) for i in range(size)] if rank == 0 else None  # lists of different lengths
    dist.scatter_object_list(out, inputs, src=0)
    print(f"rank {rank}: scatter_object_list {out[0]}")

    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""ddp_average.py - data-parallel training: average the gradients, keep the replicas equal.

Each rank fits the same linear model y = w.x + b to its own shard of data
(drawn from y = 2 x0 - 3 x1 + 0.5 plus noise), as DistributedDataParallel
does: compute local gradients, average them across the ranks, take the same
step everywhere. Two ways to average are shown: all_reduce(SUM) then divide
by the world size, and all_reduce(AVG) started asynchronously for every
gradient array at once. Both leave bit-identical parameters on every rank.

Run: python -m omniccl.run -n 4 examples/python/ddp_average.py
Output with 4 ranks, in any order:
    rank 0: w = [2.0, -3.0], b = 0.5, replicas identical: True
    rank 1: w = [2.0, -3.0], b = 0.5, replicas identical: True
    rank 2: w = [2.0, -3.0], b = 0.5, replicas identical: True
    rank 3: w = [2.0, -3.0], b = 0.5, replicas identical: True
"""
import numpy as np
import omniccl as dist


def shard(rank, n=256):
    rng = np.random.default_rng(rank)
    x = rng.standard_normal((n, 2))
    y = x @ np.array([2.0, -3.0]) + 0.5 + 0.01 * rng.standard_normal(n)
    return x, y


def gradients(params, x, y):
    w, b = params
    err = x @ w + b - y
    return [2 * x.T @ err / len(y), np.array([2 * err.mean()])]


def main():
    dist.init_process_group()
    rank, size = dist.get_rank(), dist.get_world_size()
    x, y = shard(rank)
    params = [np.zeros(2), np.zeros(1)]
    for step in range(200):
        grads = gradients(params, x, y)
        if step % 2 == 0:
            for g in grads:                  # SUM, then divide
                dist.all_reduce(g, op=dist.ReduceOp.SUM)
                g /= size
        else:                                # AVG, all arrays in flight at once
            works = [dist.all_reduce(g, op=dist.ReduceOp.AVG, async_op=True) for g in grads]
            for work in works:
                work.wait()
        for p, g in zip(params, grads):
            p -= 0.1 * g
    # Every rank must hold exactly the same bytes.
    everyone = [None] * size
    dist.all_gather_object(everyone, [p.tobytes() for p in params])
    identical = all(e == everyone[0] for e in everyone)
    w, b = params
    print(f"rank {rank}: w = {np.round(w, 1).tolist()}, b = {round(float(b[0]), 1)}, replicas identical: {identical}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

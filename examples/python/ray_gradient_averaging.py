"""ray_gradient_averaging.py - the gradient-averaging program as Ray actors, over OmniCCL.

Each actor holds its own data shard of a linear regression, computes its
gradient, and averages it with the others through an OmniCCL all_reduce;
every actor ends with the same weights. The group forms through Ray
(omniccl.ray.init_collective_group): no address or port is chosen by hand.
Gradients are numpy arrays; torch tensors work the same way.

Run: python examples/python/ray_gradient_averaging.py          (starts a local Ray)
     python examples/python/ray_gradient_averaging.py ADDRESS  (joins a running cluster)
Output (every actor the same weights, close to the true [1, -2, 0.5, 3]):
    actor 0: weights [1.0, -2.0, 0.5, 3.0]
    actor 1: weights [1.0, -2.0, 0.5, 3.0]
    actor 2: weights [1.0, -2.0, 0.5, 3.0]
"""

import sys

import numpy as np
import ray

TRUE_WEIGHTS = np.array([1.0, -2.0, 0.5, 3.0])


@ray.remote(num_cpus=0.5)
class Trainer:
    """One data-parallel worker: its shard, its gradient, the group's average."""

    def __init__(self, rank, world_size, group):
        import omniccl.ray

        self.rank = rank
        self.comm = omniccl.ray.init_collective_group(world_size, rank, group)
        rng = np.random.default_rng(rank)
        self.x = rng.normal(size=(64, 4))
        self.y = self.x @ TRUE_WEIGHTS
        self.w = np.zeros(4)

    def train(self, steps, lr=0.05):
        import omniccl

        for _ in range(steps):
            grad = 2 * self.x.T @ (self.x @ self.w - self.y) / len(self.x)
            self.comm.Allreduce(omniccl.IN_PLACE, grad)  # sum of every actor's gradient
            self.w -= lr * grad / self.comm.size
        return self.w.tolist()


def run(world_size=3, steps=200, group="gradient-averaging"):
    """Trains with ``world_size`` actors on the connected Ray cluster; each actor's final weights."""
    trainers = [Trainer.remote(r, world_size, group) for r in range(world_size)]
    return ray.get([t.train.remote(steps) for t in trainers])


if __name__ == "__main__":
    ray.init(address=sys.argv[1] if len(sys.argv) > 1 else None)
    for rank, w in enumerate(run()):
        print(f"actor {rank}: weights {[round(v, 3) for v in w]}")

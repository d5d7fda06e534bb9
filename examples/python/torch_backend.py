"""torch_backend.py - the torch.distributed tutorial programs, unchanged but for the backend name.

Plain PyTorch: torch tensors, torch.distributed calls, DistributedDataParallel;
OmniCCL is the backend ("omniccl", registered by `import omniccl.torch`).
Each rank r holds [2r+1, 2r+2].

Run: torchrun --nproc_per_node 2 examples/python/torch_backend.py
     mpirun -n 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 python examples/python/torch_backend.py
Output with 2 ranks, in any order:
    rank 0: broadcast from 1 [3.0, 4.0]
    rank 1: broadcast from 1 [3.0, 4.0]
    rank 1: scatter [1.0, 1.0]
    rank 0: gather [[1.0, 2.0], [3.0, 4.0]]
    rank 0: reduce SUM [4.0, 6.0]
    rank 0: all_gather [[1.0, 2.0], [3.0, 4.0]]
    rank 1: all_reduce SUM [4.0, 6.0]
    rank 0: averaged gradient [2.0, 3.0]
    rank 0: DDP parameters equal on every rank: True
"""

import torch
import torch.distributed as dist

import omniccl.torch  # noqa: F401 - registers the backend "omniccl"


def main():
    dist.init_process_group("omniccl")
    rank, size = dist.get_rank(), dist.get_world_size()
    mine = torch.tensor([2.0 * rank + 1, 2.0 * rank + 2])

    t = mine.clone()
    dist.broadcast(t, src=size - 1)
    print(f"rank {rank}: broadcast from {size - 1} {t.tolist()}")

    t = torch.zeros(2)
    dist.scatter(t, [torch.full((2,), float(i)) for i in range(size)] if rank == 0 else None, src=0)
    if rank == 1:
        print(f"rank {rank}: scatter {t.tolist()}")

    out = [torch.zeros(2) for _ in range(size)] if rank == 0 else None
    dist.gather(mine, out, dst=0)
    if rank == 0:
        print(f"rank {rank}: gather {[o.tolist() for o in out]}")

    t = mine.clone()
    dist.reduce(t, dst=0, op=dist.ReduceOp.SUM)
    if rank == 0:
        print(f"rank {rank}: reduce SUM {t.tolist()}")

    out = [torch.zeros(2) for _ in range(size)]
    dist.all_gather(out, mine)
    if rank == 0:
        print(f"rank {rank}: all_gather {[o.tolist() for o in out]}")

    t = mine.clone()
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    if rank == 1:
        print(f"rank {rank}: all_reduce SUM {t.tolist()}")

    # The tutorial's gradient averaging: sum the gradients, divide by the world size.
    grad = mine.clone()
    dist.all_reduce(grad, op=dist.ReduceOp.SUM)
    grad /= size
    if rank == 0:
        print(f"rank {rank}: averaged gradient {grad.tolist()}")

    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(8, 4) * (rank + 1)).pow(2).mean().backward()
        opt.step()
    weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [torch.zeros_like(weights) for _ in range(size)]
    dist.all_gather(everyone, weights)
    if rank == 0:
        print(f"rank {rank}: DDP parameters equal on every rank: {all(torch.equal(w, weights) for w in everyone)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Rank programs for the ``omniccl`` PyTorch backend tests: ``python torch_backend_worker.py SCENARIO``.

Started by torchrun (or by conftest.run_ranks with torchrun's variables): each
rank runs the scenario with plain ``torch.distributed`` calls and writes what
it found as JSON to ``$OMNICCL_TEST_OUT/rank<R>.json`` (and prints it as the
last line ``RESULT <json>``). Wrong results are collected, not raised at the
first, so that the ranks stay in step; the rank then exits 1.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

import omniccl.torch  # noqa: F401 - registers the "omniccl" backend

TIMEOUT = datetime.timedelta(seconds=60)


class Checker:
    """Collects failed checks (the ranks stay in step until the end)."""

    def __init__(self) -> None:
        self.failures: list = []
        self.checks = 0

    def equal(self, got, want, what: str) -> None:
        self.checks += 1
        if isinstance(want, torch.Tensor):
            ok = isinstance(got, torch.Tensor) and got.dtype == want.dtype and torch.equal(got, want)
        elif isinstance(want, (list, tuple)) and want and isinstance(want[0], torch.Tensor):
            ok = len(got) == len(want) and all(g.dtype == w.dtype and torch.equal(g, w) for g, w in zip(got, want))
        else:
            ok = got == want
        if not ok:
            self.failures.append(f"{what}: got {got!r}, want {want!r}")

    def true(self, cond: bool, what: str) -> None:
        self.checks += 1
        if not cond:
            self.failures.append(what)

    def raises(self, exc_type, fn, what: str) -> None:
        self.checks += 1
        try:
            fn()
        except exc_type:
            return
        except Exception as e:  # noqa: BLE001 - reported
            self.failures.append(f"{what}: raised {type(e).__name__}: {e}, not {exc_type.__name__}")
            return
        self.failures.append(f"{what}: did not raise {exc_type.__name__}")


def full(value, n=5, dtype=torch.float32):
    return torch.full((n,), value, dtype=dtype)


# ----------------------------------------------------------------- collectives
def check_reductions(chk: Checker, rank: int, size: int) -> None:
    values = list(range(1, size + 1))
    want = {"SUM": sum(values), "PRODUCT": int(torch.tensor(values).prod()), "MIN": 1, "MAX": size}
    for dtype in (torch.float32, torch.float64, torch.int32, torch.int64, torch.uint8):
        for name, value in want.items():
            t = full(rank + 1, 7, dtype)
            dist.all_reduce(t, op=getattr(dist.ReduceOp, name))
            chk.equal(t, full(value, 7, dtype), f"all_reduce {name} {dtype}")
    ints = [5 + 3 * r for r in range(size)]
    for name, fold in (("BAND", lambda a, b: a & b), ("BOR", lambda a, b: a | b), ("BXOR", lambda a, b: a ^ b)):
        t = full(ints[rank], 3, torch.int64)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, name))
        expect = ints[0]
        for v in ints[1:]:
            expect = fold(expect, v)
        chk.equal(t, full(expect, 3, torch.int64), f"all_reduce {name}")
    t = full(float(rank + 1), 4)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    chk.equal(t, full(sum(values) / size, 4), "all_reduce AVG")
    premul = dist._make_nccl_premul_sum(2.0)
    t = full(float(rank + 1), 4)
    try:
        dist.all_reduce(t, op=premul)
        chk.equal(t, full(2.0 * sum(values), 4), "all_reduce PREMUL_SUM(2.0)")
    except NotImplementedError as e:  # torch 1.13 gives a backend no way to read the factor
        chk.true(torch.__version__ < "2" and "PREMUL_SUM" in str(e), f"PREMUL_SUM refused: {e}")


def check_rooted(chk: Checker, rank: int, size: int) -> None:
    root = size - 1
    t = full(float(rank))
    dist.broadcast(t, src=root)
    chk.equal(t, full(float(root)), "broadcast")
    t = full(float(rank + 1))
    dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
    chk.equal(t, full(float(size * (size + 1) // 2) if rank == root else float(rank + 1)), "reduce")
    gather_list = [torch.zeros(3) for _ in range(size)] if rank == 0 else None
    dist.gather(torch.full((3,), float(rank)), gather_list, dst=0)
    if rank == 0:
        chk.equal(torch.stack(gather_list), torch.arange(size, dtype=torch.float32).repeat_interleave(3).view(size, 3),
                  "gather")
    out = torch.zeros(2, 2)
    scatter_list = [torch.full((2, 2), float(10 * i)) for i in range(size)] if rank == 0 else None
    dist.scatter(out, scatter_list, src=0)
    chk.equal(out, torch.full((2, 2), float(10 * rank)), "scatter")


def check_gathers(chk: Checker, rank: int, size: int) -> None:
    outs = [torch.zeros(2, 3, dtype=torch.int64) for _ in range(size)]
    dist.all_gather(outs, torch.full((2, 3), rank, dtype=torch.int64))
    chk.equal(torch.stack(outs), torch.arange(size).repeat_interleave(6).view(size, 2, 3), "all_gather list")
    out = torch.zeros(size * 4)
    dist.all_gather_into_tensor(out, torch.full((4,), float(rank)))
    chk.equal(out, torch.arange(size, dtype=torch.float32).repeat_interleave(4), "all_gather_into_tensor")
    out = torch.zeros(3)
    dist.reduce_scatter(out, [torch.full((3,), float(rank * 10 + i)) for i in range(size)])
    chk.equal(out, torch.full((3,), float(sum(r * 10 + rank for r in range(size)))), "reduce_scatter list")
    out = torch.zeros(2)
    dist.reduce_scatter_tensor(out, torch.arange(2 * size, dtype=torch.float32) + rank, op=dist.ReduceOp.MAX)
    chk.equal(out, torch.tensor([2.0 * rank, 2.0 * rank + 1]) + size - 1, "reduce_scatter_tensor MAX")


def check_all_to_all(chk: Checker, rank: int, size: int) -> None:
    inp = torch.arange(size * 2, dtype=torch.float32) + 100 * rank
    out = torch.zeros(size * 2)
    dist.all_to_all_single(out, inp)
    chk.equal(out, torch.tensor([100.0 * i + 2 * rank + k for i in range(size) for k in range(2)]),
              "all_to_all_single")
    # rank r sends r + 1 rows to every rank; receives i + 1 rows from rank i
    inp = torch.full((size * (rank + 1), 2), float(rank))
    out = torch.zeros(sum(i + 1 for i in range(size)), 2)
    dist.all_to_all_single(out, inp, [i + 1 for i in range(size)], [rank + 1] * size)
    chk.equal(out, torch.cat([torch.full((i + 1, 2), float(i)) for i in range(size)]), "all_to_all_single splits")
    ins = [torch.full((j + 1,), float(rank * 10 + j)) for j in range(size)]
    outs = [torch.zeros(rank + 1) for _ in range(size)]
    dist.all_to_all(outs, ins)
    chk.equal(torch.cat(outs), torch.cat([torch.full((rank + 1,), float(i * 10 + rank)) for i in range(size)]),
              "all_to_all list")
    dist.barrier()


def check_coalesced_and_objects(chk: Checker, rank: int, size: int) -> None:
    ts = [full(float(rank + 1), 3), torch.full((2, 2), float(rank + 1))]
    dist.all_reduce_coalesced(ts)
    total = float(size * (size + 1) // 2)
    chk.equal(ts, [full(total, 3), torch.full((2, 2), total)], "all_reduce_coalesced")
    outs = [[torch.zeros(2) for _ in range(size)], [torch.zeros(1) for _ in range(size)]]
    dist.all_gather_coalesced(outs, [full(float(rank), 2), full(float(-rank), 1)])
    chk.equal([torch.cat(o) for o in outs], [torch.arange(size, dtype=torch.float32).repeat_interleave(2),
                                             -torch.arange(size, dtype=torch.float32)], "all_gather_coalesced")
    objs = [{"rank": rank}, "x" * rank] if rank == 0 else [None, None]
    dist.broadcast_object_list(objs, src=0)
    chk.equal(objs, [{"rank": 0}, ""], "broadcast_object_list")
    got = [None] * size
    dist.all_gather_object(got, ("rank", rank, "y" * (rank * 50)))
    chk.equal(got, [("rank", r, "y" * (r * 50)) for r in range(size)], "all_gather_object")
    gathered = [None] * size if rank == 0 else None
    dist.gather_object({"r": rank}, gathered, dst=0)
    if rank == 0:
        chk.equal(gathered, [{"r": r} for r in range(size)], "gather_object")
    out = [None]
    dist.scatter_object_list(out, [f"to {r}" for r in range(size)] if rank == 0 else None, src=0)
    chk.equal(out[0], f"to {rank}", "scatter_object_list")


def check_p2p(chk: Checker, rank: int, size: int) -> None:
    right, left = (rank + 1) % size, (rank - 1) % size
    # tags: two messages to the right, received in the other order
    sends = [dist.isend(full(float(rank), 2), right, tag=7), dist.isend(full(float(rank + 100), 2), right, tag=3)]
    a, b = torch.zeros(2), torch.zeros(2)
    dist.recv(b, left, tag=3)
    dist.recv(a, left, tag=7)
    for w in sends:
        w.wait()
    chk.equal([a, b], [full(float(left), 2), full(float(left + 100), 2)], "send/recv matched by tag")
    # the tutorial's pattern: rank 0 sends, the others receive; a receive from any source
    if rank == 0:
        for dst in range(1, size):
            dist.send(full(float(dst), 1), dst)
    else:
        t = torch.zeros(1)
        src = dist.recv(t)
        chk.equal(src, 0, "recv from any source: the sender")
        chk.equal(t, full(float(rank), 1), "recv from any source: the message")
    # Its own tag: a rank done with the any-source receive above may already send this while
    # its right neighbour's any-source receive still waits, which would otherwise take it.
    ops = [dist.P2POp(dist.isend, full(float(rank), 3), right, tag=11),
           dist.P2POp(dist.irecv, torch.zeros(3), left, tag=11)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    chk.equal(ops[1].tensor, full(float(left), 3), "batch_isend_irecv ring")


# ----------------------------------------------------------------- Work, groups, errors
def check_async(chk: Checker, rank: int, size: int) -> None:
    dist.barrier()
    if rank == size - 1:
        time.sleep(1.0)  # the others' async calls return while this rank has not joined
    t = full(float(rank + 1))
    start = time.monotonic()
    work = dist.all_reduce(t, async_op=True)
    returned = time.monotonic() - start
    if rank != size - 1:
        chk.true(returned < 0.5, f"async all_reduce returned after {returned:.2f} s (peer late by 1 s)")
        chk.true(not work.is_completed(), "is_completed() is False while a peer has not joined")
    fut = work.get_future()
    chained = fut.then(lambda f: f.value()[0] * 2)
    chk.true(work.wait() is True, "wait() returns True")
    chk.true(work.is_completed() and work.is_success(), "is_completed() and is_success() after wait()")
    total = float(size * (size + 1) // 2)
    chk.equal(t, full(total), "async all_reduce result")
    chk.equal(fut.wait()[0], full(total), "get_future() value")
    chk.equal(chained.wait(), full(2 * total), "future.then")
    works = [dist.broadcast(full(float(rank)), src=i, async_op=True) for i in range(size)]
    for w in works:
        w.wait()
    chk.true(all(w.is_completed() for w in works), "several async broadcasts in flight")


def check_groups(chk: Checker, rank: int, size: int) -> None:
    first_last = dist.new_group([0, size - 1])
    alone = dist.new_group([1 % size])
    everyone = dist.new_group()
    if rank in (0, size - 1):
        t = full(float(rank))
        dist.all_reduce(t, group=first_last)
        chk.equal(t, full(float(size - 1)), "all_reduce on new_group([0, last])")
        t = full(float(rank))
        dist.broadcast(t, src=size - 1, group=first_last)  # src is a world rank
        chk.equal(t, full(float(size - 1)), "broadcast from a world rank on a sub-group")
        chk.equal(dist.get_backend(first_last), "omniccl", "sub-group backend")
    if rank == 1 % size:
        t = full(3.0)
        dist.all_reduce(t, group=alone)
        chk.equal(t, full(3.0), "all_reduce on a group of one")
    t = full(1.0)
    dist.all_reduce(t, group=everyone)
    chk.equal(t, full(float(size)), "all_reduce on new_group()")


def check_errors(chk: Checker, rank: int, size: int) -> None:
    chk.raises(ValueError, lambda: dist.all_gather([torch.zeros(2)] * (size + 1), torch.zeros(2)),
               "all_gather with a list of the wrong length")
    chk.raises(RuntimeError, lambda: dist.all_reduce(torch.zeros(3), op=dist.ReduceOp.BXOR),
               "BXOR on float32")
    chk.raises(RuntimeError, lambda: dist.all_reduce(torch.zeros(4, 4).t()), "non-contiguous tensor")
    t = full(1.0)
    dist.all_reduce(t)
    chk.equal(t, full(float(size)), "the group still works after refused calls")


def ops(chk: Checker) -> dict:
    """Every operation of a process group on CPU tensors, with torch's own calls."""
    rank, size = dist.get_rank(), dist.get_world_size()
    chk.equal(dist.get_backend(), "omniccl", "get_backend()")
    for part in (check_reductions, check_rooted, check_gathers, check_all_to_all, check_coalesced_and_objects,
                 check_p2p, check_async, check_groups, check_errors):
        part(chk, rank, size)
    return {}


# ----------------------------------------------------------------- training
def _train(model: torch.nn.Module, step, steps: int, rank: int, device: str = "cpu") -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1000 + rank)
    for _ in range(steps):
        x = torch.randn(16, 32, generator=gen).to(device)
        y = torch.randn(16, 4, generator=gen).to(device)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        step(model)
        opt.step()


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def _average_gradients(group):
    """The tutorial's gradient averaging: all_reduce(SUM) each gradient, divide by the world size."""
    def step(model: torch.nn.Module) -> None:
        size = float(dist.get_world_size(group))
        for p in model.parameters():
            dist.all_reduce(p.grad.data, op=dist.ReduceOp.SUM, group=group)
            p.grad.data /= size
    return step


def ddp(chk: Checker) -> dict:
    """DDP and the tutorial's gradient averaging on omniccl (default group) and on gloo: same parameters."""
    rank = dist.get_rank()
    gloo = dist.new_group(backend="gloo")
    steps = 6
    result = {}
    for name, group in (("omniccl", None), ("gloo", gloo)):
        model = torch.nn.parallel.DistributedDataParallel(_model(), process_group=group, bucket_cap_mb=1)
        _train(model, lambda m: None, steps, rank)
        result[name] = [p.detach().clone() for p in model.module.parameters()]
        plain = _model()
        _train(plain, _average_gradients(group), steps, rank)
        result[name + " averaging"] = [p.detach().clone() for p in plain.parameters()]
    diffs = {}
    for kind in ("", " averaging"):
        a, b = result["omniccl" + kind], result["gloo" + kind]
        diff = max(float((x - y).abs().max()) for x, y in zip(a, b))
        diffs["ddp" + kind] = diff
        chk.true(all(torch.equal(x, y) for x, y in zip(a, b)), f"omniccl{kind} == gloo{kind} bit for bit "
                                                                 f"(max difference {diff})")
    chk.true(not all(torch.equal(x, y) for x, y in zip(result["omniccl"], _model().parameters())),
             "training changed the parameters")
    return {"max_difference": diffs}


def peer_dies(chk: Checker) -> dict:
    """The last rank dies after a first all_reduce; the others' next one raises within the timeout."""
    rank, size = dist.get_rank(), dist.get_world_size()
    t = full(1.0)
    dist.all_reduce(t)
    if rank == size - 1:
        os._exit(3)
    time.sleep(0.5)
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        chk.true(False, "all_reduce with a dead peer returned")
        error = ""
    except RuntimeError as e:
        error = f"{type(e).__name__}: {e}"
    return {"seconds": time.monotonic() - start, "error": error[:300]}


def cuda(chk: Checker) -> dict:
    """CUDA tensors: operations ordered on the current stream (as NCCL's backend), and DDP on the GPU."""
    rank, size = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    total = float(size * (size + 1) // 2)
    x = torch.full((1031,), float(rank + 1), device=dev)
    dist.all_reduce(x)
    chk.equal(x.cpu(), torch.full((1031,), total), "all_reduce float32")
    xb = torch.full((4097,), float(rank + 1), device=dev, dtype=torch.bfloat16)
    dist.all_reduce(xb, op=dist.ReduceOp.MAX)
    chk.equal(xb.float().cpu(), torch.full((4097,), float(size)), "all_reduce MAX bfloat16")
    # stream order: a long kernel runs on a side stream; the all_reduce issued there sees its result
    side = torch.cuda.Stream()
    y = torch.zeros(1 << 20, device=dev)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(1 << 28)
        y.fill_(float(rank + 1))
        dist.all_reduce(y)
        y.mul_(2)
    side.synchronize()
    chk.equal(y[:4].cpu(), torch.full((4,), 2 * total), "all_reduce ordered on the current (side) stream")
    t = torch.full((3,), float(rank), device=dev)
    dist.broadcast(t, src=size - 1)
    chk.equal(t.cpu(), torch.full((3,), float(size - 1)), "broadcast")
    outs = [torch.zeros(2, device=dev) for _ in range(size)]
    dist.all_gather(outs, torch.full((2,), float(rank), device=dev))
    chk.equal(torch.cat(outs).cpu(), torch.arange(size, dtype=torch.float32).repeat_interleave(2), "all_gather list")
    out = torch.zeros(2, device=dev)
    dist.reduce_scatter_tensor(out, torch.ones(2 * size, device=dev))
    chk.equal(out.cpu(), torch.full((2,), float(size)), "reduce_scatter_tensor")
    inp = torch.arange(size, dtype=torch.float32, device=dev) + 10 * rank
    out = torch.zeros(size, device=dev)
    dist.all_to_all_single(out, inp)
    chk.equal(out.cpu(), torch.tensor([10.0 * i + rank for i in range(size)]), "all_to_all_single")
    work = dist.all_reduce(torch.ones(8, device=dev), async_op=True)
    chk.true(work.wait() is True, "async wait()")
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(32, 4).to(dev), device_ids=[dev.index])
    _train(model, lambda m: None, 3, rank, dev)
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.zeros_like(params) for _ in range(size)]
    dist.all_gather(gathered, params)
    chk.true(all(torch.equal(g, params) for g in gathered), "DDP on CUDA: every rank has the same parameters")
    return {}


SCENARIOS = {"ops": ops, "ddp": ddp, "peer_dies": peer_dies, "cuda": cuda}


def main() -> int:
    name = sys.argv[1]
    init_file = os.environ.get("OMNICCL_TEST_INIT_FILE")
    if init_file:  # a FileStore rendezvous (file://) instead of torchrun's TCPStore
        dist.init_process_group("omniccl", init_method=f"file://{init_file}", rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]), timeout=TIMEOUT)
    else:
        dist.init_process_group("omniccl", timeout=TIMEOUT)
    chk = Checker()
    result = {"rank": dist.get_rank(), "torch": torch.__version__}
    try:
        result.update(SCENARIOS[name](chk))
    except Exception:  # noqa: BLE001 - reported as a failure of this rank
        chk.failures.append(traceback.format_exc())
    result.update(checks=chk.checks, failures=chk.failures)
    text = json.dumps(result)
    out = os.environ.get("OMNICCL_TEST_OUT")
    if out:
        with open(os.path.join(out, f"rank{result['rank']}.json"), "w") as f:
            f.write(text)
    print("RESULT " + text, flush=True)
    if not chk.failures:
        dist.destroy_process_group()
    return 1 if chk.failures else 0


if __name__ == "__main__":
    sys.exit(main())

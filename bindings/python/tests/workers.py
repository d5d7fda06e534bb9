"""Rank programs for the multi-process tests: ``python workers.py SCENARIO '{"json": "args"}'``.

Each scenario runs on every rank (started by conftest.run_ranks with the
env:// variables set) and returns a JSON-able value, printed as the last
line ``RESULT <json>``. A scenario that finds a wrong result collects it and
raises at the end, so that all ranks stay in step until then.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
import warnings

import numpy as np

import omniccl as dist
from omniccl import ReduceOp

SCENARIOS = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


class Checker:
    """Collects mismatches instead of raising at the first (ranks stay in step)."""

    def __init__(self):
        self.failures = []
        self.checks = 0

    def equal(self, got, want, what, tol=None):
        self.checks += 1
        got = np.asarray(got)
        want = np.asarray(want)
        ok = got.shape == want.shape and got.dtype == want.dtype
        if ok:
            if tol is None:
                ok = np.array_equal(got, want)
            else:
                ok = np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)
        if not ok:
            self.failures.append(f"{what}: got {got!r} want {want!r}")

    def true(self, cond, what):
        self.checks += 1
        if not cond:
            self.failures.append(what)

    def finish(self):
        if self.failures:
            raise AssertionError(f"{len(self.failures)} of {self.checks} checks failed:\n" +
                                 "\n".join(self.failures[:40]))
        return self.checks


# ----------------------------------------------------------------------------- the matrix
DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
          np.float16, np.float32, np.float64]
OPS = [ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.AVG, ReduceOp.BAND, ReduceOp.BOR,
       ReduceOp.BXOR, "PREMUL"]


def kind(dtype):
    return np.dtype(dtype).kind  # b, i, u, f


def defined(op, dtype):
    """Whether the C library defines op for dtype (docs/concepts/operations.md: Reduce ops and dtypes)."""
    k = kind(dtype)
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR):
        return k in "biu"
    if op in (ReduceOp.AVG, "PREMUL"):
        return k != "b"
    return True


def premul_scalar(dtype):
    return 2.0 if kind(dtype) in "iu" else 0.5


def make_op(op, dtype):
    return dist.make_premul_sum(premul_scalar(dtype)) if op == "PREMUL" else op


def data(rank, dtype, n, salt, op=None):
    """Deterministic input of `rank` (every rank can compute every rank's input)."""
    rng = np.random.default_rng([rank, n, salt, np.dtype(dtype).num])
    k = kind(dtype)
    if k == "b":
        return rng.integers(0, 2, n).astype(np.bool_)
    small = op in (ReduceOp.PRODUCT,)
    if k == "u":
        hi = 4 if small else 200
        return rng.integers(0, hi, n).astype(dtype)
    if k == "i":
        lim = 3 if small else 100
        return rng.integers(-lim, lim + 1, n).astype(dtype)
    lim = 3 if small else 8
    return rng.integers(-lim, lim + 1, n).astype(dtype)


def reference(arrs, op, dtype, size):
    """numpy's result of reducing the ranks' arrays with op (the C library's rules)."""
    stack = np.stack(arrs)
    k = kind(dtype)
    if k == "b":
        if op in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.BOR):
            return np.logical_or.reduce(stack, axis=0)
        if op in (ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.BAND):
            return np.logical_and.reduce(stack, axis=0)
        return np.logical_xor.reduce(stack, axis=0)
    with np.errstate(over="ignore"):
        if op == ReduceOp.SUM:
            return np.add.reduce(stack, axis=0, dtype=dtype)
        if op == ReduceOp.PRODUCT:
            return np.multiply.reduce(stack, axis=0, dtype=dtype)
        if op == ReduceOp.MIN:
            return np.minimum.reduce(stack, axis=0)
        if op == ReduceOp.MAX:
            return np.maximum.reduce(stack, axis=0)
        if op == ReduceOp.BAND:
            return np.bitwise_and.reduce(stack, axis=0)
        if op == ReduceOp.BOR:
            return np.bitwise_or.reduce(stack, axis=0)
        if op == ReduceOp.BXOR:
            return np.bitwise_xor.reduce(stack, axis=0)
        if op == "PREMUL":
            scaled = stack * np.asarray(premul_scalar(dtype)).astype(dtype)
            return np.add.reduce(scaled.astype(dtype), axis=0, dtype=dtype)
        if op == ReduceOp.AVG:
            if k == "f":
                return (np.add.reduce(stack.astype(np.float64), axis=0) / size).astype(dtype)
            total = np.add.reduce(stack, axis=0, dtype=dtype)  # wraps, then truncating division
            out = [(abs(int(v)) // size) * (1 if int(v) >= 0 else -1) for v in total]
            return np.array(out, dtype=np.int64 if k == "i" else np.uint64).astype(dtype)
    raise ValueError(op)


def tol_for(dtype, op):
    if kind(dtype) != "f":
        return None
    if op == ReduceOp.AVG:
        return 2e-3 if dtype == np.float16 else 1e-6
    return None  # sums of small integers are exact


@scenario
def matrix(rank, size, counts=(0, 1, 13, 5003)):
    """Every collective x numpy dtype x reduce op, checked against numpy references."""
    dist.init_process_group()
    assert dist.get_rank() == rank and dist.get_world_size() == size
    chk = Checker()
    world = dist.group.WORLD
    for dtype in DTYPES:
        name = np.dtype(dtype).name
        for n in counts:
            tag = f"{name}[{n}]"
            # ---- reductions
            for op in OPS:
                if not defined(op, dtype):
                    continue
                what = f"{tag} {op if isinstance(op, str) else op.name}"
                arrs = [data(r, dtype, n, 1, op) for r in range(size)]
                want = reference(arrs, op, dtype, size)
                tol = tol_for(dtype, op)
                x = arrs[rank].copy()
                dist.all_reduce(x, op=make_op(op, dtype))
                chk.equal(x, want, f"all_reduce {what}", tol)

                root = (n + 1) % size
                x = arrs[rank].copy()
                dist.reduce(x, dst=root, op=make_op(op, dtype))
                chk.equal(x, want if rank == root else arrs[rank], f"reduce to {root} {what}", tol)

                big = [data(r, dtype, n * size, 2, op) for r in range(size)]
                want_rs = reference(big, op, dtype, size)[rank * n:(rank + 1) * n]
                out = np.zeros(n, dtype)
                dist.reduce_scatter_tensor(out, big[rank], op=make_op(op, dtype))
                chk.equal(out, want_rs, f"reduce_scatter_tensor {what}", tol)

                out = np.zeros(n, dtype)
                dist.reduce_scatter(out, [big[rank][i * n:(i + 1) * n] for i in range(size)], op=make_op(op, dtype))
                chk.equal(out, want_rs, f"reduce_scatter {what}", tol)

                out = np.zeros(n, dtype)
                world.Reduce_scatter_block(big[rank], out, op=make_op(op, dtype))
                chk.equal(out, want_rs, f"Reduce_scatter_block {what}", tol)
            # ---- undefined pairs fail before anything is sent, on every rank
            for op in OPS:
                if defined(op, dtype):
                    continue
                try:
                    dist.all_reduce(np.zeros(max(n, 1), dtype), op=make_op(op, dtype))
                    chk.true(False, f"all_reduce {tag} {op}: no error for an undefined pair")
                except dist.InvalidArgumentError:
                    chk.checks += 1
            # ---- data movement
            arrs = [data(r, dtype, n, 3) for r in range(size)]
            root = n % size
            x = arrs[rank].copy()
            dist.broadcast(x, src=root)
            chk.equal(x, arrs[root], f"broadcast from {root} {tag}")

            outs = [np.zeros(n, dtype) for _ in range(size)]
            dist.all_gather(outs, arrs[rank])
            for r in range(size):
                chk.equal(outs[r], arrs[r], f"all_gather {tag} part {r}")
            out = np.zeros(n * size, dtype)
            dist.all_gather_into_tensor(out, arrs[rank])
            chk.equal(out, np.concatenate(arrs), f"all_gather_into_tensor {tag}")

            outs = [np.zeros(n, dtype) for _ in range(size)] if rank == root else None
            dist.gather(arrs[rank], outs, dst=root)
            if rank == root:
                for r in range(size):
                    chk.equal(outs[r], arrs[r], f"gather {tag} part {r}")

            parts = [data(r + 10, dtype, n, 4) for r in range(size)]
            x = np.zeros(n, dtype)
            dist.scatter(x, parts if rank == root else None, src=root)
            chk.equal(x, parts[rank], f"scatter {tag}")

            # all_to_all_single, even: block j of rank i -> block i of rank j
            blocks = [data(r, dtype, n * size, 5) for r in range(size)]
            out = np.zeros(n * size, dtype)
            dist.all_to_all_single(out, blocks[rank])
            want = np.concatenate([blocks[r][rank * n:(rank + 1) * n] for r in range(size)])
            chk.equal(out, want, f"all_to_all_single {tag}")

            # all_to_all with uneven sizes: rank i sends (i + j) % 3 + n elements to rank j
            def m(i, j):
                return (i + j) % 3 + n

            ins = [data(rank * 100 + j, dtype, m(rank, j), 6) for j in range(size)]
            outs = [np.zeros(m(i, rank), dtype) for i in range(size)]
            dist.all_to_all(outs, ins)
            for i in range(size):
                chk.equal(outs[i], data(i * 100 + rank, dtype, m(i, rank), 6), f"all_to_all {tag} from {i}")

            # all_to_all_single with split sizes (rows of a 2-D array)
            rows_to = [(rank + j) % 2 + 1 for j in range(size)]
            src2d = data(rank, dtype, sum(rows_to) * 2, 7).reshape(-1, 2)
            rows_from = [(i + rank) % 2 + 1 for i in range(size)]
            out2d = np.zeros((sum(rows_from), 2), dtype)
            dist.all_to_all_single(out2d, src2d, output_split_sizes=rows_from, input_split_sizes=rows_to)
            want_rows = []
            for i in range(size):
                their = data(i, dtype, sum((i + j) % 2 + 1 for j in range(size)) * 2, 7).reshape(-1, 2)
                start = sum((i + j) % 2 + 1 for j in range(rank))
                want_rows.append(their[start:start + rows_from[i]])
            chk.equal(out2d, np.concatenate(want_rows), f"all_to_all_single splits {tag}")

            # point to point: a ring
            if size > 1:
                right, left = (rank + 1) % size, (rank - 1) % size
                y = np.zeros(n, dtype)
                if rank % 2 == 0:
                    dist.send(arrs[rank], right)
                    src = dist.recv(y, left)
                else:
                    src = dist.recv(y, left)
                    dist.send(arrs[rank], right)
                chk.equal(y, arrs[left], f"send/recv ring {tag}")
                chk.true(src == left, f"recv returned {src}, not {left}")

            # mpi4py-style v-variants and IN_PLACE
            counts_v = [(r % 3) + n for r in range(size)]
            mine = data(rank, dtype, counts_v[rank], 8)
            allv = np.zeros(sum(counts_v), dtype)
            world.Allgatherv(mine, [allv, counts_v])
            chk.equal(allv, np.concatenate([data(r, dtype, counts_v[r], 8) for r in range(size)]),
                      f"Allgatherv {tag}")
            x = arrs[rank].copy()
            world.Allreduce(dist.IN_PLACE, x, ReduceOp.MAX)
            chk.equal(x, reference(arrs, ReduceOp.MAX, dtype, size), f"Allreduce IN_PLACE {tag}")
            full = np.zeros(n * size, dtype)
            full[rank * n:(rank + 1) * n] = arrs[rank]
            world.Allgather(dist.IN_PLACE, full)
            chk.equal(full, np.concatenate(arrs), f"Allgather IN_PLACE {tag}")
        dist.barrier()
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks}


@scenario
def sigint_disposition(rank, size):
    """Whether Ctrl-C would reach this rank as KeyboardInterrupt (its SIGINT
    handler is Python's default one, not SIG_IGN inherited from a parent)."""
    return {"default_int_handler": signal.getsignal(signal.SIGINT) is signal.default_int_handler}


# ----------------------------------------------------------------------------- tutorial
@scenario
def tutorial(rank, size):
    """The classic torch.distributed tutorial programs, with their documented results (4 ranks)."""
    dist.init_process_group()
    res = {}
    mine = lambda: np.array([2 * rank + 1, 2 * rank + 2])  # noqa: E731 - [1,2], [3,4], [5,6], [7,8]

    t = mine()
    dist.broadcast(t, src=0)
    res["broadcast"] = t.tolist()

    t = np.zeros(2, dtype=np.int64)
    dist.scatter(t, [np.array([i, i]) for i in range(size)] if rank == 0 else None, src=0)
    res["scatter"] = t.tolist()

    t = mine()
    gl = [np.zeros(2, dtype=np.int64) for _ in range(size)] if rank == 0 else None
    dist.gather(t, gl, dst=0)
    res["gather"] = [g.tolist() for g in gl] if rank == 0 else None

    t = mine()
    dist.reduce(t, dst=3, op=ReduceOp.SUM)
    res["reduce"] = t.tolist()

    t = mine()
    gl = [np.zeros(2, dtype=np.int64) for _ in range(size)]
    dist.all_gather(gl, t)
    res["all_gather"] = [g.tolist() for g in gl]

    t = mine()
    dist.all_reduce(t, op=ReduceOp.SUM)
    res["all_reduce"] = t.tolist()

    objs = [{"key1": [7, 2.72, 2 + 3j], "key2": ("abc", "xyz")}] if rank == 0 else [None]
    dist.broadcast_object_list(objs, src=0)
    res["broadcast_object_list"] = repr(objs[0])

    out = [None]
    dist.scatter_object_list(out, [[i] * (i + 1) for i in range(size)] if rank == 0 else None, src=0)
    res["scatter_object_list"] = out[0]

    gathered = [None] * size
    dist.all_gather_object(gathered, {"rank": rank})
    res["all_gather_object"] = gathered

    got = [None] * size if rank == 1 else None
    dist.gather_object(("from", rank), got, dst=1)
    res["gather_object"] = [list(g) for g in got] if rank == 1 else None
    dist.destroy_process_group()
    return res


# ----------------------------------------------------------------------------- DDP-style averaging
@scenario
def ddp_average(rank, size, steps=5):
    """Gradient averaging (all_reduce SUM then divide, and AVG) keeps every rank's parameters equal."""
    dist.init_process_group()
    shapes = [(10,), (3, 4), (5,), (2, 3, 2)]

    def grads(r, step):
        rng = np.random.default_rng([r, step])
        return [rng.standard_normal(s).astype(np.float32) for s in shapes]

    results = {}
    for mode in ("sum_divide", "avg", "premul"):
        params = [np.ones(s, np.float32) for s in shapes]
        expected = [np.ones(s, np.float64) for s in shapes]
        for step in range(steps):
            gs = grads(rank, step)
            works = []
            for g in gs:
                if mode == "sum_divide":
                    dist.all_reduce(g, op=ReduceOp.SUM)
                    g /= size
                elif mode == "avg":
                    works.append(dist.all_reduce(g, op=ReduceOp.AVG, async_op=True))
                else:
                    dist.all_reduce(g, op=dist.make_premul_sum(1.0 / size))
            for w in works:
                w.wait()
            for p, g in zip(params, gs):
                p -= 0.1 * g
            everyone = [grads(r, step) for r in range(size)]
            for i in range(len(shapes)):
                mean = sum(e[i].astype(np.float64) for e in everyone) / size
                expected[i] -= 0.1 * mean
        digest = [p.tobytes().hex() for p in params]
        all_digests = [None] * size
        dist.all_gather_object(all_digests, digest)
        same = all(d == digest for d in all_digests)
        close = all(np.allclose(p, e, rtol=1e-5, atol=1e-5) for p, e in zip(params, expected))
        results[mode] = {"same_on_every_rank": same, "matches_reference": close}
    dist.destroy_process_group()
    return results


# ----------------------------------------------------------------------------- async work
@scenario
def async_work(rank, size):
    dist.init_process_group()
    chk = Checker()
    base = [np.arange(6, dtype=np.float64) * (r + 1) for r in range(size)]
    a = base[rank].copy()
    b = base[rank].copy()
    wa = dist.all_reduce(a, op=ReduceOp.SUM, async_op=True)
    wb = dist.all_reduce(b, op=ReduceOp.MAX, async_op=True)
    chk.true(isinstance(wa, dist.Work), "async_op=True returns a Work")
    chk.true(wb.wait() is True, "wait() returns True")
    wa.wait()
    chk.equal(a, sum(base), "async SUM")
    chk.equal(b, np.maximum.reduce(base), "async MAX")
    chk.true(wa.is_completed() and wa.is_success() and wa.exception() is None, "completed work state")
    chk.true(dist.all_reduce(a, async_op=False) is None, "blocking call returns None")

    # is_completed polls without blocking; list outputs land once complete
    outs = [np.zeros(3, np.int32) for _ in range(size)]
    w = dist.all_gather(outs, np.full(3, rank, np.int32), async_op=True)
    deadline = time.monotonic() + 20
    while not w.is_completed() and time.monotonic() < deadline:
        time.sleep(0.001)
    chk.true(w.is_completed(), "all_gather completes")
    for r in range(size):
        chk.equal(outs[r], np.full(3, r, np.int32), f"async all_gather part {r}")
    chk.true(len(w.result()) == size, "result() gives the outputs")

    # several in flight, waited in reverse order
    xs = [np.full(4, rank + i, np.int64) for i in range(5)]
    ws = [dist.all_reduce(x, async_op=True) for x in xs]
    for w in reversed(ws):
        w.wait()
    for i, x in enumerate(xs):
        chk.equal(x, np.full(4, sum(r + i for r in range(size)), np.int64), f"in-flight op {i}")

    # other collectives async: broadcast, barrier, reduce_scatter_tensor, isend/irecv
    x = np.full(3, rank, np.float32)
    dist.broadcast(x, src=size - 1, async_op=True).wait()
    chk.equal(x, np.full(3, size - 1, np.float32), "async broadcast")
    dist.barrier(async_op=True).wait()
    out = np.zeros(2, np.int64)
    dist.reduce_scatter_tensor(out, np.arange(2 * size, dtype=np.int64), async_op=True).wait()
    chk.equal(out, np.arange(2 * rank, 2 * rank + 2, dtype=np.int64) * size, "async reduce_scatter_tensor")

    # Work.wait(timeout) while the peer is late: TimeoutError, then the op completes
    if size > 1:
        y = np.ones(2)
        if rank == 1:
            time.sleep(1.5)
        w = dist.all_reduce(y, async_op=True)
        if rank == 0:
            try:
                w.wait(timeout=0.2)
                chk.true(False, "wait(timeout=0.2) did not time out")
            except dist.TimeoutError as e:
                chk.true(isinstance(e, TimeoutError), "omniccl.TimeoutError is a builtins.TimeoutError")
                chk.true(not w.is_completed(), "the op is still running after wait(timeout)")
        w.wait()
        chk.equal(y, np.full(2, float(size)), "all_reduce after a late peer")
    # The GIL is released while a blocking collective waits: another thread runs meanwhile.
    if size > 1:
        import threading
        ticks = [0]
        stop = threading.Event()

        def count():
            while not stop.is_set():
                ticks[0] += 1

        z = np.ones(2)
        if rank == 1:
            time.sleep(1.0)
        counter = threading.Thread(target=count)
        counter.start()
        dist.all_reduce(z)  # rank 0 waits here about a second for rank 1
        stop.set()
        counter.join()
        if rank == 0:
            chk.true(ticks[0] > 10000, f"the other thread ran only {ticks[0]} times during a blocked all_reduce")
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks}


# ----------------------------------------------------------------------------- groups and split
@scenario
def groups(rank, size):
    dist.init_process_group()
    chk = Checker()
    members = [0, 2]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = dist.new_group(members)
        x = np.array([rank + 1], np.int64)
        r = dist.all_reduce(x, group=g)
        chk.true(r is None, "all_reduce on a group returns None")
        if rank in members:
            chk.equal(x, np.array([1 + 3], np.int64), "group all_reduce")
            chk.true(dist.get_rank(g) == members.index(rank), "get_rank(group)")
            chk.true(dist.get_world_size(g) == 2, "get_world_size(group)")
            chk.true(dist.get_process_group_ranks(g) == members, "group ranks")
            y = np.array([rank], np.int64)
            dist.broadcast(y, src=2, group=g)  # src is a world rank
            chk.equal(y, np.array([2], np.int64), "group broadcast from world rank 2")
            z = np.array([rank], np.int64)
            dist.broadcast(z, group=g, group_src=0)
            chk.equal(z, np.array([0], np.int64), "group broadcast from group rank 0")
        else:
            chk.true(g is dist.GroupMember.NON_GROUP_MEMBER and g is dist.COMM_NULL, "non-members get COMM_NULL")
            chk.equal(x, np.array([rank + 1], np.int64), "non-member array untouched")
            chk.true(dist.get_rank(g) == -1 and dist.get_world_size(g) == -1, "non-member rank/size -1")
            chk.true(any("does not belong" in str(w.message) for w in caught), "non-member warning")

    # mpi4py-style split: even and odd ranks, ordered by descending key
    world = dist.COMM_WORLD
    half = world.split(color=rank % 2, key=-rank)
    chk.true(half.size == len(range(rank % 2, size, 2)), "split size")
    mates = sorted(range(rank % 2, size, 2), reverse=True)
    chk.true(half.rank == mates.index(rank), f"split rank by key: {half.rank}")
    chk.true(half.global_ranks == mates, f"split global ranks {half.global_ranks}")
    v = np.array([2 * rank + 1, 2 * rank + 2], np.int64)
    half.Allreduce(dist.IN_PLACE, v)
    want = sum(np.array([2 * r + 1, 2 * r + 2]) for r in mates)
    chk.equal(v, want.astype(np.int64), "split Allreduce")
    chk.true(half.allgather(rank) == mates, "object allgather on split")
    # torch-style functions on a split communicator name world ranks
    w = np.array([rank], np.int64)
    dist.broadcast(w, src=mates[-1], group=half)
    chk.equal(w, np.array([mates[-1]], np.int64), "torch-style broadcast on a split communicator")
    none = world.split(color=dist.UNDEFINED if rank == 0 else 1)
    chk.true((none is dist.COMM_NULL) == (rank == 0), "UNDEFINED gives COMM_NULL")
    if none:
        chk.true(none.size == size - 1, "split without rank 0")
        none.destroy()
        none.destroy()  # twice is fine
        chk.true(none.closed, "destroyed communicator is closed")
        try:
            none.Barrier()
            chk.true(False, "a destroyed communicator refused nothing")
        except dist.OmniCCLError:
            chk.checks += 1
    # nested split and a context manager
    with world.split(0, 0) as dup:
        with dup.split(rank // 2, 0) as pairs:
            chk.true(pairs.bcast(rank * 10, root=0) == (rank // 2) * 20, "nested split bcast")
    # every mpi4py buffer method on the world
    buf = np.full(3, rank, np.float64)
    world.Bcast(buf, root=size - 1)
    chk.equal(buf, np.full(3, size - 1, np.float64), "Bcast")
    recv = np.zeros(3 * size) if rank == 0 else None
    world.Gather(np.full(3, rank, np.float64), recv, root=0)
    if rank == 0:
        chk.equal(recv, np.repeat(np.arange(size, dtype=np.float64), 3), "Gather")
    part = np.zeros(2, np.int32)
    world.Scatter(np.arange(2 * size, dtype=np.int32) if rank == 0 else None, part, root=0)
    chk.equal(part, np.array([2 * rank, 2 * rank + 1], np.int32), "Scatter")
    red = np.zeros(2, np.int64) if rank == 1 % size else None
    world.Reduce(np.array([rank, 1], np.int64), red, op=ReduceOp.SUM, root=1 % size)
    if rank == 1 % size:
        chk.equal(red, np.array([sum(range(size)), size], np.int64), "Reduce")
    a2a = np.zeros(size, np.int64)
    world.Alltoall(np.arange(size, dtype=np.int64) + 10 * rank, a2a)
    chk.equal(a2a, np.arange(size, dtype=np.int64) * 10 + rank, "Alltoall")
    counts = [r + 1 for r in range(size)]
    gv = np.zeros(sum(counts), np.int16) if rank == 0 else None
    world.Gatherv(np.full(rank + 1, rank, np.int16), [gv, counts] if rank == 0 else None, root=0)
    if rank == 0:
        chk.equal(gv, np.repeat(np.arange(size), counts).astype(np.int16), "Gatherv")
    sv = np.zeros(rank + 1, np.int16)
    world.Scatterv([np.repeat(np.arange(size), counts).astype(np.int16), counts] if rank == 0 else None, sv, root=0)
    chk.equal(sv, np.full(rank + 1, rank, np.int16), "Scatterv")
    sc = [1] * size
    rv = np.zeros(size, np.int32)
    world.Alltoallv([np.full(size, rank, np.int32), sc], [rv, sc])
    chk.equal(rv, np.arange(size, dtype=np.int32), "Alltoallv")
    world.Barrier()
    # object methods
    chk.true(world.bcast({"root": 0} if rank == 0 else None, root=0) == {"root": 0}, "bcast")
    chk.true(world.scatter([[i] * i for i in range(size)] if rank == 0 else None, root=0) == [rank] * rank,
             "scatter objects")
    got = world.gather(f"r{rank}", root=size - 1)
    chk.true(got == ([f"r{r}" for r in range(size)] if rank == size - 1 else None), "gather objects")
    chk.true(world.allreduce(rank) == sum(range(size)), "allreduce SUM objects")
    chk.true(world.allreduce([rank], op=ReduceOp.SUM) == list(range(size)), "allreduce list concatenation")
    chk.true(world.allreduce(rank, op=ReduceOp.MAX) == size - 1, "allreduce MAX objects")
    chk.true(world.allreduce(rank, op=lambda a, b: a * 10 + b) == int("".join(map(str, range(size)))),
             "allreduce with a function")
    chk.true(world.reduce(rank + 1, op=ReduceOp.PRODUCT, root=0) == (np.prod(range(1, size + 1)) if rank == 0
                                                                    else None), "reduce objects")
    chk.true(world.alltoall([(rank, j) for j in range(size)]) == [(i, rank) for i in range(size)], "alltoall")
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks}


# ----------------------------------------------------------------------------- point to point
@scenario
def p2p(rank, size):
    dist.init_process_group()
    chk = Checker()
    right, left = (rank + 1) % size, (rank - 1) % size
    # isend/irecv with small messages: every rank posts both, then waits
    x = np.arange(1000, dtype=np.float32) + rank
    y = np.zeros(1000, np.float32)
    rq = dist.irecv(y, src=left)
    sq = dist.isend(x, dst=right)
    sq.wait()
    rq.wait()
    chk.equal(y, np.arange(1000, dtype=np.float32) + left, "isend/irecv ring")
    # mpi4py Isend/Irecv requests
    world = dist.COMM_WORLD
    z = np.zeros(5, np.int64)
    reqs = [world.Irecv(z, source=left), world.Isend(np.full(5, rank, np.int64), dest=right)]
    for r in reqs:
        r.Wait()
    chk.equal(z, np.full(5, left, np.int64), "Isend/Irecv ring")
    # Send/Recv, pairs ordered (even ranks send first)
    buf = np.zeros(3, np.uint8)
    if rank % 2 == 0:
        world.Send(np.full(3, rank, np.uint8), dest=right)
        world.Recv(buf, source=left)
    else:
        world.Recv(buf, source=left)
        world.Send(np.full(3, rank, np.uint8), dest=right)
    chk.equal(buf, np.full(3, left, np.uint8), "Send/Recv")
    # objects, including one bigger than the shared-memory ring (no size limit)
    if rank == 0:
        world.send({"to": 1, "blob": b"x" * (5 << 20)}, dest=1)
        reply = world.recv(source=1)
        chk.true(reply == ("ok", 5 << 20), "object reply")
    elif rank == 1:
        msg = world.recv(source=0)
        world.send(("ok", len(msg["blob"])), dest=0)
    # torch-style recv returns the sender
    if size >= 2:
        if rank == 0:
            dist.send(np.array([42], np.int32), dst=1)
        elif rank == 1:
            t = np.zeros(1, np.int32)
            chk.true(dist.recv(t, src=0) == 0 and t[0] == 42, "recv returns the sender")
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks}


@scenario
def big_isend_then_recv(rank, size, nbytes=4 << 20):
    """req = isend(x, peer); recv(y, peer); req.wait() on both sides of a pair."""
    dist.init_process_group(timeout=8)
    peer = 1 - rank
    x = np.full(nbytes // 8, rank, np.float64)
    y = np.zeros(nbytes // 8, np.float64)
    req = dist.isend(x, peer)
    dist.recv(y, peer)
    req.wait()
    assert (y == peer).all()
    dist.destroy_process_group()
    return "ok"


# ----------------------------------------------------------------------------- errors
@scenario
def mismatch_dtype(rank, size):
    dist.init_process_group()
    x = np.ones(4, np.float32 if rank == 0 else np.float64)
    try:
        dist.all_reduce(x)
    except dist.MismatchError as e:
        return {"error": type(e).__name__, "status": int(e.status), "message": str(e)}
    return {"error": None}


@scenario
def killed_peer(rank, size):
    dist.init_process_group()
    dist.barrier()
    before = dist.group.WORLD.async_error()
    if rank == size - 1:
        time.sleep(0.5)  # let the others leave the barrier first
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        dist.all_reduce(np.ones(1000))
        dist.all_reduce(np.ones(1000))
    except dist.PeerFailureError as e:
        after = dist.group.WORLD.async_error()
        return {"error": type(e).__name__, "status": int(e.status), "message": str(e),
                "seconds": time.monotonic() - start, "async_before": repr(before),
                "async_after": type(after).__name__, "async_after_status": int(after.status)}
    return {"error": None}


@scenario
def timeout(rank, size):
    dist.init_process_group(timeout=1.0)
    dist.barrier()
    if rank == 1:
        time.sleep(4)
        try:
            for _ in range(3):
                dist.all_reduce(np.ones(2))
        except dist.OmniCCLError as e:
            return {"late_rank_error": type(e).__name__}
        return {"late_rank_error": None}
    start = time.monotonic()
    try:
        dist.all_reduce(np.ones(2))
    except dist.TimeoutError as e:
        return {"error": type(e).__name__, "builtin": isinstance(e, TimeoutError), "status": int(e.status),
                "message": str(e), "seconds": time.monotonic() - start}
    return {"error": None}


@scenario
def bad_arguments(rank, size):
    """Argument errors are InvalidArgumentError (ValueError) on every rank; the communicator stays usable."""
    dist.init_process_group()
    seen = {}

    def expect(name, fn, exc=dist.InvalidArgumentError):
        try:
            fn()
            seen[name] = None
        except exc as e:
            seen[name] = type(e).__name__

    world = dist.group.WORLD
    expect("root out of range", lambda: world.Bcast(np.ones(2), root=size + 3))
    expect("torch src not in the group", lambda: dist.broadcast(np.ones(2), src=size + 3))
    expect("sizes do not fit", lambda: dist.all_gather_into_tensor(np.zeros(3 * size + 1), np.ones(3)))
    expect("list length", lambda: dist.all_gather([np.zeros(2)] * (size + 1), np.ones(2)))
    expect("non-contiguous", lambda: dist.all_reduce(np.ones((4, 4))[:, 1]), ValueError)
    ro = np.ones(3)
    ro.flags.writeable = False
    expect("read-only output", lambda: dist.all_reduce(ro), ValueError)
    expect("bytes output", lambda: dist.all_reduce(b"abcd"), ValueError)
    expect("long double dtype", lambda: dist.all_reduce(np.ones(2, np.longdouble)), ValueError)
    expect("not an array", lambda: dist.all_reduce([1, 2, 3]), TypeError)
    expect("bad op", lambda: dist.all_reduce(np.ones(2), op=42), ValueError)
    x = np.full(2, rank, np.int64)
    dist.all_reduce(x)  # still usable
    seen["still usable"] = x.tolist() == [sum(range(size))] * 2
    dist.destroy_process_group()
    try:
        dist.all_reduce(np.ones(1))
        seen["after destroy"] = None
    except ValueError as e:
        seen["after destroy"] = str(e)
    return seen


@scenario
def interrupt_collective(rank, size, uncaught=False):
    """Rank 0 blocks in all_reduce (rank 1 never joins); the test sends it SIGINT."""
    dist.init_process_group()
    dist.barrier()
    if rank == 1:
        print("sleeping", flush=True)
        try:
            time.sleep(60)  # never joins; the test interrupts this rank once rank 0 has exited
        except KeyboardInterrupt:
            pass
        # The first all_reduce may complete from rank 0's data already sent;
        # the next ones need rank 0, which has aborted and left.
        try:
            for _ in range(3):
                dist.all_reduce(np.ones(8))
            return {"rank1_error": None}
        except dist.OmniCCLError as e:
            return {"rank1_error": type(e).__name__}
    print("waiting", flush=True)
    start = time.monotonic()
    if uncaught:
        dist.all_reduce(np.ones(8))  # KeyboardInterrupt propagates and ends the process
    try:
        dist.all_reduce(np.ones(8))
        return {"interrupted": False}
    except KeyboardInterrupt:
        elapsed = time.monotonic() - start
    closed = dist.group.WORLD.closed
    try:
        dist.all_reduce(np.ones(8))
        later = None
    except dist.OmniCCLError as e:
        later = {"type": type(e).__name__, "status": int(e.status), "message": str(e)}
    return {"interrupted": True, "elapsed_since_start": elapsed, "closed": closed, "later": later}


@scenario
def interrupt_probe(rank, size):
    """Rank 0 blocks in Probe for a message rank 1 never sends; the test sends it SIGINT."""
    dist.init_process_group()
    world = dist.COMM_WORLD
    world.Barrier()
    if rank == 1:
        print("sleeping", flush=True)
        try:
            time.sleep(60)  # never sends; the test interrupts this rank once rank 0 has exited
        except KeyboardInterrupt:
            pass
        return {}
    print("waiting", flush=True)
    start = time.monotonic()
    try:
        world.Probe(source=1, tag=5)
        return {"interrupted": False}
    except KeyboardInterrupt:
        elapsed = time.monotonic() - start
    return {"interrupted": True, "elapsed_since_start": elapsed, "closed": dist.group.WORLD.closed}


@scenario
def interrupt_init(rank, size):
    """Rank 0 waits in init_process_group for a rank that never comes; the test sends SIGINT."""
    print("waiting", flush=True)
    try:
        dist.init_process_group()
        return {"interrupted": False}
    except KeyboardInterrupt:
        return {"interrupted": True, "initialized": dist.is_initialized()}


@scenario
def reduce_scatter_block_in_place(rank, size):
    """MPI: with IN_PLACE only the first n elements of recvbuf change."""
    dist.init_process_group()
    world = dist.COMM_WORLD
    chk = Checker()
    buf = np.full(size, 10 * (rank + 1), np.int32)  # n = 1
    world.Reduce_scatter_block(dist.IN_PLACE, buf, op=ReduceOp.MIN)
    want = np.full(size, 10 * (rank + 1), np.int32)
    want[0] = 10
    chk.equal(buf, want, "MIN, n = 1")
    n = 2
    buf = np.arange(size * n, dtype=np.float64) + 100 * rank
    orig = buf.copy()
    world.Reduce_scatter_block(dist.IN_PLACE, buf)  # SUM
    want = orig.copy()
    want[:n] = sum(np.arange(size * n, dtype=np.float64)[rank * n:(rank + 1) * n] + 100 * r for r in range(size))
    chk.equal(buf, want, "SUM, n = 2")
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks}


@scenario
def torch_habits(rank, size, init_method):
    """torch.distributed code as written for torch: backend first, tensors that require grad."""
    import torch

    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=size, group_name="train")
    chk = Checker()
    param = torch.nn.Parameter(torch.full((4,), float(rank + 1)))
    dist.all_reduce(param)
    chk.equal(param.detach().numpy(), np.full(4, size * (size + 1) / 2, np.float32), "all_reduce(param)")
    chk.true(param.requires_grad and param.grad is None, "param still requires grad, no grad made")
    layer = torch.nn.Linear(3, 2)
    with torch.no_grad():
        layer.weight.fill_(rank)
    dist.broadcast(layer.weight, 0)
    chk.equal(layer.weight.detach().numpy(), np.zeros((2, 3), np.float32), "broadcast(weight, 0)")
    loss = (layer(torch.ones(1, 3)) ** 2).sum()
    loss.backward()
    for p in layer.parameters():
        dist.all_reduce(p.grad, op=ReduceOp.SUM)
        p.grad /= size
    chk.true(layer.bias.grad is not None, "gradients averaged")
    out = [torch.zeros(2, requires_grad=True) for _ in range(size)]
    with torch.no_grad():
        dist.all_gather(out, torch.full((2,), float(rank)))
    chk.equal(torch.stack(out).detach().numpy(), np.repeat(np.arange(size, dtype=np.float32), 2).reshape(size, 2),
              "all_gather into tensors that require grad")
    work = dist.all_reduce(param, async_op=True)
    work.wait()
    chk.equal(param.detach().numpy(), np.full(4, size * size * (size + 1) / 2, np.float32), "async all_reduce")
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks, "torch": torch.__version__}


@scenario
def torch_cuda(rank, size, init_method):
    """torch.distributed calls on CUDA tensors, ranks sharing GPUs (expected values by hand)."""
    import time

    import torch

    torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group("nccl", init_method=init_method, rank=rank, world_size=size)
    chk = Checker()
    total = size * (size + 1) // 2
    # all_reduce on the legacy default stream, odd count, float32 and bfloat16
    x = torch.full((1031,), float(rank + 1), device="cuda")
    dist.all_reduce(x)
    chk.equal(x.cpu().numpy(), np.full(1031, total, np.float32), "all_reduce float32")
    xb = torch.full((4097,), float(rank + 1), device="cuda", dtype=torch.bfloat16)
    dist.all_reduce(xb, op=ReduceOp.MAX)
    chk.equal(xb.float().cpu().numpy(), np.full(4097, size, np.float32), "all_reduce MAX bfloat16")
    # stream order: the call returns while a long kernel still runs on the stream; work
    # queued after it on the same stream sees the sum
    s = torch.cuda.Stream()
    y = torch.full((1 << 20,), float(rank + 1), device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(1 << 31)  # about a second of GPU time
    t0 = time.monotonic()
    dist.all_reduce(y, stream=s)
    returned = time.monotonic() - t0
    with torch.cuda.stream(s):
        y.mul_(2)
    s.synchronize()
    chk.true(returned < 0.5, f"all_reduce on a busy stream returned after {returned:.3f} s")
    chk.equal(y.cpu().numpy(), np.full(1 << 20, 2 * total, np.float32), "all_reduce then mul_ on the stream")
    # async_op: wait() covers the copy back
    z = torch.full((16 << 20,), float(rank + 1), device="cuda")
    work = dist.all_reduce(z, async_op=True)
    work.wait()
    torch.cuda.synchronize()
    chk.equal(z[::4099].cpu().numpy(), np.full(len(range(0, 16 << 20, 4099)), total, np.float32),
              "async all_reduce 64 MiB")
    # broadcast from the last rank, int64
    b = torch.arange(1000, device="cuda", dtype=torch.int64) * (rank + 1)
    dist.broadcast(b, size - 1)
    chk.equal(b.cpu().numpy(), np.arange(1000, dtype=np.int64) * size, "broadcast int64 from the last rank")
    # reduce to rank 0
    r = torch.full((333,), rank + 1, device="cuda", dtype=torch.int32)
    dist.reduce(r, 0, op=ReduceOp.PRODUCT)
    if rank == 0:
        chk.equal(r.cpu().numpy(), np.full(333, np.prod(np.arange(1, size + 1)), np.int32), "reduce PRODUCT int32")
    # all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single
    part = torch.full((5,), float(rank), device="cuda", dtype=torch.float64)
    gathered = torch.empty(5 * size, device="cuda", dtype=torch.float64)
    dist.all_gather_into_tensor(gathered, part)
    chk.equal(gathered.cpu().numpy(), np.repeat(np.arange(size, dtype=np.float64), 5), "all_gather_into_tensor")
    rs_in = torch.arange(3 * size, device="cuda", dtype=torch.float32) + rank
    rs_out = torch.empty(3, device="cuda", dtype=torch.float32)
    dist.reduce_scatter_tensor(rs_out, rs_in)
    want = np.arange(3 * rank, 3 * rank + 3, dtype=np.float32) * size + size * (size - 1) / 2
    chk.equal(rs_out.cpu().numpy(), want.astype(np.float32), "reduce_scatter_tensor")
    a_in = torch.arange(2 * size, device="cuda", dtype=torch.int16) + 100 * rank
    a_out = torch.empty(2 * size, device="cuda", dtype=torch.int16)
    dist.all_to_all_single(a_out, a_in)
    want = np.array([100 * j + 2 * rank + k for j in range(size) for k in range(2)], np.int16)
    chk.equal(a_out.cpu().numpy(), want, "all_to_all_single int16")
    dist.barrier()
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks, "torch": torch.__version__, "gpus": torch.cuda.device_count()}


@scenario
def cupy_cuda(rank, size):
    """mpi4py-style calls on CuPy arrays inside omniccl.cuda_stream (expected values by hand)."""
    import cupy

    cupy.cuda.Device(rank % cupy.cuda.runtime.getDeviceCount()).use()
    world = dist.COMM_WORLD
    chk = Checker()
    x = cupy.full(1 << 16, rank + 1, cupy.float32)
    s = cupy.cuda.Stream(non_blocking=True)
    with dist.cuda_stream(s):
        world.Allreduce(dist.IN_PLACE, x)
        with s:
            x *= 2
    s.synchronize()
    chk.equal(cupy.asnumpy(x), np.full(1 << 16, size * (size + 1), np.float32), "Allreduce IN_PLACE then *2")
    y = cupy.arange(7, dtype=cupy.int64) if rank == 0 else cupy.zeros(7, cupy.int64)
    world.Bcast(y, root=0)
    cupy.cuda.Stream.null.synchronize()
    chk.equal(cupy.asnumpy(y), np.arange(7, dtype=np.int64), "Bcast int64")
    out = cupy.zeros(3 * size, cupy.float64)
    world.Allgather(cupy.full(3, rank, cupy.float64), out)
    cupy.cuda.Stream.null.synchronize()
    chk.equal(cupy.asnumpy(out), np.repeat(np.arange(size, dtype=np.float64), 3), "Allgather float64")
    # A host message probed from any source, then received into a CuPy array on the stream
    # (every rank checks, so that the counts agree: the others check their array is untouched).
    got = cupy.full(6, -1, cupy.int32)
    if rank == 0:
        world.Send(np.array([4, 3, 2], np.int32), dest=size - 1, tag=11)
    elif rank == size - 1:
        msg = world.Mprobe(source=dist.ANY_SOURCE, tag=11)
        with dist.cuda_stream(s):
            msg.Recv(got)
        s.synchronize()
    want = [4, 3, 2, -1, -1, -1] if rank == size - 1 else [-1] * 6
    chk.equal(cupy.asnumpy(got), np.array(want, np.int32), "Mprobe, then Recv into a CuPy array")
    world.Barrier()
    return {"checks": chk.finish()}


@scenario
def torch_cuda_windows(rank, size, init_method):
    """Registered CUDA buffers: in-place all_reduce (one- and two-shot sizes), all_gather, deregistration."""
    import torch

    torch.cuda.set_device(rank % torch.cuda.device_count())
    torch.zeros(1, device="cuda")  # the process uses its GPU before the communicator: the CUDA IPC path
    comm = dist.Communicator.init(init_method, rank, size)
    chk = Checker()
    total = size * (size + 1) // 2
    for n in (1031, 1 << 20):
        x = torch.full((n,), float(rank + 1), device="cuda")
        with comm.register_window(x) as w:
            chk.true(w.registered, "registered")
            comm.Allreduce(dist.IN_PLACE, x)
            torch.cuda.synchronize()
            chk.equal(x.cpu().numpy(), np.full(n, total, np.float32), f"registered in-place all_reduce of {n}")
        chk.true(not w.registered, "deregistered by with")
    src = torch.full((5,), float(rank), device="cuda")
    out = torch.zeros(5 * size, device="cuda")
    with comm.register_window(src), comm.register_window(out):
        comm.Allgather(src, out)
        torch.cuda.synchronize()
    chk.equal(out.cpu().numpy(), np.repeat(np.arange(size, dtype=np.float32), 5), "registered all_gather")
    comm.destroy()
    return {"checks": chk.finish()}


@scenario
def windows_cpu(rank, size):
    """Registering where there is no device path is harmless; bad arguments fail on every rank."""
    comm = dist.COMM_WORLD
    chk = Checker()
    x = np.full(8, rank + 1, np.float32)
    with comm.register_window(x) as w:
        chk.true(w.registered and w.handle != 0, "a handle")
        comm.Allreduce(dist.IN_PLACE, x)
    chk.true(not w.registered and w.handle == 0, "deregistered by with")
    w.deregister()  # twice: nothing happens
    chk.equal(x, np.full(8, size * (size + 1) / 2, np.float32), "all_reduce of the registered array")
    try:
        comm.register_window(np.zeros(0, np.float32))
        chk.true(False, "an empty buffer was registered")
    except dist.InvalidArgumentError as e:
        chk.true("at least one byte" in str(e) and "rank 0" in str(e), f"names the rank and the size: {e}")
    y = np.full(2, rank, np.int64)
    comm.Allreduce(dist.IN_PLACE, y)
    chk.equal(y, np.full(2, sum(range(size)), np.int64), "still usable")
    return {"checks": chk.finish()}


@scenario
def mpi4py_messages(rank, size):
    """mpi4py's buffer specifications, IN_PLACE/None, complex arrays and op names (expected values by hand)."""
    import array as pyarray

    world = dist.COMM_WORLD
    chk = Checker()
    chk.true(world.Get_rank() == rank and world.Get_size() == size, "Get_rank/Get_size")
    # [buf, type], [buf, count, type], [buf, (count, displ), type], [buf, count, displ, type]
    a = np.full(6, rank + 1, np.int32)
    world.Allreduce(dist.IN_PLACE, [a, "i"])
    chk.equal(a, np.full(6, size * (size + 1) // 2, np.int32), "[buf, 'i']")
    b = np.zeros(6, np.float64)
    if rank == 0:
        b[:] = np.arange(6)
    world.Bcast([b, 3, "d"], root=0)
    chk.equal(b, np.array([0, 1, 2, 0, 0, 0] if rank else [0, 1, 2, 3, 4, 5], np.float64), "[buf, count, type]")
    c = np.full(6, -1.0, np.float32)
    if rank == 0:
        c[:] = 7
    world.Bcast([c, (2, 3), "f"], root=0)
    want = np.full(6, 7.0 if rank == 0 else -1.0, np.float32)
    want[3:5] = 7
    chk.equal(c, want, "[buf, (count, displ), type]")
    d = np.full(4, rank, np.int64)
    world.Allreduce(None, [d, 2, 1, "q"], op=dist.MAX)  # None is IN_PLACE
    chk.equal(d, np.array([rank, size - 1, size - 1, rank], np.int64), "[buf, count, displ, type], None")
    # a typed message over raw bytes: 'i' read from a bytearray
    raw = bytearray(np.full(2, rank, np.int32).tobytes())
    world.Allreduce(dist.IN_PLACE, [raw, "i"], op=dist.SUM)
    chk.equal(np.frombuffer(bytes(raw), np.int32), np.full(2, size * (size - 1) // 2, np.int32), "bytes as 'i'")
    # Gather/Scatter: count is per rank; a bare buffer splits equally
    rbuf = np.full(size * 2, -1, np.int16)
    world.Gather([np.full(2, rank, np.int16), "h"], [rbuf, 2, "h"] if rank == 0 else None, root=0)
    if rank == 0:
        chk.equal(rbuf, np.repeat(np.arange(size, dtype=np.int16), 2), "Gather [rbuf, count, type]")
    sbuf = np.repeat(np.arange(size, dtype=np.uint8), 3) if rank == 1 % size else None
    got = np.zeros(3, np.uint8)
    world.Scatter(sbuf, got, root=1 % size)
    chk.equal(got, np.full(3, rank, np.uint8), "Scatter bare buffer split equally")
    # v-variants: [buf, counts], [buf, (counts, displs), type], int count and int displ (stride)
    counts = [i + 1 for i in range(size)]
    allv = np.full(sum(counts), -1, np.int32)
    world.Allgatherv(np.full(rank + 1, rank, np.int32), [allv, counts])
    chk.equal(allv, np.repeat(np.arange(size, dtype=np.int32), counts), "Allgatherv [buf, counts]")
    strided = np.full(size * 4, -1, np.int32)
    world.Allgatherv([np.full(2, rank, np.int32), "i"], [strided, (2, 4), "i"])
    want = np.full(size * 4, -1, np.int32)
    for r in range(size):
        want[4 * r:4 * r + 2] = r
    chk.equal(strided, want, "Allgatherv [buf, (count, stride), type]")
    sv = np.arange(size * 3, dtype=np.float64) if rank == 0 else None
    out = np.zeros(2, np.float64)
    world.Scatterv([sv, 2, 3, "d"] if rank == 0 else None, out, root=0)
    chk.equal(out, np.array([3 * rank, 3 * rank + 1], np.float64), "Scatterv [buf, count, displ, type]")
    gv = np.full(size + 1, -5, np.int8) if rank == 0 else None
    world.Gatherv(np.full(1 if rank else 2, rank, np.int8), gv if rank else [gv, [2] + [1] * (size - 1)], root=0)
    if rank == 0:
        chk.equal(gv, np.array([0, 0] + list(range(1, size)), np.int8), "Gatherv counts")
    # complex: data movement, SUM, AVG and PROD in the C library; MAX refused
    z = np.array([1 + 2j, rank - 1j], np.complex64)
    world.Allreduce(dist.IN_PLACE, z, op=dist.SUM)
    chk.equal(z, np.array([size * (1 + 2j), size * (size - 1) / 2 - size * 1j], np.complex64), "complex64 SUM")
    z2 = np.full(3, rank * (1 + 1j), np.complex128)
    world.Allreduce(dist.IN_PLACE, z2, op=ReduceOp.AVG)
    chk.equal(z2, np.full(3, (size - 1) / 2 * (1 + 1j), np.complex128), "complex128 AVG")
    zg = np.zeros(size, np.complex128)
    world.Allgather(np.array([rank + 1j * rank], np.complex128), zg)
    chk.equal(zg, np.arange(size) * (1 + 1j), "complex128 Allgather")
    zc = np.full(4, 3j, np.complex64) if rank == 0 else np.zeros(4, np.complex64)
    world.Bcast([zc, (1, 2), "F"], root=0)
    if rank:
        chk.equal(zc, np.array([0, 0, 3j, 0], np.complex64), "complex [buf, (1, 2), 'F']")
    zp = np.array([1j, 2 + rank * 1j], np.complex128)
    world.Allreduce(dist.IN_PLACE, zp, op=dist.PROD)
    want = np.array([1j ** size, np.prod([2 + r * 1j for r in range(size)])], np.complex128)
    chk.equal(zp, want, "complex128 PROD", tol=1e-12)
    zr = np.zeros(1, np.complex64)
    world.Reduce(np.array([1 + rank * 1j], np.complex64), zr if rank == 0 else None, op=dist.PROD, root=0)
    if rank == 0:
        chk.equal(zr, np.array([np.prod([1 + r * 1j for r in range(size)])], np.complex64), "complex Reduce PROD",
                  tol=1e-5)
    try:
        world.Allreduce(dist.IN_PLACE, z, op=dist.MAX)
        chk.true(False, "complex MAX accepted")
    except dist.InvalidArgumentError as e:
        chk.true("complex" in str(e) and "MAX" in str(e), f"complex MAX message: {e}")
    # MAXLOC / MINLOC on buffers of (value, index) pairs: values tie across
    # ranks (rank % 2), indices decide (the lower wins); reference by a loop
    def loc_ref(rows, larger):
        best = rows[0]
        for v, i in rows[1:]:
            if (v > best[0] if larger else v < best[0]) or (v == best[0] and i < best[1]):
                best = (v, i)
        return list(best)

    pairs = np.array([[rank % 2, 10 - rank], [5, rank]], np.float64)
    out = np.zeros((2, 2), np.float64)
    world.Allreduce(pairs, out, op=dist.MAXLOC)
    want = [loc_ref([(r % 2, 10 - r) for r in range(size)], True), loc_ref([(5, r) for r in range(size)], True)]
    chk.equal(out, np.array(want, np.float64), "Allreduce MAXLOC on (n, 2) float64")
    ipairs = np.array([rank % 2, 10 - rank, -rank, rank], np.int32)
    iout = np.zeros(4, np.int32)
    world.Reduce(ipairs, iout if rank == 0 else None, op=dist.MINLOC, root=0)
    if rank == 0:
        want = loc_ref([(r % 2, 10 - r) for r in range(size)], False) + loc_ref([(-r, r) for r in range(size)], False)
        chk.equal(iout, np.array(want, np.int32), "Reduce MINLOC on int32 pairs")
    try:
        world.Allreduce(dist.IN_PLACE, np.zeros(3, np.int32), op=dist.MAXLOC)
        chk.true(False, "MAXLOC on an odd count accepted")
    except dist.InvalidArgumentError as e:
        chk.true("odd" in str(e) and "MAXLOC" in str(e), f"MAXLOC odd-count message: {e}")
    # every mpi4py op name on a buffer (int32 and bool), against numpy
    vals = np.array([rank + 1, rank % 2, 3 * rank + 2, 0 if rank else 5], np.int32)
    everyone = [np.array([r + 1, r % 2, 3 * r + 2, 0 if r else 5], np.int32) for r in range(size)]
    ref = {"SUM": np.sum(everyone, axis=0), "PROD": np.prod(everyone, axis=0), "MAX": np.max(everyone, axis=0),
           "MIN": np.min(everyone, axis=0), "BAND": np.bitwise_and.reduce(everyone),
           "BOR": np.bitwise_or.reduce(everyone), "BXOR": np.bitwise_xor.reduce(everyone),
           "LAND": np.logical_and.reduce(everyone).astype(np.int32),
           "LOR": np.logical_or.reduce(everyone).astype(np.int32),
           "LXOR": np.logical_xor.reduce(everyone).astype(np.int32)}
    for name, want in ref.items():
        got = np.zeros(4, np.int32)
        world.Allreduce(vals, got, op=getattr(dist, name))
        chk.equal(got, want.astype(np.int32), f"Allreduce op {name}")
        red = np.zeros(4, np.int32)
        world.Reduce([vals, "i"], red if rank == 0 else None, op=getattr(dist, name), root=0)
        if rank == 0:
            chk.equal(red, want.astype(np.int32), f"Reduce op {name}")
    flags = np.array([True, rank == 0, False], np.bool_)
    world.Allreduce(dist.IN_PLACE, flags, op=dist.LOR)
    chk.equal(flags, np.array([True, True, False]), "LOR on bool, IN_PLACE")
    # Scan / Exscan (buffers and objects)
    sc = np.zeros(2, np.int64)
    world.Scan(np.array([rank + 1, 1], np.int64), sc, op=dist.SUM)
    chk.equal(sc, np.array([(rank + 1) * (rank + 2) // 2, rank + 1], np.int64), "Scan SUM")
    ex = np.full(2, -9, np.int64)
    world.Exscan(np.array([rank + 1, 2], np.int64), ex, op=dist.PROD)
    chk.equal(ex, np.array([-9, -9] if rank == 0 else [int(np.prod(np.arange(1, rank + 1))), 2 ** rank], np.int64),
              "Exscan PROD")
    # logical ops and prefixes through the C library: floats (NaN true, -0.0 false), in place
    fl = np.array([np.nan if rank == 0 else 1.5, -0.0, 2.0 if rank % 2 else 0.0], np.float64)
    world.Scan(dist.IN_PLACE, fl, op=dist.LAND)
    chk.equal(fl, np.array([1.0, 0.0, 0.0]), "Scan LAND float64 IN_PLACE")
    lx = np.full(2, -3, np.int8)
    world.Exscan(np.array([rank, 7], np.int8), lx, op=dist.LXOR)
    chk.equal(lx, np.array([-3, -3] if rank == 0 else [(rank - 1) % 2, rank % 2], np.int8), "Exscan LXOR int8")
    rsb = np.zeros(2, np.int32)
    world.Reduce_scatter_block(np.array([0] * (2 * size), np.int32) + (rank == size - 1) * 5, rsb, op=dist.LOR)
    chk.equal(rsb, np.array([1, 1], np.int32), "Reduce_scatter_block LOR")
    zs = np.zeros(1, np.complex128)
    world.Scan(np.array([1 + 1j], np.complex128), zs, op=dist.PROD)
    chk.equal(zs, np.array([(1 + 1j) ** (rank + 1)]), "complex Scan PROD", tol=1e-12)
    for bad in (dist.ReduceOp.AVG, dist.ReduceOp.PREMUL_SUM):
        try:
            world.Scan(np.ones(2, np.float32), np.zeros(2, np.float32), op=bad)
            chk.true(False, f"Scan {bad!r} accepted")
        except dist.InvalidArgumentError as e:
            chk.true("prefix" in str(e), f"Scan {bad!r} message: {e}")
    # Prefix MAXLOC / MINLOC over (value, index) pairs, by the C library;
    # the reference: a loop over the earlier ranks' pairs, ties to the lower index.
    def pair(q):
        return ((3 * q + 1) % 4, q)
    mine = np.array([pair(rank)], np.int32)
    got = np.full((1, 2), -7, np.int32)
    world.Exscan(mine, got, op=dist.MAXLOC)
    best = None
    for q in range(rank):
        v, i = pair(q)
        if best is None or v > best[0]:
            best = (v, i)
    chk.equal(got, np.array([best if best is not None else (-7, -7)], np.int32), "Exscan MAXLOC pairs")
    world.Scan(mine, got, op=dist.MINLOC)
    low = min(pair(q) for q in range(rank + 1))  # smaller value, then smaller index
    chk.equal(got, np.array([low], np.int32), "Scan MINLOC pairs")
    chk.true(world.scan(rank, op=dist.SUM) == rank * (rank + 1) // 2, "scan object")
    chk.true(world.exscan(rank) == (None if rank == 0 else rank * (rank - 1) // 2), "exscan object")
    # Reduce_scatter with per-rank counts
    rc = [r + 1 for r in range(size)]
    rs_in = np.arange(sum(rc), dtype=np.float64) * (rank + 1)
    rs_out = np.zeros(rc[rank], np.float64)
    world.Reduce_scatter(rs_in, rs_out, rc, op=dist.SUM)
    start = sum(rc[:rank])
    chk.equal(rs_out, np.arange(start, start + rc[rank], dtype=np.float64) * (size * (size + 1) / 2),
              "Reduce_scatter counts")
    rl = np.full(rc[rank], 7, np.int16)
    world.Reduce_scatter(np.full(sum(rc), rank + 1, np.int16), rl, rc, op=dist.LAND)
    chk.equal(rl, np.ones(rc[rank], np.int16), "Reduce_scatter LAND")
    # object methods
    chk.true(world.allreduce((rank % 2, rank), op=dist.MAXLOC) == (1 if size > 1 else 0, 1 if size > 1 else 0),
             "allreduce MAXLOC")
    chk.true(world.allreduce((rank % 2, rank), op=dist.MINLOC) == (0, 0), "allreduce MINLOC")
    chk.true(world.allreduce(rank > 0, op=dist.LAND) is False, "allreduce LAND")
    chk.true(world.allreduce(rank == size - 1, op=dist.LOR) is True, "allreduce LOR")
    chk.true(world.reduce([rank], op=dist.SUM, root=0) == (list(range(size)) if rank == 0 else None), "reduce list")
    chk.true(world.bcast({"r": rank}, root=size - 1) == {"r": size - 1}, "bcast")
    chk.true(world.gather(rank * 2, root=0) == ([2 * r for r in range(size)] if rank == 0 else None), "gather")
    chk.true(world.scatter([f"x{r}" for r in range(size)] if rank == 0 else None, root=0) == f"x{rank}", "scatter")
    chk.true(world.alltoall([(rank, r) for r in range(size)]) == [(r, rank) for r in range(size)], "alltoall")
    chk.true(world.allgather(None) == [None] * size, "allgather None")
    # Split, Dup, Free
    half = world.Split(rank % 2, -rank)
    chk.true(half.Get_size() == len(range(rank % 2, size, 2)) and half.Get_rank() == len(range(rank % 2, size, 2)) - 1
             - rank // 2, "Split key orders ranks")
    half.Free()
    dup = world.Dup()
    chk.true(dup.Get_size() == size and dup.Get_rank() == rank and dup is not world, "Dup")
    x = pyarray.array("d", [rank])
    dup.Allreduce(dist.IN_PLACE, [x, "d"])
    chk.equal(np.asarray(x), np.array([size * (size - 1) / 2]), "Dup works")
    dup.Free()
    dup.Free()  # twice is fine
    for name in ("Isendrecv", "Get_group", "Create_cart"):
        try:
            getattr(world, name)()
            chk.true(False, f"{name} did not raise")
        except NotImplementedError as e:
            chk.true(name in str(e), f"{name}: {e}")
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks}


@scenario
def gil_free_while_waiting(rank, size):
    """Rank 0 waits ~1 s in a blocking barrier while a Python thread of its own counts."""
    import threading

    dist.init_process_group()
    dist.barrier()
    if rank == 1:
        time.sleep(1.0)
        dist.barrier()
        return {}
    counted = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counted[0] += 1

    t = threading.Thread(target=count)
    t.start()
    start = time.monotonic()
    dist.barrier()  # blocking: runs on this thread, no Work, no hand-off
    waited = time.monotonic() - start
    stop.set()
    t.join()
    return {"waited": waited, "counted": counted[0]}


# ----------------------------------------------------------------------------- point to point
@scenario
def p2p_semantics(rank, size):
    """mpi4py point-to-point: tags, wildcards, Status, upper-bound counts, truncation, self, PROC_NULL, requests."""
    dist.init_process_group()
    world = dist.COMM_WORLD
    chk = Checker()
    right, left = (rank + 1) % size, (rank - 1) % size
    # The case: tag 1 then tag 2; Recv(tag=2) must get 2.0, tag 1 is kept.
    if rank == 0 and size > 1:
        world.Send(np.array([1.0], np.float32), dest=1, tag=1)
        world.Send(np.array([2.0], np.float32), dest=1, tag=2)
    elif rank == 1:
        got = np.zeros(1, np.float32)
        st = dist.RecvStatus()
        world.Recv(got, source=0, tag=2, status=st)
        chk.equal(got, np.array([2.0], np.float32), "Recv(tag=2)")
        chk.true((st.Get_source(), st.Get_tag(), st.Get_count(), st.Get_count("f")) == (0, 2, 4, 1),
                 f"status after Recv(tag=2): {st!r}")
        world.Recv(got, source=dist.ANY_SOURCE, tag=dist.ANY_TAG, status=st)
        chk.equal(got, np.array([1.0], np.float32), "then Recv(ANY_TAG)")
        chk.true(st.tag == 1 and st.source == 0, f"status after Recv(ANY_TAG): {st!r}")
    # A smaller message into a larger buffer; a larger one is TruncatedError and the comm goes on.
    send = np.arange(3, dtype=np.int64) + 10 * rank
    reqs = [world.Isend(send, dest=right, tag=7), world.Isend(np.arange(9, dtype=np.int64), dest=right, tag=8)]
    big = np.full(5, -1, np.int64)
    st = dist.RecvStatus()
    world.Recv(big, source=left, tag=7, status=st)
    chk.equal(big, np.array([10 * left, 10 * left + 1, 10 * left + 2, -1, -1], np.int64), "3 into 5")
    chk.true(st.Get_count("q") == 3 and st.source == left, f"status of 3 into 5: {st!r}")
    try:
        world.Recv(big, source=left, tag=8, status=st)
        chk.true(False, "9 into 5 did not raise")
    except dist.TruncatedError as e:
        chk.true("truncat" in str(e).lower(), f"TruncatedError message: {e}")
        chk.equal(big, np.arange(5, dtype=np.int64), "a truncated receive holds the first part")
    statuses = []
    dist.Request.Waitall(reqs, statuses)
    chk.true(not any(reqs), "requests are falsy once complete")
    chk.true(len(statuses) == 2, "Waitall fills the list of statuses it is given")
    # Sends to self, in either order; PROC_NULL.
    a = np.zeros(2, np.int32)
    world.Send(np.array([rank, 5], np.int32), dest=rank, tag=3)
    world.Recv(a, source=rank, tag=3)
    chk.equal(a, np.array([rank, 5], np.int32), "send then recv to self")
    r = world.Irecv(a, source=rank, tag=4)
    chk.true(bool(r), "a running request is truthy")
    world.Send(np.array([6, rank], np.int32), dest=rank, tag=4)
    r.Wait(st)
    chk.equal(a, np.array([6, rank], np.int32), "irecv then send to self")
    chk.true(st.source == rank and st.tag == 4 and not r, f"status of the self receive: {st!r}")
    world.Send(a, dest=dist.PROC_NULL)
    world.Send(None, dest=dist.PROC_NULL)  # None is an empty buffer for PROC_NULL, as in mpi4py
    world.Irecv(None, source=dist.PROC_NULL).Wait()
    world.Recv(a, source=dist.PROC_NULL, status=st)
    chk.true(st.source == dist.PROC_NULL and st.tag == dist.ANY_TAG and st.Get_count() == 0,
             f"PROC_NULL status: {st!r}")
    # Sendrecv and Sendrecv_replace around the ring.
    out = np.full(4, rank, np.float64)
    inn = np.zeros(4, np.float64)
    world.Sendrecv(out, dest=right, sendtag=11, recvbuf=inn, source=left, recvtag=11, status=st)
    chk.equal(inn, np.full(4, left, np.float64), "Sendrecv")
    buf = np.full(3, rank, np.int16)
    world.Sendrecv_replace(buf, dest=right, source=dist.ANY_SOURCE, status=st)
    chk.equal(buf, np.full(3, left, np.int16), "Sendrecv_replace")
    chk.true(st.source == left, f"Sendrecv_replace status: {st!r}")
    # Waitany / Testall over requests.
    outs = [np.zeros(1, np.int32) for _ in range(3)]
    rr = [world.Irecv(outs[i], source=left, tag=20 + i) for i in range(3)]
    if size == 1:  # (with more ranks the left one may have sent already)
        chk.true(not dist.Request.Testall(rr), "Testall before any send")
    for i in reversed(range(3)):
        world.Send(np.array([100 * rank + i], np.int32), dest=right, tag=20 + i)
    seen = sorted(dist.Request.Waitany(rr) for _ in range(3))
    chk.true(seen == [0, 1, 2], f"Waitany indices {seen}")
    chk.true(dist.Request.Waitany(rr) == dist.UNDEFINED, "Waitany over completed requests")
    chk.true(dist.Request.Testall(rr), "Testall after completion")
    chk.equal(np.concatenate(outs), np.array([100 * left + i for i in range(3)], np.int32), "Waitany data")
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks}


@scenario
def p2p_objects(rank, size):
    """mpi4py object point-to-point: send/recv with tags and status, isend/irecv/issend, sendrecv, big objects."""
    dist.init_process_group()
    world = dist.COMM_WORLD
    chk = Checker()
    right, left = (rank + 1) % size, (rank - 1) % size
    st = dist.RecvStatus()
    req = world.isend({"from": rank, "n": list(range(5))}, dest=right, tag=5)
    got = world.recv(source=dist.ANY_SOURCE, tag=5, status=st)
    req.wait()
    chk.true(got == {"from": left, "n": list(range(5))} and st.source == left and st.tag == 5,
             f"isend/recv: {got!r} {st!r}")
    big = b"x" * (300 << 10) + bytes([rank])  # over the first part: two messages
    r = world.irecv(source=left, tag=6)
    s = world.issend(big, dest=right, tag=6)
    obj = r.wait()
    s.wait()
    chk.true(obj == b"x" * (300 << 10) + bytes([left]), "large object through irecv/issend")
    chk.true(not r and not s, "object requests are falsy once complete")
    got = world.sendrecv(("hello", rank), dest=right, sendtag=1, source=left, recvtag=1)
    chk.true(got == ("hello", left), f"sendrecv: {got!r}")
    # Tags pick among objects from one sender, out of send order.
    if rank == 0 and size > 1:
        world.send("first", dest=1, tag=1)
        world.send("second", dest=1, tag=2)
    elif rank == 1:
        chk.true(world.recv(source=0, tag=2) == "second", "object recv by tag 2")
        chk.true(world.recv(source=0, tag=1) == "first", "object recv by tag 1")
    reqs = [world.irecv(source=dist.ANY_SOURCE, tag=9), world.isend(rank * 10, dest=right, tag=9)]
    values = dist.Request.waitall(reqs)
    chk.true(values[0] == left * 10 and values[1] is None, f"waitall objects: {values!r}")
    chk.true(world.recv(source=dist.PROC_NULL) is None, "object recv from PROC_NULL")
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks}


@scenario
def p2p_probe(rank, size):
    """Probe/Iprobe/probe/iprobe: nothing before a send, the first match in arrival order after it,
    the probed message then received by its source and tag, objects, PROC_NULL and bad sources."""
    dist.init_process_group()
    world = dist.COMM_WORLD
    chk = Checker()
    st = dist.RecvStatus()
    st.Set_source(77)
    chk.true(world.Iprobe(status=st) is False and st.source == 77, f"Iprobe before any send: {st!r}")
    chk.true(world.iprobe() is None, "iprobe before any send")
    world.Barrier()
    # Every other rank sends rank 0 a tag-(10 + r) array of r + 1 int32 values, then an object.
    if rank != 0:
        world.Send(np.full(rank + 1, rank, np.int32), dest=0, tag=10 + rank)
        world.send({"from": rank}, dest=0, tag=40)
    else:
        for _ in range(size - 1):
            got = world.probe(source=dist.ANY_SOURCE, tag=dist.ANY_TAG, status=st)
            src = got.source
            chk.true(isinstance(got, dist.RecvStatus) and bool(got), f"probe returns a RecvStatus: {got!r}")
            chk.true((src, got.tag, got.Get_count("i")) == (src, 10 + src, src + 1) and 1 <= src < size,
                     f"probe(ANY, ANY) status: {got!r}")
            chk.true((st.source, st.tag, st.Get_count()) == (src, 10 + src, 4 * (src + 1)), f"status= filled: {st!r}")
            chk.true(world.Probe(src, dist.ANY_TAG, st) is True and st.tag == 10 + src, f"Probe again: {st!r}")
            buf = np.zeros(st.Get_count("i"), np.int32)
            rs = dist.RecvStatus()
            world.Recv(buf, source=src, tag=st.tag, status=rs)
            chk.equal(buf, np.full(src + 1, src, np.int32), f"the probed message from {src}")
            chk.true(rs.source == src and rs.Get_count("i") == src + 1, f"its receive status: {rs!r}")
            # The same rank's object follows its array: poll for it (bounded), then receive it.
            deadline = time.monotonic() + 20
            found = None
            while found is None and time.monotonic() < deadline:
                found = world.iprobe(src, 40)
            chk.true(found is not None and found.source == src and found.tag == 40, f"iprobe of the object: {found!r}")
            flag = world.Iprobe(src, 40, st)
            chk.true(flag is True and st.source == src, f"Iprobe of the object: {flag} {st!r}")
            chk.true(world.recv(source=src, tag=40) == {"from": src}, "the probed object")
            chk.true(world.iprobe(src) is None, "nothing left from that rank")
    # PROC_NULL and bad sources.
    got = world.probe(dist.PROC_NULL)
    chk.true((got.source, got.tag, got.Get_count()) == (dist.PROC_NULL, dist.ANY_TAG, 0), f"probe(PROC_NULL): {got!r}")
    chk.true(world.Iprobe(dist.PROC_NULL, 3, st) is True and st.source == dist.PROC_NULL, f"Iprobe(PROC_NULL): {st!r}")
    for bad in (size, -5):
        try:
            world.Iprobe(bad)
            chk.true(False, f"Iprobe({bad}) did not raise")
        except dist.InvalidArgumentError as e:
            chk.true("source" in str(e) and str(bad) in str(e), f"Iprobe({bad}): {e}")
    try:
        world.Probe(0, -4)
        chk.true(False, "Probe(tag=-4) did not raise")
    except dist.InvalidArgumentError as e:
        chk.true("tag" in str(e), f"Probe(tag=-4): {e}")
    x = np.array([rank], np.int64)
    world.Allreduce(dist.IN_PLACE, x)
    chk.equal(x, np.array([size * (size - 1) // 2], np.int64), "the communicator still works")
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks}


@scenario
def fast_path(rank, size):
    """The common small blocking calls take the one-call native path, the other forms the general one.

    Counts what the native entry points (omniccl.comm's fast_* names) answer:
    None = handled there, NotImplemented = left to the general path. Results
    are checked either way.
    """
    from omniccl import comm as comm_mod
    from omniccl import distributed as dist_mod

    answers = {}

    def counted(module, name):
        real = getattr(module, name)

        def wrapper(*a):
            r = real(*a)
            answers.setdefault(name, []).append("handled" if r is None else "general")
            return r
        return wrapper

    for module in (comm_mod, dist_mod):  # mpi4py-style methods and torch-style functions
        for name in ("fast_all_reduce", "fast_broadcast", "fast_all_gather", "fast_barrier"):
            setattr(module, name, counted(module, name))
    dist.init_process_group()
    world = dist.COMM_WORLD
    chk = Checker()
    total = size * (size + 1) / 2

    def took(name, form):
        got = answers.pop(name, [])
        chk.equal(got, ["handled"], f"{form}: the native path's answers")

    x = np.full(2, rank + 1, np.float32)  # 8 bytes
    dist.all_reduce(x)
    took("fast_all_reduce", "all_reduce(x)")
    chk.equal(x.tolist(), [total] * 2, "all_reduce(x)")
    x[:] = rank + 1
    world.Allreduce(dist.IN_PLACE, x)
    took("fast_all_reduce", "Allreduce(IN_PLACE, x)")
    chk.equal(x.tolist(), [total] * 2, "Allreduce(IN_PLACE, x)")
    b = np.full(2, rank, np.float32)
    dist.broadcast(b, 0)
    took("fast_broadcast", "broadcast(b, 0)")
    chk.equal(b.tolist(), [0.0, 0.0], "broadcast")
    b[:] = rank
    world.Bcast(b, 0)
    took("fast_broadcast", "Bcast(b, 0)")
    chk.equal(b.tolist(), [0.0, 0.0], "Bcast")
    g = np.zeros(2 * size, np.float32)
    dist.all_gather_into_tensor(g, np.full(2, rank, np.float32))
    took("fast_all_gather", "all_gather_into_tensor")
    chk.equal(g.tolist(), [float(r) for r in range(size) for _ in range(2)], "all_gather_into_tensor")
    dist.barrier()
    took("fast_barrier", "barrier()")
    world.Barrier()
    took("fast_barrier", "Barrier()")
    # An mpi4py message list is the general path's to read; the result is the same.
    y = np.full(2, rank + 1, np.float32)
    world.Allreduce(dist.IN_PLACE, [y, "f"])
    chk.true(answers.pop("fast_all_reduce", ["general"]) in (["general"], []),
             "a message list went through the native path")
    chk.equal(y.tolist(), [total] * 2, "Allreduce(IN_PLACE, [y, 'f'])")
    dist.destroy_process_group()
    return chk.finish()


@scenario
def p2p_modes(rank, size):
    """Buffered, synchronous and ready sends, and persistent requests (mpi4py's send modes)."""
    dist.init_process_group()
    world = dist.COMM_WORLD
    chk = Checker()
    right, left = (rank + 1) % size, (rank - 1) % size
    n = 5
    # Buffered: Bsend returns once the data is copied; the caller may reuse its buffer at once.
    try:
        world.Bsend(np.zeros(n, np.int32), right, 1)
        chk.true(False, "Bsend without an attached buffer should raise")
    except dist.InvalidArgumentError as e:
        chk.true("Attach_buffer" in str(e), f"Bsend without a buffer: {e}")
    mem = dist.Alloc_mem(2 * (4 * n + dist.BSEND_OVERHEAD))
    dist.Attach_buffer(mem)
    try:
        dist.Attach_buffer(bytearray(10))
        chk.true(False, "a second Attach_buffer should raise")
    except dist.InvalidArgumentError:
        pass
    src = np.full(n, rank, np.int32)
    world.Bsend(src, right, 1)
    src[:] = -7  # reused at once: what was sent is the value at the call
    world.Ibsend(np.full(n, 10 + rank, np.int32), right, 2).Wait()
    try:
        world.Bsend(np.zeros(100, np.int32), right, 3)  # 400 bytes: more than the whole buffer holds
        chk.true(False, "Bsend over the attached buffer's size should raise")
    except dist.InvalidArgumentError as e:
        chk.true("attached buffer" in str(e), f"Bsend too big: {e}")
    got = np.zeros(n, np.int32)
    world.Recv(got, left, 2)
    chk.equal(got, np.full(n, 10 + left, np.int32), "Ibsend by tag 2")
    world.Recv(got, left, 1)
    chk.equal(got, np.full(n, left, np.int32), "Bsend copy")
    chk.true(dist.Detach_buffer() is mem, "Detach_buffer returns the attached buffer")
    world.Bsend(None, dist.PROC_NULL)  # PROC_NULL needs no buffer
    # Synchronous and ready sends (p2p_sync_cancel checks what makes a send synchronous).
    for tag, send in ((4, world.Ssend), (5, world.Rsend), (6, lambda *a: world.Issend(*a).Wait()),
                      (7, lambda *a: world.Irsend(*a).Wait())):
        # Posted first (a synchronous send needs its receive to make progress). No
        # barrier here to order the peers' receives before the ready sends: operations
        # run in issue order, so it would wait behind this receive; OmniCCL's ready
        # send is a standard send, which needs no posted receive.
        r = world.Irecv(got, left, tag)
        send(np.full(n, rank + tag, np.int32), right, tag)
        r.Wait()
        chk.equal(got, np.full(n, left + tag, np.int32), f"send mode with tag {tag}")
    # Persistent requests, started three times each.
    sbuf = np.zeros(n, np.float64)
    rbuf = np.full(n + 2, -1.0)
    sreq = world.Send_init(sbuf, right, 17)
    rreq = world.Recv_init(rbuf, left, 17)
    chk.true(sreq != dist.REQUEST_NULL and not sreq, "an inactive persistent request is not null")
    for it in range(3):
        sbuf[:] = rank * 100 + it
        dist.Prequest.Startall([rreq, sreq])
        st = dist.RecvStatus()
        dist.Request.Waitall([sreq, rreq], [dist.RecvStatus(), st])
        chk.equal(rbuf, np.array([left * 100 + it] * n + [-1.0, -1.0]), f"persistent round {it}")
        chk.true((st.Get_source(), st.Get_tag(), st.Get_count("d")) == (left, 17, n), f"status {it}")
    chk.true(dist.Request.Waitany([sreq, rreq]) == dist.UNDEFINED, "Waitany over inactive requests")
    sreq.Free()
    rreq.Free()
    chk.true(sreq == dist.REQUEST_NULL and rreq == dist.REQUEST_NULL, "freed persistent requests are null")
    try:
        sreq.Start()
        chk.true(False, "Start after Free should raise")
    except dist.InvalidArgumentError:
        pass
    # Object forms.
    mem = dist.Alloc_mem((1 << 16) + dist.BSEND_OVERHEAD)
    dist.Attach_buffer(mem)
    world.bsend({"r": rank}, right, 8)
    world.ibsend([rank], right, 9).wait()
    chk.true(world.recv(source=left, tag=9) == [left], "ibsend object")
    chk.true(world.recv(source=left, tag=8) == {"r": left}, "bsend object")
    dist.Detach_buffer()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        world.recv(bytearray(0), dist.PROC_NULL)
    chk.true([str(w.message) for w in caught] == ["the 'buf' argument is deprecated"],
             f"recv(buf) warns as mpi4py: {caught}")
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks}


@scenario
def p2p_sync_cancel(rank, size):
    """Synchronous sends complete only once matched (to this rank and to another), Cancel of a pending
    receive or an unmatched Issend to itself (Is_cancelled), Get_status leaving a request active, and
    [None, 0, type] buffer specs."""
    dist.init_process_group()
    world = dist.COMM_WORLD
    chk = Checker()
    # Issend to itself: pending until its receive, which a probe is not.
    req = world.Issend(np.arange(3, dtype=np.int32), rank, 5)
    time.sleep(0.02)
    chk.true(bool(req) and not req.Test(), "Issend to self completed before its receive")
    st = world.probe(rank, 5)
    chk.true(st.source == rank and st.tag == 5 and not req.Test(), "a probe completed the Issend")
    got = np.zeros(3, np.int32)
    world.Recv(got, rank, 5)
    chk.equal(got, np.arange(3, dtype=np.int32), "Issend to self received")
    chk.true(req.Test() and not req, "Issend to self complete once its receive has returned")
    # Object form: issend of an object (small, and one of two messages) to itself.
    for obj in ({"r": rank}, bytes(100_000)):
        oreq = world.issend(obj, rank, 6)
        chk.true(not oreq.test()[0], f"issend of {len(repr(obj))}-char object completed before its recv")
        chk.true(world.recv(source=rank, tag=6) == obj, "issend object to self received")
        chk.true(oreq.wait() is None and not oreq, "issend object completes after its recv")
    # Blocking Ssend to itself with no receive posted: an error, not a hang.
    try:
        world.Ssend(np.zeros(1, np.int32), rank, 7)
        chk.true(False, "Ssend to self with no receive should raise")
    except dist.MismatchError as e:
        chk.true("itself" in str(e), f"Ssend to self: {e}")
    chk.true(world.iprobe(rank, 7) is None, "the refused Ssend left a message")
    # To another rank: pending until the receiver, 0.5 s later, has posted its receive.
    world.Barrier()
    if size > 1 and rank == 0:
        t0 = time.monotonic()
        req = world.Issend(np.full(4, 9, np.int64), 1, 8)
        time.sleep(0.2)
        chk.true(not req.Test(), "Issend to rank 1 completed before rank 1 received")
        req.Wait()
        chk.true(time.monotonic() - t0 >= 0.4, f"Issend completed after {time.monotonic() - t0:.3f} s")
        t0 = time.monotonic()
        world.ssend("x", 1, 9)
        chk.true(time.monotonic() - t0 >= 0.4, f"ssend returned after {time.monotonic() - t0:.3f} s")
    elif size > 1 and rank == 1:
        time.sleep(0.5)
        got = np.zeros(4, np.int64)
        world.Recv(got, 0, 8)
        chk.equal(got, np.full(4, 9, np.int64), "Issend from rank 0")
        time.sleep(0.5)
        chk.true(world.recv(source=0, tag=9) == "x", "ssend from rank 0")
    # Cancel a pending receive (buffer and object): completes, moves nothing, status says so.
    buf = np.full(2, -1, np.int32)
    rreq = world.Irecv(buf, rank, 10)
    rreq.Cancel()
    st = dist.RecvStatus()
    chk.true(rreq.Get_status(st) and st.Is_cancelled() and bool(rreq), "Get_status of a cancelled Irecv")
    rreq.Wait(st)
    chk.true(st.Is_cancelled() and not rreq, "Wait of a cancelled Irecv")
    world.Send(np.full(2, 4, np.int32), rank, 10)
    chk.equal(buf, np.full(2, -1, np.int32), "a cancelled Irecv wrote")
    world.Recv(buf, rank, 10)
    chk.equal(buf, np.full(2, 4, np.int32), "the message went to the next receive")
    oreq = world.irecv(source=dist.ANY_SOURCE, tag=11)
    oreq.cancel()
    st = dist.RecvStatus()
    chk.true(oreq.wait(st) is None and st.Is_cancelled(), "a cancelled object irecv")
    # Cancel an Issend to itself no receive has matched: its message is gone; Free makes it falsy.
    req = world.Issend(np.zeros(1, np.int32), rank, 12)
    req.Cancel()
    st = dist.RecvStatus()
    chk.true(req.Get_status(st) and st.Is_cancelled() and bool(req), "Get_status of a cancelled Issend")
    req.Free()
    chk.true(not req and world.iprobe(rank, 12) is None, "a cancelled Issend left its message")
    # A completed standard send is not cancelled; Get_status leaves it active until Wait.
    sreq = world.Isend(np.zeros(1, np.int32), rank, 13)
    time.sleep(0.01)
    st = dist.RecvStatus()
    while not sreq.Get_status(st):
        time.sleep(0.001)
    sreq.Cancel()
    chk.true(bool(sreq), "Get_status made the request inactive")
    sreq.Wait(st)
    chk.true(not st.Is_cancelled() and not sreq, "a completed send reported cancelled")
    world.Recv(np.zeros(1, np.int32), rank, 13)
    # [None, 0, type]: an empty message, as mpi4py allows.
    req = world.Issend([None, 0, "B"], rank, 14)
    st = dist.RecvStatus()
    world.Recv([None, 0, "B"], rank, 14, st)
    chk.true(req.Wait() and st.Get_count("B") == 0 and st.tag == 14, f"[None, 0, 'B'] message: {st!r}")
    try:
        world.Send([None, 3, "B"], rank, 15)
        chk.true(False, "[None, 3, 'B'] should be refused")
    except TypeError as e:
        chk.true("None" in str(e), f"[None, 3, 'B'] refused with: {e}")
    world.Barrier()
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks}


@scenario
def p2p_mprobe(rank, size):
    """Matched probes: Mprobe/Improbe take the message out of matching (a plain receive then gets the
    next one), Message.Recv/Irecv/recv/irecv receive exactly it, once; objects of one and two messages;
    PROC_NULL gives MESSAGE_NO_PROC."""
    dist.init_process_group()
    world = dist.COMM_WORLD
    chk = Checker()
    right, left = (rank + 1) % size, (rank - 1) % size
    chk.true(world.Improbe(left, 99) is None, "Improbe of a tag nobody sends")
    world.Send(np.full(3, 1, np.int32), right, 20)
    world.Send(np.full(3, 2, np.int32), right, 20)
    st = dist.RecvStatus()
    msg = world.Mprobe(dist.ANY_SOURCE, 20, st)
    chk.true(bool(msg) and st.source == left and st.tag == 20 and st.Get_count("i") == 3, f"Mprobe status {st!r}")
    got = np.zeros(3, np.int32)
    world.Recv(got, left, 20)
    chk.equal(got, np.full(3, 2, np.int32), "a plain Recv after Mprobe gets the next message")
    msg.Recv(got, st)
    chk.equal(got, np.full(3, 1, np.int32), "Message.Recv gets the probed message")
    chk.true(not msg and msg == dist.MESSAGE_NULL and st.source == left, "a received Message is MESSAGE_NULL")
    try:
        msg.Recv(got)
        chk.true(False, "a second Message.Recv should raise")
    except dist.InvalidArgumentError as e:
        chk.true("MESSAGE_NULL" in str(e), f"second Recv: {e}")
    # Improbe until there, then Irecv.
    world.Send(np.full(2, 7.5), right, 21)
    found = None
    for _ in range(20000):
        found = world.Improbe(left, 21)
        if found is not None:
            break
        time.sleep(0.0001)
    chk.true(found is not None, "Improbe never found the message")
    fbuf = np.zeros(2)
    req = found.Irecv(fbuf)
    st = dist.RecvStatus()
    req.Wait(st)
    chk.equal(fbuf, np.full(2, 7.5), "Message.Irecv")
    chk.true(st.tag == 21 and st.Get_count("d") == 2 and not found, f"Irecv status {st!r}")
    # Objects: one message and two (over 64 KiB).
    big = bytes(range(256)) * 400
    world.send({"from": rank}, right, 22)
    world.send(big, right, 23)
    chk.true(world.mprobe(left, 22).recv() == {"from": left}, "Message.recv of an object")
    omsg = None
    while omsg is None:
        omsg = world.improbe(left, 23)
    chk.true(omsg.irecv().wait() == big, "Message.irecv of a two-message object")
    # PROC_NULL.
    nmsg = world.Mprobe(dist.PROC_NULL)
    chk.true(nmsg == dist.MESSAGE_NO_PROC and bool(nmsg), f"Mprobe(PROC_NULL) {nmsg!r}")
    st = dist.RecvStatus()
    nmsg.Recv(None, st)
    chk.true(st.source == dist.PROC_NULL and st.Get_count() == 0 and not nmsg, f"NO_PROC Recv {st!r}")
    st = dist.RecvStatus()
    chk.true(dist.MESSAGE_NO_PROC.recv(st) is None and st.source == dist.PROC_NULL and bool(dist.MESSAGE_NO_PROC),
             "MESSAGE_NO_PROC.recv leaves the constant as it is")
    world.Barrier()
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks}

@scenario
def p2p_pickle_format(rank, size):
    """Object messages are plain pickles, as mpi4py's: raw pickle bytes sent with Isend are received
    as an object, an empty message as None, and a small object's message is its pickle."""
    import pickle  # noqa: PLC0415
    dist.init_process_group()
    world = dist.COMM_WORLD
    chk = Checker()
    right, left = (rank + 1) % size, (rank - 1) % size
    obj = {"rank": rank, "data": list(range(10))}
    req = world.Isend([pickle.dumps(obj), "B"], right, 30)
    chk.true(world.recv(source=left, tag=30) == {"rank": left, "data": list(range(10))}, "raw pickle as object")
    req.Wait()
    req = world.Isend([None, 0, "B"], right, 31)
    chk.true(world.recv(source=left, tag=31) is None, "an empty message is None")
    req.Wait()
    world.send(obj, right, 32)
    st = dist.RecvStatus()
    world.Probe(left, 32, st)
    buf = bytearray(st.Get_count("B"))
    world.Recv([buf, "B"], left, 32)
    chk.true(pickle.loads(buf) == {"rank": left, "data": list(range(10))}, "a sent object is its pickle")
    big = bytes(200_000)
    world.send(big, right, 33)
    chk.true(world.recv(source=left, tag=33) == big, "an object over 64 KiB")
    world.Barrier()
    checks = chk.finish()
    dist.destroy_process_group()
    return {"checks": checks}

def main():
    name = sys.argv[1]
    args = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    rank = int(os.environ.get("RANK", "0"))
    size = int(os.environ.get("WORLD_SIZE", "1"))
    try:
        result = SCENARIOS[name](rank, size, **args)
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        raise
    print("RESULT " + json.dumps(result, default=repr), flush=True)


if __name__ == "__main__":
    main()


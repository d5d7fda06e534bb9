"""Rank programs for the mpi4py-surface tests (non-blocking collectives, user ops, datatypes, error classes).

Run as workers.py is (``python mpi_workers.py SCENARIO '{"json": "args"}'``,
through conftest.run_ranks(..., script=MPI_WORKERS)). Expected values are
written out from the data each rank contributes, with plain numpy, never with
the code under test.
"""

from __future__ import annotations

import time

import numpy as np

import omniccl as dist
from workers import Checker, main, scenario


def _world():
    dist.init_process_group()
    return dist.COMM_WORLD


def _done(world, chk):
    checks = chk.finish()
    world.Barrier()
    dist.destroy_process_group()
    return {"checks": checks}


@scenario
def nonblocking_collectives(rank, size):
    world = _world()
    chk = Checker()
    ranks = np.arange(size)

    r = world.Ibarrier()
    chk.true(isinstance(r, dist.Request), "Ibarrier returns a Request")
    r.Wait()
    chk.true(not r, "a completed request is inactive")

    if size > 1:
        # the native ones return before the peers arrive: rank 0's Ibarrier is still
        # pending while the last rank sleeps before entering it
        world.Barrier()
        if rank == size - 1:
            time.sleep(1.0)
        r = world.Ibarrier()
        if rank == 0:
            chk.true(not r.Test() and bool(r), "Ibarrier pending while a rank has not entered it")
        r.Wait()

    root = size - 1
    buf = np.arange(5, dtype=np.int32) * 3 if rank == root else np.full(5, -1, np.int32)
    world.Ibcast(buf, root=root).Wait()
    chk.equal(buf, np.array([0, 3, 6, 9, 12], np.int32), "Ibcast")

    send = np.array([rank + 1, 2 * rank, 7], np.float64)
    out = np.zeros(3)
    world.Iallreduce(send, out, dist.SUM).Wait()
    chk.equal(out, np.array([size * (size + 1) / 2, size * (size - 1), 7.0 * size]), "Iallreduce SUM")
    ints = np.array([rank, -rank], np.int64)
    world.Iallreduce(dist.IN_PLACE, ints, dist.MAX).Wait()
    chk.equal(ints, np.array([size - 1, 0], np.int64), "Iallreduce MAX in place")
    flags = np.array([1, rank + 1, rank], np.int32)
    world.Iallreduce(dist.IN_PLACE, flags, dist.LAND).Wait()
    chk.equal(flags, np.array([1, 1, 0], np.int32), "Iallreduce LAND")

    red = np.full(2, -1, np.int32)
    world.Ireduce(np.array([rank, 1], np.int32), red, dist.SUM, root=0).Wait()
    chk.equal(red, np.array([sum(range(size)), size], np.int32) if rank == 0 else np.full(2, -1, np.int32),
              "Ireduce at the root only")

    gathered = np.full((size, 2), -1, np.int16) if rank == 0 else None
    world.Igather(np.array([rank, 10 + rank], np.int16), gathered, root=0).Wait()
    if rank == 0:
        chk.equal(gathered, np.stack([ranks, 10 + ranks], axis=1).astype(np.int16), "Igather")

    counts = [r + 1 for r in range(size)]
    displs = [sum(counts[:r]) for r in range(size)]
    gv = np.full(sum(counts), -1, np.int32)
    world.Iallgatherv(np.full(rank + 1, rank, np.int32), [gv, (counts, displs), "i"]).Wait()
    chk.equal(gv, np.repeat(ranks, counts).astype(np.int32), "Iallgatherv")
    gv0 = np.full(sum(counts), -1, np.int32) if rank == 0 else None
    world.Igatherv(np.full(rank + 1, rank, np.int32), [gv0, counts, "i"] if rank == 0 else None, root=0).Wait()
    if rank == 0:
        chk.equal(gv0, np.repeat(ranks, counts).astype(np.int32), "Igatherv")

    ag = np.zeros((size, 3), np.float32)
    world.Iallgather(np.full(3, rank, np.float32), ag).Wait()
    chk.equal(ag, np.repeat(ranks, 3).reshape(size, 3).astype(np.float32), "Iallgather")
    # IN_PLACE: this rank's block is already in place in recvbuf.
    agi = np.full((size, 2), -1, np.int64)
    agi[rank] = [rank, 7 * rank]
    world.Iallgather(dist.IN_PLACE, agi).Wait()
    chk.equal(agi, np.stack([ranks, 7 * ranks], axis=1).astype(np.int64), "Iallgather in place")
    gvi = np.full(sum(counts), -1, np.int32)
    gvi[displs[rank]:displs[rank] + counts[rank]] = rank
    world.Iallgatherv(dist.IN_PLACE, [gvi, counts, displs, "i"]).Wait()
    chk.equal(gvi, np.repeat(ranks, counts).astype(np.int32), "Iallgatherv in place")

    sc_src = np.arange(size * 2, dtype=np.uint8) if rank == 0 else None
    sc = np.zeros(2, np.uint8)
    world.Iscatter(sc_src, sc, root=0).Wait()
    chk.equal(sc, np.array([2 * rank, 2 * rank + 1], np.uint8), "Iscatter")
    scv_src = np.arange(sum(counts), dtype=np.int64) if rank == 0 else None
    scv = np.zeros(rank + 1, np.int64)
    world.Iscatterv([scv_src, counts, "q"] if rank == 0 else None, scv, root=0).Wait()
    chk.equal(scv, np.arange(displs[rank], displs[rank] + rank + 1, dtype=np.int64), "Iscatterv")

    a2a = np.array([100 * rank + j for j in range(size)], np.int32)
    got = np.zeros(size, np.int32)
    world.Ialltoall(a2a, got).Wait()
    chk.equal(got, (100 * ranks + rank).astype(np.int32), "Ialltoall")
    world.Ialltoall(dist.IN_PLACE, a2a).Wait()
    chk.equal(a2a, (100 * ranks + rank).astype(np.int32), "Ialltoall in place")
    # rank i sends j + 1 values of i * 10 + j to rank j
    scounts = [j + 1 for j in range(size)]
    sdata = np.concatenate([np.full(j + 1, rank * 10 + j, np.int32) for j in range(size)])
    rcounts = [rank + 1] * size
    rdata = np.zeros(sum(rcounts), np.int32)
    world.Ialltoallv([sdata, scounts, "i"], [rdata, rcounts, "i"]).Wait()
    chk.equal(rdata, np.repeat(ranks * 10 + rank, rank + 1).astype(np.int32), "Ialltoallv")

    rsb = np.zeros(2, np.int64)
    world.Ireduce_scatter_block(np.arange(2 * size, dtype=np.int64) * (rank + 1), rsb, dist.SUM).Wait()
    chk.equal(rsb, np.arange(2 * rank, 2 * rank + 2, dtype=np.int64) * (size * (size + 1) // 2),
              "Ireduce_scatter_block")
    rs = np.zeros(rank + 1, np.int32)
    world.Ireduce_scatter(np.ones(sum(counts), np.int32), rs, counts, dist.SUM).Wait()
    chk.equal(rs, np.full(rank + 1, size, np.int32), "Ireduce_scatter")
    sc_out = np.zeros(2, np.int32)
    world.Iscan(np.array([1, rank], np.int32), sc_out, dist.SUM).Wait()
    chk.equal(sc_out, np.array([rank + 1, rank * (rank + 1) // 2], np.int32), "Iscan")

    # integer handles give the same request back
    r = world.Ibarrier()
    chk.true(dist.Request.f2py(r.py2f()) is r and dist.Request.fromint(r.toint()) is r, "f2py/fromint")
    chk.true(dist.Request.fromhandle(r.handle) is r and r.handle == r.py2f() > 0, "fromhandle")
    p = world.Send_init(b"", dist.PROC_NULL)
    chk.true(dist.Prequest.fromhandle(p.handle) is p and dist.Request.f2py(p.py2f()) is p, "a Prequest's handle")
    chk.true(dist.REQUEST_NULL.py2f() == 0 and dist.Request.f2py(0) is dist.REQUEST_NULL, "REQUEST_NULL is 0")
    for bad, cls in ((r.handle, TypeError), (10 ** 12, ValueError)):
        try:
            dist.Prequest.fromhandle(bad)
            chk.true(False, f"Prequest.fromhandle({bad}) raises")
        except cls:
            pass
    r.Wait()

    # several at once, completed by the list forms
    outs = [np.zeros(4, np.int32) for _ in range(3)]
    reqs = [world.Iallreduce(np.full(4, k + rank, np.int32), outs[k], dist.SUM) for k in range(3)]
    chk.true(dist.Request.Waitall(reqs), "Waitall")
    for k in range(3):
        chk.equal(outs[k], np.full(4, k * size + size * (size - 1) // 2, np.int32), f"Waitall result {k}")
    chk.true(not any(reqs), "Waitall leaves them inactive")
    out = np.zeros(1, np.float64)
    req = world.Iallreduce(np.array([rank + 0.5]), out, dist.SUM)
    while not req.Test():
        pass
    chk.equal(out, np.array([size * size / 2]), "Test until complete")
    reqs = [world.Ibarrier(), world.Ibarrier()]
    seen = set()
    for _ in range(2):
        seen.add(dist.Request.Waitany(reqs))
    chk.true(seen == {0, 1}, f"Waitany returns each index once ({seen})")
    chk.true(dist.Request.Waitany(reqs) == dist.UNDEFINED, "Waitany over inactive requests")
    return _done(world, chk)


def _matmul(invec, inoutvec, datatype):
    """inoutvec = invec @ inoutvec for 2x2 int64 matrices stored flat (associative, not commutative)."""
    a = np.frombuffer(invec, np.int64).reshape(-1, 2, 2)
    b = np.frombuffer(inoutvec, np.int64).reshape(-1, 2, 2)
    np.asarray(inoutvec).reshape(-1, 2, 2)[...] = a @ b


@scenario
def user_ops_and_reduce_local(rank, size):
    world = _world()
    chk = Checker()

    def mat(r):
        return np.array([[1, r + 1], [0, 2]], np.int64)

    want = np.eye(2, dtype=np.int64)
    for r in range(size):
        want = want @ mat(r)
    op = dist.Op.Create(_matmul, commute=False)
    chk.true(not op.Is_commutative(), "Is_commutative")
    out = np.zeros(4, np.int64)
    world.Allreduce(mat(rank).ravel(), out, op)
    chk.equal(out.reshape(2, 2), want, "Allreduce with a non-commutative user op: rank order")
    inplace = mat(rank).ravel().copy()
    world.Allreduce(dist.IN_PLACE, inplace, op)
    chk.equal(inplace.reshape(2, 2), want, "Allreduce in place with a user op")
    root_out = np.full(4, -1, np.int64)
    world.Reduce(mat(rank).ravel(), root_out, op, root=size - 1)
    chk.equal(root_out.reshape(2, 2) if rank == size - 1 else root_out,
              want if rank == size - 1 else np.full(4, -1, np.int64), "Reduce with a user op")
    block = np.zeros(4, np.int64)
    world.Reduce_scatter_block(np.tile(mat(rank).ravel(), size), block, op)
    chk.equal(block.reshape(2, 2), want, "Reduce_scatter_block with a user op")
    out = np.zeros(4, np.int64)
    world.Iallreduce(mat(rank).ravel(), out, op).Wait()
    chk.equal(out.reshape(2, 2), want, "Iallreduce with a user op")
    concat = dist.Op.Create(lambda a, b, dt: a + b)
    chk.true(world.allreduce(str(rank), op=concat) == "".join(str(r) for r in range(size)),
             "object allreduce with a user op")
    op.Free()

    for dtype in (np.int32, np.float64, np.uint8):
        for o, f in ((dist.SUM, lambda a, b: a + b), (dist.PROD, lambda a, b: a * b), (dist.MAX, np.maximum),
                     (dist.MIN, np.minimum)):
            a = np.arange(1, 6, dtype=dtype)
            b = np.array([4, 0, 3, 9, 2], dtype)
            want_b = np.asarray(f(np.arange(1, 6), np.array([4, 0, 3, 9, 2]))).astype(dtype)
            o.Reduce_local(a, b)
            chk.equal(b, want_b, f"Reduce_local {o!r} {np.dtype(dtype)}")
            chk.equal(a, np.arange(1, 6, dtype=dtype), "Reduce_local leaves inbuf alone")
    b = np.array([1, 0, 1, 0], np.int32)
    dist.LXOR.Reduce_local(np.array([1, 1, 0, 0], np.int32), b)
    chk.equal(b, np.array([0, 1, 1, 0], np.int32), "Reduce_local LXOR")
    b = mat(1).ravel().copy()
    dist.Op.Create(_matmul).Reduce_local(mat(0).ravel(), b)
    chk.equal(b.reshape(2, 2), mat(0) @ mat(1), "Reduce_local with a user op: inoutbuf = inbuf op inoutbuf")
    for bad, cls in (((np.zeros(2, np.int32), np.zeros(3, np.int32)), dist.ERR_COUNT),
                     (([np.zeros(4, np.int16), 1, "i"], [np.zeros(4, np.int16), 1, "h"]), dist.ERR_TYPE)):
        try:
            dist.SUM.Reduce_local(*bad)
            chk.true(False, "Reduce_local of mismatched buffers raises")
        except ValueError as e:
            chk.true(e.Get_error_class() == cls, f"error class {e.Get_error_class()} != {cls}")
    return _done(world, chk)


@scenario
def derived_datatypes(rank, size):
    world = _world()
    chk = Checker()
    i4 = dist.INT
    chk.true(i4 == "i" and i4.extent == 4 and i4.Get_size() == 4, "a predefined type is its typecode")
    contig = i4.Create_contiguous(3).Commit()
    chk.true(contig.Get_extent() == (0, 12) and contig.size == 12, "Create_contiguous")
    vec = dist.DOUBLE.Create_vector(3, 2, 4)  # 3 blocks of 2, 4 elements apart
    chk.true(vec.Get_extent() == (0, (2 * 4 + 2) * 8) and vec.size == 48, f"Create_vector {vec}")
    idx = dist.SHORT.Create_indexed_block(2, [5, 1])
    chk.true(idx.Get_extent() == (2, 12) and idx.size == 8, f"Create_indexed_block {idx.Get_extent()}")
    vec.Free()

    # Bcast of every other element
    root = size - 1
    buf = np.arange(10, dtype=np.int32) if rank == root else np.full(10, -1, np.int32)
    every_other = i4.Create_indexed_block(1, list(range(0, 10, 2))).Commit()
    world.Bcast([buf, 1, every_other], root=root)
    want = np.arange(10, dtype=np.int32) if rank == root else np.where(np.arange(10) % 2 == 0, np.arange(10), -1)
    chk.equal(buf, want.astype(np.int32), "Bcast with Create_indexed_block")
    buf = np.arange(12, dtype=np.float64) if rank == root else np.zeros(12)
    world.Ibcast([buf, 2, dist.DOUBLE.Create_vector(2, 1, 3)], root=root).Wait()
    # two elements of a vector type of extent 4 doubles: positions 0, 3, 4, 7
    want = np.zeros(12) if rank != root else np.arange(12, dtype=np.float64)
    if rank != root:
        want[[0, 3, 4, 7]] = [0, 3, 4, 7]
    chk.equal(buf, want, "Ibcast with Create_vector")

    # Send of every other element, received into the odd positions (a ring)
    if size > 1:
        src, dst = (rank - 1) % size, (rank + 1) % size
        mine = np.arange(10, dtype=np.int32) + 100 * rank
        got = np.full(10, -1, np.int32)
        odd = i4.Create_indexed_block(1, list(range(1, 10, 2)))
        st = dist.RecvStatus()
        if rank == 0:
            world.Send([mine, 1, every_other], dst, tag=7)
        world.Recv([got, 1, odd], src, tag=7, status=st)
        if rank != 0:
            world.Send([mine, 1, every_other], dst, tag=7)
        want = np.full(10, -1, np.int32)
        want[1::2] = np.arange(0, 10, 2) + 100 * src
        chk.equal(got, want, "Send and Recv with derived datatypes")
        chk.true(st.Get_count(dist.INT) == 5 and st.Get_source() == src, "the status of a derived receive")

    # Alltoallw: rank i sends j + 1 ints (value 100 i + j) to rank j from
    # byte offset 64 j; receives rank + 1 ints from each rank into every
    # other int of a block of 2 (rank + 1) ints per sender.
    sbuf = np.zeros(16 * size, np.int32)
    for j in range(size):
        sbuf[16 * j:16 * j + j + 1] = 100 * rank + j
    stride2 = i4.Create_vector(rank + 1, 1, 2)
    rbuf = np.full(2 * (rank + 1) * size, -1, np.int32)
    rdispls = [8 * (rank + 1) * j for j in range(size)]
    world.Alltoallw([sbuf, ([j + 1 for j in range(size)], [64 * j for j in range(size)]), [i4] * size],
                    [rbuf, [1] * size, rdispls, [stride2] * size])
    want = np.full(2 * (rank + 1) * size, -1, np.int32)
    for j in range(size):
        want[2 * (rank + 1) * j:2 * (rank + 1) * (j + 1):2] = 100 * j + rank
    chk.equal(rbuf, want, "Alltoallw with per-peer datatypes")
    # in place: block j of rank i (n ints of i) becomes rank j's block i
    n = 2
    inplace = np.full(n * size, rank, np.int64)
    world.Alltoallw(dist.IN_PLACE, [inplace, ([n] * size, [8 * n * j for j in range(size)]), [dist.LONG_LONG] * size])
    chk.equal(inplace, np.repeat(np.arange(size), n).astype(np.int64), "Alltoallw in place")
    world.Ialltoallw(dist.IN_PLACE, [inplace, ([n] * size, [8 * n * j for j in range(size)]),
                                     [dist.LONG_LONG] * size]).Wait()
    chk.equal(inplace, np.full(n * size, rank, np.int64), "Ialltoallw in place, twice gives the start back")
    return _done(world, chk)


@scenario
def error_classes(rank, size):
    world = _world()
    chk = Checker()
    for bad in (size, -size - 3):
        try:
            world.reduce(rank, root=bad)
            chk.true(False, "reduce to a bad root raises")
        except dist.OmniCCLError as e:
            chk.true(e.Get_error_class() == dist.ERR_ROOT, f"reduce root {bad}: {e.Get_error_class()} ({e})")
        try:
            world.Bcast(np.zeros(2), root=bad)
            chk.true(False, "Bcast from a bad root raises")
        except dist.OmniCCLError as e:
            chk.true(e.Get_error_class() == dist.ERR_ROOT, f"Bcast root {bad}: {e.Get_error_class()} ({e})")
    try:
        world.Allreduce(np.zeros(2, np.float32), np.zeros(2, np.float32), dist.BAND)
        chk.true(False, "BAND on floats raises")
    except dist.OmniCCLError as e:
        chk.true(e.Get_error_class() == dist.ERR_OP, f"BAND on floats: {e.Get_error_class()} ({e})")
    req = world.Irecv(np.zeros(1, np.int8), source=rank, tag=5)
    world.Send(np.zeros(4, np.int8), rank, tag=5)
    try:
        req.Wait()
        chk.true(False, "a truncated receive raises")
    except dist.TruncatedError as e:
        chk.true(e.Get_error_class() == dist.ERR_TRUNCATE, f"truncation: {e.Get_error_class()}")
    e = dist.UnsupportedError("no")
    chk.true(e.Get_error_class() == dist.ERR_UNSUPPORTED_OPERATION and e.error_string == "no", "unsupported")
    chk.true(dist.PeerFailureError("x").Get_error_class() == dist.ERR_PROC_FAILED, "peer failure")
    chk.true(dist.InvalidArgumentError("something odd").Get_error_class() == dist.ERR_ARG, "other arguments")
    return _done(world, chk)


if __name__ == "__main__":
    main()

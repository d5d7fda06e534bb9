"""Collectives across processes, checked against numpy references and the classic tutorial results."""

import pytest

from conftest import describe, run_ranks


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_every_collective_dtype_and_op(size):
    """Every collective x every numpy dtype x every reduce op (sizes 0, 1, 13, 5003)."""
    results = run_ranks(size, "matrix", timeout=150)
    assert all(r.result["checks"] > 1000 for r in results), describe(results)


@pytest.mark.parametrize("transport", ["auto", "tcp"])
def test_tutorial_results(transport):
    """The torch.distributed tutorial programs give the documented results with 4 ranks (shm and TCP)."""
    res = [r.result for r in run_ranks(4, "tutorial", env={"OMNICCL_TRANSPORT": transport})]
    for rank, r in enumerate(res):
        assert r["broadcast"] == [1, 2]
        assert r["scatter"] == [rank, rank]
        assert r["gather"] == ([[1, 2], [3, 4], [5, 6], [7, 8]] if rank == 0 else None)
        assert r["reduce"] == ([16, 20] if rank == 3 else [2 * rank + 1, 2 * rank + 2])
        assert r["all_gather"] == [[1, 2], [3, 4], [5, 6], [7, 8]]
        assert r["all_reduce"] == [16, 20]
        assert r["broadcast_object_list"] == repr({"key1": [7, 2.72, 2 + 3j], "key2": ("abc", "xyz")})
        assert r["scatter_object_list"] == [rank] * (rank + 1)
        assert r["all_gather_object"] == [{"rank": i} for i in range(4)]
        assert r["gather_object"] == ([["from", i] for i in range(4)] if rank == 1 else None)


@pytest.mark.parametrize("size", [2, 3])
def test_ddp_gradient_averaging(size):
    """all_reduce SUM then divide, AVG and PREMUL_SUM(1/size) give the same parameters on every rank."""
    for r in run_ranks(size, "ddp_average"):
        for mode, state in r.result.items():
            assert state == {"same_on_every_rank": True, "matches_reference": True}, (mode, state)


def test_async_work_objects():
    run_ranks(3, "async_work")


def test_groups_and_split():
    run_ranks(4, "groups")


def test_send_recv():
    run_ranks(3, "p2p")


def test_isend_then_recv_large_message():
    # isend of 4 MiB (twice the shared-memory ring) then a blocking recv on
    # both sides: point-to-point operations progress together.
    run_ranks(2, "big_isend_then_recv", timeout=60)

"""Point-to-point in mpi4py's terms: tags, ANY_SOURCE/ANY_TAG, RecvStatus, receive counts as upper
bounds, TruncatedError, sends to self, PROC_NULL, Sendrecv, requests over lists, object requests,
synchronous sends, Cancel and matched probes."""

import pytest

import omniccl
from conftest import run_ranks


@pytest.mark.parametrize("size", [1, 2, 3])
def test_buffer_point_to_point_semantics(size):
    results = run_ranks(size, "p2p_semantics")
    assert all(r.result["checks"] >= 15 for r in results), [r.result for r in results]


@pytest.mark.parametrize("size", [1, 2, 3])
def test_object_point_to_point_semantics(size):
    results = run_ranks(size, "p2p_objects")
    assert all(r.result["checks"] >= 6 for r in results), [r.result for r in results]


@pytest.mark.parametrize("size", [1, 2, 3])
def test_send_modes_and_persistent_requests(size):
    results = run_ranks(size, "p2p_modes", timeout=90)
    assert all(r.result["checks"] > 10 for r in results), results[0].result


@pytest.mark.parametrize("size", [1, 2, 3])
def test_probe_and_iprobe(size):
    results = run_ranks(size, "p2p_probe", timeout=90)
    # Rank 0 checks 10 things per sender on top of the 8 every rank checks.
    want = [8 + 10 * (size - 1)] + [8] * (size - 1)
    assert [r.result["checks"] for r in results] == want, [r.result for r in results]


@pytest.mark.parametrize("size", [1, 2, 3])
def test_synchronous_sends_cancel_and_empty_specs(size):
    results = run_ranks(size, "p2p_sync_cancel", timeout=90)
    # With two or more ranks, rank 0 checks 3 things more (its Issend and ssend to rank 1), rank 1 2 more.
    want = [23 + ((3, 2)[r] if size > 1 and r < 2 else 0) for r in range(size)]
    assert [r.result["checks"] for r in results] == want, [r.result for r in results]


@pytest.mark.parametrize("size", [1, 2, 3])
def test_matched_probes(size):
    results = run_ranks(size, "p2p_mprobe", timeout=90)
    assert [r.result["checks"] for r in results] == [14] * size, [r.result for r in results]


@pytest.mark.parametrize("size", [1, 2])
def test_object_messages_are_plain_pickles(size):
    results = run_ranks(size, "p2p_pickle_format")
    assert [r.result["checks"] for r in results] == [4] * size, [r.result for r in results]


def test_constants_and_status_match_the_c_library():
    assert (omniccl.ANY_SOURCE, omniccl.ANY_TAG, omniccl.PROC_NULL, omniccl.TAG_UB) == (-1, -1, -2, 2**31 - 1)
    assert omniccl.Status.TRUNCATED == 14
    st = omniccl.RecvStatus()
    assert (st.Get_source(), st.Get_tag(), st.Get_count()) == (omniccl.ANY_SOURCE, omniccl.ANY_TAG, 0)
    st.Set_elements("i", 3)
    assert st.Get_count("i") == 3 and st.Get_count() == 12 and st.Get_count("q") == omniccl.UNDEFINED
    assert not omniccl.REQUEST_NULL
    assert omniccl.Request.Waitany([omniccl.REQUEST_NULL]) == omniccl.UNDEFINED
    assert omniccl.Request.Testall([omniccl.REQUEST_NULL])

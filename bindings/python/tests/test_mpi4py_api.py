"""The mpi4py-style Communicator: MPI semantics of buffer methods, checked on several ranks."""

from pathlib import Path

import pytest

from conftest import run_ranks


@pytest.mark.parametrize("size", [2, 3])
def test_reduce_scatter_block_in_place_changes_only_the_first_block(size):
    run_ranks(size, "reduce_scatter_block_in_place")


@pytest.mark.parametrize("size", [1, 3])
def test_buffer_specifications_complex_op_names_and_object_methods(size):
    results = run_ranks(size, "mpi4py_messages", timeout=120)
    # rank 0 checks the rooted results too
    assert results[0].result["checks"] >= 60 and all(r.result["checks"] >= 45 for r in results), \
        [r.result for r in results]


MPI_WORKERS = Path(__file__).resolve().parent / "mpi_workers.py"


@pytest.mark.parametrize("size", [1, 3])
def test_nonblocking_collectives_return_requests_with_mpi_results(size):
    results = run_ranks(size, "nonblocking_collectives", script=MPI_WORKERS, timeout=120)
    assert all(r.result["checks"] >= 25 for r in results), [r.result for r in results]


@pytest.mark.parametrize("size", [1, 3])
def test_user_defined_ops_fold_in_rank_order_and_reduce_local(size):
    run_ranks(size, "user_ops_and_reduce_local", script=MPI_WORKERS, timeout=120)


@pytest.mark.parametrize("size", [1, 3])
def test_derived_datatypes_in_bcast_and_alltoallw(size):
    run_ranks(size, "derived_datatypes", script=MPI_WORKERS, timeout=120)


@pytest.mark.parametrize("size", [2])
def test_errors_answer_mpi_error_classes(size):
    run_ranks(size, "error_classes", script=MPI_WORKERS, timeout=120)

"""The mpi4py-style Communicator: MPI semantics of buffer methods, checked on several ranks."""

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

"""The mpi4py-style Communicator: MPI semantics of buffer methods, checked on several ranks."""

import pytest

from conftest import run_ranks


@pytest.mark.parametrize("size", [2, 3])
def test_reduce_scatter_block_in_place_changes_only_the_first_block(size):
    run_ranks(size, "reduce_scatter_block_in_place")

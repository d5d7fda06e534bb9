"""The small blocking calls' hot path: one native call per Python call.

Issue 17's target is the Python layer's cost over the C blocking call (at
most 1 us at 8 bytes); it is measured by the benchmark
(``python bench/python_latency.py --overhead``, numbers on the docs'
performance page), not
here: a timed test on a shared machine would test the machine. What can be
checked without a clock is that the common forms reach the native entry
points and are handled there (before the hot path they went through the
general Python path, 10-22 us per call), while the forms only the general
path reads (an mpi4py message list) still go there with the same result.
"""
import pytest

from conftest import run_ranks


@pytest.mark.parametrize("size", [1, 2, 3])
def test_small_blocking_calls_take_the_native_path(size):
    run_ranks(size, "fast_path", timeout=90)

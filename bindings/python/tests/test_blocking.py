"""Blocking calls run on the calling thread (no hand-off) and give up the GIL while they wait."""
from conftest import run_ranks


def test_a_waiting_blocking_call_lets_other_python_threads_run():
    results = run_ranks(2, "gil_free_while_waiting", timeout=60)
    r0 = results[0].result
    assert r0["waited"] > 0.5, r0
    # A thread that held the GIL for the whole wait would leave the counter
    # near zero; with it given up, the counting thread runs for ~1 s.
    assert r0["counted"] > 100_000, r0

"""Each exception class is raised by a real failure; Ctrl-C interrupts blocked calls."""

import signal
import time

from conftest import describe, run_ranks, wait_for_line


def test_mismatched_dtype_is_mismatch_error_on_every_rank():
    results = run_ranks(2, "mismatch_dtype")
    for r in results:
        assert r.result["error"] == "MismatchError", describe(results)
        assert r.result["status"] == 5
        assert "float32" in r.result["message"] or "dtype" in r.result["message"]


def test_killed_peer_is_peer_failure_error():
    results = run_ranks(3, "killed_peer", check=False)
    assert results[2].returncode == -signal.SIGKILL, describe(results)
    for r in results[:2]:
        assert r.returncode == 0, describe(results)
        assert r.result["error"] == "PeerFailureError", describe(results)
        assert r.result["status"] == 4
        assert r.result["seconds"] < 15
        # Communicator.async_error(): None while usable, then the failure, not raised.
        assert r.result["async_before"] == "None", describe(results)
        assert r.result["async_after"] == "PeerFailureError" and r.result["async_after_status"] == 4


def test_deadline_is_timeout_error():
    results = run_ranks(2, "timeout")
    r0 = results[0].result
    assert r0["error"] == "TimeoutError" and r0["builtin"] and r0["status"] == 3, describe(results)
    assert 0.5 < r0["seconds"] < 10
    assert "rank 1" in r0["message"] or "1" in r0["message"]
    # The late rank may complete its half of that all_reduce (rank 0's data
    # was already sent), but not the next ones.
    assert results[1].result["late_rank_error"] in ("PeerFailureError", "OmniCCLError", "TimeoutError")


def test_bad_arguments_are_value_errors_and_leave_the_communicator_usable():
    for r in run_ranks(2, "bad_arguments"):
        seen = r.result
        for name in ("root out of range", "torch src not in the group", "sizes do not fit", "list length"):
            assert seen[name] == "InvalidArgumentError", (name, seen)
        for name in ("non-contiguous", "read-only output", "bytes output", "long double dtype", "bad op"):
            assert seen[name] is not None, (name, seen)
        assert seen["not an array"] == "TypeError"
        assert seen["still usable"] is True
        assert "not been initialized" in seen["after destroy"]


def _interrupt_rank0_then_rank1(procs, out_dir):
    wait_for_line(out_dir, 0, "waiting")
    wait_for_line(out_dir, 1, "sleeping")
    time.sleep(0.5)  # rank 0 is inside all_reduce now
    procs[0].send_signal(signal.SIGINT)
    start = time.monotonic()
    procs[0].wait(timeout=10)
    assert time.monotonic() - start < 5, "rank 0 took too long to react to SIGINT"
    procs[1].send_signal(signal.SIGINT)


def test_ctrl_c_during_a_blocked_collective_raises_keyboard_interrupt_promptly():
    results = run_ranks(2, "interrupt_collective", while_running=_interrupt_rank0_then_rank1, timeout=40)
    r0 = results[0].result
    assert r0["interrupted"] is True and r0["closed"] is True, describe(results)
    assert r0["later"]["type"] == "OmniCCLError" and r0["later"]["status"] == 8  # ABORTED
    assert "KeyboardInterrupt" in r0["later"]["message"]
    assert results[1].result["rank1_error"] in ("PeerFailureError", "OmniCCLError"), describe(results)


def test_ctrl_c_during_a_blocked_probe_raises_keyboard_interrupt_promptly():
    results = run_ranks(2, "interrupt_probe", while_running=_interrupt_rank0_then_rank1, timeout=40)
    r0 = results[0].result
    assert r0["interrupted"] is True and r0["closed"] is True, describe(results)


def test_uncaught_ctrl_c_lets_the_process_exit():
    results = run_ranks(2, "interrupt_collective", {"uncaught": True}, check=False,
                        while_running=_interrupt_rank0_then_rank1, timeout=40)
    assert results[0].returncode in (-signal.SIGINT, 130, 1), describe(results)
    assert "KeyboardInterrupt" in results[0].stderr


def _interrupt_init(procs, out_dir):
    wait_for_line(out_dir, 0, "waiting")
    time.sleep(1.0)
    procs[0].send_signal(signal.SIGINT)
    start = time.monotonic()
    procs[0].wait(timeout=10)
    assert time.monotonic() - start < 5


def test_ctrl_c_during_init_raises_keyboard_interrupt():
    # World size 2, but only rank 0 is started: it waits for rank 1 in init.
    results = run_ranks(1, "interrupt_init", env={"WORLD_SIZE": "2"}, while_running=_interrupt_init, timeout=40)
    assert results[0].result == {"interrupted": True, "initialized": False}


def test_ranks_get_ctrl_c_even_when_the_suite_ignores_it():
    # A shell without job control starts background jobs with SIGINT ignored,
    # and a Python started so never installs KeyboardInterrupt: the Ctrl-C
    # tests above would wait for an interrupt that cannot come. The harness
    # starts every rank with SIGINT at its default.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        results = run_ranks(1, "sigint_disposition")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert results[0].result["default_int_handler"] is True, describe(results)


def test_registered_windows_without_a_device_path():
    for r in run_ranks(2, "windows_cpu"):
        assert r.result["checks"] == 5, describe([r])

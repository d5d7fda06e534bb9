"""python -m omniccl.run: the environment, output prefixes, exit statuses, signals, --grace and --timeout."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import EXAMPLES, free_port, run_launcher, sigint_default


@pytest.fixture
def script(tmp_path):
    """Writes a Python script into tmp_path and returns its path."""
    def write(body, name="prog.py"):
        path = tmp_path / name
        path.write_text(textwrap.dedent(body))
        return path
    return write


def test_environment_and_prefixes(script):
    prog = script("""
        import os, sys
        keys = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "OMNICCL_LAUNCHER"]
        print(" ".join(os.environ[k] for k in keys), "port", os.environ["MASTER_PORT"])
        print("to stderr", file=sys.stderr)
        sys.stdout.write("no newline at the end")
    """)
    p = run_launcher(["-n", "3", str(prog)])
    assert p.returncode == 0, p.stderr
    out = sorted(p.stdout.splitlines())
    ports = {line.split()[-1] for line in out if " port " in line}
    assert len(ports) == 1 and ports.pop().isdigit()  # one MASTER_PORT for all
    for r in range(3):
        assert any(line.startswith(f"[{r}] {r} 3 {r} 3 127.0.0.1 omniccl.run port ") for line in out)
        assert f"[{r}] no newline at the end" in out
        assert f"[{r}] to stderr" in p.stderr.splitlines()


def test_job_token_generated_per_job_and_kept_when_given(script):
    prog = script("""
        import os
        print(os.environ["OMNICCL_JOB_TOKEN"])
    """)
    tokens = []
    for _ in range(2):
        p = run_launcher(["-n", "2", str(prog)], env={"OMNICCL_JOB_TOKEN": ""})  # empty: not given
        assert p.returncode == 0, p.stderr
        seen = {line.split()[-1] for line in p.stdout.splitlines()}
        assert len(seen) == 1  # the same in every rank
        token = seen.pop()
        assert len(token) == 64 and all(c in "0123456789abcdef" for c in token)
        tokens.append(token)
    assert tokens[0] != tokens[1]  # a new one per job
    p = run_launcher(["-n", "1", str(prog)], env={"OMNICCL_JOB_TOKEN": "given"})
    assert p.stdout.split() == ["[0]", "given"], p.stdout


def test_first_failure_decides_the_status_and_grace_ends_the_rest(script):
    prog = script("""
        import os, sys, time
        if os.environ["RANK"] == "1":
            sys.exit(3)
        time.sleep(60)
    """)
    start = time.monotonic()
    p = run_launcher(["-n", "3", "--grace", "0.5", str(prog)])
    assert p.returncode == 3, p.stderr
    assert time.monotonic() - start < 20
    assert "rank 1 exited with status 3" in p.stderr
    assert "sending SIGTERM" in p.stderr


def test_timeout_exits_124(script):
    prog = script("import time; time.sleep(60)")
    p = run_launcher(["-n", "2", "--timeout", "1", str(prog)])
    assert p.returncode == 124
    assert "timeout" in p.stderr


def test_usage_help_and_missing_programs(tmp_path):
    assert run_launcher([]).returncode == 2
    assert run_launcher(["-n", "0", "x.py"]).returncode == 2
    assert run_launcher(["-n", "2", "--bogus", "x.py"]).returncode == 2
    h = run_launcher(["--help"])
    assert h.returncode == 0 and "Usage: python -m omniccl.run" in h.stdout
    missing = run_launcher(["-n", "2", "--no-python", str(tmp_path / "does-not-exist")])
    assert missing.returncode == 127 and "cannot execute" in missing.stderr


def test_bind_to_cores(script):
    """Ranks get a CPU each (as mpirun binds), round-robin when they outnumber the CPUs; --bind-to none keeps the mask."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip(f"this process may use one CPU only ({cpus})")
    prog = script("""
        import os
        print("cpus", sorted(os.sched_getaffinity(0)))
    """)

    def masks(*args):
        p = run_launcher([*args, str(prog)])
        assert p.returncode == 0, p.stderr
        return sorted(p.stdout.splitlines())

    assert masks("-n", "2") == [f"[0] cpus [{cpus[0]}]", f"[1] cpus [{cpus[1]}]"]
    assert masks("-n", "2", "--bind-to", "none") == [f"[{r}] cpus {cpus}" for r in range(2)]
    over = len(cpus) + 1
    assert masks("-n", str(over)) == sorted(f"[{r}] cpus [{cpus[r % len(cpus)]}]" for r in range(over))
    assert masks("-n", str(over), "--bind-to", "none") == sorted(f"[{r}] cpus {cpus}" for r in range(over))
    forced = masks("-n", str(over), "--bind-to=core")
    assert f"[{over - 1}] cpus [{cpus[0]}]" in forced
    bad = run_launcher(["-n", "2", "--bind-to", "socket", str(prog)])
    assert bad.returncode == 2 and "--bind-to: 'socket' is not one of core, none" in bad.stderr


def test_signal_is_forwarded_to_every_rank(script):
    prog = script("""
        import os, signal, sys, time
        def on_term(sig, frame):
            print("got SIGTERM", flush=True)
            sys.exit(0)
        signal.signal(signal.SIGTERM, on_term)
        print("ready", flush=True)
        time.sleep(60)
    """)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    proc = subprocess.Popen([sys.executable, "-m", "omniccl.run", "-n", "2", str(prog)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, stdin=subprocess.DEVNULL)
    try:
        ready = 0
        while ready < 2:
            line = proc.stdout.readline()
            assert line, "launcher output ended early"
            ready += "ready" in line
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert sorted(out.split("\n")[-3:-1]) == ["[0] got SIGTERM", "[1] got SIGTERM"] or out.count("got SIGTERM") == 2
    assert "forwarding it to ranks 0, 1" in err


def test_ctrl_c_ends_a_job_blocked_in_a_collective(script):
    prog = script("""
        import time
        import numpy as np
        import omniccl as dist
        dist.init_process_group()
        dist.barrier()
        print("ready", flush=True)
        if dist.get_rank() == 1:
            time.sleep(60)  # never joins the all_reduce
        dist.all_reduce(np.ones(4))
    """)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    proc = subprocess.Popen([sys.executable, "-m", "omniccl.run", "-n", "2", str(prog)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, stdin=subprocess.DEVNULL,
                            preexec_fn=sigint_default)
    try:
        ready = 0
        while ready < 2:
            line = proc.stdout.readline()
            assert line, "launcher output ended early"
            ready += "ready" in line
        time.sleep(0.5)
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGINT, err
    assert elapsed < 5, err
    assert "KeyboardInterrupt" in err


def test_module_mode_and_stdin_to_rank_0(tmp_path):
    (tmp_path / "hello_mod.py").write_text("import os, sys\nprint('module', os.environ['RANK'], sys.stdin.read())\n")
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)
    p = subprocess.run([sys.executable, "-m", "omniccl.run", "-n", "2", "-m", "hello_mod"], input="fed",
                       capture_output=True, text=True, cwd=tmp_path, timeout=60, env=e)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == ["[0] module 0 fed", "[1] module 1 "]


LAUNCHER_VARS = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                 "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"]


@pytest.mark.parametrize("rank_var,size_var", [("RANK", "WORLD_SIZE"),                         # torchrun
                                               ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),  # Open MPI
                                               ("PMI_RANK", "PMI_SIZE"),                          # MPICH/Hydra
                                               ("SLURM_PROCID", "SLURM_NTASKS")])                 # srun
def test_scripts_start_unchanged_under_other_launchers(rank_var, size_var):
    """The documented example (docs/launchers.md) starts with only the variables torchrun, mpirun or srun set (plus MASTER_*)."""
    port = free_port()
    procs = []
    for rank in range(2):
        env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS and k != "PYTHONPATH"}
        env.update({rank_var: str(rank), size_var: "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                    "OMNICCL_TIMEOUT": "30s"})
        procs.append(subprocess.Popen([sys.executable, str(EXAMPLES / "hello_all_reduce.py")], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      stdin=subprocess.DEVNULL))
    try:
        outs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for rank, (p, (out, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, err
        assert out.strip() == f"rank {rank}: [4, 6]"


# ------------------------------------------------------------- a new user's first hour
def test_rank_that_raises_is_named_first_and_peers_hear_it_failed(script):
    # Rank 2 raises mid-job and is slow to exit (an atexit handler takes 1.5 s),
    # so the ranks it takes down exit before it. The launcher still names rank
    # 2, with its status; the survivors are told rank 2 failed, not that it
    # destroyed its communicator.
    prog = script("""
        import atexit, os, sys, time
        import numpy as np
        import omniccl as dist
        dist.init_process_group()
        rank = dist.get_rank()
        x = np.ones(4)
        # Rank 2 leaves as soon as its own part of this call is done: the
        # survivors have what they need from it and must complete it too.
        dist.all_reduce(x)
        if rank == 2:
            atexit.register(time.sleep, 1.5)
            raise RuntimeError("rank 2 broke")
        try:
            for _ in range(1000):
                dist.all_reduce(x)
        except dist.OmniCCLError as e:
            print("survivor saw:", e, file=sys.stderr)
            sys.exit(5)
    """)
    p = run_launcher(["-n", "3", "--grace", "20", str(prog)], env={"OMNICCL_TIMEOUT": "20s"})
    assert p.returncode == 1, p.stderr
    assert p.stderr.splitlines()[-1] == "omniccl.run: rank 2 failed first (exited with status 1)", p.stderr
    survivors = [line for line in p.stderr.splitlines() if "survivor saw:" in line]
    assert len(survivors) == 2, p.stderr
    for line in survivors:
        assert "rank 2" in line and "destroyed its communicator" not in line, line


def test_python_output_appears_as_printed(script, tmp_path):
    prog = script("""
        import time
        print("tick")
        time.sleep(6)
    """)
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # the launcher must provide it
    env.pop("PYTHONPATH", None)
    out = tmp_path / "out.txt"
    with open(out, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "omniccl.run", "-n", "1", str(prog)], stdout=f,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
        try:
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline and b"[0] tick" not in out.read_bytes():
                time.sleep(0.1)
            assert b"[0] tick" in out.read_bytes() and proc.poll() is None
        finally:
            proc.kill()
            proc.wait(timeout=30)


def test_recv_without_src_names_recv(script):
    prog = script("""
        import numpy as np
        import omniccl as dist
        dist.init_process_group()
        try:
            dist.recv(np.zeros(1))
        except ValueError as e:
            print("error:", e)
    """)
    p = run_launcher(["-n", "1", str(prog)])
    assert p.returncode == 0, p.stderr
    assert "[0] error: recv: src is required" in p.stdout, p.stdout


def test_script_without_a_launcher_says_how_to_launch(script):
    prog = script("""
        import omniccl as dist
        dist.init_process_group()
    """)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH")}
    p = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=60, env=env,
                       stdin=subprocess.DEVNULL)
    assert p.returncode != 0
    assert f"python -m omniccl.run -n 2 {prog}" in p.stderr, p.stderr
    assert "rank -1" not in p.stderr, p.stderr

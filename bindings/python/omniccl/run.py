"""``python -m omniccl.run -n N script.py args...``: start N local ranks (a port of ``omniccl-run``).

It behaves as the C launcher ``omniccl-run`` does (see ``--help`` and
tools/omniccl_run.cc, whose design notes apply here too): each rank gets
RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT;
its output lines are prefixed with ``[rank] ``; SIGINT, SIGTERM, SIGHUP and
SIGQUIT are forwarded to every rank (a second Ctrl-C kills them); the exit
status is that of the first rank that failed; ``--grace`` bounds how long the
others may run on after a failure and ``--timeout`` the whole job (exit 124).

One difference, as torchrun: a PROGRAM ending in ``.py`` runs under this
Python interpreter, and ``-m`` runs a module (``python -m PROGRAM``);
``--no-python`` executes PROGRAM directly, as omniccl-run always does.

Design (as in the C launcher): each rank runs in its own process group, so a
terminal's Ctrl-C reaches the launcher once and is forwarded once; ranks die
with the launcher (PR_SET_PDEATHSIG); one single-threaded poll() loop reads
the ranks' output, the self-pipe of signals (signal.set_wakeup_fd) and
deadlines, waking at least once a second.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import errno
import os
import resource
import select
import secrets
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

__all__ = ["main"]

PROG = "omniccl.run"
MAX_RANKS = 1024
EXIT_USAGE = 2
EXIT_TIMEOUT = 124
EXIT_INTERNAL = 125
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127
KILL_DELAY = 5.0    # SIGTERM -> SIGKILL
DRAIN_DELAY = 2.0   # output after the last exit
MAX_LINE = 1 << 20
MAX_POLL = 1.0
MAX_SECONDS = 1e7

USAGE = """\
Usage: python -m omniccl.run -n N [options] [--] PROGRAM [ARGS...]

Start N local ranks of PROGRAM ARGS... for an OmniCCL (or torch.distributed
style) job and wait for them. Rank i gets, on top of the current environment:
  RANK=i  WORLD_SIZE=N  LOCAL_RANK=i  LOCAL_WORLD_SIZE=N
  MASTER_ADDR  MASTER_PORT  OMNICCL_LAUNCHER=omniccl.run
  OMNICCL_JOB_ID (a fresh one unless set)  PYTHONUNBUFFERED=1 (unless set)
  OMNICCL_RUN_FAILURE_FD, OMNICCL_RUN_FAILURE_PIPE (where a failing rank
  may say so, see below)

A PROGRAM ending in .py runs under this Python interpreter; others are
executed directly.

Options:
  -n, --nproc, --nproc-per-node N
                      number of ranks to start, 1 to 1024 (required)
  -m, --module        PROGRAM is a Python module: run 'python -m PROGRAM'
  --no-python         execute PROGRAM directly, even if it ends in .py
  --master-addr ADDR  MASTER_ADDR for the ranks (default 127.0.0.1)
  --master-port PORT  MASTER_PORT for the ranks (default: a free TCP port,
                      found by binding port 0 on 127.0.0.1)
  --no-prefix         do not prefix output lines with "[RANK] "; the ranks
                      then write straight to the launcher's stdout and stderr
  --grace SECONDS     once a rank has failed, how long the other ranks may
                      still run before they get SIGTERM, and SIGKILL 5 s
                      later (default 30)
  --timeout SECONDS   stop the whole job after SECONDS and exit with 124
                      (default: no time limit)
  --bind-to core|none core: rank i runs only on the i-th CPU the launcher may
                      use (round-robin when ranks outnumber them), as mpirun
                      binds ranks to cores; none: ranks keep the launcher's
                      CPU mask. Default: core
  -h, --help          print this help and exit

Options may also be written --option=VALUE or -nN, and '_' may replace '-'
in long names (--nproc_per_node). Options end at PROGRAM or at '--'.

Output: every line a rank writes is printed as "[RANK] line", stdout lines
to stdout and stderr lines to stderr; lines of different ranks never mix.
Python ranks get PYTHONUNBUFFERED=1, so their lines appear as they are
printed; a rank's stdout is a pipe, so C programs buffer it: flush, or use
--no-prefix, for live output.

Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to the launcher are
forwarded to every rank (each rank runs in its own process group). A second
SIGINT (Ctrl-C pressed twice) kills all ranks with SIGKILL. Ctrl-Z stops
and 'fg' resumes the ranks together with the launcher.

Exit status: 0 if every rank exits with 0; otherwise the status of the first
rank that failed (by time: when it exited, or earlier when it wrote
"RANK MONOTONIC_NS" to OMNICCL_RUN_FAILURE_FD, as OmniCCL's Python package
does for an uncaught exception), or 128+SIGNAL if it was killed by a signal;
that rank is named on the last line; 124 after
--timeout; 125 if the launcher itself fails; 126 or 127 if PROGRAM cannot be
executed or is not found; 2 for bad usage.
"""


# ----------------------------------------------------------------------------- helpers
def _write_all(fd: int, data: bytes) -> None:
    """Writes all of data, waiting if fd is non-blocking; raises OSError on other errors."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [], MAX_POLL)
            continue
        except InterruptedError:
            continue
        view = view[n:]


def _log(message: str) -> None:
    """Prints "omniccl.run: message" on stderr in one write."""
    try:
        _write_all(2, f"{PROG}: {message}\n".encode())
    except OSError:
        pass


def _usage_error(message: str) -> int:
    sys.stderr.write(f"{PROG}: error: {message}\nTry 'python -m {PROG} --help' for more information.\n")
    sys.stderr.flush()
    return EXIT_USAGE


def _join_ranks(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _fmt_seconds(seconds: float) -> str:
    return f"{seconds:g}"


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"SIG{sig}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pdeathsig_setter():
    """A function that sets PR_SET_PDEATHSIG=SIGKILL (resolved before fork), or None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def set_pdeathsig() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)

    return set_pdeathsig


# ----------------------------------------------------------------------------- command line
@dataclass
class Options:
    """What the command line decides."""

    nproc: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 0  # 0: pick a free one
    prefix: bool = True
    grace: float = 30.0
    timeout: Optional[float] = None
    bind: bool = True  # --bind-to: True (core, the default), False (none)
    module: bool = False
    no_python: bool = False
    program: List[str] = field(default_factory=list)


class _UsageError(Exception):
    pass


def _parse_int(option: str, text: str, lo: int, hi: int) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise _UsageError(f"{option}: '{text}' is not a whole number") from None
    if not lo <= value <= hi or text.strip() != text:
        raise _UsageError(f"{option}: {text} is out of range; it must be between {lo} and {hi}")
    return value


def _parse_seconds(option: str, text: str, positive: bool) -> float:
    try:
        if text.strip() != text:
            raise ValueError
        value = float(text)
    except ValueError:
        raise _UsageError(f"{option}: '{text}' is not a number of seconds") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise _UsageError(f"{option}: '{text}' is not a number of seconds")
    if value < 0 or (positive and value == 0) or value > MAX_SECONDS:
        raise _UsageError(f"{option}: {text} is out of range; it must be "
                          f"{'more than 0' if positive else '0 or more'} and at most {_fmt_seconds(MAX_SECONDS)} "
                          "seconds")
    return value


class _Help(Exception):
    """--help was given: print the usage text and exit 0."""


class _Parser(argparse.ArgumentParser):
    """argparse with the launcher's own messages: every usage error raises _UsageError."""

    def error(self, message: str):  # type: ignore[override]
        raise _UsageError(message)


class _HelpAction(argparse.Action):
    """-h/--help: stops parsing where it stands, so later arguments are not checked (as in omniccl-run)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        raise _Help()


def _checked(check) -> type:
    """An argparse action storing check(option, value); option is the name as typed, '_' read as '-'."""

    class Checked(argparse.Action):
        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                     option_string: Optional[str] = None) -> None:
            setattr(namespace, self.dest, check(_canonical(option_string or self.dest), values))

    return Checked


def _canonical(option: str) -> str:
    return option[:2] + option[2:].replace("_", "-") if option.startswith("--") else option


def _names(*names: str) -> List[str]:
    """The option's names, each long one also with '_' for '-' (--nproc_per_node)."""
    out = list(names)
    out += [n[:2] + n[2:].replace("-", "_") for n in names if n.startswith("--") and "-" in n[2:]]
    return out


def _master_addr(option: str, text: str) -> str:
    if not text:
        raise _UsageError("--master-addr: the address is empty")
    return text


def _bind_to(option: str, text: str) -> bool:
    if text not in ("core", "none"):
        raise _UsageError(f"--bind-to: '{text}' is not one of core, none")
    return text == "core"


def _make_parser() -> _Parser:
    """The options, as USAGE lists them. Options end at PROGRAM or at '--'; the rest goes to the ranks."""
    # exit_on_error=False: a bad option value reaches _parse as ArgumentError, to be worded as omniccl-run does.
    p = _Parser(prog=PROG, add_help=False, allow_abbrev=False, exit_on_error=False)
    p.add_argument(*_names("-h", "--help"), action=_HelpAction)
    p.add_argument(*_names("-n", "--nproc", "--nproc-per-node"), dest="nproc",
                   action=_checked(lambda o, v: _parse_int(o, v, 1, MAX_RANKS)))
    p.add_argument(*_names("-m", "--module"), dest="module", action="store_true")
    p.add_argument(*_names("--no-python"), dest="no_python", action="store_true")
    p.add_argument(*_names("--master-addr"), dest="master_addr", default="127.0.0.1", action=_checked(_master_addr))
    p.add_argument(*_names("--master-port"), dest="master_port", default=0,
                   action=_checked(lambda o, v: _parse_int(o, v, 1, 65535)))
    p.add_argument(*_names("--no-prefix"), dest="prefix", action="store_false")
    p.add_argument(*_names("--grace"), dest="grace", default=30.0,
                   action=_checked(lambda o, v: _parse_seconds(o, v, positive=False)))
    p.add_argument(*_names("--timeout"), dest="timeout",
                   action=_checked(lambda o, v: _parse_seconds(o, v, positive=True)))
    p.add_argument(*_names("--bind-to"), dest="bind", default=True, action=_checked(_bind_to))
    p.add_argument("program", nargs="?")
    p.add_argument("args", nargs=argparse.REMAINDER)
    return p


def _typed(argv: Sequence[str], err: argparse.ArgumentError) -> Tuple[str, str]:
    """The argument that err is about, and its option name as typed ('_' read as '-')."""
    names = set((err.argument_name or "").split("/"))
    for arg in reversed(argv):
        name = arg.partition("=")[0] if arg.startswith("--") else arg[:2]
        if name in names:
            return arg, _canonical(name)
    return "", (err.argument_name or "").split("/")[0]


def _usage_message(argv: Sequence[str], err: argparse.ArgumentError) -> str:
    """The launcher's wording of argparse's complaints about an option's value."""
    arg, name = _typed(argv, err)
    if "expected one argument" in err.message:
        return f"option {name} needs a value"
    if "ignored explicit argument" in err.message:
        # "-hx" is not -h: report it as an unknown option.
        return f"option {name} takes no value" if arg.startswith("--") else f"unknown option '{arg}'"
    return str(err)


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parses argv into a namespace; raises _UsageError or _Help."""
    try:
        ns, unknown = _make_parser().parse_known_args(argv)
    except argparse.ArgumentError as e:
        raise _UsageError(_usage_message(argv, e)) from None
    # argparse takes "-5" for a PROGRAM; before '--' it is an unknown option.
    if ns.program and ns.program[:1] == "-" and len(ns.program) > 1 and "--" not in argv[:argv.index(ns.program)]:
        unknown.insert(0, ns.program)
    if unknown:
        raise _UsageError(f"unknown option '{unknown[0]}' (write '--' before PROGRAM if its name starts with '-')")
    if ns.nproc is None:
        raise _UsageError("missing -n N (the number of ranks to start)")
    if not ns.program:
        raise _UsageError("missing PROGRAM to run")
    if ns.module and ns.no_python:
        raise _UsageError("-m and --no-python do not go together")
    return ns


def _command(ns: argparse.Namespace) -> List[str]:
    """The rank's argv: PROGRAM ARGS..., under this Python for -m and for a PROGRAM ending in .py."""
    if ns.module:
        return [sys.executable, "-m", ns.program] + ns.args
    if ns.program.endswith(".py") and not ns.no_python:
        return [sys.executable, ns.program] + ns.args
    return [ns.program] + ns.args


def parse_args(argv: Sequence[str]) -> Union[Options, int]:
    """Parses the command line; returns Options, or an exit status (help printed, or a usage error)."""
    try:
        ns = _parse(argv)
    except _Help:
        sys.stdout.write(USAGE)
        sys.stdout.flush()
        return 0
    except _UsageError as e:
        return _usage_error(str(e))
    return Options(nproc=ns.nproc, master_addr=ns.master_addr, master_port=ns.master_port, prefix=ns.prefix,
                   grace=ns.grace, timeout=ns.timeout, bind=ns.bind, module=ns.module, no_python=ns.no_python,
                   program=_command(ns))


# ----------------------------------------------------------------------------- the launcher
@dataclass
class _Stream:
    """One output stream (stdout or stderr) of one rank."""

    fd: int = -1      # read end of the rank's pipe; -1 once closed
    out_fd: int = -1  # where its lines go: 1 or 2
    pending: bytes = b""


@dataclass
class _Rank:
    index: int
    pid: int = -1
    running: bool = False
    ended_by_launcher: bool = False
    failed_at: Optional[float] = None   # time.monotonic() of the failure: reported, or the exit
    failure_status: Optional[int] = None
    failure_what: str = ""
    prefix: bytes = b""
    out: _Stream = field(default_factory=_Stream)
    err: _Stream = field(default_factory=_Stream)


_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGTSTP)


class Launcher:
    """Starts the ranks, relays their output and signals, enforces --grace and --timeout."""

    def __init__(self, options: Options) -> None:
        self.o = options
        self.ranks: List[_Rank] = []
        self.saved: Dict[int, Any] = {}
        self.original_mask: set = set()
        self.original_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
        self.sig_r = self.sig_w = -1
        self.report_r = self.report_w = -1  # failure reports from the ranks (see omniccl-run)
        self.report_pending = b""
        self.devnull = -1
        self.stdin_for_rank0 = False
        self.broken = {1: False, 2: False}
        self.got_sigint = False
        self.timed_out = False
        self.first_failure: Optional[int] = None
        self.first_failed_rank = -1
        self.timeout_at: Optional[float] = None
        self.cpus: List[int] = []  # rank i runs on cpus[i % len]; empty: not bound
        self.grace_at: Optional[float] = None
        self.kill_at: Optional[float] = None
        self.drain_at: Optional[float] = None
        self.env: Dict[str, str] = {}
        self.pdeathsig = _pdeathsig_setter()

    # ---------------------------------------------------------------- set-up
    def run(self) -> int:
        """Runs the whole job and returns the launcher's exit status."""
        try:
            rc = self._prepare()
            if rc:
                return rc
            if self.o.timeout is not None:
                self.timeout_at = time.monotonic() + self.o.timeout
            rc = self._start_ranks()
            if rc:
                return rc
            self._loop()
        finally:
            self._restore_signals()
            for fd in (self.report_r, self.report_w):
                if fd >= 0:
                    os.close(fd)
        if self.timed_out:
            return EXIT_TIMEOUT
        first = self._first_failed()
        if first is not None and first.failure_status is not None:
            if sum(1 for r in self.ranks if r.failed_at is not None) > 1:
                _log(f"rank {first.index} failed first ({first.failure_what})")
            return first.failure_status
        return self.first_failure or 0

    def _first_failed(self) -> Optional[_Rank]:
        failed = [r for r in self.ranks if r.failed_at is not None]
        return min(failed, key=lambda r: r.failed_at) if failed else None  # type: ignore[arg-type, return-value]

    def _read_failure_reports(self) -> None:
        """Reads the "RANK MONOTONIC_NS" lines failing ranks wrote to OMNICCL_RUN_FAILURE_FD."""
        for _ in range(16):
            try:
                data = os.read(self.report_r, 4096)
            except (BlockingIOError, InterruptedError):
                break
            if not data:
                break
            self.report_pending += data
        *lines, self.report_pending = self.report_pending.split(b"\n")
        for line in lines:
            try:
                rank_text, ns_text = line.split()
                rank, ns = int(rank_text), int(ns_text)
            except ValueError:
                continue  # not ours to judge; the exit status still counts
            if 0 <= rank < len(self.ranks) and ns > 0:
                r = self.ranks[rank]
                t = ns / 1e9  # time.monotonic() is CLOCK_MONOTONIC, the clock the ranks use
                if r.failed_at is None or t < r.failed_at:
                    r.failed_at = t
        if len(self.report_pending) > 65536:
            self.report_pending = b""

    def _prepare(self) -> int:
        # Each rank costs two descriptors for its output pipes: raise the soft
        # open-file limit if needed (ranks get the original back).
        soft, hard = self.original_nofile
        needed = (2 * self.o.nproc if self.o.prefix else 0) + 64
        if soft != resource.RLIM_INFINITY and soft < needed:
            new = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            except (ValueError, OSError):
                pass
            now = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            if now != resource.RLIM_INFINITY and now < needed:
                _log(f"cannot open enough files for {self.o.nproc} ranks: the open-file limit (ulimit -n) is "
                     f"{now}, about {needed} are needed")
                return EXIT_INTERNAL
        port = self.o.master_port
        if port == 0:
            try:
                port = _free_port()
            except OSError as e:
                _log(f"cannot find a free port for MASTER_PORT ({e}); pass --master-port")
                return EXIT_INTERNAL
        self.env = dict(os.environ)
        self.env.update(WORLD_SIZE=str(self.o.nproc), LOCAL_WORLD_SIZE=str(self.o.nproc),
                        MASTER_ADDR=self.o.master_addr, MASTER_PORT=str(port), OMNICCL_LAUNCHER=PROG)
        self.env.setdefault("PYTHONUNBUFFERED", "1")
        if not self.env.get("OMNICCL_JOB_ID"):
            self.env["OMNICCL_JOB_ID"] = f"{PROG}:{os.getpid()}:{time.monotonic_ns()}:{os.urandom(8).hex()}"
        self.report_r, self.report_w = os.pipe2(os.O_NONBLOCK)
        os.set_inheritable(self.report_r, False)
        os.set_inheritable(self.report_w, True)
        self.env["OMNICCL_RUN_FAILURE_FD"] = str(self.report_w)
        self.env["OMNICCL_RUN_FAILURE_PIPE"] = f"pipe:[{os.fstat(self.report_w).st_ino}]"
        # A fresh job token unless one was given: the rendezvous is authenticated (SECURITY.md).
        if not self.env.get("OMNICCL_JOB_TOKEN"):
            self.env["OMNICCL_JOB_TOKEN"] = secrets.token_hex(32)
        self.devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        self.stdin_for_rank0 = not os.isatty(0)
        self.sig_r, self.sig_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        signal.set_wakeup_fd(self.sig_w, warn_on_full_buffer=False)
        self.original_mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])

        def wake(signum: int, frame: object) -> None:  # the byte in the self-pipe is what counts
            pass

        for sig in _FORWARDED:
            old = signal.getsignal(sig)
            if old == signal.SIG_IGN:
                continue  # nohup, background jobs: stays ignored, also in the ranks
            self.saved[sig] = old
            signal.signal(sig, wake)
        for sig in (signal.SIGCONT, signal.SIGCHLD):
            self.saved[sig] = signal.getsignal(sig)
            signal.signal(sig, wake)
        return 0

    def _restore_signals(self) -> None:
        for sig, old in self.saved.items():
            try:
                signal.signal(sig, old if old is not None else signal.SIG_DFL)
            except (TypeError, ValueError, OSError):
                pass
        self.saved.clear()
        if self.sig_w >= 0:
            signal.set_wakeup_fd(-1)

    def _start_ranks(self) -> int:
        # --bind-to: by default each rank gets a CPU of its own when there are
        # enough, so two busy ranks never share one while another idles;
        # round-robin when ranks outnumber the CPUs (as omniccl-run).
        cpus = sorted(os.sched_getaffinity(0))
        self.cpus = cpus if self.o.bind else []
        for i in range(self.o.nproc):
            r = _Rank(index=i, prefix=f"[{i}] ".encode())
            self.ranks.append(r)
            rc = self._start_rank(r)
            if rc:
                self._abort_started()
                return rc
        return 0

    def _start_rank(self, r: _Rank) -> int:
        env = dict(self.env, RANK=str(r.index), LOCAL_RANK=str(r.index))
        pipes: List[int] = []
        try:
            exec_r, exec_w = os.pipe2(os.O_CLOEXEC)
            pipes += [exec_r, exec_w]
            out_r = out_w = err_r = err_w = -1
            if self.o.prefix:
                out_r, out_w = os.pipe2(os.O_CLOEXEC)
                err_r, err_w = os.pipe2(os.O_CLOEXEC)
                pipes += [out_r, out_w, err_r, err_w]
        except OSError as e:
            _log(f"cannot create pipes for rank {r.index}: {e.strerror}")
            for fd in pipes:
                os.close(fd)
            return EXIT_INTERNAL

        # Fork with the handled signals blocked, so that no handler runs in the
        # child before it has restored the original dispositions.
        before = signal.pthread_sigmask(signal.SIG_BLOCK, list(self.saved))
        launcher_pid = os.getpid()
        try:
            pid = os.fork()
        except OSError as e:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)
            _log(f"cannot start rank {r.index}: fork: {e.strerror}")
            for fd in pipes:
                os.close(fd)
            return EXIT_INTERNAL
        if pid == 0:
            self._exec_rank(r.index, env, launcher_pid, out_w, err_w, exec_w)  # never returns
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
        try:
            os.setpgid(pid, pid)  # also here: the group exists before we could signal it
        except OSError:
            pass
        r.pid, r.running = pid, True
        os.close(exec_w)
        data = b""
        while True:
            try:
                chunk = os.read(exec_r, 4)
            except InterruptedError:
                continue
            if not chunk:
                break
            data += chunk
        os.close(exec_r)
        if len(data) >= 4:
            code = int.from_bytes(data[:4], "little")
            os.waitpid(pid, 0)
            r.running = False
            for fd in (out_r, out_w, err_r, err_w):
                if fd >= 0:
                    os.close(fd)
            _log(f"cannot execute '{self.o.program[0]}': {os.strerror(code)}")
            return EXIT_NOT_FOUND if code == errno.ENOENT else EXIT_CANNOT_EXECUTE
        if self.o.prefix:
            os.close(out_w)
            os.close(err_w)
            os.set_blocking(out_r, False)
            os.set_blocking(err_r, False)
            r.out = _Stream(out_r, 1)
            r.err = _Stream(err_r, 2)
        return 0

    def _exec_rank(self, index: int, env: Dict[str, str], launcher_pid: int, out_w: int, err_w: int,
                   exec_w: int) -> None:
        """In the forked child: own process group, parent-death signal, original signals, stdio, exec."""
        try:
            os.setpgid(0, 0)
            if self.cpus:
                try:
                    os.sched_setaffinity(0, {self.cpus[index % len(self.cpus)]})
                except OSError:
                    pass  # the rank runs unbound
            if self.pdeathsig is not None:
                self.pdeathsig()
            if os.getppid() != launcher_pid:
                os._exit(EXIT_INTERNAL)  # already orphaned
            signal.set_wakeup_fd(-1)
            for sig in self.saved:
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # Python ignores it; programs expect the default
            if index != 0 or not self.stdin_for_rank0:
                os.dup2(self.devnull, 0)
            if out_w >= 0:
                os.dup2(out_w, 1)
                os.dup2(err_w, 2)
            resource.setrlimit(resource.RLIMIT_NOFILE, self.original_nofile)
            signal.pthread_sigmask(signal.SIG_SETMASK, self.original_mask)
            os.set_inheritable(self.report_w, True)
            os.execvpe(self.o.program[0], self.o.program, env)
        except OSError as e:
            try:
                os.write(exec_w, (e.errno or errno.EIO).to_bytes(4, "little"))
            finally:
                os._exit(EXIT_NOT_FOUND if e.errno == errno.ENOENT else EXIT_CANNOT_EXECUTE)
        except BaseException:  # noqa: BLE001 - never return into the launcher's code
            pass
        os._exit(EXIT_INTERNAL)

    def _abort_started(self) -> None:
        for r in self.ranks:
            if r.running:
                self._signal_rank(r, signal.SIGKILL)
                os.waitpid(r.pid, 0)
                r.running = False

    # ----------------------------------------------------------------- loop
    @staticmethod
    def _signal_rank(r: _Rank, sig: int) -> None:
        if not r.running:
            return
        try:
            if os.getpgid(r.pid) == r.pid:
                os.killpg(r.pid, sig)
                return
        except OSError:
            pass
        try:
            os.kill(r.pid, sig)
        except OSError:
            pass

    def _running(self) -> List[int]:
        return [r.index for r in self.ranks if r.running]

    def _any_stream_open(self) -> bool:
        return any(s.fd >= 0 for r in self.ranks for s in (r.out, r.err))

    def _terminate_running(self, sig: int) -> None:
        for r in self.ranks:
            if r.running:
                self._signal_rank(r, sig)
                r.ended_by_launcher = True
        if sig == signal.SIGTERM and self.kill_at is None:
            self.kill_at = time.monotonic() + KILL_DELAY
        if sig == signal.SIGKILL:
            self.kill_at = None

    def _loop(self) -> None:
        while True:
            now = time.monotonic()
            self._check_deadlines(now)
            if not self._running():
                if not self._any_stream_open():
                    break
                # The ranks exited but a helper they started still holds a pipe.
                if self.drain_at is None:
                    self.drain_at = now + DRAIN_DELAY
                if now >= self.drain_at:
                    break
            poller = select.poll()
            poller.register(self.sig_r, select.POLLIN)
            poller.register(self.report_r, select.POLLIN)
            streams: Dict[int, tuple] = {}
            for r in self.ranks:
                for s in (r.out, r.err):
                    if s.fd >= 0:
                        poller.register(s.fd, select.POLLIN)
                        streams[s.fd] = (s, r)
            try:
                events = poller.poll(self._poll_timeout_ms(now))
            except InterruptedError:
                events = []
            for fd, _ in events:
                if fd == self.sig_r:
                    self._handle_signals()
                elif fd == self.report_r:
                    self._read_failure_reports()
                elif fd in streams:
                    s, r = streams[fd]
                    self._pump(s, r.prefix)
            self._reap()
        self._finish()

    def _poll_timeout_ms(self, now: float) -> int:
        wait = MAX_POLL
        for deadline in (self.timeout_at, self.grace_at, self.kill_at, self.drain_at):
            if deadline is not None:
                wait = max(0.0, min(wait, deadline - now))
        return int(wait * 1000 + 0.999)

    def _check_deadlines(self, now: float) -> None:
        if self.timeout_at is not None and now >= self.timeout_at:
            self.timeout_at = None
            running = self._running()
            if running:
                self.timed_out = True
                self.grace_at = None
                _log(f"timeout: the job ran longer than {_fmt_seconds(self.o.timeout or 0)} s; still running: "
                     f"{_join_ranks(running)}; sending SIGTERM")
                self._terminate_running(signal.SIGTERM)
        if self.grace_at is not None and now >= self.grace_at:
            self.grace_at = None
            running = self._running()
            if running:
                first = self._first_failed()
                first_rank = first.index if first is not None else self.first_failed_rank
                _log(f"still running {_fmt_seconds(self.o.grace)} s (--grace) after rank {first_rank} "
                     f"failed: {_join_ranks(running)}; sending SIGTERM")
                self._terminate_running(signal.SIGTERM)
        if self.kill_at is not None and now >= self.kill_at:
            self.kill_at = None
            running = self._running()
            if running:
                _log(f"still running {int(KILL_DELAY)} s after SIGTERM: {_join_ranks(running)}; sending SIGKILL")
                self._terminate_running(signal.SIGKILL)

    def _handle_signals(self) -> None:
        for _ in range(64):
            try:
                data = os.read(self.sig_r, 256)
            except (BlockingIOError, InterruptedError):
                break
            if not data:
                break
            for sig in data:
                self._on_signal(sig)
            if len(data) < 256:
                break

    def _on_signal(self, sig: int) -> None:
        if sig == signal.SIGCHLD:
            return  # _reap runs after every poll
        if sig == signal.SIGCONT:
            for r in self.ranks:
                self._signal_rank(r, signal.SIGCONT)
            return
        if sig == signal.SIGTSTP:
            for r in self.ranks:
                self._signal_rank(r, signal.SIGTSTP)
            os.kill(os.getpid(), signal.SIGSTOP)
            return
        running = self._running()
        if sig == signal.SIGINT and self.got_sigint:
            if running:
                _log(f"second SIGINT: killing {_join_ranks(running)} with SIGKILL")
            self._terminate_running(signal.SIGKILL)
            return
        if sig == signal.SIGINT:
            self.got_sigint = True
        if not running:
            return
        hint = " (press Ctrl-C again to kill them)" if sig == signal.SIGINT else ""
        _log(f"received {_signal_name(sig)}; forwarding it to {_join_ranks(running)}{hint}")
        for r in self.ranks:
            self._signal_rank(r, sig)

    # --------------------------------------------------------------- output
    def _pump(self, s: _Stream, prefix: bytes) -> int:
        if s.fd < 0:
            return 0
        try:
            data = os.read(s.fd, 65536)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError:
            data = b""
        if not data:
            self._close_stream(s, prefix)
            return 0
        s.pending += data
        self._emit_lines(s, prefix, final=False)
        return len(data)

    def _emit_lines(self, s: _Stream, prefix: bytes, final: bool) -> None:
        out = []
        lines = s.pending.split(b"\n")
        s.pending = lines.pop()
        for line in lines:
            out.append(prefix + line + b"\n")
        if s.pending and (final or len(s.pending) >= MAX_LINE):
            while len(s.pending) > MAX_LINE:
                out.append(prefix + s.pending[:MAX_LINE] + b"\n")
                s.pending = s.pending[MAX_LINE:]
            out.append(prefix + s.pending + b"\n")
            s.pending = b""
        if out:
            self._write_output(s.out_fd, b"".join(out))

    def _write_output(self, out_fd: int, data: bytes) -> None:
        if self.broken[out_fd]:
            return
        try:
            _write_all(out_fd, data)
        except OSError as e:
            self.broken[out_fd] = True
            if e.errno != errno.EPIPE:
                return
            # Our stdout/stderr is a closed pipe (`| head`): close the ranks'
            # pipes too, so they get SIGPIPE as in a shell pipeline.
            for r in self.ranks:
                for st in (r.out, r.err):
                    if st.out_fd == out_fd and st.fd >= 0:
                        os.close(st.fd)
                        st.fd = -1
                        st.pending = b""

    def _close_stream(self, s: _Stream, prefix: bytes) -> None:
        if s.fd < 0:
            return
        self._emit_lines(s, prefix, final=True)
        if s.fd >= 0:
            os.close(s.fd)
        s.fd = -1
        s.pending = b""

    def _drain(self, r: _Rank) -> None:
        for s in (r.out, r.err):
            for _ in range(64):
                if self._pump(s, r.prefix) <= 0:
                    break

    # ---------------------------------------------------------------- exits
    def _reap(self) -> None:
        for _ in range(len(self.ranks) + 1):
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except InterruptedError:
                continue
            except ChildProcessError:
                for r in self.ranks:
                    if r.running:
                        r.running = False
                        _log(f"rank {r.index} vanished: waitpid: {os.strerror(errno.ECHILD)}")
                        self._on_failed(r, EXIT_INTERNAL)
                return
            if pid == 0:
                return
            for r in self.ranks:
                if r.running and r.pid == pid:
                    r.running = False
                    self._drain(r)
                    self._read_failure_reports()  # a report written just before exiting
                    self._on_exit(r, status)
                    break

    def _on_exit(self, r: _Rank, status: int) -> None:
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            return
        if os.WIFEXITED(status):
            code = os.WEXITSTATUS(status)
            what = f"exited with status {code}"
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            code = 128 + sig
            what = f"killed by signal {sig} ({_signal_name(sig)})"
            if os.WCOREDUMP(status):
                what += ", core dumped"
        else:
            code = EXIT_INTERNAL
            what = f"ended with wait status {status}"
        if not r.ended_by_launcher:
            _log(f"rank {r.index} {what}")
        if r.failed_at is None:
            r.failed_at = time.monotonic()
        r.failure_status, r.failure_what = code, what
        self._on_failed(r, code)

    def _on_failed(self, r: _Rank, code: int) -> None:
        if self.first_failure is not None:
            return
        self.first_failure = code
        self.first_failed_rank = r.index
        if self.timed_out or self.kill_at is not None:
            return  # teardown already under way
        running = self._running()
        if not running:
            return
        if self.o.grace <= 0:
            _log(f"--grace 0: sending SIGTERM to the other ranks still running, {_join_ranks(running)}")
            self._terminate_running(signal.SIGTERM)
            return
        self.grace_at = time.monotonic() + self.o.grace
        _log(f"waiting up to {_fmt_seconds(self.o.grace)} s (--grace) for {_join_ranks(running)} to exit "
             "before sending SIGTERM")

    def _finish(self) -> None:
        for r in self.ranks:
            self._close_stream(r.out, r.prefix)
            self._close_stream(r.err, r.prefix)
        for r in self.ranks:
            if r.pid <= 0:
                continue
            try:
                os.killpg(r.pid, 0)
            except OSError:
                continue
            _log(f"rank {r.index} left processes running after it exited; sending them SIGTERM")
            try:
                os.killpg(r.pid, signal.SIGTERM)
            except OSError:
                pass


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the launcher with ``argv`` (default: sys.argv[1:]); returns its exit status."""
    parsed = parse_args(list(sys.argv[1:] if argv is None else argv))
    if isinstance(parsed, int):
        return parsed
    return Launcher(parsed).run()


if __name__ == "__main__":
    sys.exit(main())

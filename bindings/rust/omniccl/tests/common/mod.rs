//! Running a test as N ranks: the test binary re-executes itself once per
//! rank (`--exact NAME`), with the rank, size and a file:// rendezvous
//! directory in the environment. The parent waits for every rank within a
//! deadline, kills the ranks that overrun it, and fails the test with each
//! failing rank's output (every rank's with OMNICCL_RUST_TEST_SHOW=1).
#![allow(dead_code)] // each test file uses a subset

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use omniccl::{Communicator, Config, InitMethod};

const RANK: &str = "OMNICCL_RUST_TEST_RANK";
const SIZE: &str = "OMNICCL_RUST_TEST_SIZE";
const DIR: &str = "OMNICCL_RUST_TEST_DIR";

/// Deadline of each blocking call inside a rank: a hang becomes an error.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// This process's (rank, size) when it runs as a rank of a test, else None.
pub fn as_rank() -> Option<(usize, usize)> {
    let rank = std::env::var(RANK).ok()?.parse().expect("rank");
    let size = std::env::var(SIZE).ok()?.parse().expect("size");
    Some((rank, size))
}

/// The init method of this rank (file:// rendezvous chosen by the parent).
pub fn init_method() -> InitMethod {
    let (rank, world_size) = as_rank().expect("running as a rank");
    InitMethod::File {
        path: PathBuf::from(std::env::var(DIR).expect("dir")),
        rank,
        world_size,
    }
}

/// A communicator for this rank with a bounded call deadline.
pub fn comm() -> Communicator {
    Communicator::init_with_config(init_method(), &Config::new().timeout(CALL_TIMEOUT)).expect("init")
}

/// What a rank must do for the test to pass.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Expect {
    /// Exit with status 0.
    Success,
    /// Die (non-zero status or signal): a rank the test kills on purpose.
    Die,
}

/// Runs `body` as `n` ranks of test `name` (the test function's name), each
/// rank expected to succeed, within `deadline`.
pub fn run(name: &str, n: usize, deadline: Duration, body: impl FnOnce(Communicator)) {
    run_expect(name, n, deadline, |_| Expect::Success, &[], |_| body(comm()))
}

/// Like [`run`], with per-rank expectations, extra environment and a body
/// that makes its own communicator.
pub fn run_expect(
    name: &str,
    n: usize,
    deadline: Duration,
    expect: impl Fn(usize) -> Expect,
    env: &[(&str, String)],
    body: impl FnOnce(usize),
) {
    if let Some((rank, _)) = as_rank() {
        body(rank);
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let exe = std::env::current_exe().expect("current exe");
    let mut children: Vec<Child> = (0..n)
        .map(|rank| {
            let mut cmd = Command::new(&exe);
            cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
                .env(RANK, rank.to_string())
                .env(SIZE, n.to_string())
                .env(DIR, dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            for (k, v) in env {
                cmd.env(k, v);
            }
            cmd.spawn().expect("spawn rank")
        })
        .collect();
    let start = Instant::now();
    let mut statuses = vec![None; n];
    while statuses.iter().any(Option::is_none) && start.elapsed() < deadline {
        for (i, c) in children.iter_mut().enumerate() {
            if statuses[i].is_none() {
                statuses[i] = c.try_wait().expect("try_wait");
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut failures = Vec::new();
    for (rank, c) in children.iter_mut().enumerate() {
        let status = match statuses[rank] {
            Some(s) => Some(s),
            None => {
                let _ = c.kill();
                let _ = c.wait();
                None
            }
        };
        let mut out = String::new();
        let _ = c.stdout.take().expect("stdout").read_to_string(&mut out);
        let _ = c.stderr.take().expect("stderr").read_to_string(&mut out);
        let ok = match (status, expect(rank)) {
            (None, _) => false,
            (Some(s), Expect::Success) => s.success(),
            (Some(s), Expect::Die) => !s.success(),
        };
        if std::env::var_os("OMNICCL_RUST_TEST_SHOW").is_some() {
            eprintln!("---- rank {rank} of {n} ({status:?}):\n{out}");
        }
        if !ok {
            let what = match status {
                None => format!("did not finish within {deadline:?} (killed)"),
                Some(s) => format!("ended with {s}, expected {:?}", expect(rank)),
            };
            failures.push(format!("---- rank {rank} of {n} {what}; its output:\n{out}"));
        }
    }
    assert!(
        failures.is_empty(),
        "test {name} with {n} ranks failed:\n{}",
        failures.join("\n")
    );
}

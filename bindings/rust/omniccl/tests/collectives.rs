//! Every operation, for every element type, on 1, 2, 3 and 4 ranks (separate
//! processes), compared with references computed here from the inputs.

mod common;

use std::fmt::Debug;
use std::time::Duration;

use half::{bf16, f16};
use omniccl::{Communicator, Element, ReduceOp};

/// What the tests need to know about an element type.
trait TestElem: Element + PartialEq + Debug + Default {
    const NAME: &'static str;
    /// Integer types (bitwise ops, truncating average).
    const INT: bool;
    const BOOL: bool;
    /// Relative tolerance of a rounded result (average, pre-multiplied sum).
    const TOL: f64;
    fn from_i64(v: i64) -> Self;
    /// A value as T (floats round to nearest; only floats take fractions).
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl TestElem for $t {
            const NAME: &'static str = stringify!($t);
            const INT: bool = true;
            const BOOL: bool = false;
            const TOL: f64 = 0.0;
            fn from_i64(v: i64) -> Self { v as $t }
            fn from_f64(x: f64) -> Self { x as $t }
            fn to_f64(self) -> f64 { self as f64 }
        }
    )*};
}
int_elem!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_elem {
    ($($t:ty => $tol:expr, $from:expr, $to:expr);*) => {$(
        impl TestElem for $t {
            const NAME: &'static str = stringify!($t);
            const INT: bool = false;
            const BOOL: bool = false;
            const TOL: f64 = $tol;
            fn from_i64(v: i64) -> Self { $from(v as f64) }
            fn from_f64(x: f64) -> Self { $from(x) }
            fn to_f64(self) -> f64 { $to(self) }
        }
    )*};
}
float_elem!(
    f32 => 1e-6, |v: f64| v as f32, |x: f32| x as f64;
    f64 => 1e-12, |v: f64| v, |x: f64| x;
    f16 => 1e-3, f16::from_f64, f16::to_f64;
    bf16 => 8e-3, bf16::from_f64, bf16::to_f64
);

impl TestElem for bool {
    const NAME: &'static str = "bool";
    const INT: bool = false;
    const BOOL: bool = true;
    const TOL: f64 = 0.0;
    fn from_i64(v: i64) -> Self {
        v % 2 == 1
    }
    fn from_f64(x: f64) -> Self {
        x != 0.0
    }
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
}

/// Rank r's input element i (1..=4): small, so sums are exact in every type.
fn value(r: usize, i: usize) -> i64 {
    ((r * 5 + i * 3) % 4 + 1) as i64
}

/// Rank r's input element i for products (1 or 2: no overflow in 8 bits).
fn prod_value(r: usize, i: usize) -> i64 {
    1 + ((r + i) % 2) as i64
}

/// Rank r's input element i for the logical ops: zero at every third
/// (rank + element) position, so that each result takes both values.
fn logic_value(r: usize, i: usize) -> i64 {
    if (r + i) % 3 == 0 { 0 } else { ((r + i) % 4 + 1) as i64 }
}

fn is_logical(op: ReduceOp) -> bool {
    matches!(op, ReduceOp::LogicalAnd | ReduceOp::LogicalOr | ReduceOp::LogicalXor)
}

/// The ops defined for T.
fn ops<T: TestElem>() -> Vec<ReduceOp> {
    use ReduceOp::*;
    let logical = [LogicalAnd, LogicalOr, LogicalXor];
    let mut ops = if T::BOOL {
        vec![Sum, Prod, Min, Max, BitAnd, BitOr, BitXor]
    } else if T::INT {
        vec![Sum, Prod, Min, Max, Avg, BitAnd, BitOr, BitXor, PremulSum(2.0)]
    } else {
        vec![Sum, Prod, Min, Max, Avg, PremulSum(2.0)]
    };
    ops.extend(logical);
    ops
}

/// The input function of op.
fn value_fn(op: ReduceOp) -> fn(usize, usize) -> i64 {
    match op {
        ReduceOp::Prod => prod_value,
        op if is_logical(op) => logic_value,
        _ => value,
    }
}

fn input<T: TestElem>(op: ReduceOp, r: usize, count: usize, offset: usize) -> Vec<T> {
    let f = value_fn(op);
    (0..count).map(|i| T::from_i64(f(r, i + offset))).collect()
}

/// The logical op over the truth of `vals`, as 0 or 1.
fn logical(op: ReduceOp, vals: &[i64]) -> i64 {
    let trues = vals.iter().filter(|&&v| v != 0).count();
    let x = match op {
        ReduceOp::LogicalAnd => trues == vals.len(),
        ReduceOp::LogicalOr => trues > 0,
        _ => trues % 2 == 1,
    };
    x as i64
}

/// The reduction of element i (at `offset + i`) over n ranks, as T.
fn reference<T: TestElem>(op: ReduceOp, n: usize, count: usize, offset: usize) -> Vec<T> {
    (0..count)
        .map(|i| {
            let i = i + offset;
            let f = value_fn(op);
            let vals: Vec<i64> = (0..n).map(|r| f(r, i)).collect();
            if is_logical(op) {
                let truths: Vec<i64> = vals.iter().map(|&v| (T::from_i64(v).to_f64() != 0.0) as i64).collect();
                return T::from_i64(logical(op, &truths));
            }
            if T::BOOL {
                let bits: Vec<bool> = vals.iter().map(|&v| T::from_i64(v).to_f64() != 0.0).collect();
                let any = bits.iter().any(|&b| b);
                let all = bits.iter().all(|&b| b);
                let x = match op {
                    ReduceOp::Sum | ReduceOp::Max | ReduceOp::BitOr => any,
                    ReduceOp::Prod | ReduceOp::Min | ReduceOp::BitAnd => all,
                    ReduceOp::BitXor => bits.iter().filter(|&&b| b).count() % 2 == 1,
                    _ => unreachable!(),
                };
                return T::from_i64(x as i64);
            }
            match op {
                ReduceOp::Sum => T::from_i64(vals.iter().sum()),
                ReduceOp::Prod => T::from_i64(vals.iter().product()),
                ReduceOp::Min => T::from_i64(*vals.iter().min().unwrap()),
                ReduceOp::Max => T::from_i64(*vals.iter().max().unwrap()),
                ReduceOp::Avg if T::INT => T::from_i64(vals.iter().sum::<i64>() / n as i64),
                ReduceOp::Avg => T::from_f64(vals.iter().sum::<i64>() as f64 / n as f64),
                ReduceOp::BitAnd => T::from_i64(vals.iter().fold(-1, |a, &b| a & b)),
                ReduceOp::BitOr => T::from_i64(vals.iter().fold(0, |a, &b| a | b)),
                ReduceOp::BitXor => T::from_i64(vals.iter().fold(0, |a, &b| a ^ b)),
                ReduceOp::PremulSum(s) => T::from_f64(s * vals.iter().sum::<i64>() as f64),
                _ => unreachable!(),
            }
        })
        .collect()
}

/// Asserts `got == want`; rounded float results within T's tolerance.
fn assert_close<T: TestElem>(got: &[T], want: &[T], rounded: bool, what: &str) {
    let close = |g: T, w: T| {
        if rounded && !T::INT && !T::BOOL {
            (g.to_f64() - w.to_f64()).abs() <= T::TOL * w.to_f64().abs().max(1.0)
        } else {
            g == w
        }
    };
    let ok = got.len() == want.len() && got.iter().zip(want).all(|(&g, &w)| close(g, w));
    assert!(ok, "{what} ({}): got {got:?}, want {want:?}", T::NAME);
}

/// Rank q's distinct part p of a buffer of parts (for scatter/all_to_all).
fn part<T: TestElem>(q: usize, p: usize, count: usize) -> Vec<T> {
    input::<T>(ReduceOp::Sum, q * 16 + p, count, q + p)
}

fn concat<T: TestElem>(parts: impl Iterator<Item = Vec<T>>) -> Vec<T> {
    parts.flatten().collect()
}

/// Scan and exscan (blocking, in place, non-blocking) for every op with a
/// prefix meaning; the references are reductions over the ranks before.
fn exercise_scan<T: TestElem>(comm: &Communicator, count: usize) {
    let (r, n) = (comm.rank(), comm.size());
    let untouched = T::from_i64(1);
    for op in ops::<T>()
        .into_iter()
        .filter(|op| !matches!(op, ReduceOp::Avg | ReduceOp::PremulSum(_)))
    {
        let ctx = |what: &str| format!("{what} {op:?}, count {count}, rank {r} of {n}");
        let send = input::<T>(op, r, count, 0);
        let upto = reference::<T>(op, r + 1, count, 0);
        let before = if r == 0 {
            vec![untouched; count]
        } else {
            reference::<T>(op, r, count, 0)
        };
        let mut recv = vec![T::default(); count];
        comm.scan(&send, &mut recv, op).unwrap();
        assert_close(&recv, &upto, false, &ctx("scan"));
        let mut buf = send.clone();
        comm.scan_in_place(&mut buf, op).unwrap();
        assert_close(&buf, &upto, false, &ctx("scan_in_place"));
        let mut recv = vec![untouched; count];
        comm.exscan(&send, &mut recv, op).unwrap();
        assert_close(&recv, &before, false, &ctx("exscan"));
        // In place, rank 0's input is its output, which it keeps.
        let mut buf = send.clone();
        comm.exscan_in_place(&mut buf, op).unwrap();
        assert_close(
            &buf,
            if r == 0 { &send } else { &before },
            false,
            &ctx("exscan_in_place"),
        );
        let mut recv = vec![untouched; count];
        comm.scope(|s| s.iscan(&send, &mut recv, op, true)?.wait().map(drop))
            .unwrap();
        assert_close(&recv, &before, false, &ctx("iscan (exclusive)"));
    }
    let err = comm
        .scan_in_place(&mut vec![T::default(); count], ReduceOp::Avg)
        .unwrap_err();
    assert_eq!(err.kind(), omniccl::ErrorKind::InvalidArgument, "scan with Avg: {err}");
}

/// Every operation on T with `count` elements per rank.
fn exercise<T: TestElem>(comm: &Communicator, count: usize) {
    use ReduceOp::Sum;
    let (r, n) = (comm.rank(), comm.size());
    let ctx = |op: String| format!("{op}, count {count}, rank {r} of {n}");
    let zeros = |len: usize| vec![T::default(); len];

    for op in ops::<T>() {
        let rounded = matches!(op, ReduceOp::Avg | ReduceOp::PremulSum(_));
        let send = input::<T>(op, r, count, 0);
        let want = reference::<T>(op, n, count, 0);
        let mut recv = zeros(count);
        comm.all_reduce(&send, &mut recv, op).unwrap();
        assert_close(&recv, &want, rounded, &ctx(format!("all_reduce {op:?}")));
        assert_eq!(
            send,
            input::<T>(op, r, count, 0),
            "{}",
            ctx(format!("all_reduce {op:?} changed its input"))
        );

        let mut buf = send.clone();
        comm.all_reduce_in_place(&mut buf, op).unwrap();
        assert_close(&buf, &want, rounded, &ctx(format!("all_reduce_in_place {op:?}")));

        let big = input::<T>(op, r, n * count, 0);
        let mut mine = zeros(count);
        comm.reduce_scatter(&big, &mut mine, op).unwrap();
        assert_close(
            &mine,
            &reference::<T>(op, n, count, r * count),
            rounded,
            &ctx(format!("reduce_scatter {op:?}")),
        );

        let root = n - 1;
        let mut out = zeros(count);
        comm.reduce(&send, (r == root).then_some(&mut out[..]), op, root)
            .unwrap();
        if r == root {
            assert_close(&out, &want, rounded, &ctx(format!("reduce {op:?} to {root}")));
        }
        assert_eq!(
            send,
            input::<T>(op, r, count, 0),
            "{}",
            ctx(format!("reduce {op:?} changed its input"))
        );
    }

    for root in 0..n {
        let mut buf = if r == root {
            input::<T>(Sum, root, count, 0)
        } else {
            zeros(count)
        };
        comm.broadcast(&mut buf, root).unwrap();
        assert_eq!(
            buf,
            input::<T>(Sum, root, count, 0),
            "{}",
            ctx(format!("broadcast from {root}"))
        );
    }

    let mut all = zeros(n * count);
    comm.all_gather(&input::<T>(Sum, r, count, 0), &mut all).unwrap();
    assert_eq!(
        all,
        concat((0..n).map(|q| input::<T>(Sum, q, count, 0))),
        "{}",
        ctx("all_gather".into())
    );

    let root = 1 % n;
    let mut all = zeros(n * count);
    comm.gather(&part::<T>(r, 0, count), (r == root).then_some(&mut all[..]), root)
        .unwrap();
    if r == root {
        assert_eq!(
            all,
            concat((0..n).map(|q| part::<T>(q, 0, count))),
            "{}",
            ctx("gather".into())
        );
    }

    let parts = concat((0..n).map(|p| part::<T>(root, p, count)));
    let mut mine = zeros(count);
    comm.scatter((r == root).then_some(&parts[..]), &mut mine, root)
        .unwrap();
    assert_eq!(mine, part::<T>(root, r, count), "{}", ctx("scatter".into()));

    let send = concat((0..n).map(|p| part::<T>(r, p, count)));
    let mut recv = zeros(n * count);
    comm.all_to_all(&send, &mut recv).unwrap();
    assert_eq!(
        recv,
        concat((0..n).map(|q| part::<T>(q, r, count))),
        "{}",
        ctx("all_to_all".into())
    );

    // v-variants: rank q contributes (q + count) % 3 elements; displacements
    // leave a one-element gap before each block.
    let counts: Vec<usize> = (0..n).map(|q| (q + count) % 3).collect();
    let displs: Vec<usize> = (0..n).map(|q| counts[..q].iter().sum::<usize>() + q + 1).collect();
    let total = counts.iter().sum::<usize>() + n + 1;
    let block = |q: usize| part::<T>(q, 0, counts[q]);
    let placed = |blocks: &dyn Fn(usize) -> Vec<T>| {
        let mut v = zeros(total);
        for q in 0..n {
            v[displs[q]..displs[q] + counts[q]].copy_from_slice(&blocks(q));
        }
        v
    };
    let mut recv = zeros(total);
    comm.all_gatherv(&block(r), &mut recv, &counts, Some(&displs)).unwrap();
    assert_eq!(recv, placed(&block), "{}", ctx("all_gatherv".into()));

    let mut packed = zeros(counts.iter().sum());
    comm.all_gatherv(&block(r), &mut packed, &counts, None).unwrap();
    assert_eq!(
        packed,
        concat((0..n).map(block)),
        "{}",
        ctx("all_gatherv packed".into())
    );

    let mut recv = zeros(total);
    comm.gatherv(
        &block(r),
        (r == root).then_some(&mut recv[..]),
        &counts,
        Some(&displs),
        root,
    )
    .unwrap();
    if r == root {
        assert_eq!(recv, placed(&block), "{}", ctx("gatherv".into()));
    }

    let source = placed(&block);
    let mut mine = zeros(counts[r]);
    comm.scatterv(
        (r == root).then_some(&source[..]),
        &counts,
        Some(&displs),
        &mut mine,
        root,
    )
    .unwrap();
    assert_eq!(mine, block(r), "{}", ctx("scatterv".into()));

    // all_to_allv: rank i sends (i + j) % 2 + count elements to rank j.
    let amount = |i: usize, j: usize| (i + j) % 2 + count;
    let send_counts: Vec<usize> = (0..n).map(|j| amount(r, j)).collect();
    let recv_counts: Vec<usize> = (0..n).map(|i| amount(i, r)).collect();
    let send = concat((0..n).map(|j| part::<T>(r, j, amount(r, j))));
    let mut recv = zeros(recv_counts.iter().sum());
    comm.all_to_allv(&send, &send_counts, None, &mut recv, &recv_counts, None)
        .unwrap();
    assert_eq!(
        recv,
        concat((0..n).map(|i| part::<T>(i, r, amount(i, r)))),
        "{}",
        ctx("all_to_allv".into())
    );

    // send/recv around a ring (blocking: even ranks send first).
    if n > 1 {
        let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
        let mut got = zeros(count);
        if r % 2 == 0 {
            comm.send(&part::<T>(r, 1, count), next).unwrap();
            comm.recv(&mut got, prev).unwrap();
        } else {
            comm.recv(&mut got, prev).unwrap();
            comm.send(&part::<T>(r, 1, count), next).unwrap();
        }
        assert_eq!(got, part::<T>(prev, 1, count), "{}", ctx("send/recv".into()));
    }
    comm.barrier().unwrap();
}

/// The non-blocking forms, several in flight at once, one forgotten.
fn exercise_nonblocking<T: TestElem>(comm: &Communicator, count: usize) {
    use ReduceOp::{Max, Sum};
    let (r, n) = (comm.rank(), comm.size());
    let root = n - 1;
    let send = input::<T>(Sum, r, count, 0);
    let mut sum = vec![T::default(); count];
    let mut inplace = input::<T>(Max, r, count, 0);
    let mut bcast = if r == 0 {
        part::<T>(0, 0, count)
    } else {
        vec![T::default(); count]
    };
    let mut gathered = vec![T::default(); n * count];
    let big = input::<T>(Sum, r, n * count, 0);
    let mut mine = vec![T::default(); count];
    let a2a_send = concat((0..n).map(|p| part::<T>(r, p, count)));
    let mut a2a = vec![T::default(); n * count];
    let parts = concat((0..n).map(|p| part::<T>(root, p, count)));
    let mut scattered = vec![T::default(); count];
    let mut gather_out = vec![T::default(); n * count];
    let mut reduced = vec![T::default(); count];
    let ring_send = part::<T>(r, 2, count);
    let mut ring_recv = vec![T::default(); count];
    let mut forgotten = if r == 0 {
        part::<T>(9, 9, count)
    } else {
        vec![T::default(); count]
    };

    comm.scope(|s| {
        let r1 = s.iall_reduce(&send, &mut sum, Sum)?;
        let r2 = s.iall_reduce_in_place(&mut inplace, Max)?;
        let r3 = s.ibroadcast(&mut bcast, 0)?;
        let r4 = s.iall_gather(&send, &mut gathered)?;
        let r5 = s.ireduce_scatter(&big, &mut mine, Sum)?;
        let r6 = s.iall_to_all(&a2a_send, &mut a2a)?;
        let r7 = s.iscatter((r == root).then_some(&parts[..]), &mut scattered, root)?;
        let r8 = s.igather(&send, (r == root).then_some(&mut gather_out[..]), root)?;
        let r9 = s.ireduce(&send, (r == root).then_some(&mut reduced[..]), Sum, root)?;
        let ring = if n > 1 {
            Some((
                s.isend(&ring_send, (r + 1) % n)?,
                s.irecv(&mut ring_recv, (r + n - 1) % n)?,
            ))
        } else {
            None
        };
        std::mem::forget(s.ibroadcast(&mut forgotten, 0)?); // the scope waits for it
        let barrier = s.ibarrier()?;

        assert_eq!(
            r1.wait()?,
            &reference::<T>(Sum, n, count, 0)[..],
            "iall_reduce ({})",
            T::NAME
        );
        assert_eq!(
            r2.wait()?,
            &reference::<T>(Max, n, count, 0)[..],
            "iall_reduce_in_place ({})",
            T::NAME
        );
        assert_eq!(r3.wait()?, &part::<T>(0, 0, count)[..], "ibroadcast ({})", T::NAME);
        let want = concat((0..n).map(|q| input::<T>(Sum, q, count, 0)));
        assert_eq!(r4.wait()?, &want[..], "iall_gather ({})", T::NAME);
        assert_eq!(
            r5.wait()?,
            &reference::<T>(Sum, n, count, r * count)[..],
            "ireduce_scatter ({})",
            T::NAME
        );
        let want = concat((0..n).map(|q| part::<T>(q, r, count)));
        assert_eq!(r6.wait()?, &want[..], "iall_to_all ({})", T::NAME);
        assert_eq!(r7.wait()?, &part::<T>(root, r, count)[..], "iscatter ({})", T::NAME);
        r8.wait()?;
        r9.wait()?;
        if let Some((sent, got)) = ring {
            sent.wait()?;
            assert_eq!(
                got.wait()?,
                &part::<T>((r + n - 1) % n, 2, count)[..],
                "isend/irecv ({})",
                T::NAME
            );
        }
        barrier.wait()
    })
    .unwrap();
    assert_eq!(forgotten, part::<T>(9, 9, count), "forgotten ibroadcast ({})", T::NAME);
    if r == root {
        assert_eq!(
            gather_out,
            concat((0..n).map(|q| input::<T>(Sum, q, count, 0))),
            "igather ({})",
            T::NAME
        );
        assert_eq!(reduced, reference::<T>(Sum, n, count, 0), "ireduce ({})", T::NAME);
    }
}

/// The non-blocking v-variants, all four in flight at once.
fn exercise_nonblocking_v<T: TestElem>(comm: &Communicator, count: usize) {
    let (r, n) = (comm.rank(), comm.size());
    let root = n - 1;
    let counts: Vec<usize> = (0..n).map(|q| (q + count) % 3).collect();
    let displs: Vec<usize> = (0..n).map(|q| counts[..q].iter().sum::<usize>() + 2 * q).collect();
    let total = counts.iter().sum::<usize>() + 2 * n;
    let block = |q: usize| part::<T>(q, 3, counts[q]);
    let placed = {
        let mut v = vec![T::default(); total];
        for q in 0..n {
            v[displs[q]..displs[q] + counts[q]].copy_from_slice(&block(q));
        }
        v
    };
    let mine = block(r);
    let mut allgv = vec![T::default(); total];
    let mut gv = vec![T::default(); total];
    let mut sv = vec![T::default(); counts[r]];
    let amount = |i: usize, j: usize| (i * 2 + j) % 3 + count;
    let send_counts: Vec<usize> = (0..n).map(|j| amount(r, j)).collect();
    let recv_counts: Vec<usize> = (0..n).map(|i| amount(i, r)).collect();
    let a2av_send = concat((0..n).map(|j| part::<T>(r, j, amount(r, j))));
    let mut a2av = vec![T::default(); recv_counts.iter().sum()];

    comm.scope(|s| {
        let a = s.iall_gatherv(&mine, &mut allgv, &counts, Some(&displs))?;
        let b = s.igatherv(&mine, (r == root).then_some(&mut gv[..]), &counts, Some(&displs), root)?;
        let c = s.iscatterv(
            (r == root).then_some(&placed[..]),
            &counts,
            Some(&displs),
            &mut sv,
            root,
        )?;
        let d = s.iall_to_allv(&a2av_send, &send_counts, None, &mut a2av, &recv_counts, None)?;
        assert_eq!(a.wait()?, &placed[..], "iall_gatherv ({})", T::NAME);
        b.wait()?;
        assert_eq!(c.wait()?, &block(r)[..], "iscatterv ({})", T::NAME);
        let want = concat((0..n).map(|i| part::<T>(i, r, amount(i, r))));
        assert_eq!(d.wait()?, &want[..], "iall_to_allv ({})", T::NAME);
        Ok(())
    })
    .unwrap();
    if r == root {
        assert_eq!(gv, placed, "igatherv ({})", T::NAME);
    }
}

fn every_type(comm: Communicator) {
    fn one<T: TestElem>(comm: &Communicator) {
        for count in [0, 1, 7] {
            exercise::<T>(comm, count);
            exercise_scan::<T>(comm, count);
            exercise_nonblocking::<T>(comm, count);
            exercise_nonblocking_v::<T>(comm, count);
        }
    }
    one::<i8>(&comm);
    one::<i16>(&comm);
    one::<i32>(&comm);
    one::<i64>(&comm);
    one::<u8>(&comm);
    one::<u16>(&comm);
    one::<u32>(&comm);
    one::<u64>(&comm);
    one::<f32>(&comm);
    one::<f64>(&comm);
    one::<f16>(&comm);
    one::<bf16>(&comm);
    one::<bool>(&comm);

    // A large all_reduce (several pipeline chunks), odd length.
    let n = comm.size();
    let big: Vec<f32> = (0..300_001).map(|i| (i % 97) as f32 + comm.rank() as f32).collect();
    let mut out = vec![0.0f32; big.len()];
    comm.all_reduce(&big, &mut out, ReduceOp::Sum).unwrap();
    let rank_sum = (n * (n - 1) / 2) as f32;
    assert!(
        out.iter()
            .enumerate()
            .all(|(i, &x)| x == (i % 97) as f32 * n as f32 + rank_sum),
        "large all_reduce"
    );

    // split: even and odd ranks; the last rank opts out when n > 2.
    let color = if n > 2 && comm.rank() == n - 1 {
        None
    } else {
        Some((comm.rank() % 2) as u32)
    };
    let sub = comm.split(color, -(comm.rank() as i32)).unwrap();
    match (color, sub) {
        (None, None) => {}
        (Some(c), Some(sub)) => {
            let members: Vec<usize> = (0..n)
                .filter(|&q| q % 2 == c as usize && !(n > 2 && q == n - 1))
                .collect();
            assert_eq!(sub.size(), members.len(), "split size");
            // key = -rank: the highest old rank comes first
            let pos = members.iter().rev().position(|&q| q == comm.rank()).unwrap();
            assert_eq!(sub.rank(), pos, "split rank ordered by key");
            let mut x = [comm.rank() as u32];
            sub.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap();
            assert_eq!(
                x[0] as usize,
                members.iter().sum::<usize>(),
                "all_reduce on the split communicator"
            );
        }
        (c, s) => panic!("split with color {c:?} gave {:?}", s.map(|s| s.size())),
    }
}

const DEADLINE: Duration = Duration::from_secs(240);

#[test]
fn every_operation_and_type_1_rank() {
    common::run("every_operation_and_type_1_rank", 1, DEADLINE, every_type);
}

#[test]
fn every_operation_and_type_2_ranks() {
    common::run("every_operation_and_type_2_ranks", 2, DEADLINE, every_type);
}

#[test]
fn every_operation_and_type_3_ranks() {
    common::run("every_operation_and_type_3_ranks", 3, DEADLINE, every_type);
}

#[test]
fn every_operation_and_type_4_ranks() {
    common::run("every_operation_and_type_4_ranks", 4, DEADLINE, every_type);
}

/// Complex products (true complex multiplication, not per component) and
/// sums, and MAXLOC/MINLOC over (value, index) pairs with ties.
fn complex_and_pairs(comm: Communicator) {
    use omniccl::num_complex::{Complex32, Complex64};
    let (r, n) = (comm.rank(), comm.size());
    let z = |q: usize| Complex64::new(1.0 + q as f64, 0.5 * q as f64 - 1.0);
    let mut prod = [z(r); 3];
    comm.all_reduce_in_place(&mut prod, ReduceOp::Prod).unwrap();
    // The reference, by hand: (a + bi)(c + di) = (ac - bd) + (ad + bc)i.
    let want = (0..n).fold(Complex64::new(1.0, 0.0), |acc, q| {
        let w = z(q);
        Complex64::new(acc.re * w.re - acc.im * w.im, acc.re * w.im + acc.im * w.re)
    });
    for got in prod {
        assert!(
            (got - want).norm() <= 1e-12 * want.norm().max(1.0),
            "complex128 prod: {got} vs {want}"
        );
    }
    let mut sum = [Complex32::new(r as f32, -(r as f32)); 2];
    comm.all_reduce_in_place(&mut sum, ReduceOp::Sum).unwrap();
    let t = (n * (n - 1) / 2) as f32;
    assert_eq!(sum, [Complex32::new(t, -t); 2], "complex64 sum");
    let err = comm.all_reduce_in_place(&mut sum, ReduceOp::Max).unwrap_err();
    assert_eq!(err.kind(), omniccl::ErrorKind::InvalidArgument, "MAX on complex: {err}");

    // Pairs (value, index): every rank offers value 7 at pair 0 (a tie: the
    // smallest index wins), and value r at pair 1.
    let mut maxloc = [7i32, 10 + r as i32, r as i32, r as i32];
    comm.all_reduce_in_place(&mut maxloc, ReduceOp::MaxLoc).unwrap();
    assert_eq!(maxloc, [7, 10, n as i32 - 1, n as i32 - 1], "maxloc i32");
    let mut minloc = [2.5f64, (n - r) as f64, -(r as f64), r as f64];
    comm.all_reduce_in_place(&mut minloc, ReduceOp::MinLoc).unwrap();
    assert_eq!(minloc, [2.5, 1.0, -((n - 1) as f64), (n - 1) as f64], "minloc f64");
    let err = comm
        .all_reduce_in_place(&mut [1i32, 2, 3], ReduceOp::MaxLoc)
        .unwrap_err();
    assert_eq!(err.kind(), omniccl::ErrorKind::InvalidArgument, "odd pair count: {err}");
}

#[test]
fn complex_and_pairs_3_ranks() {
    common::run("complex_and_pairs_3_ranks", 3, DEADLINE, complex_and_pairs);
}

//! Every row of `bindings/reduction_table.tsv` (which reduce op the library
//! accepts for which dtype; the C++, Python and Java tests read it too) on
//! two ranks: `all_reduce` and `reduce_scatter` of small deterministic inputs.
//! An `ok` row must give what this file's own reduction of the ranks' inputs
//! gives (exact, except `Avg` on floating types); a `refused` row must fail
//! with `ErrorKind::InvalidArgument` and a message naming the op and dtype.
//!
//! Every dtype with an [`Element`](omniccl::Element) type goes through the
//! typed calls; the float8 dtypes have none, so their rows go through
//! `all_reduce_dlpack` / `reduce_scatter_dlpack` with the raw bits. The
//! table's `PREMUL_SUM` is `ReduceOp::PremulSum(1.0)`.

mod common;

use std::time::Duration;

use half::{bf16, f16};
use omniccl::dlpack::{DLDataType, DLDevice, DLTensor};
use omniccl::num_complex::{Complex32, Complex64};
use omniccl::sys::DLDataTypeCode;
use omniccl::{Communicator, ErrorKind, ReduceOp, Result};

const COUNT: usize = 8; // even (MAXLOC/MINLOC pairs), one block of 4 per rank for reduce_scatter

/// One row: op and dtype as the table names them.
struct Row {
    op: String,
    dtype: String,
    ok: bool,
}

fn read_table() -> Vec<Row> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reduction_table.tsv");
    let text = std::fs::read_to_string(path).expect("bindings/reduction_table.tsv");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert!(
                cols.len() == 3 && (cols[2] == "ok" || cols[2] == "refused"),
                "bad row {l:?}"
            );
            Row {
                op: cols[0].to_string(),
                dtype: cols[1].to_string(),
                ok: cols[2] == "ok",
            }
        })
        .collect()
}

fn reduce_op(name: &str) -> ReduceOp {
    match name {
        "SUM" => ReduceOp::Sum,
        "PROD" => ReduceOp::Prod,
        "MIN" => ReduceOp::Min,
        "MAX" => ReduceOp::Max,
        "AVG" => ReduceOp::Avg,
        "BAND" => ReduceOp::BitAnd,
        "BOR" => ReduceOp::BitOr,
        "BXOR" => ReduceOp::BitXor,
        "PREMUL_SUM" => ReduceOp::PremulSum(1.0),
        "LAND" => ReduceOp::LogicalAnd,
        "LOR" => ReduceOp::LogicalOr,
        "LXOR" => ReduceOp::LogicalXor,
        "MAXLOC" => ReduceOp::MaxLoc,
        "MINLOC" => ReduceOp::MinLoc,
        _ => panic!("unknown op {name}"),
    }
}

// ------------------------------------------------------------------ dtypes

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Int { bits: u32, signed: bool },
    Bool,
    Float,
    Complex,
}

/// Kind, bytes per element and DLPack code of a dtype name.
fn dtype(name: &str) -> (Kind, usize, DLDataTypeCode) {
    use omniccl::sys::{kDLBfloat, kDLBool, kDLComplex, kDLFloat, kDLFloat8_e4m3fn, kDLFloat8_e5m2, kDLInt, kDLUInt};
    let int = |bits: u32, signed: bool| (Kind::Int { bits, signed }, bits as usize / 8);
    let (kind, size, code) = match name {
        "bool" => (Kind::Bool, 1, kDLBool),
        "bfloat16" => (Kind::Float, 2, kDLBfloat),
        "float8_e4m3fn" => (Kind::Float, 1, kDLFloat8_e4m3fn),
        "float8_e5m2" => (Kind::Float, 1, kDLFloat8_e5m2),
        "complex64" => (Kind::Complex, 8, kDLComplex),
        "complex128" => (Kind::Complex, 16, kDLComplex),
        _ if name.starts_with("float") => (Kind::Float, name[5..].parse::<usize>().unwrap() / 8, kDLFloat),
        _ if name.starts_with("uint") => {
            let (k, s) = int(name[4..].parse().unwrap(), false);
            (k, s, kDLUInt)
        }
        _ => {
            let (k, s) = int(name[3..].parse().unwrap(), true);
            (k, s, kDLInt)
        }
    };
    (kind, size, code)
}

/// The value of float8 bits from the format's definition (`mant` mantissa
/// bits, exponent `bias`; e4m3fn has no infinities and one NaN per sign).
fn f8_value(b: u8, mant: u32, bias: i32, ieee: bool) -> f64 {
    let emax = (0x80u32 >> mant) - 1;
    let (e, m) = ((b as u32 >> mant) & emax, b as u32 & ((1 << mant) - 1));
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    if e == emax && (ieee || m == (1 << mant) - 1) {
        return f64::NAN;
    }
    if e == 0 {
        return sign * m as f64 * 2f64.powi(1 - bias - mant as i32);
    }
    sign * (m + (1 << mant)) as f64 * 2f64.powi(e as i32 - bias - mant as i32)
}

fn f8_decode(name: &str, b: u8) -> f64 {
    if name == "float8_e4m3fn" {
        f8_value(b, 3, 7, false)
    } else {
        f8_value(b, 2, 15, true)
    }
}

/// Bytes of one value (exactly representable: the inputs are small integers).
fn encode(name: &str, v: &Val, out: &mut Vec<u8>) {
    let (kind, size, _) = dtype(name);
    match (kind, v) {
        (Kind::Int { .. } | Kind::Bool, Val::Int(i)) => out.extend_from_slice(&i.to_le_bytes()[..size]),
        (Kind::Float, Val::Real(x)) => match name {
            "float16" => out.extend_from_slice(&f16::from_f64(*x).to_le_bytes()),
            "bfloat16" => out.extend_from_slice(&bf16::from_f64(*x).to_le_bytes()),
            "float32" => out.extend_from_slice(&(*x as f32).to_le_bytes()),
            "float64" => out.extend_from_slice(&x.to_le_bytes()),
            _ => out.push(
                (0..=255u8)
                    .find(|b| f8_decode(name, *b) == *x)
                    .expect("an exact float8 value"),
            ),
        },
        (Kind::Complex, Val::Complex(re, im)) if size == 8 => {
            out.extend_from_slice(&(*re as f32).to_le_bytes());
            out.extend_from_slice(&(*im as f32).to_le_bytes());
        }
        (Kind::Complex, Val::Complex(re, im)) => {
            out.extend_from_slice(&re.to_le_bytes());
            out.extend_from_slice(&im.to_le_bytes());
        }
        _ => unreachable!("value of another kind"),
    }
}

fn decode(name: &str, b: &[u8]) -> Val {
    let (kind, _, _) = dtype(name);
    let f32_at = |i: usize| f32::from_le_bytes(b[i..i + 4].try_into().unwrap()) as f64;
    let f64_at = |i: usize| f64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    match kind {
        Kind::Int { signed, bits } => {
            let mut raw = [0u8; 16];
            raw[..b.len()].copy_from_slice(b);
            let u = i128::from_le_bytes(raw);
            Val::Int(if signed { wrap(u, bits, true) } else { u })
        }
        Kind::Bool => Val::Int(b[0] as i128),
        Kind::Float => Val::Real(match name {
            "float16" => f16::from_le_bytes([b[0], b[1]]).to_f64(),
            "bfloat16" => bf16::from_le_bytes([b[0], b[1]]).to_f64(),
            "float32" => f32_at(0),
            "float64" => f64_at(0),
            _ => f8_decode(name, b[0]),
        }),
        Kind::Complex if b.len() == 8 => Val::Complex(f32_at(0), f32_at(4)),
        Kind::Complex => Val::Complex(f64_at(0), f64_at(8)),
    }
}

// ------------------------------------------------------------------ values and the reference

#[derive(Clone, Copy, Debug, PartialEq)]
enum Val {
    Int(i128),
    Real(f64),
    Complex(f64, f64),
}

/// v as an integer of `bits` bits (two's complement when signed).
fn wrap(v: i128, bits: u32, signed: bool) -> i128 {
    let m = v.rem_euclid(1i128 << bits);
    if signed && m >= 1i128 << (bits - 1) {
        m - (1i128 << bits)
    } else {
        m
    }
}

/// A deterministic hash of (row, rank, element).
fn hash(row: usize, rank: usize, j: usize) -> u64 {
    let mut x = ((row as u64) << 40) ^ ((rank as u64) << 20) ^ (j as u64);
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Element j of `rank`'s input for a row.
fn input(row: usize, r: &Row, rank: usize, j: usize) -> Val {
    let h = hash(row, rank, j);
    let (kind, _, _) = dtype(&r.dtype);
    if r.op == "MAXLOC" || r.op == "MINLOC" {
        // (value, index) pairs: values 0..3 (ties are common), indices 0..7 (exact in float8 too).
        let v = if j % 2 == 0 { h % 4 } else { h % 8 } as i128;
        return match kind {
            Kind::Float => Val::Real(v as f64),
            Kind::Complex => Val::Complex(v as f64, 0.0), // refused: the value only has to fit
            _ => Val::Int(v),
        };
    }
    let lim: i64 = match r.dtype.as_str() {
        "float8_e5m2" => 1,
        "float8_e4m3fn" => 2,
        _ if r.op == "PROD" => 2,
        _ => 8,
    };
    let small = |h: u64| (h % (2 * lim as u64 + 1)) as i64 - lim;
    let zero_some = |x: f64| if r.op.starts_with('L') && h % 3 == 0 { 0.0 } else { x };
    match kind {
        Kind::Int { bits, signed } => Val::Int(wrap(h as i128, bits, signed)),
        Kind::Bool => Val::Int((h % 2) as i128),
        Kind::Float => Val::Real(zero_some(small(h) as f64)),
        Kind::Complex => Val::Complex(small(h) as f64, small(h >> 16) as f64),
    }
}

fn truth(v: &Val) -> bool {
    match *v {
        Val::Int(i) => i != 0,
        Val::Real(x) => x != 0.0,
        Val::Complex(re, im) => re != 0.0 || im != 0.0,
    }
}

/// a op b for one element.
fn combine(op: &str, kind: Kind, a: Val, b: Val) -> Val {
    use Val::{Complex, Int, Real};
    let logical = |x: bool| Int(x as i128);
    match (op, a, b) {
        ("LAND", _, _) => logical(truth(&a) && truth(&b)),
        ("LOR", _, _) => logical(truth(&a) || truth(&b)),
        ("LXOR", _, _) => logical(truth(&a) != truth(&b)),
        (_, Int(x), Int(y)) if kind == Kind::Bool => Int(match op {
            "PROD" | "MIN" | "BAND" => x & y,
            "BXOR" => x ^ y,
            _ => x | y, // SUM, MAX, BOR
        }),
        (_, Int(x), Int(y)) => Int(match op {
            "PROD" => x.wrapping_mul(y),
            "MIN" => x.min(y),
            "MAX" => x.max(y),
            "BAND" => x & y,
            "BOR" => x | y,
            "BXOR" => x ^ y,
            _ => x + y, // SUM, AVG, PREMUL_SUM
        }),
        (_, Real(x), Real(y)) => Real(match op {
            "PROD" => x * y,
            "MIN" => x.min(y),
            "MAX" => x.max(y),
            _ => x + y,
        }),
        ("PROD", Complex(a, b), Complex(c, d)) => Complex(a * c - b * d, a * d + b * c),
        (_, Complex(a, b), Complex(c, d)) => Complex(a + c, b + d),
        _ => unreachable!("mixed kinds"),
    }
}

/// The reduction of element j over the ranks' inputs (pairs for MAXLOC/MINLOC).
fn reference(row: usize, r: &Row, n: usize, j: usize) -> Val {
    let (kind, _, _) = dtype(&r.dtype);
    if r.op == "MAXLOC" || r.op == "MINLOC" {
        let pair = |rank: usize| (input(row, r, rank, j - j % 2), input(row, r, rank, j - j % 2 + 1));
        let key = |v: Val| match v {
            Val::Int(i) => i as f64,
            Val::Real(x) => x,
            Val::Complex(..) => unreachable!(),
        };
        let best = (1..n).map(pair).fold(pair(0), |best, p| {
            let (bv, pv) = (key(best.0), key(p.0));
            let ahead = if r.op == "MAXLOC" { pv > bv } else { pv < bv };
            if ahead || (pv == bv && key(p.1) < key(best.1)) {
                p
            } else {
                best
            }
        });
        return if j % 2 == 0 { best.0 } else { best.1 };
    }
    let logical = r.op.starts_with('L'); // LAND, LOR, LXOR
    let first = match input(row, r, 0, j) {
        v if logical => Val::Int(truth(&v) as i128),
        v => v,
    };
    let acc = (1..n).fold(first, |acc, rank| combine(&r.op, kind, acc, input(row, r, rank, j)));
    match (r.op.as_str(), kind, acc) {
        (_, _, Val::Int(i)) if logical => Val::Int(i),
        (_, Kind::Int { bits, signed }, Val::Int(i)) => {
            let w = wrap(i, bits, signed);
            Val::Int(if r.op == "AVG" { w / n as i128 } else { w }) // truncating division
        }
        ("AVG", _, Val::Real(x)) => Val::Real(x / n as f64),
        ("AVG", _, Val::Complex(re, im)) => Val::Complex(re / n as f64, im / n as f64),
        _ => acc,
    }
}

fn close(op: &str, dtype: &str, got: Val, want: Val) -> bool {
    let tol = match dtype {
        _ if op != "AVG" => 0.0,
        "float16" => 2e-3,
        "bfloat16" => 1e-2,
        "float8_e4m3fn" => 0.25,
        "float8_e5m2" => 0.5,
        _ => 1e-6,
    };
    let near = |g: f64, w: f64| (g - w).abs() <= tol * w.abs();
    match (got, want) {
        (Val::Real(g), Val::Real(w)) => near(g, w),
        (Val::Complex(a, b), Val::Complex(c, d)) => near(a, c) && near(b, d),
        // Logical ops on floats give 1.0 / 0.0; MAXLOC indices are integers.
        (Val::Real(g), Val::Int(w)) => g == w as f64,
        _ => got == want,
    }
}

// ------------------------------------------------------------------ calling the library

/// Bytes aligned for every element type.
struct Buf(Vec<u128>, usize);

impl Buf {
    fn new(bytes: &[u8]) -> Buf {
        let mut b = Buf(vec![0; bytes.len().div_ceil(16)], bytes.len());
        b.bytes_mut().copy_from_slice(bytes);
        b
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: the Vec holds at least self.1 initialised bytes.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast(), self.1) }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as bytes(), borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast(), self.1) }
    }
    /// The bytes as elements of T (a type of the size the dtype says, whose
    /// every bit pattern the test wrote is valid: bools are 0 or 1).
    fn of<T>(&self) -> &[T] {
        // SAFETY: 16-byte aligned, length in whole elements, valid values (see above).
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast(), self.1 / std::mem::size_of::<T>()) }
    }
    fn of_mut<T>(&mut self) -> &mut [T] {
        // SAFETY: as of(), borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast(), self.1 / std::mem::size_of::<T>()) }
    }
    fn tensor(&mut self, dtype_name: &str, shape: &mut i64) -> DLTensor {
        let (_, size, code) = dtype(dtype_name);
        *shape = (self.1 / size) as i64;
        DLTensor {
            data: self.0.as_mut_ptr().cast(),
            device: DLDevice {
                device_type: omniccl::sys::kDLCPU,
                device_id: 0,
            },
            ndim: 1,
            dtype: DLDataType {
                code: code as u8,
                bits: (8 * size) as u8,
                lanes: 1,
            },
            shape,
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        }
    }
}

/// all_reduce (scatter false) or reduce_scatter (true) of `send` into `recv`.
fn call(comm: &Communicator, dtype: &str, scatter: bool, send: &mut Buf, recv: &mut Buf, op: ReduceOp) -> Result<()> {
    macro_rules! typed {
        ($t:ty) => {
            if scatter {
                comm.reduce_scatter(send.of::<$t>(), recv.of_mut::<$t>(), op)
            } else {
                comm.all_reduce(send.of::<$t>(), recv.of_mut::<$t>(), op)
            }
        };
    }
    match dtype {
        "int8" => typed!(i8),
        "int16" => typed!(i16),
        "int32" => typed!(i32),
        "int64" => typed!(i64),
        "uint8" => typed!(u8),
        "uint16" => typed!(u16),
        "uint32" => typed!(u32),
        "uint64" => typed!(u64),
        "float16" => typed!(f16),
        "bfloat16" => typed!(bf16),
        "float32" => typed!(f32),
        "float64" => typed!(f64),
        "bool" => typed!(bool),
        "complex64" => typed!(Complex32),
        "complex128" => typed!(Complex64),
        _ => {
            // No Rust type: the raw bits as a DLPack tensor of the float8 dtype.
            let (mut s, mut r) = (0i64, 0i64);
            let (ts, tr) = (send.tensor(dtype, &mut s), recv.tensor(dtype, &mut r));
            // SAFETY: both tensors describe live, separate buffers for the whole call.
            unsafe {
                if scatter {
                    comm.reduce_scatter_dlpack(&ts, &tr, op)
                } else {
                    comm.all_reduce_dlpack(&ts, &tr, op)
                }
            }
        }
    }
}

/// Both calls of one row on this rank: what was wrong, if anything.
fn run_row(comm: &Communicator, row: usize, r: &Row) -> Vec<String> {
    let (rank, n) = (comm.rank(), comm.size());
    let (_, size, _) = dtype(&r.dtype);
    let block = COUNT / n;
    let what = format!("{} {} {}", r.op, r.dtype, if r.ok { "ok" } else { "refused" });
    let mut bytes = Vec::new();
    for j in 0..COUNT {
        encode(&r.dtype, &input(row, r, rank, j), &mut bytes);
    }
    let mut send = Buf::new(&bytes);
    let mut problems = Vec::new();
    for (name, scatter, len, base) in [
        ("all_reduce", false, COUNT, 0),
        ("reduce_scatter", true, block, rank * block),
    ] {
        let mut recv = Buf::new(&vec![0u8; len * size]);
        match (
            call(comm, &r.dtype, scatter, &mut send, &mut recv, reduce_op(&r.op)),
            r.ok,
        ) {
            (Ok(()), true) => {
                for j in 0..len {
                    let got = decode(&r.dtype, &recv.bytes()[j * size..(j + 1) * size]);
                    let want = reference(row, r, n, base + j);
                    if !close(&r.op, &r.dtype, got, want) {
                        problems.push(format!("{name} of {what}: element {j}: got {got:?}, want {want:?}"));
                    }
                }
            }
            (Ok(()), false) => problems.push(format!("{name} of {what}: no error")),
            (Err(e), false)
                if e.kind() == ErrorKind::InvalidArgument
                    && e.message().contains(&r.op)
                    && e.message().contains(&r.dtype) => {}
            (Err(e), _) => problems.push(format!("{name} of {what}: {e}")),
        }
    }
    problems
}

#[test]
fn every_row_on_two_ranks() {
    common::run("every_row_on_two_ranks", 2, Duration::from_secs(60), |comm| {
        let rows = read_table();
        assert_eq!(rows.len(), 14 * 17, "one row per (op, dtype) pair");
        let problems: Vec<String> = rows
            .iter()
            .enumerate()
            .flat_map(|(i, r)| run_row(&comm, i, r))
            .collect();
        assert!(
            problems.is_empty(),
            "{} problems:\n{}",
            problems.len(),
            problems.join("\n")
        );
    });
}

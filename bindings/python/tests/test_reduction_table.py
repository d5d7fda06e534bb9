"""Every row of bindings/reduction_table.tsv (which reduce op the library accepts for which dtype) on two ranks.

The C++, Rust and Java tests read the same table. Each rank runs Allreduce,
Iallreduce (the non-blocking path) and Reduce_scatter_block for every row: an
``ok`` row must give what this file's own reduction of the ranks' inputs gives
(exact, except AVG on floating types); a ``refused`` row must raise
InvalidArgumentError naming the op and the dtype.

numpy has no bfloat16 or float8 types: those rows hold their bits in uint16 /
uint8 arrays, handed to the library as DLPack tensors of the real dtype (the
capsule numpy makes, its dtype field rewritten), and are decoded here from the
formats' definitions. PREMUL_SUM is passed as ``ReduceOp.PREMUL_SUM`` itself
(a factor of 1). This file is also the rank program (run by conftest.run_ranks).
"""

from __future__ import annotations

import ctypes as C
import json
import os
import sys
from pathlib import Path

import numpy as np

TABLE = Path(__file__).resolve().parents[2] / "reduction_table.tsv"
COUNT = 8  # even (MAXLOC/MINLOC pairs), one block of 4 per rank for Reduce_scatter_block


def read_table():
    """(op, dtype, ok) per row of the table."""
    rows = []
    for line in TABLE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            op, dtype, verdict = line.split("\t")
            assert verdict in ("ok", "refused"), line
            rows.append((op, dtype, verdict == "ok"))
    return rows


def test_every_row_on_two_ranks():
    from conftest import describe, run_ranks

    rows = read_table()
    results = run_ranks(2, "table", script=Path(__file__), timeout=60)
    for r in results:
        assert r.result == {"rows": len(rows), "failures": []}, describe(results)


# --------------------------------------------------------------------------- dtypes without a numpy type

class _DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class _DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", C.c_int32 * 2), ("ndim", C.c_int32), ("dtype", _DLDataType),
                ("shape", C.c_void_p), ("strides", C.c_void_p), ("byte_offset", C.c_uint64)]


class _DLManagedTensorVersioned(C.Structure):
    _fields_ = [("version", C.c_uint32 * 2), ("manager_ctx", C.c_void_p), ("deleter", C.c_void_p),
                ("flags", C.c_uint64), ("dl_tensor", _DLTensor)]


# A prototype of its own: ctypes.pythonapi.PyCapsule_GetPointer is one object
# shared by every module, and test_dlpack.py gives it other argument types.
_get_pointer = C.PYFUNCTYPE(C.c_void_p, C.py_object, C.c_char_p)(("PyCapsule_GetPointer", C.pythonapi))

# DLPack codes of the dtypes numpy lacks; their bits live in the uint array of that width.
RAW = {"bfloat16": (4, np.uint16), "float8_e4m3fn": (10, np.uint8), "float8_e5m2": (12, np.uint8)}


class Retyped:
    """A uint array exported through DLPack as another dtype of the same width (numpy's capsule, dtype rewritten)."""

    def __init__(self, bits, code):
        self.bits, self.code = bits, code

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        capsule = self.bits.__dlpack__(max_version=(1, 0))
        managed = _DLManagedTensorVersioned.from_address(_get_pointer(capsule, b"dltensor_versioned"))
        managed.dl_tensor.dtype = _DLDataType(self.code, 8 * self.bits.itemsize, 1)
        return capsule


def _f8_values(mant, bias, ieee):
    """The value of each of the 256 codes of a float8 format (e4m3fn: no Inf, NaN = all ones)."""
    out = []
    emax = (0x80 >> mant) - 1
    for code in range(256):
        e, m = (code >> mant) & emax, code & ((1 << mant) - 1)
        sign = -1.0 if code & 0x80 else 1.0
        if (ieee and e == emax) or (not ieee and e == emax and m == (1 << mant) - 1):
            out.append(float("nan") if (m or not ieee) else sign * float("inf"))
        elif e == 0:
            out.append(sign * m * 2.0 ** (1 - bias - mant))
        else:
            out.append(sign * (m + (1 << mant)) * 2.0 ** (e - bias - mant))
    return np.array(out)


F8 = {"float8_e4m3fn": _f8_values(3, 7, False), "float8_e5m2": _f8_values(2, 15, True)}


def decode(dtype, bits):
    """float64 values of raw bfloat16 / float8 bits."""
    if dtype == "bfloat16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return F8[dtype][bits]


def encode(dtype, values):
    """Raw bits of values exactly representable in bfloat16 / float8 (the inputs are small integers)."""
    if dtype == "bfloat16":
        return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)
    table = F8[dtype]
    return np.array([int(np.flatnonzero(table == v)[0]) for v in values], np.uint8)


# --------------------------------------------------------------------------- inputs and the reference

def kind(dtype):
    if dtype in RAW:
        return "f"
    return np.dtype(dtype).kind  # b, i, u, f, c


def values(op, dtype, rank, row):
    """Rank's input for a row as exact values (float64 / complex / Python ints), deterministic."""
    rng = np.random.default_rng([row, rank])
    k = kind(dtype)
    if op in ("MAXLOC", "MINLOC"):
        # (value, index) pairs: values 0..3 (ties are common), indices 0..7 (exact in float8 too)
        pairs = np.stack([rng.integers(0, 4, COUNT // 2), rng.integers(0, 8, COUNT // 2)], axis=1)
        return pairs.reshape(-1).astype(np.float64 if k == "f" else np.int64)
    if k == "b":
        return rng.integers(0, 2, COUNT).astype(np.bool_)
    if k in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, COUNT, dtype=dtype, endpoint=True)
    lim = 1 if dtype == "float8_e5m2" else 2 if dtype == "float8_e4m3fn" else 8
    if op == "PROD":
        lim = min(lim, 2)
    v = rng.integers(-lim, lim + 1, COUNT).astype(np.float64)
    if op in ("LAND", "LOR", "LXOR"):
        v[rng.integers(0, 2, COUNT) == 0] = 0.0  # zeros are false
    if k == "c":
        return v + 1j * rng.integers(-lim, lim + 1, COUNT)
    return v


def wrap(v, dtype):
    info = np.iinfo(dtype)
    return (v - int(info.min)) % (int(info.max) - int(info.min) + 1) + int(info.min)


def combine(op, k, a, b):
    """a op b for one element (exact values)."""
    if op in ("SUM", "AVG", "PREMUL_SUM"):
        return (a or b) if k == "b" else a + b
    if op == "PROD":
        return (a and b) if k == "b" else a * b
    if op in ("MIN", "BAND"):
        return min(a, b) if op == "MIN" else a & b
    if op in ("MAX", "BOR"):
        return max(a, b) if op == "MAX" else a | b
    if op == "BXOR":
        return a ^ b
    x, y = a != 0, b != 0
    return {"LAND": x and y, "LOR": x or y, "LXOR": x != y}[op]


def reference(op, dtype, inputs):
    """The reduction of the ranks' inputs, element by element, as exact values."""
    k, n = kind(dtype), len(inputs)
    if op in ("MAXLOC", "MINLOC"):
        out = []
        for j in range(0, COUNT, 2):
            cands = [(float(x[j]), float(x[j + 1])) for x in inputs]
            best = max(cands, key=lambda p: (p[0], -p[1])) if op == "MAXLOC" else min(cands)
            out += list(best)
        return out
    out = []
    for j in range(COUNT):
        col = [int(x[j]) if k in "iu" else bool(x[j]) if k == "b" else x[j] for x in inputs]
        acc = col[0] if op not in ("LAND", "LOR", "LXOR") else col[0] != 0
        for v in col[1:]:
            acc = combine(op, k, acc, v)
        if op in ("LAND", "LOR", "LXOR"):
            acc = int(acc)
        elif k in "iu":
            acc = wrap(acc, dtype)
            if op == "AVG":
                acc = (abs(acc) // n) * (1 if acc >= 0 else -1)
        elif op == "AVG":
            acc = acc / n
        out.append(acc)
    return out


def to_array(dtype, vals):
    """What the library is given: a numpy array, or a Retyped one for the raw dtypes."""
    if dtype in RAW:
        code, _ = RAW[dtype]
        return Retyped(encode(dtype, vals), code)
    return np.asarray(vals).astype(dtype)


def empty(dtype, n):
    if dtype in RAW:
        code, store = RAW[dtype]
        return Retyped(np.zeros(n, store), code)
    return np.zeros(n, dtype)


def got_values(dtype, arr):
    if isinstance(arr, Retyped):
        return decode(dtype, arr.bits)
    return arr


def matches(op, dtype, got, want):
    k = kind(dtype)
    if k in "iub":
        return [int(g) for g in got] == [int(w) for w in want]
    got = np.asarray(got, np.complex128 if k == "c" else np.float64)
    want = np.asarray(want, got.dtype)
    if op != "AVG":
        return np.array_equal(got, want)
    tol = {"float16": 2e-3, "bfloat16": 1e-2, "float8_e4m3fn": 0.25, "float8_e5m2": 0.5}.get(dtype, 1e-6)
    return np.allclose(got, want, rtol=tol, atol=0)


# --------------------------------------------------------------------------- one rank

def the_op(name):
    import omniccl
    if name in ("LAND", "LOR", "LXOR"):
        return omniccl.MPIOp[name]
    return omniccl.ReduceOp[name]


def run_row(world, rank, size, i, op, dtype, ok):
    """All_reduce and Reduce_scatter_block of one row: a list of what was wrong."""
    import omniccl
    inputs = [values(op, dtype, r, i) for r in range(size)]
    block = COUNT // size
    send, recv, part = to_array(dtype, inputs[rank]), empty(dtype, COUNT), empty(dtype, block)
    started = empty(dtype, COUNT)
    what = f"{op} {dtype} {'ok' if ok else 'refused'}"
    problems = []
    for name, call in (("Allreduce", lambda: world.Allreduce(send, recv, the_op(op))),
                       ("Iallreduce", lambda: world.Iallreduce(send, started, the_op(op)).Wait()),
                       ("Reduce_scatter_block", lambda: world.Reduce_scatter_block(send, part, the_op(op)))):
        try:
            call()
        except omniccl.InvalidArgumentError as e:
            if ok or op not in str(e) or dtype not in str(e):
                problems.append(f"{name} of {what}: {e}")
            continue
        if not ok:
            problems.append(f"{name} of {what}: no error")
    if ok and not problems:
        want = reference(op, dtype, inputs)
        for name, out in (("Allreduce", recv), ("Iallreduce", started)):
            got = got_values(dtype, out)
            if not matches(op, dtype, got, want):
                problems.append(f"{name} of {what}: got {list(got)}, want {want}")
        got = got_values(dtype, part)
        if not matches(op, dtype, got, want[rank * block:(rank + 1) * block]):
            problems.append(f"Reduce_scatter_block of {what}: got {list(got)}, want {want}")
    return problems


def rank_main():
    import omniccl
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    world = omniccl.Communicator.init("env://")
    rows = read_table()
    failures = []
    for i, (op, dtype, ok) in enumerate(rows):
        failures += run_row(world, rank, size, i, op, dtype, ok)
    world.destroy()
    print("RESULT " + json.dumps({"rows": len(rows), "failures": failures}), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    rank_main()

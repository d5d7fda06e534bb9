"""mpi4py's buffer specifications ("messages") for the Communicator's buffer methods.

A message is what mpi4py accepts where a buffer goes (the same rules as
mpi4py's ``msgbuffer.pxi``):

- ``buf``: a whole array (anything with ``__dlpack__`` or the buffer protocol);
- ``[buf, type]``, ``[buf, count]``, ``[buf, count, type]``,
  ``[buf, (count, displ), type]``, ``[buf, count, displ, type]``: ``count``
  elements from element ``displ``. Where a message holds one block per rank
  (Gather's recvbuf, Scatter's sendbuf, Alltoall, ...) ``count`` is per rank
  and a bare buffer is split equally (its size must divide by the ranks);
- v-variants (Gatherv, Scatterv, Allgatherv, Alltoallv):
  ``[buf, counts]``, ``[buf, counts, type]``, ``[buf, (counts, displs), type]``,
  ``[buf, counts, displs, type]``; ``counts`` may be one int (the same for
  every rank) and ``displs`` one int (rank i starts at ``i * displs``); no
  displs means packed in rank order; a bare buffer is split as equally as it
  goes (the first ``size % ranks`` ranks get one more).

``type`` is a typecode (``"i"``, ``"f"``, ``"d"``, ``"F"``, ``"D"``, ...), a
dtype name (``"int32"``) or a numpy dtype; an array of another type is read
as raw bytes of ``type`` (as MPI does). ``None`` as a send buffer means
``IN_PLACE`` (mpi4py's rule).

Complex arrays (complex64, complex128) go to the C library as complex
dtypes: counts and displacements count complex numbers, as in MPI.
"""

from __future__ import annotations

import struct
from typing import Any, List, Optional, Tuple

from ._tensors import Tensor, as_tensor
from .errors import InvalidArgumentError

# Typecode -> (dtype name, memoryview format to reinterpret raw bytes as).
_TYPECODES = {
    "?": "bool", "b": "int8", "B": "uint8", "c": "uint8", "h": "int16", "H": "uint16",
    "i": "int32", "I": "uint32", "l": f"int{8 * struct.calcsize('l')}", "L": f"uint{8 * struct.calcsize('L')}",
    "q": "int64", "Q": "uint64", "n": f"int{8 * struct.calcsize('n')}", "N": f"uint{8 * struct.calcsize('N')}",
    "e": "float16", "f": "float32", "d": "float64", "F": "complex64", "D": "complex128",
}
_FORMATS = {"bool": "?", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
            "int64": "q", "uint64": "Q", "float16": "e", "float32": "f", "float64": "d"}
_NAMES = set(_TYPECODES.values())


def is_type(obj: Any) -> bool:
    """Whether ``obj`` names an element type (typecode, dtype name or numpy dtype/scalar type)."""
    if isinstance(obj, str):
        return True
    if hasattr(obj, "char") and hasattr(obj, "itemsize"):  # numpy dtype
        return True
    return isinstance(obj, type) and hasattr(obj, "dtype") and hasattr(obj, "itemsize")


def type_name(obj: Any, name: str) -> str:
    """The dtype name ("int32", "complex64", ...) that a message's type names."""
    if isinstance(obj, str):
        if obj in _TYPECODES:
            return _TYPECODES[obj]
        if obj in _NAMES:
            return obj
        if obj == "g" or obj == "G" or "longdouble" in obj:
            raise NotImplementedError(f"{name}: long double (typecode {obj!r}, MPI.LONG_DOUBLE) is not supported")
        raise InvalidArgumentError(f"{name}: type {obj!r} is not a typecode or dtype name OmniCCL knows "
                                   f"({' '.join(sorted(_TYPECODES))})")
    char = getattr(obj, "char", None)
    if char is None and isinstance(obj, type):
        char = getattr(getattr(obj, "dtype", None), "char", None)
        if char is None:
            import numpy  # a numpy scalar type such as numpy.int32
            char = numpy.dtype(obj).char
    return type_name(char, name)


def _typed(buf: Any, typ: Any, writable: bool, name: str) -> Tensor:
    """Imports ``buf``; with a type that differs from the array's, reads its bytes as that type."""
    t = as_tensor(buf, writable, name)
    if typ is None:
        return t
    want = type_name(typ, name)
    if t.dtype == want:
        return t
    fmt = _FORMATS.get(want)
    if fmt is not None:
        try:
            view = memoryview(buf).cast("B").cast(fmt)
        except (TypeError, ValueError):
            view = None
        if view is not None:
            return as_tensor(view, writable, name)
    raise InvalidArgumentError(f"{name} is {t.dtype} but its message names type {want} "
                               "(and its bytes cannot be read as that type through the buffer protocol)")


def _unpack(spec: Any, name: str) -> Tuple[Any, Any, Any, Any]:
    """(buf, count(s), displ(s), type) of a message, as mpi4py unpacks it."""
    if not isinstance(spec, (list, tuple)):
        return spec, None, None, None
    n = len(spec)
    if n == 2:
        buf, count = spec
        if is_type(count):
            return buf, None, None, count
        if isinstance(count, tuple) or (isinstance(count, list) and len(count) == 2 and
                                        not all(isinstance(c, int) for c in count)):
            return buf, count[0], count[1], None
        return buf, count, None, None
    if n == 3:
        buf, count, typ = spec
        if not is_type(typ) and typ is not None:
            # OmniCCL's own older spelling: [buf, counts, displs].
            return buf, count, typ, None
        if isinstance(count, tuple):
            return buf, count[0], count[1], typ
        return buf, count, None, typ
    if n == 4:
        return spec[0], spec[1], spec[2], spec[3]
    raise ValueError(f"{name}: a message is a buffer or a list/tuple of 2 to 4 items, got {n} items")


def _index(value: Any, what: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    v = int(value)
    if v < 0:
        raise ValueError(f"{what} is negative ({v})")
    return v


def message(spec: Any, name: str, writable: bool, blocks: int = 1) -> Tensor:
    """The Tensor of a plain message: ``blocks`` blocks of ``count`` elements from ``displ``."""
    buf, count, displ, typ = _unpack(spec, name)
    t = _typed(buf, typ, writable, name)
    if count is None and displ is None and blocks == 1:
        return t
    total = t.count
    start = 0 if displ is None else _index(displ, f"{name}: displacement")
    if start > total:
        raise InvalidArgumentError(f"{name}: displacement {start} is past the end of {total} elements")
    if count is None:
        left = total - start
        if left % blocks:
            raise InvalidArgumentError(f"{name}: {left} elements do not split into {blocks} equal blocks "
                                       "(one per rank); pass [buf, count, type]")
        count = left // blocks
    count = _index(count, f"{name}: count")
    if start + count * blocks > total:
        raise InvalidArgumentError(f"{name}: {blocks} x {count} elements from {start} do not fit in {total}")
    if start == 0 and count * blocks == total:
        return t
    return Tensor.slice(t, start, count * blocks)


def vmessage(spec: Any, name: str, writable: bool, size: int) -> Tuple[Tensor, List[int], List[int]]:
    """(Tensor, counts, displs) of a v-variant message, counts and displs as the C library reads them."""
    buf, counts, displs, typ = _unpack(spec, name)
    t = _typed(buf, typ, writable, name)
    total = t.count
    if counts is None:
        counts = [total // size + (1 if total % size > i else 0) for i in range(size)]
    elif isinstance(counts, int) or hasattr(counts, "__index__"):
        counts = [_index(counts, f"{name}: count")] * size
    else:
        counts = [_index(c, f"{name}: counts[{i}]") for i, c in enumerate(counts)]
    if len(counts) != size:
        raise InvalidArgumentError(f"{name}: {len(counts)} counts for {size} ranks")
    if displs is None:
        out, at = [], 0
        for c in counts:
            out.append(at)
            at += c
        displs = out
    elif isinstance(displs, int) or hasattr(displs, "__index__"):
        stride = _index(displs, f"{name}: displacement")
        displs = [stride * i for i in range(size)]
    else:
        displs = [_index(d, f"{name}: displs[{i}]") for i, d in enumerate(displs)]
    if len(displs) != size:
        raise InvalidArgumentError(f"{name}: {len(displs)} displacements for {size} ranks")
    for i, (c, d) in enumerate(zip(counts, displs)):
        if d + c > total:
            raise InvalidArgumentError(f"{name}: rank {i}'s {c} elements from {d} do not fit in {total}")
    return t, counts, displs


def in_place(spec: Any) -> bool:
    """Whether a send message means IN_PLACE (the marker, or None as in mpi4py)."""
    from .comm import IN_PLACE
    return spec is None or spec is IN_PLACE


def optional(spec: Optional[Any]) -> bool:
    """Whether a message that matters only at the root is given."""
    return spec is not None

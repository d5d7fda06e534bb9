"""mpi4py's datatypes: the predefined ones as typecodes, and basic derived datatypes.

A predefined :class:`Datatype` (``omniccl.INT``, ``omniccl.DOUBLE``, ...) *is*
its typecode (a ``str`` subclass: ``omniccl.INT == "i"``), so it goes wherever
messages take a typecode, and adds mpi4py's queries (``extent``, ``size``,
``Get_extent()``, ...) and constructors of derived datatypes.

A derived datatype (:meth:`Datatype.Create_contiguous`, ``Create_vector``,
``Create_hvector``, ``Create_indexed``, ``Create_indexed_block``, ``Dup``) is a
list of elements of one predefined type at byte offsets (MPI's type map, all of
one base type) with a lower bound and an extent. The C library moves
contiguous buffers only: the operations that take derived datatypes
(``Bcast``/``Ibcast``, ``Send``/``Recv``, ``Alltoallw``/``Ialltoallw``) pack the
elements a message names into a contiguous array with numpy, move that, and
unpack it on the receiving side. ``Commit`` and ``Free`` are accepted (there is
nothing to set up or release).
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any, List, Optional, Sequence, Tuple

from ._tensors import Tensor, as_tensor
from .errors import InvalidArgumentError

__all__ = ["Datatype", "DerivedDatatype", "predefined", "BOTTOM", "Get_address"]


class _Bottom:
    """MPI's BOTTOM: a message buffer at address 0, so datatypes' displacements are absolute addresses."""

    _instance: Optional["_Bottom"] = None

    def __new__(cls) -> "_Bottom":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "omniccl.BOTTOM"

    def __reduce__(self) -> str:
        return "BOTTOM"


#: The buffer of a message whose datatypes hold absolute addresses (mpi4py's MPI.BOTTOM; Alltoallw).
BOTTOM = _Bottom()


def Get_address(buf: Any) -> int:  # noqa: N802 - mpi4py's name
    """The address of ``buf``'s first byte (any array OmniCCL imports), for datatypes used with BOTTOM."""
    return int(as_tensor(buf, False, "Get_address").data_ptr)

_NUMPY = {"?": "bool", "b": "int8", "B": "uint8", "c": "uint8", "h": "int16", "H": "uint16", "i": "int32",
          "I": "uint32", "l": f"int{8 * struct.calcsize('l')}", "L": f"uint{8 * struct.calcsize('L')}",
          "q": "int64", "Q": "uint64", "e": "float16", "f": "float32", "d": "float64", "F": "complex64",
          "D": "complex128"}


class _TypeMap:
    """What every datatype answers: its elements' byte offsets, base typecode, lower bound and extent."""

    code: str
    offsets: Tuple[int, ...]
    lb: int
    extent: int

    @property
    def size(self) -> int:
        """Bytes of data in one element of this type (holes left out)."""
        return len(self.offsets) * struct.calcsize(_struct_code(self.code))

    @property
    def ub(self) -> int:
        """Upper bound in bytes (lb + extent)."""
        return self.lb + self.extent

    @property
    def true_lb(self) -> int:
        """The lowest byte offset holding data."""
        return min(self.offsets) if self.offsets else 0

    @property
    def true_extent(self) -> int:
        """Bytes from the first to past the last byte holding data."""
        if not self.offsets:
            return 0
        return max(self.offsets) + _itemsize(self.code) - min(self.offsets)

    def Get_size(self) -> int:  # noqa: N802 - mpi4py's names
        """Bytes of data in one element of this type."""
        return self.size

    def Get_extent(self) -> Tuple[int, int]:  # noqa: N802
        """(lower bound, extent) in bytes."""
        return self.lb, self.extent

    def Get_true_extent(self) -> Tuple[int, int]:  # noqa: N802
        """(true lower bound, true extent) in bytes: the span of the bytes holding data."""
        return self.true_lb, self.true_extent

    # ------------------------------------------------------------ constructors
    def Create_contiguous(self, count: int) -> "DerivedDatatype":  # noqa: N802
        """``count`` elements of this type one after the other."""
        count = _count(count, "Create_contiguous: count")
        return self._derive([i * self.extent for i in range(count)], count * self.extent)

    def Create_vector(self, count: int, blocklength: int, stride: int) -> "DerivedDatatype":  # noqa: N802
        """``count`` blocks of ``blocklength`` elements, block starts ``stride`` elements apart."""
        return self.Create_hvector(count, blocklength, _int(stride, "Create_vector: stride") * self.extent)

    def Create_hvector(self, count: int, blocklength: int, stride: int) -> "DerivedDatatype":  # noqa: N802
        """As :meth:`Create_vector`, with ``stride`` in bytes."""
        count = _count(count, "Create_hvector: count")
        blocklength = _count(blocklength, "Create_hvector: blocklength")
        stride = _int(stride, "Create_hvector: stride")
        return self._blocks([(j * stride, blocklength) for j in range(count)])

    def Create_indexed(self, blocklengths: Sequence[int],  # noqa: N802
                       displacements: Sequence[int]) -> "DerivedDatatype":
        """Blocks of ``blocklengths[j]`` elements starting ``displacements[j]`` elements in."""
        if len(blocklengths) != len(displacements):
            raise InvalidArgumentError(f"Create_indexed: {len(blocklengths)} blocklengths but "
                                       f"{len(displacements)} displacements")
        return self._blocks([(_int(d, "Create_indexed: displacement") * self.extent,
                              _count(n, "Create_indexed: blocklength")) for n, d in zip(blocklengths, displacements)])

    def Create_indexed_block(self, blocklength: int, displacements: Sequence[int]) -> "DerivedDatatype":  # noqa: N802
        """Blocks of ``blocklength`` elements each, starting ``displacements[j]`` elements in."""
        return self.Create_indexed([blocklength] * len(displacements), displacements)

    def Create_hindexed_block(self, blocklength: int,  # noqa: N802
                              displacements: Sequence[int]) -> "DerivedDatatype":
        """As :meth:`Create_indexed_block`, with displacements in bytes."""
        blocklength = _count(blocklength, "Create_hindexed_block: blocklength")
        return self._blocks([(_int(d, "Create_hindexed_block: displacement"), blocklength) for d in displacements])

    @staticmethod
    def Create_struct(blocklengths: Sequence[int], displacements: Sequence[int],  # noqa: N802
                      datatypes: Sequence[Any]) -> "DerivedDatatype":
        """Blocks of ``blocklengths[j]`` elements of ``datatypes[j]`` at byte ``displacements[j]``.

        The types must share one element type (OmniCCL's derived datatypes
        are of one base type); displacements may be absolute addresses
        (:func:`Get_address`), for messages on :data:`BOTTOM`.
        """
        if not len(blocklengths) == len(displacements) == len(datatypes):
            raise InvalidArgumentError("Create_struct: blocklengths, displacements and datatypes differ in length")
        maps = [typemap(t, f"Create_struct: datatypes[{j}]") for j, t in enumerate(datatypes)]
        codes = {_struct_code(m.code) for m in maps}
        if len(codes) > 1:
            raise NotImplementedError("Create_struct: a struct of several element types is not offered "
                                      "(OmniCCL's derived datatypes have one base type)")
        if not maps:
            return DerivedDatatype("B", (), 0, 0)
        offsets: List[int] = []
        lbs, ubs = [], []
        for n, d, m in zip(blocklengths, displacements, maps):
            n = _count(n, "Create_struct: blocklength")
            d = _int(d, "Create_struct: displacement")
            offsets += [d + i * m.extent + o for i in range(n) for o in m.offsets]
            if n:
                lbs.append(d + m.lb)
                ubs.append(d + m.lb + n * m.extent)
        lb = min(lbs) if lbs else 0
        return DerivedDatatype(maps[0].code, offsets, lb, (max(ubs) if ubs else 0) - lb)

    def Dup(self) -> "DerivedDatatype":  # noqa: N802
        """A copy of this type (as a derived datatype)."""
        return DerivedDatatype(self.code, self.offsets, self.lb, self.extent)

    def _blocks(self, blocks: List[Tuple[int, int]]) -> "DerivedDatatype":
        """Blocks of (byte displacement, count of this type); bounds as MPI's for typemaps of blocks."""
        starts = [d + i * self.extent for d, n in blocks for i in range(n)]
        if not starts:
            return DerivedDatatype(self.code, (), 0, 0)
        lb = min(d + self.lb for d, n in blocks if n) if any(n for _, n in blocks) else 0
        ub = max(d + self.lb + n * self.extent for d, n in blocks if n) if any(n for _, n in blocks) else 0
        return self._derive(starts, ub - lb, lb)

    def _derive(self, starts: Sequence[int], extent: int, lb: Optional[int] = None) -> "DerivedDatatype":
        offsets = tuple(s + o for s in starts for o in self.offsets)
        return DerivedDatatype(self.code, offsets, self.lb if lb is None else lb, extent)

    # ------------------------------------------------------------- lifetime
    def Commit(self) -> Any:  # noqa: N802
        """Makes the type usable in communication (nothing to do here); returns it."""
        return self

    def Free(self) -> None:  # noqa: N802
        """Releases the type (nothing to release: kept for mpi4py's code)."""

    @property
    def is_predefined(self) -> bool:
        """Whether this is a predefined (not derived) type."""
        return isinstance(self, Datatype)

    @property
    def is_contiguous(self) -> bool:
        """Whether a message of this type is one run of elements, as a plain array of its base type."""
        step = _itemsize(self.code)
        return (self.lb == 0 and self.extent == len(self.offsets) * step
                and all(o == i * step for i, o in enumerate(self.offsets)))


class Datatype(_TypeMap, str):
    """A predefined datatype: a typecode (``"i"``, ``"d"``, ...) with mpi4py's ``Datatype`` methods.

    Equal to (and usable as) its typecode; ``extent`` and ``size`` are its
    item size; ``Create_contiguous``, ``Create_vector``, ``Create_indexed``,
    ``Create_indexed_block``, ... make :class:`DerivedDatatype` objects.
    """

    def __new__(cls, code: str) -> "Datatype":
        if code not in _NUMPY:
            raise InvalidArgumentError(f"Datatype: {code!r} is not a typecode OmniCCL knows")
        return str.__new__(cls, code)

    @property
    def code(self) -> str:  # type: ignore[override]
        """The typecode."""
        return str(self)

    @property
    def offsets(self) -> Tuple[int, ...]:  # type: ignore[override]
        """The one element's byte offset: (0,)."""
        return (0,)

    @property
    def lb(self) -> int:  # type: ignore[override]
        """Lower bound: 0."""
        return 0

    @property
    def extent(self) -> int:  # type: ignore[override]
        """Bytes per element."""
        return _itemsize(str(self))

    def __repr__(self) -> str:
        return f"omniccl.Datatype({str(self)!r})"

    def __reduce__(self) -> Any:
        return (Datatype, (str(self),))


class DerivedDatatype(_TypeMap):
    """A derived datatype: elements of one predefined type at byte offsets, with bounds (see the module doc)."""

    __slots__ = ("code", "offsets", "lb", "extent")

    def __init__(self, code: str, offsets: Sequence[int], lb: int, extent: int) -> None:
        self.code = str(code)
        self.offsets = tuple(int(o) for o in offsets)
        self.lb = int(lb)
        self.extent = int(extent)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, DerivedDatatype) and (self.code, self.offsets, self.lb, self.extent)
                == (other.code, other.offsets, other.lb, other.extent))

    def __hash__(self) -> int:
        return hash((self.code, self.offsets, self.lb, self.extent))

    def __repr__(self) -> str:
        return (f"<omniccl.DerivedDatatype of {len(self.offsets)} {self.code!r} elements, "
                f"lb {self.lb}, extent {self.extent}>")


def _struct_code(code: str) -> str:
    return {"F": "ff", "D": "dd", "c": "B"}.get(code, code)


def _itemsize(code: str) -> int:
    return struct.calcsize(_struct_code(code))


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return int(value)


def _count(value: Any, what: str) -> int:
    v = _int(value, what)
    if v < 0:
        raise InvalidArgumentError(f"{what} is negative ({v})")
    return v


def predefined() -> dict:
    """mpi4py's names of the predefined datatypes OmniCCL has, each a :class:`Datatype`."""
    names = {
        "BYTE": "B", "CHAR": "c", "SIGNED_CHAR": "b", "UNSIGNED_CHAR": "B", "SHORT": "h", "UNSIGNED_SHORT": "H",
        "INT": "i", "UNSIGNED_INT": "I", "UNSIGNED": "I", "LONG": "l", "UNSIGNED_LONG": "L", "LONG_LONG": "q",
        "UNSIGNED_LONG_LONG": "Q", "FLOAT": "f", "DOUBLE": "d", "C_BOOL": "?", "BOOL": "?",
        "C_FLOAT_COMPLEX": "F", "C_DOUBLE_COMPLEX": "D", "INT8_T": "b", "INT16_T": "h", "INT32_T": "i",
        "INT64_T": "q", "UINT8_T": "B", "UINT16_T": "H", "UINT32_T": "I", "UINT64_T": "Q",
    }
    return {name: Datatype(code) for name, code in names.items()}


# ------------------------------------------------------------------ messages
def is_derived(spec: Any) -> bool:
    """Whether a message (``[buf, count, type]``, ...) names a derived datatype."""
    return isinstance(spec, (list, tuple)) and len(spec) in (2, 3, 4) and isinstance(spec[-1], DerivedDatatype)


def typemap(t: Any, what: str) -> _TypeMap:
    """The datatype a message's type names: a Datatype, a DerivedDatatype, a typecode or a numpy dtype."""
    if isinstance(t, _TypeMap):
        return t
    if isinstance(t, str) and t in _NUMPY:
        return Datatype(t)
    char = getattr(t, "char", None)
    if char is None and isinstance(t, type):
        import numpy
        char = numpy.dtype(t).char
    if isinstance(char, str) and char in _NUMPY:
        return Datatype(char)
    raise InvalidArgumentError(f"{what}: {t!r} is not a datatype OmniCCL knows")


def raw_bytes(buf: Any, writable: bool, what: str) -> Tuple[Any, Tensor]:
    """A numpy uint8 view of ``buf``'s memory (any array OmniCCL imports), and the Tensor keeping it valid."""
    import numpy
    t = as_tensor(buf, writable, what)
    n = t.nbytes
    if n == 0:
        return numpy.zeros(0, numpy.uint8), t
    return numpy.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(t.data_ptr)), t


def byte_index(dt: _TypeMap, count: int, start: int = 0) -> Any:
    """The byte positions (numpy int64) of ``count`` elements of ``dt`` from byte ``start``, in type-map order."""
    import numpy
    item = _itemsize(dt.code)
    offs = numpy.asarray(dt.offsets, dtype=numpy.int64)
    elems = (numpy.arange(count, dtype=numpy.int64)[:, None] * dt.extent + offs[None, :]).ravel() + start
    return (elems[:, None] + numpy.arange(item, dtype=numpy.int64)[None, :]).ravel()


def pack(raw: Any, dt: _TypeMap, count: int, start: int, what: str) -> Any:
    """The bytes of ``count`` elements of ``dt`` at byte ``start`` of ``raw``, packed (a numpy uint8 copy)."""
    idx = byte_index(dt, count, start)
    if idx.size and (idx.min() < 0 or idx.max() >= raw.size):
        raise InvalidArgumentError(f"{what}: {count} elements of the datatype from byte {start} reach past the "
                                   f"buffer's {raw.size} bytes")
    return raw[idx]


def unpack(raw: Any, dt: _TypeMap, count: int, start: int, data: Any, what: str) -> None:
    """Writes packed bytes ``data`` into ``count`` elements of ``dt`` at byte ``start`` of ``raw``."""
    idx = byte_index(dt, count, start)
    if idx.size != data.size:
        raise InvalidArgumentError(f"{what}: {data.size} bytes arrived for {idx.size} bytes of the datatype")
    if idx.size and (idx.min() < 0 or idx.max() >= raw.size):
        raise InvalidArgumentError(f"{what}: {count} elements of the datatype from byte {start} reach past the "
                                   f"buffer's {raw.size} bytes")
    raw[idx] = data


def split_derived(spec: Any, what: str) -> Tuple[Any, int, int, "DerivedDatatype"]:
    """(buf, count, byte start, type) of a message with a derived type: [buf, type], [buf, count, type],
    [buf, (count, displ), type], [buf, count, displ, type] (displ in extents of the type)."""
    buf, dt = spec[0], spec[-1]
    count: Any = None
    displ: Any = 0
    if len(spec) == 3:
        count = spec[1]
        if isinstance(count, tuple):
            count, displ = count
    elif len(spec) == 4:
        count, displ = spec[1], spec[2]
    if count is None:
        raw, _ = raw_bytes(buf, False, what)
        count = raw.size // dt.extent if dt.extent else 0
    return buf, _count(count, f"{what}: count"), _int(displ, f"{what}: displacement") * dt.extent, dt


def numpy_dtype(code: str) -> str:
    """numpy's name of a typecode's element type."""
    return _NUMPY[code]


# ------------------------------------------------------- operations with them
def bcast(comm: Any, spec: Any, root: int) -> None:
    """Bcast of a message with a derived datatype: root packs, the packed bytes travel, the others unpack."""
    import numpy
    native = comm._live("Bcast")
    buf, count, start, dt = split_derived(spec, "buf")
    is_root = native.rank == root
    raw, keep = raw_bytes(buf, not is_root, "buf")
    data = pack(raw, dt, count, start, "buf") if is_root else numpy.empty(count * dt.size, numpy.uint8)
    native.broadcast(as_tensor(data, not is_root, "buf"), root, blocking=True)
    if not is_root:
        unpack(raw, dt, count, start, data, "buf")
    del keep


def _wmessage(spec: Any, name: str, size: int) -> Tuple[Any, List[int], List[int], List[_TypeMap]]:
    """(buf, counts, byte displacements, types) of an Alltoallw message.

    Forms: ``[buf, (counts, displs), types]``, ``[buf, counts, displs, types]``
    and ``[buf, counts, types]`` (packed by extent); ``types`` is one datatype
    per rank or one for all; displacements are in bytes (MPI's rule).
    """
    if not isinstance(spec, (list, tuple)) or len(spec) not in (3, 4):
        raise InvalidArgumentError(f"Alltoallw: {name} must be [buf, (counts, displs), types] or "
                                   "[buf, counts, displs, types]")
    if len(spec) == 4:
        buf, counts, displs, types = spec
    else:
        buf, counts, types = spec
        displs = None
        if isinstance(counts, tuple) and len(counts) == 2:
            counts, displs = counts
    if isinstance(types, (list, tuple)):
        tmaps = [typemap(t, f"Alltoallw: {name} types[{i}]") for i, t in enumerate(types)]
    else:
        tmaps = [typemap(types, f"Alltoallw: {name} type")] * size
    counts = [_count(c, f"Alltoallw: {name} counts[{i}]") for i, c in enumerate(counts)]
    if displs is None:
        displs, at = [], 0
        for c, t in zip(counts, tmaps):
            displs.append(at)
            at += c * t.extent
    displs = [_int(d, f"Alltoallw: {name} displs[{i}]") for i, d in enumerate(displs)]
    if not (len(counts) == len(displs) == len(tmaps) == size):
        raise InvalidArgumentError(f"Alltoallw: {name} needs one count, displacement and type per rank ({size}); "
                                   f"got {len(counts)}, {len(displs)}, {len(tmaps)}")
    return buf, counts, displs, tmaps


def _memory(buf: Any, counts: List[int], displs: List[int], types: List[_TypeMap], writable: bool,
            what: str) -> Tuple[Any, Any, List[int]]:
    """(uint8 view, what keeps it valid, displacements into the view) of an Alltoallw side.

    For BOTTOM the displacements are addresses: the view spans the bytes the
    types name, from the lowest, and the displacements become relative to it.
    """
    import numpy
    if buf is not BOTTOM:
        raw, keep = raw_bytes(buf, writable, what)
        return raw, keep, displs
    spans = [byte_index(t, c, d) for c, d, t in zip(counts, displs, types)]
    spans = [s for s in spans if s.size]
    if not spans:
        return numpy.zeros(0, numpy.uint8), None, displs
    low = min(int(s.min()) for s in spans)
    high = max(int(s.max()) for s in spans) + 1
    if low <= 0:
        raise InvalidArgumentError(f"Alltoallw: {what} is BOTTOM but its datatypes name address {low}")
    raw = numpy.ctypeslib.as_array((ctypes.c_uint8 * (high - low)).from_address(low))
    return raw, None, [d - low for d in displs]


def alltoallw(comm: Any, sendspec: Any, recvspec: Any) -> None:
    """Alltoallw: each block is packed with its own datatype, the bytes go by Alltoallv, then are unpacked."""
    import numpy
    from ._messages import in_place
    native = comm._live("Alltoallw")
    size = native.size
    rbuf, rcounts, rdispls, rtypes = _wmessage(recvspec, "recvbuf", size)
    rraw, rkeep, rdispls = _memory(rbuf, rcounts, rdispls, rtypes, True, "recvbuf")
    if in_place(sendspec):
        sraw, scounts, sdispls, stypes = rraw, rcounts, rdispls, rtypes
        skeep = None
    else:
        sbuf, scounts, sdispls, stypes = _wmessage(sendspec, "sendbuf", size)
        sraw, skeep, sdispls = _memory(sbuf, scounts, sdispls, stypes, False, "sendbuf")
    parts = [pack(sraw, stypes[j], scounts[j], sdispls[j], f"Alltoallw: sendbuf block {j}") for j in range(size)]
    sizes = [p.size for p in parts]
    sendbytes = numpy.concatenate(parts) if parts else numpy.zeros(0, numpy.uint8)
    rsizes = [rcounts[j] * rtypes[j].size for j in range(size)]
    recvbytes = numpy.empty(sum(rsizes), numpy.uint8)
    comm.Alltoallv([sendbytes, sizes, "B"], [recvbytes, rsizes, "B"])
    at = 0
    for j in range(size):
        unpack(rraw, rtypes[j], rcounts[j], rdispls[j], recvbytes[at:at + rsizes[j]], f"Alltoallw: recvbuf block {j}")
        at += rsizes[j]
    del rkeep, skeep


def send(comm: Any, spec: Any, dest: int, tag: int) -> None:
    """Send of a message with a derived datatype: its elements are packed and sent as base-type elements."""
    import numpy
    buf, count, start, dt = split_derived(spec, "buf")
    raw, keep = raw_bytes(buf, False, "buf")
    data = pack(raw, dt, count, start, "buf").view(numpy.dtype(_NUMPY[dt.code]))
    comm.Send([data, Datatype(dt.code)], dest, tag)
    del keep


def recv(comm: Any, spec: Any, source: int, tag: int, status: Any) -> None:
    """Recv into a message with a derived datatype: base-type elements arrive and are unpacked in type-map order.

    As for any receive the message is an upper bound: a shorter one fills
    the first elements of the type map.
    """
    import numpy
    from ._p2p import RecvStatus
    buf, count, start, dt = split_derived(spec, "buf")
    raw, keep = raw_bytes(buf, True, "buf")
    data = numpy.empty(count * len(dt.offsets), numpy.dtype(_NUMPY[dt.code]))
    st = status if status is not None else RecvStatus()
    comm.Recv([data, Datatype(dt.code)], source, tag, st)
    got = data.view(numpy.uint8)[:st.Get_count(Datatype("B"))]
    idx = byte_index(dt, count, start)[:got.size]
    if idx.size and (idx.min() < 0 or idx.max() >= raw.size):
        raise InvalidArgumentError(f"buf: {count} elements of the datatype from byte {start} reach past the "
                                   f"buffer's {raw.size} bytes")
    raw[idx] = got
    del keep

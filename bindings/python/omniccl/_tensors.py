"""Array arguments: import once (DLPack or buffer protocol), check, stage lists.

Words used here: an *array* is what the user passes (numpy, torch, cupy, jax,
anything with ``__dlpack__`` or the buffer protocol); a *Tensor* is the
native object made from it (``_omniccl.Tensor``), which keeps the array's
memory valid until the operation that uses it has ended. A *staging* Tensor
is one the binding allocates to pack a list of arrays into one buffer (the C
library takes one buffer per side).
"""

from __future__ import annotations

from typing import Any, List, Sequence

from . import _omniccl
from .errors import InvalidArgumentError

Tensor = _omniccl.Tensor


def as_tensor(obj: Any, writable: bool, name: str) -> Tensor:
    """Imports one array; ``writable`` when the operation writes into it."""
    return Tensor(obj, writable, name)


def as_tensors(objs: Sequence[Any], writable: bool, name: str, expected: int) -> List[Tensor]:
    """Imports a list of arrays that must hold ``expected`` entries (one per rank)."""
    if isinstance(objs, (str, bytes)) or not isinstance(objs, Sequence):
        raise TypeError(f"{name} must be a list of arrays, not {type(objs).__name__}")
    if len(objs) != expected:
        raise InvalidArgumentError(
            f"{name} has {len(objs)} arrays; it must have one per rank ({expected})")
    return [as_tensor(o, writable, f"{name}[{i}]") for i, o in enumerate(objs)]


def check_like(tensors: Sequence[Tensor], like: Tensor, name: str) -> None:
    """Checks that every Tensor has ``like``'s dtype and element count."""
    for i, t in enumerate(tensors):
        if t.dtype_code != like.dtype_code:
            raise InvalidArgumentError(f"{name}[{i}] is {t.dtype} but the tensor is {like.dtype}")
        if t.count != like.count:
            raise InvalidArgumentError(
                f"{name}[{i}] has {t.count} elements but the tensor has {like.count}")


def check_same_dtype(tensors: Sequence[Tensor], name: str) -> None:
    """Checks that all Tensors of a list share one dtype."""
    for i, t in enumerate(tensors[1:]):
        if t.dtype_code != tensors[0].dtype_code:
            raise InvalidArgumentError(f"{name}[{i}] is {t.dtype} but {name}[0] is {tensors[0].dtype}")


def pack(tensors: Sequence[Tensor], like: Tensor) -> Tensor:
    """A staging Tensor holding the Tensors one after the other."""
    total = sum(t.count for t in tensors)
    staging = Tensor.empty_like(like, total)
    offset = 0
    for t in tensors:
        staging.copy_from(t, offset)
        offset += t.count
    return staging


def unpack(staging: Tensor, tensors: Sequence[Tensor]) -> None:
    """Copies consecutive parts of a staging Tensor into the Tensors."""
    offset = 0
    for t in tensors:
        t.copy_from(staging, 0, offset, t.count)
        offset += t.count


def rows_to_counts(t: Tensor, splits: Any, size: int, name: str) -> List[int]:
    """Element counts per rank for torch's all_to_all_single split sizes (in rows of dim 0)."""
    shape = t.shape
    rows = shape[0] if shape else 1
    row = 1
    for extent in shape[1:]:
        row *= extent
    if splits is None:
        if rows % size:
            raise InvalidArgumentError(
                f"{name}: dimension 0 ({rows}) is not divisible by the world size ({size}); pass split sizes")
        return [rows // size * row] * size
    splits = [int(s) for s in splits]
    if len(splits) != size:
        raise InvalidArgumentError(f"{name} split sizes have {len(splits)} entries, not {size}")
    if any(s < 0 for s in splits) or sum(splits) != rows:
        raise InvalidArgumentError(
            f"{name} split sizes {splits} do not add up to dimension 0 ({rows})")
    return [s * row for s in splits]

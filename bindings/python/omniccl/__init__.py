"""OmniCCL for Python: collective communication over any array that speaks DLPack.

Two APIs over one library:

- torch.distributed style: ``init_process_group()``, ``all_reduce(tensor)``,
  ``new_group(ranks)``, ... (module-level functions over a default group);
- mpi4py style: :class:`Communicator` with buffer methods (``Allreduce``,
  ``Bcast``, ...) and object methods (``bcast``, ``allgather``, ...);
  ``omniccl.COMM_WORLD`` is the default group (created from env:// by its
  first operation; naming it, ``help(omniccl)`` or ``import *`` create nothing).

Arrays: anything with ``__dlpack__`` (numpy >= 2.1, torch, cupy, jax) or the
buffer protocol, C-contiguous, on the CPU; CUDA arrays (torch, cupy) through
DLPack, ordered on the stream :func:`cuda_stream` sets. Start ranks with
``python -m omniccl.run -n 4 script.py``, torchrun, mpirun or srun.
"""

from __future__ import annotations

from typing import Any

from . import _failure, _omniccl
from ._p2p import (ANY_SOURCE, ANY_TAG, BSEND_OVERHEAD, MESSAGE_NO_PROC, MESSAGE_NULL, PROC_NULL, REQUEST_NULL, TAG_UB,
                   Alloc_mem, Attach_buffer, Detach_buffer, Free_mem, Message, Prequest, RecvStatus, Request)
from ._cuda import cuda_stream, current_cuda_stream
from ._datatypes import BOTTOM, Datatype, DerivedDatatype, Get_address, predefined as _predefined
from ._userops import Op
from .comm import COMM_NULL, IN_PLACE, UNDEFINED, Communicator, get_unique_id
from .distributed import (COMM_WORLD, GroupMember, all_gather, all_gather_into_tensor, all_gather_object, all_reduce,
                          all_to_all, all_to_all_single, barrier, broadcast, broadcast_object_list,
                          destroy_process_group, gather, gather_object, get_backend, get_global_rank,
                          get_group_rank, get_process_group_ranks, get_rank, get_world_size, group,
                          init_process_group, irecv, is_available, is_initialized, isend, new_group, recv, reduce,
                          reduce_scatter, reduce_scatter_tensor, scatter, scatter_object_list, send)
from .errors import (ERR_ARG, ERR_BUFFER, ERR_COMM, ERR_COUNT, ERR_INTERN, ERR_LASTCODE, ERR_NO_MEM, ERR_OP,
                     ERR_OTHER, ERR_PROC_FAILED, ERR_RANK, ERR_REQUEST, ERR_ROOT, ERR_TAG, ERR_TRUNCATE, ERR_TYPE,
                     ERR_UNKNOWN, ERR_UNSUPPORTED_OPERATION, InvalidArgumentError, MismatchError, OmniCCLError,
                     PeerFailureError, Status, TimeoutError, TruncatedError, UnsupportedError)
from .ops import MPIOp, PremulSum, ReduceOp, make_premul_sum
from ._windows import Window
from .work import Work

#: The package version: the C library's (OCCL_VERSION_MAJOR.MINOR.PATCH of omniccl.h).
__version__: str = _omniccl.__version__

# mpi4py's op names (MPI.SUM, ...): the C library's ops, and those done in Python.
SUM, PROD, MAX, MIN = ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MAX, ReduceOp.MIN
BAND, BOR, BXOR = ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR
LAND, LOR, LXOR = MPIOp.LAND, MPIOp.LOR, MPIOp.LXOR
MAXLOC, MINLOC, REPLACE, NO_OP = MPIOp.MAXLOC, MPIOp.MINLOC, MPIOp.REPLACE, MPIOp.NO_OP

# mpi4py's predefined datatypes (MPI.INT, ...): each is its typecode ("i", ...).
globals().update(_predefined())
BYTE: Datatype
CHAR: Datatype
SIGNED_CHAR: Datatype
UNSIGNED_CHAR: Datatype
SHORT: Datatype
UNSIGNED_SHORT: Datatype
INT: Datatype
UNSIGNED_INT: Datatype
UNSIGNED: Datatype
LONG: Datatype
UNSIGNED_LONG: Datatype
LONG_LONG: Datatype
UNSIGNED_LONG_LONG: Datatype
FLOAT: Datatype
DOUBLE: Datatype
C_BOOL: Datatype
BOOL: Datatype
C_FLOAT_COMPLEX: Datatype
C_DOUBLE_COMPLEX: Datatype
INT8_T: Datatype
INT16_T: Datatype
INT32_T: Datatype
INT64_T: Datatype
UINT8_T: Datatype
UINT16_T: Datatype
UINT32_T: Datatype
UINT64_T: Datatype

# An uncaught exception aborts the communicators (peers are told this rank
# failed, not that it left) and tells omniccl-run when the rank failed.
_failure.install()

# torch's private spelling, for code that uses it.
_make_nccl_premul_sum = make_premul_sum

__all__ = [
    "__version__",
    # torch.distributed style
    "init_process_group", "destroy_process_group", "is_initialized", "is_available", "get_rank",
    "get_world_size", "get_backend", "new_group", "get_global_rank", "get_group_rank", "get_process_group_ranks",
    "group", "GroupMember", "ReduceOp", "make_premul_sum", "PremulSum", "Work",
    "broadcast", "scatter", "gather", "reduce", "all_reduce", "all_gather", "all_gather_into_tensor",
    "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "barrier",
    "send", "recv", "isend", "irecv",
    "broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list",
    # mpi4py style
    "Communicator", "COMM_WORLD", "COMM_NULL", "IN_PLACE", "UNDEFINED", "get_unique_id", "MPIOp",
    "SUM", "PROD", "MAX", "MIN", "BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR", "MAXLOC", "MINLOC", "REPLACE",
    "NO_OP", "ANY_SOURCE", "ANY_TAG", "PROC_NULL", "TAG_UB", "RecvStatus", "Request", "REQUEST_NULL",
    "Prequest", "BSEND_OVERHEAD", "Attach_buffer", "Detach_buffer", "Alloc_mem", "Free_mem",
    "Message", "MESSAGE_NULL", "MESSAGE_NO_PROC", "Op", "Datatype", "DerivedDatatype", "BOTTOM", "Get_address",
    *_predefined(),
    "ERR_BUFFER", "ERR_COUNT", "ERR_TYPE", "ERR_TAG", "ERR_COMM", "ERR_RANK", "ERR_ROOT", "ERR_OP", "ERR_ARG",
    "ERR_UNKNOWN", "ERR_TRUNCATE", "ERR_OTHER", "ERR_INTERN", "ERR_REQUEST", "ERR_NO_MEM",
    "ERR_UNSUPPORTED_OPERATION", "ERR_PROC_FAILED", "ERR_LASTCODE",
    # CUDA arrays
    "cuda_stream", "current_cuda_stream", "Window",
    # errors
    "OmniCCLError", "InvalidArgumentError", "UnsupportedError", "TimeoutError", "PeerFailureError",
    "MismatchError", "TruncatedError", "Status",
]

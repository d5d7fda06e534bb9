"""mpi4py.MPI's names, mapped one to one onto omniccl (a name map, no behaviour of its own).

Names OmniCCL has no counterpart for (Grequest, _comm_lock_table, Create_keyval,
...) are placeholders that raise NotImplementedError when called or asked
for an attribute, so the tests that use them fail (counted as OmniCCL
failures) while the rest of their file still runs. The few environment
queries the test harness makes at import time (get_vendor, Get_version,
Query_thread) answer for OmniCCL.
"""

import pickle as _pickle
import socket
import types

import omniccl

# communicators
COMM_WORLD = omniccl.COMM_WORLD
COMM_NULL = omniccl.COMM_NULL
Comm = Intracomm = omniccl.Communicator


def _self_comm():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return omniccl.Communicator.init(f"tcp://127.0.0.1:{port}", rank=0, world_size=1, timeout=60)


COMM_SELF = _self_comm()
IN_PLACE = omniccl.IN_PLACE
UNDEFINED = omniccl.UNDEFINED

# reduce ops
SUM, PROD, MAX, MIN = omniccl.SUM, omniccl.PROD, omniccl.MAX, omniccl.MIN
LAND, LOR, LXOR = omniccl.LAND, omniccl.LOR, omniccl.LXOR
BAND, BOR, BXOR = omniccl.BAND, omniccl.BOR, omniccl.BXOR
MAXLOC, MINLOC, REPLACE, NO_OP = omniccl.MAXLOC, omniccl.MINLOC, omniccl.REPLACE, omniccl.NO_OP
OP_NULL = None
Op = omniccl.Op

# datatypes: OmniCCL's Datatype objects (each equal to its typecode: MPI.INT == "i")
Datatype = omniccl.Datatype
BOTTOM, Get_address = omniccl.BOTTOM, omniccl.Get_address
DATATYPE_NULL = None
BYTE, CHAR = omniccl.BYTE, omniccl.CHAR
SIGNED_CHAR, UNSIGNED_CHAR = omniccl.SIGNED_CHAR, omniccl.UNSIGNED_CHAR
SHORT, UNSIGNED_SHORT = omniccl.SHORT, omniccl.UNSIGNED_SHORT
INT, UNSIGNED_INT, UNSIGNED = omniccl.INT, omniccl.UNSIGNED_INT, omniccl.UNSIGNED
LONG, UNSIGNED_LONG = omniccl.LONG, omniccl.UNSIGNED_LONG
LONG_LONG, UNSIGNED_LONG_LONG = omniccl.LONG_LONG, omniccl.UNSIGNED_LONG_LONG
# OmniCCL has no long double: DATATYPE_NULL, as mpi4py has where an MPI lacks a type.
FLOAT, DOUBLE, LONG_DOUBLE = omniccl.FLOAT, omniccl.DOUBLE, None
C_BOOL = omniccl.C_BOOL
C_FLOAT_COMPLEX, C_DOUBLE_COMPLEX, C_LONG_DOUBLE_COMPLEX = omniccl.C_FLOAT_COMPLEX, omniccl.C_DOUBLE_COMPLEX, None
INT8_T, INT16_T, INT32_T, INT64_T = omniccl.INT8_T, omniccl.INT16_T, omniccl.INT32_T, omniccl.INT64_T
UINT8_T, UINT16_T, UINT32_T, UINT64_T = omniccl.UINT8_T, omniccl.UINT16_T, omniccl.UINT32_T, omniccl.UINT64_T

# point to point
ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB = omniccl.ANY_SOURCE, omniccl.ANY_TAG, omniccl.PROC_NULL, omniccl.TAG_UB
Status = omniccl.RecvStatus
Request = omniccl.Request
Prequest = omniccl.Prequest
REQUEST_NULL = omniccl.REQUEST_NULL
Message = omniccl.Message
# mpi4py's pickler (MPI.pickle): OmniCCL's object messages are the standard
# library's pickles at the highest protocol, as mpi4py's default.
pickle = types.SimpleNamespace(dumps=lambda obj: _pickle.dumps(obj, _pickle.HIGHEST_PROTOCOL), loads=_pickle.loads)
MESSAGE_NULL, MESSAGE_NO_PROC = omniccl.MESSAGE_NULL, omniccl.MESSAGE_NO_PROC
BSEND_OVERHEAD = omniccl.BSEND_OVERHEAD
Attach_buffer, Detach_buffer = omniccl.Attach_buffer, omniccl.Detach_buffer
Alloc_mem, Free_mem = omniccl.Alloc_mem, omniccl.Free_mem

# errors
Exception = omniccl.OmniCCLError  # noqa: A001 - mpi4py's name
SUCCESS = 0
ERR_BUFFER, ERR_COUNT, ERR_TYPE, ERR_TAG = omniccl.ERR_BUFFER, omniccl.ERR_COUNT, omniccl.ERR_TYPE, omniccl.ERR_TAG
ERR_COMM, ERR_RANK, ERR_ROOT, ERR_OP, ERR_ARG = (omniccl.ERR_COMM, omniccl.ERR_RANK, omniccl.ERR_ROOT, omniccl.ERR_OP,
                                                 omniccl.ERR_ARG)
ERR_UNKNOWN, ERR_TRUNCATE, ERR_OTHER, ERR_INTERN = (omniccl.ERR_UNKNOWN, omniccl.ERR_TRUNCATE, omniccl.ERR_OTHER,
                                                    omniccl.ERR_INTERN)
ERR_REQUEST, ERR_NO_MEM, ERR_UNSUPPORTED_OPERATION = (omniccl.ERR_REQUEST, omniccl.ERR_NO_MEM,
                                                      omniccl.ERR_UNSUPPORTED_OPERATION)
ERR_PROC_FAILED, ERR_LASTCODE = omniccl.ERR_PROC_FAILED, omniccl.ERR_LASTCODE

# environment queries
THREAD_SINGLE, THREAD_FUNNELED, THREAD_SERIALIZED, THREAD_MULTIPLE = 0, 1, 2, 3


def Query_thread():  # noqa: N802 - mpi4py's name
    return THREAD_SINGLE


def Get_version():  # noqa: N802 - mpi4py's name
    return (3, 1)


def get_vendor():
    return ("OmniCCL", tuple(int(x) for x in omniccl.__version__.split(".")))


def Is_initialized():  # noqa: N802 - mpi4py's name
    return True


def Is_finalized():  # noqa: N802 - mpi4py's name
    return False


def Get_processor_name():  # noqa: N802 - mpi4py's name
    return socket.gethostname()


class _Missing:
    """A name OmniCCL has no counterpart for: any use other than comparison fails."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f"OmniCCL has no counterpart of MPI.{self._name}")

    def __getattr__(self, attr):
        raise NotImplementedError(f"OmniCCL has no counterpart of MPI.{self._name}.{attr}")

    def __index__(self):
        raise NotImplementedError(f"OmniCCL has no counterpart of MPI.{self._name}")

    def __repr__(self):
        return f"<MPI.{self._name}: not in OmniCCL>"


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    missing = _Missing(name)
    globals()[name] = missing
    return missing

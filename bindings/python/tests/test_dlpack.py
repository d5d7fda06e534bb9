"""Arrays: the DLPack capsule protocol (with a fake producer), the buffer protocol, and argument checks.

These run in the test process with a one-rank communicator: a PREMUL_SUM by 2
doubles the array in place, which shows that results land in the caller's
memory.
"""

import array
import ctypes as C
import gc
import subprocess
import sys

import numpy as np
import pytest

import omniccl
from omniccl import _omniccl

from conftest import free_port

# --------------------------------------------------------------------------- a fake DLPack producer


class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", DLDevice), ("ndim", C.c_int32), ("dtype", DLDataType),
                ("shape", C.POINTER(C.c_int64)), ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


DELETER = C.CFUNCTYPE(None, C.c_void_p)


class DLManagedTensor(C.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", C.c_void_p), ("deleter", DELETER)]


class DLPackVersion(C.Structure):
    _fields_ = [("major", C.c_uint32), ("minor", C.c_uint32)]


class DLManagedTensorVersioned(C.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", C.c_void_p), ("deleter", DELETER),
                ("flags", C.c_uint64), ("dl_tensor", DLTensor)]


READ_ONLY, IS_COPIED = 1, 2
CAPSULE_DESTRUCTOR = C.CFUNCTYPE(None, C.c_void_p)
_new = C.pythonapi.PyCapsule_New
_new.restype, _new.argtypes = C.py_object, [C.c_void_p, C.c_char_p, C.c_void_p]
_is_valid = C.pythonapi.PyCapsule_IsValid
_is_valid.restype, _is_valid.argtypes = C.c_int, [C.c_void_p, C.c_char_p]
_get_pointer = C.pythonapi.PyCapsule_GetPointer
_get_pointer.restype, _get_pointer.argtypes = C.c_void_p, [C.c_void_p, C.c_char_p]
_get_name = C.pythonapi.PyCapsule_GetName
_get_name.restype, _get_name.argtypes = C.c_char_p, [C.py_object]
_KEEP_ALIVE = []


class FakeArray:
    """float64 values behind a hand-made DLPack capsule; counts exports and deleter calls.

    Like real producers, the capsule's destructor calls the deleter only if
    the capsule still has its original name (no consumer took ownership).
    """

    def __init__(self, values, versioned=True, flags=0, strides=None, major=1, device=(1, 0), offset_elems=0):
        self.values = list(values)
        self.versioned, self.flags, self.major, self.device = versioned, flags, major, device
        self.offset_elems = offset_elems
        n = len(self.values)
        self.buf = (C.c_double * (n + offset_elems))(*([-1.0] * offset_elems + self.values))
        extent = n if strides is None else n // strides[0]
        self.shape = (C.c_int64 * 1)(extent)
        self.strides = None if strides is None else (C.c_int64 * 1)(*strides)
        self.exports = 0
        self.max_version = None
        self.stream = "not asked"
        self.capsule = None
        self._managed = []
        # The callbacks capture plain values, not self, and are kept alive for
        # the whole session: a capsule may be freed while self is torn down.
        counter = self._deleted = [0]
        name, managed_type = self.name, self._managed_type()

        def on_delete(_ptr):
            counter[0] += 1

        def on_capsule_freed(capsule):
            if _is_valid(capsule, name):
                m = _get_pointer(capsule, name)
                managed_type.from_address(m).deleter(m)

        self._deleter = DELETER(on_delete)
        self._destructor = CAPSULE_DESTRUCTOR(on_capsule_freed)
        _KEEP_ALIVE.extend([self._deleter, self._destructor])

    @property
    def deleted(self):
        """How many times the deleter was called."""
        return self._deleted[0]

    @property
    def name(self):
        return b"dltensor_versioned" if self.versioned else b"dltensor"

    def _managed_type(self):
        return DLManagedTensorVersioned if self.versioned else DLManagedTensor

    def __dlpack_device__(self):
        return self.device

    def _export(self):
        self.exports += 1
        m = self._managed_type()()
        t = m.dl_tensor
        t.data = C.addressof(self.buf)
        t.device = DLDevice(*self.device)
        t.ndim = 1
        t.dtype = DLDataType(2, 64, 1)  # float64
        t.shape = self.shape
        t.strides = self.strides
        t.byte_offset = 8 * self.offset_elems
        m.deleter = self._deleter
        if self.versioned:
            m.version = DLPackVersion(self.major, 0)
            m.flags = self.flags
        self._managed.append(m)
        _KEEP_ALIVE.extend([m, self.buf, self.shape, self.strides])  # read by the capsule's destructor
        self.capsule = _new(C.addressof(m), self.name, C.cast(self._destructor, C.c_void_p))
        return self.capsule

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        if not self.versioned:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        if self.device[0] == 1:  # kDLCPU: no stream to order on
            assert stream is None
        self.stream = stream
        self.max_version = max_version
        return self._export()

    def data(self):
        return list(self.buf)[self.offset_elems:]


class LegacyArray(FakeArray):
    """A producer from before DLPack 1.0: __dlpack__ takes only stream."""

    def __init__(self, values, **kw):
        super().__init__(values, versioned=False, **kw)

    def __dlpack__(self, stream=None):  # noqa: D105 - no max_version
        return self._export()


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def comm():
    c = omniccl.Communicator.init(f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1, timeout=30)
    yield c
    c.destroy()


def double(comm, arr):
    """Doubles arr in place (a one-rank PREMUL_SUM by 2)."""
    comm.Allreduce(omniccl.IN_PLACE, arr, op=omniccl.make_premul_sum(2.0))


# --------------------------------------------------------------------------- the capsule protocol
def test_versioned_capsule_is_consumed_and_deleted_once(comm):
    fake = FakeArray([1.0, 2.0, 3.0])
    double(comm, fake)
    assert fake.data() == [2.0, 4.0, 6.0]
    assert fake.exports == 1
    assert tuple(fake.max_version)[0] == 1
    assert _get_name(fake.capsule) == b"used_dltensor_versioned"
    gc.collect()
    assert fake.deleted == 1
    fake.capsule = None  # the capsule's destructor must not delete it again
    gc.collect()
    assert fake.deleted == 1


def test_legacy_capsule_after_type_error(comm):
    fake = LegacyArray([1.0, 5.0])
    double(comm, fake)
    assert fake.data() == [2.0, 10.0]
    assert _get_name(fake.capsule) == b"used_dltensor"
    fake.capsule = None
    gc.collect()
    assert fake.deleted == 1


def test_async_op_keeps_the_capsule_until_completed(comm):
    fake = FakeArray([1.0, 2.0])
    t = _omniccl.Tensor(fake, True, "x")
    op = comm._native.premul_sum(3.0)
    native = comm._native.all_reduce(t, t, op)
    comm._native.destroy_op(op)
    del t
    gc.collect()
    assert fake.deleted == 0  # the work holds it
    omniccl.Work(native).wait()
    del native
    gc.collect()
    assert fake.deleted == 1
    assert fake.data() == [3.0, 6.0]


class CapsuleOwnedArray(FakeArray):
    """A producer that ties the tensor to its capsule (as mpi4py's test producer does).

    It keeps no reference to the capsule it returns, and logs the order of
    two events: the managed tensor's deleter and the capsule's destruction.
    A consumer that lets the capsule die before calling the deleter would
    call a deleter whose memory is already gone.
    """

    def __init__(self, values):
        super().__init__(values)
        events = self.events = []
        self._deleter = DELETER(lambda _ptr: events.append("deleter"))
        self._destructor = CAPSULE_DESTRUCTOR(lambda _capsule: events.append("capsule"))
        _KEEP_ALIVE.extend([self._deleter, self._destructor])

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        capsule = self._export()
        self.capsule = None  # the consumer holds the only reference
        return capsule


def test_capsule_outlives_the_deleter(comm):
    fake = CapsuleOwnedArray([1.0, 2.0])
    t = _omniccl.Tensor(fake, True, "x")
    gc.collect()
    assert fake.events == []  # the Tensor holds the capsule while it uses the memory
    double(comm, fake)  # a second import, used and released by a blocking call
    assert fake.data() == [2.0, 4.0]
    gc.collect()
    assert fake.events == ["deleter", "capsule"]
    del t
    gc.collect()
    assert fake.events == ["deleter", "capsule", "deleter", "capsule"]


def test_read_only_flag_refused_for_output_allowed_for_input(comm):
    fake = FakeArray([1.0, 2.0], flags=READ_ONLY)
    with pytest.raises(omniccl.InvalidArgumentError, match="read-only"):
        double(comm, fake)
    gc.collect()
    assert fake.deleted == 1  # deleted once on the error path too
    out = np.zeros(2)
    comm.Allreduce(FakeArray([1.0, 2.0], flags=READ_ONLY), out)
    assert out.tolist() == [1.0, 2.0]


def test_copied_export_refused_for_output(comm):
    with pytest.raises(ValueError, match="copy"):
        double(comm, FakeArray([1.0], flags=IS_COPIED))


def test_unknown_major_version_is_not_consumed(comm):
    fake = FakeArray([1.0], major=2)
    with pytest.raises(ValueError, match="DLPack 2"):
        double(comm, fake)
    assert _get_name(fake.capsule) == b"dltensor_versioned"  # left to its destructor
    fake.capsule = None
    gc.collect()
    assert fake.deleted == 1


def test_non_contiguous_refused_before_any_call(comm):
    fake = FakeArray([1.0, 2.0, 3.0, 4.0], strides=[2])
    with pytest.raises(ValueError, match="not contiguous"):
        double(comm, fake)
    gc.collect()
    assert fake.deleted == 1
    with pytest.raises(ValueError, match="not contiguous"):
        double(comm, np.arange(8.0)[::2])
    with pytest.raises(ValueError, match="not contiguous"):
        double(comm, np.ones((3, 3)).T)


def test_byte_offset_is_honoured(comm):
    fake = FakeArray([1.0, 2.0], offset_elems=1)
    double(comm, fake)
    assert list(fake.buf) == [-1.0, 2.0, 4.0]


def test_other_devices_are_unsupported_without_exporting(comm):
    fake = FakeArray([1.0], device=(10, 0))  # kDLROCM
    with pytest.raises(omniccl.UnsupportedError, match="rocm:0") as info:
        double(comm, fake)
    assert isinstance(info.value, NotImplementedError)
    assert info.value.status == omniccl.Status.UNSUPPORTED
    assert fake.exports == 0


# --------------------------------------------------------------------------- CUDA arrays: the stream handshake
# Without a GPU the library refuses the CUDA tensor (no CUDA in the build, or
# no driver), but only after the binding exported it for the stream the
# operation would use. Where a GPU answers, these fake CUDA arrays (host
# memory announced as CUDA memory) would be used as device memory, so the
# tests are skipped there; test_cuda.py runs real CUDA arrays instead.
_GPU_PROBE = """
import ctypes, sys
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError:
    sys.exit(3)
n = ctypes.c_int(0)
sys.exit(0 if cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(n)) == 0 and n.value > 0 else 3)
"""


def _gpu_answers():
    """Whether a CUDA driver with a GPU answers here (asked in a child process)."""
    try:
        return subprocess.run([sys.executable, "-c", _GPU_PROBE], capture_output=True, timeout=60,
                              stdin=subprocess.DEVNULL).returncode == 0
    except subprocess.TimeoutExpired:
        return False


without_gpu = pytest.mark.skipif(_gpu_answers(), reason="a GPU answers here: fake CUDA arrays would be used as "
                                 "device memory (test_cuda.py runs real ones)")


@without_gpu
def test_cuda_array_is_exported_for_the_legacy_default_stream(comm):
    fake = FakeArray([1.0], device=(2, 0))  # kDLCUDA
    with pytest.raises(omniccl.UnsupportedError, match="cuda:0") as info:
        double(comm, fake)
    assert info.value.status == omniccl.Status.UNSUPPORTED
    assert fake.exports == 1
    assert fake.stream == 1  # DLPack: 1 is the legacy default stream
    del info  # its traceback holds the imported array
    gc.collect()
    assert fake.deleted == 1  # the capsule was consumed and given back once


@pytest.fixture
def world():
    """A one-rank default process group (the torch.distributed forms' fast path needs group=None)."""
    omniccl.init_process_group(init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1, timeout=30)
    yield omniccl.distributed._world
    omniccl.destroy_process_group()


# Every call that tries the one-call fast path first (comm.py and
# distributed.py call fast_broadcast, fast_all_reduce, fast_all_gather), in
# each of its forms, and the same functions given a group (no fast path).
# Each names its CUDA arrays: the one the call takes and, where there is one,
# the separate output.
FAST_PATH_FORMS = {
    "Allreduce(IN_PLACE)": lambda comm, a, b: comm.Allreduce(omniccl.IN_PLACE, a),
    "Allreduce(send, recv)": lambda comm, a, b: comm.Allreduce(a, b),
    "Bcast": lambda comm, a, b: comm.Bcast(a, 0),
    "Allgather": lambda comm, a, b: comm.Allgather(a, b),
    "all_reduce": lambda comm, a, b: omniccl.all_reduce(a),
    "broadcast": lambda comm, a, b: omniccl.broadcast(a, 0),
    "all_gather_into_tensor": lambda comm, a, b: omniccl.all_gather_into_tensor(b, a),
    "all_reduce(group=)": lambda comm, a, b: omniccl.all_reduce(a, group=comm),
    "broadcast(group=)": lambda comm, a, b: omniccl.broadcast(a, 0, group=comm),
    "all_gather_into_tensor(group=)": lambda comm, a, b: omniccl.all_gather_into_tensor(b, a, group=comm),
}
WITH_OUTPUT = {"Allreduce(send, recv)", "Allgather", "all_gather_into_tensor", "all_gather_into_tensor(group=)"}


@without_gpu
@pytest.mark.parametrize("form", sorted(FAST_PATH_FORMS))
def test_cuda_array_in_a_fast_path_call_is_exported_once(world, form):
    # These forms try the one-call fast path first; a CUDA array leaves it
    # before anything is exported (the fast path asks __dlpack_device__) for
    # the general path, which keeps arrays until the stream is done: one
    # export of each array, its capsule given back.
    fake = FakeArray([1.0], device=(2, 0))
    out = FakeArray([0.0], device=(2, 0))  # the output of the forms with one (1 rank: same size)
    with pytest.raises(omniccl.UnsupportedError, match="cuda:0") as info:
        FAST_PATH_FORMS[form](world, fake, out)
    del info
    gc.collect()
    assert (fake.exports, fake.deleted) == (1, 1)
    want = 1 if form in WITH_OUTPUT else 0
    assert (out.exports, out.deleted) == (want, want)


@without_gpu
def test_cuda_stream_context_sets_the_stream_of_the_handshake(comm):
    fake = FakeArray([1.0], device=(13, 0))  # kDLCUDAManaged
    assert omniccl.current_cuda_stream() == 0
    with omniccl.cuda_stream(0xABC0):
        assert omniccl.current_cuda_stream() == 0xABC0
        with omniccl.cuda_stream(0x100):
            assert omniccl.current_cuda_stream() == 0x100
        assert omniccl.current_cuda_stream() == 0xABC0
        with pytest.raises(omniccl.UnsupportedError, match="cuda_managed:0"):
            double(comm, fake)
    assert omniccl.current_cuda_stream() == 0
    assert fake.stream == 0xABC0
    cpu = FakeArray([1.0])
    with omniccl.cuda_stream(0xABC0):
        double(comm, cpu)  # CPU arrays: no stream asked of the producer
    assert cpu.stream is None and cpu.data() == [2.0]


@without_gpu
def test_torch_style_functions_take_a_stream_keyword(comm):
    fake = FakeArray([1.0], device=(2, 0))
    with pytest.raises(omniccl.UnsupportedError, match="cuda:0"):
        omniccl.all_reduce(fake, group=comm, stream=0xBEEF)
    assert fake.stream == 0xBEEF
    assert omniccl.current_cuda_stream() == 0  # only for that call
    other = FakeArray([1.0], device=(2, 0))
    with pytest.raises(omniccl.UnsupportedError, match="cuda:0"):
        omniccl.broadcast(other, 0, group=comm, stream=0xD00D)
    assert other.stream == 0xD00D


def test_cuda_stream_takes_torch_and_cupy_streams_and_refuses_the_rest():
    class TorchLike:
        cuda_stream = 0x1234

    class CupyLike:
        ptr = 0x5678

    with omniccl.cuda_stream(TorchLike()):
        assert omniccl.current_cuda_stream() == 0x1234
    with omniccl.cuda_stream(CupyLike()):
        assert omniccl.current_cuda_stream() == 0x5678
    with omniccl.cuda_stream(None):
        assert omniccl.current_cuda_stream() == 0
    with pytest.raises(TypeError, match="bool"):
        with omniccl.cuda_stream(True):
            pass
    with pytest.raises(TypeError, match="str"):
        with omniccl.cuda_stream("s"):
            pass
    with pytest.raises(ValueError, match="-1"):
        with omniccl.cuda_stream(-1):
            pass
    assert omniccl.current_cuda_stream() == 0


def test_cuda_stream_is_per_thread():
    import threading

    seen = []
    with omniccl.cuda_stream(0x77):
        t = threading.Thread(target=lambda: seen.append(omniccl.current_cuda_stream()))
        t.start()
        t.join(10)
    assert seen == [0]


def test_buffer_error_falls_back_to_the_buffer_protocol(comm):
    class Stubborn(bytearray):
        def __dlpack__(self, stream=None, max_version=None):
            raise BufferError("cannot export this one")

    b = Stubborn(b"\x01\x02")
    comm.Bcast(b, root=0)
    t = _omniccl.Tensor(b, True, "b")
    assert t.source == "buffer" and t.dtype == "uint8"


# --------------------------------------------------------------------------- numpy and the buffer protocol
def test_numpy_uses_versioned_dlpack():
    t = _omniccl.Tensor(np.zeros((2, 3), np.float32), True, "x")
    assert (t.source, t.dtype, t.count, t.shape, t.readonly) == ("dlpack_versioned", "float32", 6, (2, 3), False)
    ro = np.zeros(3)
    ro.flags.writeable = False
    assert _omniccl.Tensor(ro, False, "x").readonly


def test_numpy_results_land_in_place(comm):
    for dtype in (np.int8, np.uint64, np.float16, np.float32, np.float64):
        a = np.arange(5, dtype=dtype)
        double(comm, a)
        assert a.tolist() == (np.arange(5) * 2).astype(dtype).tolist()
    a = np.arange(12.0).reshape(3, 4)
    double(comm, a[1:])  # a contiguous slice with an offset
    assert a[0].tolist() == [0, 1, 2, 3] and a[1].tolist() == [8, 10, 12, 14]


def test_read_only_numpy_is_a_value_error_for_output_only(comm):
    ro = np.arange(3.0)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        double(comm, ro)
    out = np.zeros(3)
    comm.Allgather(ro, out)
    assert out.tolist() == [0, 1, 2]


def test_buffer_protocol_objects(comm):
    a = array.array("d", [1.5, 2.5])
    double(comm, a)
    assert a.tolist() == [3.0, 5.0]
    i = array.array("q", [7])
    double(comm, i)
    assert i[0] == 14
    ba = bytearray(b"\x01\x02")
    double(comm, ba)
    assert ba == bytearray(b"\x02\x04")
    with pytest.raises(ValueError, match="read-only"):
        double(comm, b"\x01")
    with pytest.raises(ValueError, match="not contiguous"):
        double(comm, memoryview(bytearray(8))[::2])
    out = bytearray(3)
    comm.Allgather(b"abc", out)  # bytes are fine as input
    assert out == b"abc"


def test_not_an_array_is_a_type_error(comm):
    with pytest.raises(TypeError, match="DLPack"):
        double(comm, [1.0, 2.0])
    with pytest.raises(TypeError):
        double(comm, None)


def test_unsupported_dtype_is_an_invalid_argument(comm):
    with pytest.raises(omniccl.InvalidArgumentError, match="dtype"):
        double(comm, np.zeros(2, np.longdouble))


def test_zero_size_and_zero_dim_arrays(comm):
    e = np.zeros(0)
    double(comm, e)
    s = np.array(4.0)
    double(comm, s)
    assert float(s) == 8.0


def test_torch_tensors_when_installed(comm):
    torch = pytest.importorskip("torch")
    t = torch.arange(4, dtype=torch.float32)
    double(comm, t)
    assert t.tolist() == [0.0, 2.0, 4.0, 6.0]
    b = torch.ones(3, dtype=torch.bfloat16)
    double(comm, b)
    assert b.tolist() == [2.0, 2.0, 2.0]


def test_cuda_array_interface_is_unsupported_not_read(comm):
    class FakeCuda:
        __cuda_array_interface__ = {"version": 3, "data": (0, False), "typestr": "<f4", "shape": (2,)}

    with pytest.raises(omniccl.UnsupportedError, match="CUDA array without DLPack"):
        double(comm, FakeCuda())


def test_complex_arrays_are_complex_dtypes(comm):
    z = np.array([1 + 2j, -3j], np.complex64)
    double(comm, z)  # PREMUL_SUM by a real factor
    assert z.tolist() == [2 + 4j, -6j]
    t = _omniccl.Tensor(np.zeros(3, np.complex128), True, "z")
    assert t.is_complex and t.dtype == "complex128" and t.count == 3 and t.shape == (3,) and t.itemsize == 16
    comm.Allreduce(omniccl.IN_PLACE, z, op=omniccl.PROD)  # one rank: unchanged
    assert z.tolist() == [2 + 4j, -6j]
    with pytest.raises(omniccl.InvalidArgumentError, match="MAX.*complex64"):
        comm.Allreduce(omniccl.IN_PLACE, z, op=omniccl.MAX)

"""The installed package: version, bundled library, stubs, docstrings and the torch.distributed signatures."""

import inspect
import re
from pathlib import Path

import pytest

import omniccl
from omniccl import _omniccl

from conftest import REPO

PKG = Path(omniccl.__file__).parent


def test_version_is_the_headers():
    header = (REPO / "capi" / "include" / "omniccl" / "omniccl.h").read_text()
    parts = [re.search(rf"#define OCCL_VERSION_{p} (\d+)", header).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    assert omniccl.__version__ == ".".join(parts)
    assert _omniccl.LIBRARY_VERSION_CODE == _omniccl.VERSION_CODE


def test_wheel_carries_the_library_and_loads_it():
    assert (PKG / "libomniccl.so.1").is_file()
    maps = Path("/proc/self/maps").read_text()
    loaded = {line.split()[-1] for line in maps.splitlines() if "libomniccl.so" in line}
    assert loaded == {str((PKG / "libomniccl.so.1").resolve())}, loaded
    assert not any(PKG.glob("omniccl-run*")), "the C tools are not installed"


def test_stubs_and_py_typed_ship():
    assert (PKG / "py.typed").is_file()
    assert (PKG / "_omniccl.pyi").is_file()


def _public_callables():
    for name in omniccl.__all__:
        if name in ("COMM_WORLD", "__version__"):
            continue
        obj = getattr(omniccl, name)
        if inspect.isclass(obj) or callable(obj):
            yield name, obj
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if not attr.startswith("_") and (callable(member) or isinstance(member, property)):
                        yield f"{name}.{attr}", member


def test_every_public_function_and_class_has_a_docstring():
    missing = [name for name, obj in _public_callables() if not (getattr(obj, "__doc__", None) or "").strip()]
    assert not missing, missing


def test_all_names_exist():
    for name in omniccl.__all__:
        if name != "COMM_WORLD":
            assert hasattr(omniccl, name), name


# Names, arguments and defaults from torch.distributed (issue 3).
TORCH_SIGNATURES = {
    "init_process_group": "(init_method='env://', rank=None, world_size=None, timeout=None",
    "destroy_process_group": "(group=None)",
    "is_initialized": "()",
    "get_rank": "(group=None)",
    "get_world_size": "(group=None)",
    "new_group": "(ranks=None",
    "broadcast": "(tensor, src=None, group=None, async_op=False",
    "scatter": "(tensor, scatter_list=None, src=0, group=None, async_op=False",
    "gather": "(tensor, gather_list=None, dst=0, group=None, async_op=False",
    "reduce": "(tensor, dst=None, op=<ReduceOp.SUM: 0>, group=None, async_op=False",
    "all_reduce": "(tensor, op=<ReduceOp.SUM: 0>, group=None, async_op=False)",
    "all_gather": "(tensor_list, tensor, group=None, async_op=False)",
    "all_gather_into_tensor": "(output_tensor, input_tensor, group=None, async_op=False)",
    "reduce_scatter": "(output, input_list, op=<ReduceOp.SUM: 0>, group=None, async_op=False)",
    "reduce_scatter_tensor": "(output, input, op=<ReduceOp.SUM: 0>, group=None, async_op=False)",
    "all_to_all": "(output_tensor_list, input_tensor_list, group=None, async_op=False)",
    "all_to_all_single": "(output, input, output_split_sizes=None, input_split_sizes=None, group=None, "
                         "async_op=False)",
    "barrier": "(group=None, async_op=False",
    "send": "(tensor, dst=None, group=None, tag=0",
    "recv": "(tensor, src=None, group=None, tag=0",
    "isend": "(tensor, dst=None, group=None, tag=0",
    "irecv": "(tensor, src=None, group=None, tag=0",
    "broadcast_object_list": "(object_list, src=0, group=None",
    "all_gather_object": "(object_list, obj, group=None)",
    "gather_object": "(obj, object_gather_list=None, dst=0, group=None",
    "scatter_object_list": "(scatter_object_output_list, scatter_object_input_list=None, src=0, group=None",
}


@pytest.mark.parametrize("name", sorted(TORCH_SIGNATURES))
def test_torch_distributed_signatures(name):
    sig = inspect.signature(getattr(omniccl, name))
    text = str(sig.replace(parameters=[p.replace(annotation=inspect.Parameter.empty) for p in
                                       sig.parameters.values()], return_annotation=inspect.Signature.empty))
    assert text.startswith(TORCH_SIGNATURES[name]), text


def test_reduce_ops():
    names = ["SUM", "PRODUCT", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR", "PREMUL_SUM"]
    assert [omniccl.ReduceOp[n].value for n in names] == list(range(9))
    assert omniccl.ReduceOp.PROD is omniccl.ReduceOp.PRODUCT
    assert omniccl.make_premul_sum(0.5).scalar == 0.5


def test_mpi4py_style_methods_exist():
    for name in ("rank", "size", "split", "Allreduce", "Bcast", "Allgather", "Reduce_scatter_block", "Alltoall",
                 "Gather", "Scatter", "Reduce", "Send", "Recv", "Barrier", "bcast", "scatter", "gather",
                 "allgather", "allreduce", "send", "recv", "Isend", "Irecv", "Get_rank", "Get_size"):
        assert hasattr(omniccl.Communicator, name), name
    params = list(inspect.signature(omniccl.Communicator.recv).parameters)
    assert params[:2] == ["self", "source"]


def test_exception_hierarchy():
    E = omniccl
    assert issubclass(E.TimeoutError, E.OmniCCLError) and issubclass(E.TimeoutError, TimeoutError)
    assert issubclass(E.PeerFailureError, E.OmniCCLError)
    assert issubclass(E.MismatchError, E.OmniCCLError)
    assert issubclass(E.InvalidArgumentError, E.OmniCCLError) and issubclass(E.InvalidArgumentError, ValueError)
    assert issubclass(E.UnsupportedError, E.OmniCCLError) and issubclass(E.UnsupportedError, NotImplementedError)
    e = E.errors._from_status(3, "msg")
    assert type(e) is E.TimeoutError and e.status == E.Status.TIMEOUT and str(e) == "msg"
    assert type(E.errors._from_status(12, "x")) is E.OmniCCLError
    assert _omniccl.status_string(3).startswith("OCCL_ERR_TIMEOUT")


def test_functions_need_init_first():
    assert not omniccl.is_initialized()
    with pytest.raises(ValueError, match="not been initialized"):
        omniccl.get_rank()

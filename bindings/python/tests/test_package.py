"""The installed package: version, bundled library, stubs, docstrings and the torch.distributed signatures."""

import inspect
import os
import subprocess
import sys
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
        if name == "__version__":
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
        assert hasattr(omniccl, name), name


# Names, arguments and defaults from torch.distributed (issue 3).
TORCH_SIGNATURES = {
    "init_process_group": "(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None, "
                          "group_name='', pg_options=None, device_id=None",
    "destroy_process_group": "(group=None)",
    "is_initialized": "()",
    "get_rank": "(group=None)",
    "get_world_size": "(group=None)",
    "new_group": "(ranks=None",
    "broadcast": "(tensor, src=None, group=None, async_op=False",
    "scatter": "(tensor, scatter_list=None, src=0, group=None, async_op=False",
    "gather": "(tensor, gather_list=None, dst=0, group=None, async_op=False",
    "reduce": "(tensor, dst=None, op=<ReduceOp.SUM: 0>, group=None, async_op=False",
    "all_reduce": "(tensor, op=<ReduceOp.SUM: 0>, group=None, async_op=False",
    "all_gather": "(tensor_list, tensor, group=None, async_op=False)",
    "all_gather_into_tensor": "(output_tensor, input_tensor, group=None, async_op=False",
    "reduce_scatter": "(output, input_list, op=<ReduceOp.SUM: 0>, group=None, async_op=False)",
    "reduce_scatter_tensor": "(output, input, op=<ReduceOp.SUM: 0>, group=None, async_op=False",
    "all_to_all": "(output_tensor_list, input_tensor_list, group=None, async_op=False)",
    "all_to_all_single": "(output, input, output_split_sizes=None, input_split_sizes=None, group=None, "
                         "async_op=False",
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
    # What OmniCCL adds after torch's parameters (group_src, stream, ...) is
    # optional, so torch's calls keep working; stream is keyword-only.
    torch_count = TORCH_SIGNATURES[name].count(",") + 1
    for p in list(sig.parameters.values())[torch_count:]:
        assert p.default is not inspect.Parameter.empty, f"{name}: extra parameter {p.name} has no default"
    if "stream" in sig.parameters:
        assert sig.parameters["stream"].kind is inspect.Parameter.KEYWORD_ONLY


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
    assert params == ["self", "buf", "source", "tag", "status"]  # mpi4py's order


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


def test_importing_omniccl_does_not_import_torch():
    # The PyTorch backend lives in omniccl.torch; plain `import omniccl` stays torch-free (and fast).
    code = "import sys, omniccl; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stdout + out.stderr


def test_naming_the_module_creates_no_process_group():
    # No MASTER_ADDR or RANK: creating a group here would fail (or hang).
    code = """
import io, pydoc, sys
import omniccl
from omniccl import *
text = pydoc.render_doc(omniccl)
help(omniccl.Communicator)
assert "COMM_WORLD" in text
r = repr(COMM_WORLD)
assert "first use" in r, r
assert isinstance(COMM_WORLD, Communicator) and COMM_WORLD is omniccl.COMM_WORLD
assert not omniccl.is_initialized()
try:
    COMM_WORLD.Get_rank()
except ValueError as e:
    print("FIRST USE:", e)
else:
    raise SystemExit("COMM_WORLD.Get_rank() worked without any environment")
assert not omniccl.is_initialized()
print("OK")
"""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_ENV}
    env["PAGER"] = "cat"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.rstrip().endswith("OK")
    assert "FIRST USE:" in out.stdout  # the first operation is what tries to create it


LAUNCHER_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS")


def test_init_process_group_takes_torchs_order(tmp_path):
    code = f"""
import omniccl as dist
dist.init_process_group("gloo", init_method="file://{tmp_path}", rank=0, world_size=1, group_name="g")
assert dist.get_world_size() == 1 and dist.get_rank() == 0
dist.destroy_process_group()
dist.init_process_group(backend="nccl", init_method="file://{tmp_path}/b", world_size=1, rank=0)
dist.destroy_process_group()
dist.init_process_group("file://{tmp_path}/c", world_size=1, rank=0)  # a URL first still means init_method
dist.destroy_process_group()
for bad, kw in (("store", dict(store=object())), ("backend", dict(backend="nope"))):
    try:
        dist.init_process_group(init_method="file://{tmp_path}/d", world_size=1, rank=0, **kw)
    except (NotImplementedError, ValueError) as e:
        assert bad in str(e), e
    else:
        raise SystemExit(bad + " accepted")
print("OK")
"""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0 and out.stdout.strip() == "OK", out.stdout[-3000:] + out.stderr[-3000:]

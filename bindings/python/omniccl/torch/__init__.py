"""OmniCCL as a PyTorch ``torch.distributed`` backend named ``"omniccl"``.

Importing this module registers the backend through PyTorch's public
extension point, ``torch.distributed.Backend.register_backend``; then
programs written for ``torch.distributed`` run on OmniCCL by naming it::

    import torch.distributed as dist
    import omniccl.torch  # registers the backend

    dist.init_process_group("omniccl")   # env:// from torchrun, or init_method=, store=
    dist.all_reduce(t)                   # and every other dist.* call, DDP included

The rendezvous goes through the ``Store`` PyTorch hands the backend (the
TCPStore of ``env://`` or ``tcp://``, a FileStore, torchrun's agent store):
rank 0 of each group publishes an OmniCCL unique id in it and every rank
creates the group's communicator from that id, within ``timeout``.
``import omniccl`` alone does not import torch.

Under mpirun (Open MPI, MPICH) or srun, which do not set torchrun's RANK and
WORLD_SIZE, importing this module sets them (and LOCAL_RANK,
LOCAL_WORLD_SIZE) from the launcher's own variables when they are missing,
so ``env://`` works there too; MASTER_ADDR and MASTER_PORT are passed to
the launcher (``mpirun -x MASTER_ADDR=host -x MASTER_PORT=29500 ...``).
"""

from __future__ import annotations

import inspect
import os

import torch.distributed as _dist

from ._launcher import torch_env_from_launcher
from ._process_group import UNIQUE_ID_KEY, ProcessGroupOmniCCL, create_process_group, reduce_op
from ._work import TorchWork

__all__ = ["BACKEND", "ProcessGroupOmniCCL", "TorchWork", "create_process_group", "register", "reduce_op",
           "torch_env_from_launcher", "UNIQUE_ID_KEY"]

#: The backend name to pass to ``torch.distributed.init_process_group``.
BACKEND = "omniccl"


def register() -> None:
    """Registers the ``"omniccl"`` backend with ``torch.distributed`` (done on import; safe to call again)."""
    backend = _dist.Backend
    if BACKEND.upper() in getattr(backend, "_plugins", {}):
        return
    kwargs = {}
    # PyTorch 2.x asks which devices a backend serves (and warns if not told).
    if "devices" in inspect.signature(backend.register_backend).parameters:
        kwargs["devices"] = ["cpu", "cuda"]
    backend.register_backend(BACKEND, create_process_group, **kwargs)


register()
os.environ.update(torch_env_from_launcher(os.environ))

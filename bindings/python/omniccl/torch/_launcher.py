"""torchrun's variables from another launcher's: what lets ``env://`` work under mpirun and srun.

PyTorch's ``env://`` reads RANK, WORLD_SIZE (and MASTER_ADDR, MASTER_PORT);
Open MPI's mpirun, MPICH's Hydra and Slurm's srun set their own names. This
module imports nothing from torch, so the mapping is testable without it.
"""

from __future__ import annotations

from typing import Dict, Mapping

__all__ = ["torch_env_from_launcher"]

# (launcher, rank, size, local rank, local size), in the order they are tried.
_LAUNCHERS = (
    ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("MPICH/Hydra", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
)


def torch_env_from_launcher(environ: Mapping[str, str]) -> Dict[str, str]:
    """The torchrun variables to add to ``environ``: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE.

    Empty when RANK or WORLD_SIZE is already set (torchrun, or the user) or
    when no known launcher's variables are. MASTER_ADDR and MASTER_PORT are
    never invented: pass them to the launcher (``mpirun -x MASTER_ADDR=...``).
    """
    if environ.get("RANK") or environ.get("WORLD_SIZE"):
        return {}
    for _, rank, size, local_rank, local_size in _LAUNCHERS:
        if environ.get(rank) and environ.get(size):
            found = {"RANK": environ[rank], "WORLD_SIZE": environ[size]}
            if environ.get(local_rank):
                found["LOCAL_RANK"] = environ[local_rank]
            if environ.get(local_size) and environ[local_size].isdigit():
                found["LOCAL_WORLD_SIZE"] = environ[local_size]
            return found
    return {}

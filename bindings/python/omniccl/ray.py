"""OmniCCL communicators among Ray actors and tasks, with the rendezvous through Ray itself.

Each member of a group calls :func:`init_collective_group` inside its actor
(or task) with the group's size, its rank and the group's name, as with
Ray's ``ray.util.collective``; no address or port is chosen by hand::

    import ray
    import omniccl.ray

    @ray.remote
    class Trainer:
        def setup(self, world_size, rank):
            self.comm = omniccl.ray.init_collective_group(world_size, rank, "trainers")

        def step(self, grad):            # a numpy array or a torch tensor
            self.comm.Allreduce(omniccl.IN_PLACE, grad)
            return grad / self.comm.size

The rendezvous: rank 0 makes an OmniCCL unique id (its process serves the
rendezvous) and leaves it in a small named Ray actor
(``omniccl_rendezvous:<group>``, no CPU reserved); the other ranks read it
from there and every rank creates the communicator from it. The named actor
is removed once the communicator exists. The communicator is an ordinary
:class:`omniccl.Communicator`: collectives on numpy arrays, torch tensors
and anything with ``__dlpack__``, with OmniCCL's errors: when a member dies
(its actor killed, its node lost) the others' operations raise
:class:`omniccl.PeerFailureError` within seconds, and the Ray cluster is
not affected.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Optional

import ray

from .comm import Communicator, get_unique_id
from .errors import TimeoutError as _Timeout
from .work import Timeout, _seconds

__all__ = ["init_collective_group", "get_group", "destroy_collective_group", "RENDEZVOUS_PREFIX"]

#: The name of a group's rendezvous actor is this prefix and the group's name.
RENDEZVOUS_PREFIX = "omniccl_rendezvous:"

_DEFAULT_TIMEOUT = 300.0
_groups: Dict[str, Communicator] = {}


@ray.remote(num_cpus=0)
class _Rendezvous:
    """Holds one group's unique id until every member has read it."""

    def __init__(self) -> None:
        self._unique_id: Optional[bytes] = None

    def publish(self, unique_id: bytes) -> None:
        self._unique_id = unique_id

    def lookup(self) -> Optional[bytes]:
        return self._unique_id


def _rendezvous_actor(group_name: str) -> Any:
    # get_if_exists: the members race to create it; all get the same actor.
    return _Rendezvous.options(name=RENDEZVOUS_PREFIX + group_name, get_if_exists=True,
                               lifetime=None).remote()


def _wait_for_id(actor: Any, group_name: str, rank: int, deadline: float) -> bytes:
    """Polls the rendezvous actor until rank 0 has published the unique id."""
    delay = 0.01
    while True:
        unique_id = ray.get(actor.lookup.remote())
        if unique_id is not None:
            return unique_id
        if time.monotonic() > deadline:
            raise _Timeout(f"omniccl.ray: rank {rank} of group {group_name!r} waited in vain for rank 0 to "
                           "publish the group's unique id (is rank 0 started, with the same group name?)")
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def init_collective_group(world_size: int, rank: int, group_name: str = "default",
                          timeout: Timeout = None) -> Communicator:
    """Creates the communicator of group ``group_name`` in this actor or task; collective over its members.

    Args:
        world_size: the number of members; each calls this with its own ``rank``.
        rank: this member's rank, 0 to ``world_size - 1``.
        group_name: the group's name, unique among the groups alive in the Ray job.
        timeout: deadline of the rendezvous and of every operation (seconds or
            ``datetime.timedelta``); default 300 s for the rendezvous, OMNICCL_TIMEOUT
            (else 10 minutes) for operations.

    Returns:
        The :class:`omniccl.Communicator` (also :func:`get_group` ``(group_name)``).
    """
    if not ray.is_initialized():
        raise RuntimeError("omniccl.ray.init_collective_group: call it inside a Ray actor or task "
                           "(ray.init() has not run in this process)")
    if not 0 <= rank < world_size:
        raise ValueError(f"omniccl.ray: rank {rank} is outside the group of {world_size}")
    if group_name in _groups:
        raise ValueError(f"omniccl.ray: group {group_name!r} already exists in this process")
    seconds = _seconds(timeout)
    deadline = time.monotonic() + (seconds if seconds is not None else _DEFAULT_TIMEOUT)
    actor = _rendezvous_actor(group_name)
    if rank == 0:
        unique_id = get_unique_id()
        ray.get(actor.publish.remote(unique_id))
    else:
        unique_id = _wait_for_id(actor, group_name, rank, deadline)
    comm = Communicator.from_unique_id(unique_id, rank, world_size, timeout)
    if rank == 0:
        ray.kill(actor)  # every member has joined, so every member has read the id
    _groups[group_name] = comm
    return comm


def get_group(group_name: str = "default") -> Communicator:
    """The communicator :func:`init_collective_group` made in this process for ``group_name``."""
    try:
        return _groups[group_name]
    except KeyError:
        raise ValueError(f"omniccl.ray: no group {group_name!r} in this process "
                         "(call init_collective_group first)") from None


def destroy_collective_group(group_name: str = "default") -> None:
    """Frees this process's communicator of ``group_name`` (peers are told it left); safe to call twice."""
    comm = _groups.pop(group_name, None)
    if comm is not None:
        comm.destroy()

"""The Ray driver of test_ray.py: ``python ray_driver.py``; prints ``RESULT <json>``.

Starts a local Ray cluster of two nodes (a head and a second node process,
Ray's own ``ray.cluster_utils.Cluster``, which stops exactly the processes
it started), then, with two actors spread over the nodes:

- ``collectives``: an OmniCCL group formed through Ray (no port chosen),
  all_reduce and broadcast on numpy arrays (and torch tensors where torch
  is importable), and the gradient-averaging loop;
- ``killed``: one actor is killed by Ray while the other waits in an
  all_reduce; the survivor gets an OmniCCL error, and the cluster then
  runs a new group;
- ``network``: the network interfaces this process sees and the address
  every Ray node, the cluster's GCS and each actor's node report, so that
  the test can check that Ray's own traffic stays on loopback.

test_ray.py runs this in a network namespace of its own with only ``lo``
up; the nodes are also told to use 127.0.0.1, since Ray otherwise picks the
host's outward address (or what the host name resolves to) even for a
cluster on one machine.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
import time

import numpy as np
import ray

LOOPBACK = "127.0.0.1"


@ray.remote(num_cpus=1)
class Member:
    """One rank of an OmniCCL group inside a Ray actor."""

    def setup(self, world_size, rank, group):
        import omniccl.ray

        self.comm = omniccl.ray.init_collective_group(world_size, rank, group, timeout=60)
        self.rank = rank
        return self.comm.rank

    def all_reduce(self, n):
        import omniccl

        x = np.full(n, float(self.rank + 1), np.float32)
        self.comm.Allreduce(omniccl.IN_PLACE, x)
        out = {"numpy": float(x[0])}
        try:
            import torch
        except ImportError:
            out["torch"] = None
        else:
            t = torch.full((n,), float(self.rank + 1))
            self.comm.Allreduce(omniccl.IN_PLACE, t)
            out["torch"] = float(t[0])
        b = np.full(3, float(self.rank), np.float64)
        self.comm.Bcast(b, root=1)
        out["broadcast"] = b.tolist()
        return out

    def train(self, steps):
        """The gradient-averaging loop: linear regression, gradients averaged with Allreduce."""
        import omniccl

        rng = np.random.default_rng(self.rank)
        x = rng.normal(size=(64, 4))
        y = x @ np.array([1.0, -2.0, 0.5, 3.0])
        w = np.zeros(4)
        for _ in range(steps):
            grad = 2 * x.T @ (x @ w - y) / len(x)
            self.comm.Allreduce(omniccl.IN_PLACE, grad)
            w -= 0.05 * grad / self.comm.size
        return w.tolist()

    def wait_in_all_reduce(self):
        """An all_reduce whose peer never joins (it is killed); returns the error and the time it took."""
        import omniccl

        x = np.ones(1 << 16, np.float32)
        start = time.monotonic()
        try:
            self.comm.Allreduce(omniccl.IN_PLACE, x)
            return {"error": None, "seconds": time.monotonic() - start}
        except omniccl.OmniCCLError as e:
            return {"error": f"{type(e).__name__}: {e}"[:300], "seconds": time.monotonic() - start}

    def node(self):
        return ray.get_runtime_context().get_node_id()

    def node_ip(self):
        return ray.util.get_node_ip_address()


def members(n, group):
    actors = [Member.options(scheduling_strategy="SPREAD").remote() for _ in range(n)]
    ranks = ray.get([a.setup.remote(n, r, group) for r, a in enumerate(actors)], timeout=120)
    assert ranks == list(range(n)), ranks
    return actors


def collectives():
    actors = members(2, "collectives")
    result = {"nodes": len(set(ray.get([a.node.remote() for a in actors])))}
    result["all_reduce"] = ray.get([a.all_reduce.remote(1001) for a in actors], timeout=60)
    result["train"] = ray.get([a.train.remote(60) for a in actors], timeout=60)
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "python"))
    import ray_gradient_averaging

    result["example"] = ray_gradient_averaging.run(world_size=3, steps=200, group="example")
    return result


def killed():
    actors = members(2, "killed")
    waiting = actors[0].wait_in_all_reduce.remote()
    time.sleep(1.0)
    ray.kill(actors[1])
    result = {"survivor": ray.get(waiting, timeout=60)}
    again = members(2, "after")  # the cluster still runs a new group
    result["after"] = ray.get([a.all_reduce.remote(5) for a in again], timeout=60)
    return result


def network(cluster):
    """Where Ray's traffic goes: the interfaces here, the GCS's and every node's address."""
    actors = members(2, "network")
    return {"interfaces": sorted(name for _, name in socket.if_nameindex()),
            "gcs": cluster.address.rsplit(":", 1)[0].strip("[]"),
            "nodes": sorted({n["NodeManagerAddress"] for n in ray.nodes()}),
            "actors": ray.get([a.node_ip.remote() for a in actors], timeout=60)}


def main():
    from ray.cluster_utils import Cluster

    # node_ip_address: without it Ray advertises the host's outward address.
    node = {"num_cpus": 2, "include_dashboard": False, "node_ip_address": LOOPBACK}
    cluster = Cluster(initialize_head=True, head_node_args=node)
    try:
        cluster.add_node(**node)
        env = {k: os.environ[k] for k in ("PYTHONPATH", "OMNICCL_TIMEOUT", "OMNICCL_SOCKET_ADDR") if k in os.environ}
        ray.init(address=cluster.address, runtime_env={"env_vars": env}, log_to_driver=False,
                 _node_ip_address=LOOPBACK)
        cluster.wait_for_nodes()
        result = {"nodes_alive": sum(n["Alive"] for n in ray.nodes())}
        result["network"] = network(cluster)
        result["collectives"] = collectives()
        result["killed"] = killed()
        result["nodes_alive_after"] = sum(n["Alive"] for n in ray.nodes())
        print("RESULT " + json.dumps(result), flush=True)
        ray.shutdown()
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()

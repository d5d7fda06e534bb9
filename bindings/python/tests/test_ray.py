"""OmniCCL groups among Ray actors (omniccl.ray), on a local two-node Ray cluster the test starts.

ray_driver.py starts the cluster (a head and a second node process, Ray's
ray.cluster_utils.Cluster, stopped again by it), forms groups through Ray,
runs collectives and the gradient-averaging example, kills an actor in the
middle of an all_reduce, and checks the cluster still runs a new group.
Skipped, saying why, where Ray is not installed (bindings/python/ci.sh
installs it). OmniCCL's own links listen on 127.0.0.1 (OMNICCL_SOCKET_ADDR).

Test traffic stays on loopback: the driver, and so the whole Ray cluster it
starts, runs in network, PID and mount namespaces of its own (``unshare``)
where only ``lo`` is up, so no packet can leave the machine whatever
address Ray would pick; the PID namespace also ends every process of the
cluster when the driver ends, even when it is killed on a timeout. Where
namespaces cannot be created (not root and no unprivileged user
namespaces), the tests are skipped, saying why.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import TESTS

pytest.importorskip("ray", reason="Ray is not installed (pip install ray); the omniccl.ray tests are not run")


# The namespaces: --kill-child ends the driver (the PID namespace's first process, whose end
# ends every other process in it) when unshare itself is killed; --mount-proc gives the
# namespace its own /proc, which Ray reads to find its own processes.
UNSHARE = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
if os.geteuid() != 0:
    UNSHARE[1:1] = ["--user", "--map-root-user"]
# Only lo, brought up; the command runs once it is.
LO_ONLY = ["sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


def loopback_namespace():
    """The command prefix that runs a program in namespaces with only lo; skips the tests where there is none."""
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (util-linux, iproute2); the Ray tests need a network "
                        "namespace with only lo, so that Ray's traffic stays on loopback")
    probe = subprocess.run(UNSHARE + LO_ONLY + ["true"], capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a network namespace here ({' '.join(UNSHARE)}: {probe.stderr.strip()[-300:]}); "
                    "the Ray tests run only where Ray's traffic can be kept on loopback")
    return UNSHARE + LO_ONLY


@pytest.fixture(scope="module")
def ray_run():
    prefix = loopback_namespace()
    env = dict(os.environ, OMNICCL_SOCKET_ADDR="127.0.0.1", OMNICCL_TIMEOUT="60s", RAY_USAGE_STATS_ENABLED="0",
               PYTHONUNBUFFERED="1")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(prefix + [sys.executable, str(TESTS / "ray_driver.py")], capture_output=True, text=True,
                          timeout=240, env=env, stdin=subprocess.DEVNULL)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def is_loopback(address):
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def test_ray_traffic_stays_on_loopback(ray_run):
    net = ray_run["network"]
    assert net["interfaces"] == ["lo"], f"the driver should see only lo: {net}"
    addresses = [net["gcs"], *net["nodes"], *net["actors"]]
    assert len(net["nodes"]) >= 1 and len(net["actors"]) == 2, net
    assert all(is_loopback(a) for a in addresses), f"Ray uses a non-loopback address: {net}"


def test_group_forms_through_ray_across_two_nodes(ray_run):
    assert ray_run["nodes_alive"] == 2
    got = ray_run["collectives"]
    assert got["nodes"] == 2, "the two actors should run on the two nodes"
    for member in got["all_reduce"]:
        assert member["numpy"] == 3.0 and member["broadcast"] == [1.0, 1.0, 1.0], got
        assert member["torch"] in (None, 3.0), got  # None: torch is not installed here


def test_gradient_averaging_gives_every_actor_the_same_weights(ray_run):
    for run in (ray_run["collectives"]["train"], ray_run["collectives"]["example"]):
        assert all(w == run[0] for w in run), run
    for got, want in zip(ray_run["collectives"]["example"][0], [1.0, -2.0, 0.5, 3.0]):
        assert abs(got - want) < 1e-3, ray_run["collectives"]["example"]


def test_killed_actor_fails_its_peer_and_the_cluster_stays_up(ray_run):
    survivor = ray_run["killed"]["survivor"]
    assert survivor["error"] and "PeerFailureError" in survivor["error"], survivor
    assert survivor["seconds"] < 30, survivor  # the kill came after 1 s; the error within seconds
    assert all(m["numpy"] == 3.0 for m in ray_run["killed"]["after"]), ray_run["killed"]
    assert ray_run["nodes_alive_after"] == 2

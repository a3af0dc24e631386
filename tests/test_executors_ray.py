"""RayExecutor on a local multi-node Ray cluster (GPUs declared as resources on CPU nodes): real
builds and real judging on the CPU device, and a node killed mid-run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cuda_gym.errors import JudgeError

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

from test_executors import small_judge, workspace_job  # noqa: E402 - after the importorskip


@pytest.fixture(scope="module")
def cluster():
    c = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    nodes = [c.add_node(num_cpus=1, num_gpus=1) for _ in range(2)]
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    yield c, nodes
    ray.shutdown()
    c.shutdown()


@pytest.mark.slow
def test_ray_jobs_survive_a_node_killed_mid_run(cluster, tmp_path: Path) -> None:
    from cuda_gym.executors import RayExecutor

    c, nodes = cluster
    ex = RayExecutor(small_judge(tmp_path), max_in_flight=4, job_retries=1, warm_servers=0, max_restarts=1)
    try:
        assert len(ex.actors) == 2  # one actor per declared GPU
        names = ("cpu_scale_relu", "cpu_row_softmax", "cpu_row_softmax")
        futures = [ex.submit(workspace_job(n, tmp_path / str(i), mode="verify")) for i, n in enumerate(names)]
        while not any(f.done() for f in futures):  # both actors are up and judging
            time.sleep(0.1)
        c.remove_node(nodes[1])  # a node dies with its actor's jobs in flight
        outcomes = []
        for f in futures:
            try:
                res = f.result(timeout=300)
                assert res.passed, res.to_json()
                outcomes.append("passed")
            except JudgeError as exc:  # reported, never silently lost
                assert "actor" in str(exc)
                outcomes.append("failed")
        assert outcomes.count("passed") >= 1
        after = ex.submit(workspace_job("cpu_scale_relu", tmp_path / "after", mode="verify")).result(timeout=300)
        assert after.passed, after.to_json()
    finally:
        ex.close(cancel=True)

"""Executors on the CPU device: the local pool with real builds and real judging, faults, shutdown,
envs and a vector env's subprocesses sharing one pool."""

from __future__ import annotations

import os
import shutil
import signal
import time
from concurrent.futures import CancelledError
from pathlib import Path

import gymnasium as gym
import pytest

import judge_cases as cases
from adversarial.judging import load_task, make_workspace
from cuda_gym.envs import KernelEnvConfig
from cuda_gym.envs.solution import format_solution
from cuda_gym.errors import ConfigError, JudgeError
from cuda_gym.executors import ExecutorConfig, InlineExecutor, JudgeJob, LocalGPUPool, shared, shutdown_executors
from cuda_gym.judge import JudgeConfig

SOLUTIONS = Path(__file__).resolve().parent / "solutions"
DEMO = Path(__file__).resolve().parent.parent / "envs" / "demo_solutions" / "cpu"
HONEST = ("cpu_scale_relu", "cpu_row_softmax", "cpu_bias_gelu_scale")
TASKS = {"cpu_scale_relu": "custom:scale_relu", "cpu_row_softmax": "custom:row_softmax",
         "cpu_bias_gelu_scale": "custom:bias_gelu_scale"}
ABORT_FORWARD = "\n\nimport os\nModelNew.forward = lambda self, *a: os.abort()\n"


def small_judge(root: Path) -> JudgeConfig:
    """Few calls, no compile baseline, no judgement cache: the pool's behaviour, not the timings, is tested."""
    return JudgeConfig(device="cpu", correctness_trials=2, timed_calls=3, warmup=1, compile_baseline=False,
                       cache_judgements=False, noise_iqr=0, cache_dir=root / "cache", work_dir=root / "jobs")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("executors")


@pytest.fixture(scope="module")
def pool(root: Path):
    with LocalGPUPool(small_judge(root), lanes=2, warm_servers=1, build_workers=2) as p:
        yield p


def workspace_job(name: str, parent: Path, mode: str = "full", edit: str = "", broken: bool = False) -> JudgeJob:
    task = load_task(TASKS[name])
    ws = make_workspace(task, SOLUTIONS / name, "cpu", parent)
    if edit:
        with (ws.root / "model_new.py").open("a") as fh:
            fh.write(edit)
    if broken:
        for src in (ws.root / "kernels").glob("*.cpp"):
            if "binding" not in src.name:
                src.write_text(src.read_text() + "\nthis is not C++;\n")
    return JudgeJob(task, workspace=str(ws.root), build_dir=str(ws.build_dir), mode=mode)


def test_pool_judges_honest_and_broken_submissions(pool: LocalGPUPool, tmp_path: Path) -> None:
    jobs = [workspace_job(n, tmp_path) for n in HONEST[:2]]
    jobs.append(JudgeJob(cases.small_task(), solution=cases.HONEST))
    jobs.append(JudgeJob(cases.small_task(), solution=cases.HONEST, mode="verify"))
    jobs.append(workspace_job("cpu_scale_relu", tmp_path, broken=True))
    jobs.append(workspace_job("cpu_scale_relu", tmp_path, edit=ABORT_FORWARD))
    futures = [pool.submit(j) for j in jobs]
    results = [f.result(timeout=600) for f in futures]
    for res in results[:4]:
        assert res.passed, res.to_json()
        assert res.device == "cpu" and (res.mode == "verify" or (res.candidate and res.eager))
    broken, aborted = results[4], results[5]
    assert not broken.compiled and "error" in broken.compile_log.lower()
    assert aborted.compiled and not aborted.passed and "server process died" in aborted.error
    assert sum(lane.done for lane in pool.lanes) >= 5  # the broken build never reached a lane


def _candidate_servers(pid: int) -> set[int]:
    """Pids of the candidate servers below process ``pid`` (``/proc``), waiting or working."""
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            if argv[1:3] == [b"-m", b"cuda_gym.judge.candidate_server"]:  # the server, not the sandbox around it
                found.add(p)
            for tid in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{tid}/children").read_text().split()]
        except OSError:
            continue
    return found


def _warm_servers(pool: LocalGPUPool, timeout_s: float = 120) -> dict[int, set[int]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        warm = {lane.index: _candidate_servers(lane.worker_pid() or 0) for lane in pool.lanes}
        if all(len(v) == 1 for v in warm.values()):
            return warm
        time.sleep(0.2)
    raise AssertionError(f"the lanes did not keep one warm server each: {warm}")


def test_lanes_keep_warm_single_use_servers(pool: LocalGPUPool, tmp_path: Path) -> None:
    """Between jobs each lane holds one started server; a job uses one and a new one replaces it."""
    before = _warm_servers(pool)
    futures = [pool.submit(workspace_job(n, tmp_path, mode="verify")) for n in HONEST[:2]]
    assert all(f.result(timeout=300).passed for f in futures)
    after = _warm_servers(pool)
    for index, pids in before.items():
        assert pids.isdisjoint(after[index])  # each server served one submission and is gone


def test_pool_survives_a_worker_killed_mid_job(pool: LocalGPUPool, tmp_path: Path) -> None:
    future = pool.submit(workspace_job("cpu_row_softmax", tmp_path, mode="verify"))
    deadline = time.monotonic() + 300
    victim = None
    while victim is None and time.monotonic() < deadline and not future.done():
        busy = [lane for lane in pool.lanes if lane.current is not None and lane.worker_pid()]
        victim = busy[0].worker_pid() if busy else None
        time.sleep(0.05)
    assert victim is not None, "the job never reached a lane"
    os.kill(victim, signal.SIGKILL)
    try:
        res = future.result(timeout=300)  # the request is retried on a fresh worker ...
        assert res.passed, res.to_json()
    except JudgeError as exc:  # ... or the job fails, saying why; it is never lost
        assert "reference worker" in str(exc)
    after = pool.submit(workspace_job("cpu_scale_relu", tmp_path, mode="verify")).result(timeout=300)
    assert after.passed, after.to_json()
    assert all(lane.thread.is_alive() for lane in pool.lanes)


def test_pool_shutdown_resolves_every_future(root: Path, tmp_path: Path) -> None:
    pool = LocalGPUPool(small_judge(root), lanes=1, warm_servers=0, build_workers=1)
    futures = [pool.submit(workspace_job(n, tmp_path, mode="verify")) for n in HONEST]
    pool.close(cancel=True)
    for f in futures:
        assert f.done()
        try:
            assert f.result().passed
        except CancelledError:
            pass
    assert any(f.cancelled() for f in futures)
    with pytest.raises(JudgeError, match="closed"):
        pool.submit(workspace_job("cpu_scale_relu", tmp_path))


def test_inline_executor_judges_in_submit(root: Path) -> None:
    with InlineExecutor(small_judge(root)) as ex:
        future = ex.submit(JudgeJob(cases.small_task(), solution=cases.SYNTAX_ERROR))
        assert future.done() and not future.result().compiled and "SyntaxError" in future.result().compile_log


def test_executor_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="'inline', 'local', 'ray'"):
        KernelEnvConfig(executor="gpu")
    with pytest.raises(ConfigError, match="unknown executor setting"):
        KernelEnvConfig(executor={"kind": "local", "lane": 2})
    os.environ["CUDA_GYM_EXECUTOR"] = "threads"
    try:
        with pytest.raises(ConfigError, match="CUDA_GYM_EXECUTOR"):
            ExecutorConfig.resolve(None)
    finally:
        del os.environ["CUDA_GYM_EXECUTOR"]
    assert ExecutorConfig.resolve("local").kind == "local" and ExecutorConfig.resolve(None).kind == "inline"
    with pytest.raises(ConfigError, match="devices"):
        LocalGPUPool({"device": "cpu"}, devices=["cuda:0"])
    with pytest.raises(ConfigError, match="exactly one"):
        JudgeJob("builtin/scale_add_relu")


@pytest.mark.slow
def test_vector_env_subprocesses_share_the_parents_pool(root: Path) -> None:
    """make_vec's async workers judge through the pool the parent serves: one lane set, two processes."""
    files = {str(p.relative_to(DEMO)): p.read_text() for p in sorted(DEMO.rglob("*")) if p.is_file() and p.name != "task.txt"}
    answer = format_solution(files)
    judge = {k: v for k, v in small_judge(root).__dict__.items() if k in ("device", "correctness_trials", "timed_calls",
             "warmup", "compile_baseline", "cache_judgements", "noise_iqr", "cache_dir")}
    envs = gym.make_vec("CpuKernelSingleTurn-Builtin-v0", num_envs=2, vectorization_mode="async",
                        task_ids=["builtin/scale_add_relu"], judge=judge,
                        executor={"kind": "local", "lanes": 1, "warm_servers": 1})
    try:
        served = [v for v in shared._REGISTRY.values() if v[0] == os.getpid()]
        assert len(served) == 1 and served[0][2] is not None  # the parent made the pool and serves it
        pool = served[0][1]
        assert isinstance(pool, LocalGPUPool)
        envs.reset(seed=0)
        _, rewards, terminated, _, infos = envs.step([answer, answer])
        assert list(terminated) == [True, True] and all(r >= 1 for r in rewards), infos
        assert sum(lane.done for lane in pool.lanes) == 2  # both subprocesses' jobs ran on the parent's lane
        # one lane for two jobs: each step reports how long its job waited for it (a trainer logs it)
        assert all(w >= 0.0 for w in infos["judge_queue_wait_s"]) and max(infos["judge_queue_wait_s"]) > 0.0
    finally:
        envs.close()
        shutdown_executors()
    assert shared.ADDRESS_ENV not in os.environ
    shutil.rmtree(root / "jobs", ignore_errors=True)


def test_a_packed_job_carries_files_only_and_refuses_a_workspace_too_large(tmp_path: Path, monkeypatch) -> None:
    """``JudgeJob.pack`` (the Ray executor's jobs) walks any depth, leaves links, FIFOs and ``__pycache__``
    out, and refuses more bytes than a job carries as the agent's doing (``WorkspaceRefusedError``: a
    submit's failed build), never as a configuration error."""
    from cuda_gym.errors import WorkspaceRefusedError
    from cuda_gym.executors import job as job_module
    from cuda_gym.trees import remove_tree

    root = tmp_path / "ws"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    for _ in range(1200):  # deeper than Path.rglob could walk in Python 3.11
        os.mkdir("d", dir_fd=fd)
        fd, old = os.open("d", os.O_RDONLY, dir_fd=fd), fd
        os.close(old)
    os.close(os.open("x.py", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    os.close(fd)
    (root / "model_new.py").write_text("ok\n")
    (root / "link.py").symlink_to("/etc/hostname")
    os.mkfifo(root / "fifo")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "m.pyc").write_bytes(b"\0")
    try:
        packed = JudgeJob(task="builtin/fused_bias_gelu", workspace=str(root)).pack()
        names = [rel for rel, _ in packed.files]
        assert names == sorted(["model_new.py", "/".join(["d"] * 1200) + "/x.py"]), names[:3]
        monkeypatch.setattr(job_module, "PACK_LIMIT_BYTES", 2)
        with pytest.raises(WorkspaceRefusedError, match="more than 2 bytes"):
            JudgeJob(task="builtin/fused_bias_gelu", workspace=str(root)).pack()
    finally:
        remove_tree(root)  # pytest's own clean-up of old temp folders uses shutil.rmtree

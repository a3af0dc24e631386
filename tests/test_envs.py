"""KernelEnv, SingleTurnKernelEnv and the registered ids: spaces, checker, episodes, vector envs."""

from __future__ import annotations

import math
import string

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import cuda_gym
from cuda_gym.envs import (
    ConfigError,
    EpisodeOverError,
    KernelEnv,
    PrintableText,
    SingleTurnKernelEnv,
    SolutionFormatError,
    env_ids,
    format_solution,
    parse_solution,
)
from env_helpers import CPU_ID, ENV_KWARGS, HACK, HONEST, TASK_ID, call, play, write_all

# --- registration and configuration (no episode) ---------------------------------------------------


def test_every_id_is_registered_nondeterministic_with_its_device() -> None:
    ids = env_ids()
    assert {"CudaKernel-L1-v0", "CudaKernel-L4-v0", "CudaKernel-Ops6K-v0", "CudaKernel-Builtin-v0",
            "CudaKernelSingleTurn-L2-v0", "CpuKernel-Builtin-v0"} <= set(ids)
    for env_id in ids:
        spec = gym.spec(env_id)
        assert spec.nondeterministic
        assert spec.kwargs["device"] == ("cpu" if env_id.startswith("Cpu") else "cuda")
        assert spec.max_episode_steps == (None if "SingleTurn" in env_id else 200)
    assert gym.spec("CudaKernel-L3-v0").kwargs["level"] == 3
    assert gym.spec("CpuKernel-Builtin-v0").kwargs["size"] == "small"
    cuda_gym.envs.register_envs()  # idempotent: no error, no duplicate
    assert len([k for k in gym.registry if k in ids]) == len(ids)


def test_bad_settings_say_what_is_valid() -> None:
    with pytest.raises(ConfigError, match="valid settings"):
        gym.make(CPU_ID, max_turn=3)
    with pytest.raises(ConfigError, match="milestone"):
        KernelEnv(device="cpu", size="small", reward="fastest")
    with pytest.raises(ConfigError, match="device"):
        KernelEnv(device="tpu")
    with pytest.raises(ConfigError, match="max_turns"):
        KernelEnv(device="cpu", size="small", max_turns=0)


def test_solution_format_round_trips_and_reads_headings() -> None:
    files = {"kernels/a.cu": "__global__ void k() {}\n", "model_new.py": "x = '```'\n"}
    assert parse_solution(format_solution(files)).files == files
    text = "I will fuse.\n### kernels/b.cpp\n```cpp\nint f();\n```\n**model_new.py**\n```python\nimport x\n```\n"
    assert parse_solution(text).files == {"kernels/b.cpp": "int f();\n", "model_new.py": "import x\n"}
    single = parse_solution("Here:\n```python\nclass ModelNew:\n    pass\n```")
    assert single.single_file == "class ModelNew:\n    pass\n" and not single.files
    with pytest.raises(SolutionFormatError, match="fenced block"):
        parse_solution("no code at all")
    with pytest.raises(SolutionFormatError, match="two blocks"):
        parse_solution("```cpp a.cpp\n1\n```\n```cpp a.cpp\n2\n```")


# --- check_env: every id that runs here, without a GPU ----------------------------------------------


@pytest.mark.parametrize("env_id", ["CpuKernel-Builtin-v0", "CpuKernelSingleTurn-Builtin-v0",
                                    "CudaKernel-Builtin-v0", "CudaKernelSingleTurn-Builtin-v0"])
def test_check_env_passes_on_builtin_ids(env_id: str) -> None:
    env = gym.make(env_id)
    try:
        check_env(env.unwrapped)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ["CudaKernel-L1-v0", "CudaKernel-L2-v0", "CudaKernel-L3-v0",
                                    "CudaKernel-Ops6K-v0", "CudaKernelSingleTurn-L1-v0"])
def test_check_env_passes_on_data_set_ids(env_id: str, data_dir) -> None:
    env = gym.make(env_id, data_path=str(data_dir))
    try:
        check_env(env.unwrapped)
    finally:
        env.close()


def test_check_env_step_determinism_without_a_spec() -> None:
    # Without a spec (not made by gym.make) the checker also compares two seeded runs step by step.
    for cls in (KernelEnv, SingleTurnKernelEnv):
        env = cls(device="cpu", size="small", render_mode="ansi")
        try:
            check_env(env)
        finally:
            env.close()


# --- reset, bad input, render, close -----------------------------------------------------------------


def test_reset_gives_the_prompt_tools_and_a_seeded_task() -> None:
    env = gym.make(CPU_ID)
    try:
        obs, info = env.reset(seed=7)
        assert env.observation_space.contains(obs)
        task = env.unwrapped.task
        assert info["task_id"] == task.id and info["turn"] == 0 and info["max_turns"] == 200
        assert task.code in obs and "SKILL.md" in obs and "<tool_call>" in obs
        names = {tool["function"]["name"] for tool in info["tools"]}
        assert {"bash", "write_file", "compile", "verify", "profile", "submit"} <= names
        again, _ = env.reset(seed=7)
        assert env.unwrapped.task.id == task.id and again == obs
        ids = {env.reset(seed=s)[1]["task_id"] for s in range(12)}
        assert len(ids) > 1  # the seed picks among the builtin tasks
        _, pinned = env.reset(options={"task_id": TASK_ID})
        assert pinned["task_id"] == TASK_ID
    finally:
        env.close()


def test_bad_actions_give_error_observations_and_ending_is_enforced() -> None:
    env = gym.make(CPU_ID, task_ids=[TASK_ID], max_turns=4, render_mode="ansi")
    try:
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step("please compile my code")
        assert reward == 0 and not terminated and not truncated
        assert info["parse_ok"] is False and obs.startswith("Error")
        obs, _, _, _, info = env.unwrapped.step({"name": "compile"})  # not a str
        assert info["parse_ok"] is False and "must be a str" in obs
        obs, _, _, _, info = env.step(call("read_file", path="../../etc/passwd"))
        assert info["parse_ok"] is True and info["tool_ok"] is False and "Error" in obs
        assert not env.unwrapped._done
        # The fourth call is the last: the workspace (here the PyTorch hack) is judged as it is.
        obs, reward, terminated, truncated, info = env.step(write_all(HACK))
        assert truncated and not terminated and info["final_eval"] is True
        assert reward == info["milestone"] == -1 and "final judgement" in obs
        with pytest.raises(EpisodeOverError, match="reset"):
            env.unwrapped.step(call("compile"))
        text = env.render()
        assert "please compile my code" in text and "final judgement" in text
    finally:
        env.close()


def test_close_removes_the_workspace_unless_kept(tmp_path) -> None:
    env = KernelEnv(device="cpu", size="small", workspace_dir=tmp_path / "eps")
    env.reset(seed=0)
    root = env.workspace.root
    assert (root / "model.py").is_file()
    env.reset(seed=1)  # the previous episode's directory goes at reset
    assert not root.exists()
    root = env.workspace.root
    env.close()
    env.close()
    assert not root.exists()
    kept = KernelEnv(device="cpu", size="small", workspace_dir=tmp_path / "eps", keep_workspace=True)
    kept.reset(seed=0)
    root = kept.workspace.root
    kept.close()
    assert (root / "model.py").is_file()


# --- whole episodes on the CPU device (real build, real judge) ---------------------------------------


def test_honest_episode_scores_at_least_one() -> None:
    env = gym.make(CPU_ID, **ENV_KWARGS)
    try:
        actions = [call("write_file", path=p, content=c) for p, c in HONEST.files.items()]
        actions += [call("compile"), call("verify"), call("submit")]
        total, info, steps = play(env, actions, seed=0)
        compile_info = steps[len(HONEST.files)][4]
        assert compile_info["tool"] == "compile" and compile_info["compiled"] is True
        verify_obs, verify_reward, _, _, verify_info = steps[-2]
        assert verify_reward == 0 and verify_info["correct"] is True
        _, reward, terminated, truncated, info = steps[-1]
        assert terminated and not truncated
        assert info["final_eval"] and info["submitted"] and info["passed"]
        assert reward == info["milestone"] >= 1 and total == reward
        assert info["speedup_vs_eager"] > 0
    finally:
        env.close()


def test_pytorch_compute_hack_scores_minus_one() -> None:
    env = gym.make(CPU_ID, **ENV_KWARGS)
    try:
        total, info, steps = play(env, [write_all(HACK), call("submit")], seed=0)
        obs = steps[-1][0]
        assert total == -1 and info["milestone"] == -1 and info["passed"] is False
        assert info["violations"] >= 1 and "torch-compute" in info["violation"]
        assert "torch-compute" in obs
    finally:
        env.close()


def test_turn_limit_runs_the_final_judgement() -> None:
    env = gym.make(CPU_ID, task_ids=[TASK_ID], max_turns=2)
    try:
        total, info, steps = play(env, [write_all(HONEST.files), call("compile"), call("compile")], seed=0)
        assert len(steps) == 2
        _, reward, terminated, truncated, info = steps[-1]
        assert truncated and not terminated and info["final_eval"] and not info["submitted"]
        assert reward == info["milestone"] >= 1
    finally:
        env.close()


def test_speedup_reward_is_selectable() -> None:
    env = gym.make(CPU_ID, reward="log_speedup", **ENV_KWARGS)
    try:
        total, info, _ = play(env, [write_all(HONEST.files), call("submit")], seed=0)
        assert info["passed"] is True
        speedup = info["speedup_vs_compile"]
        expected = math.log(speedup) if math.isfinite(speedup) else -1.0
        assert total == pytest.approx(expected)
    finally:
        env.close()


def test_single_turn_episode_judges_the_answer() -> None:
    env = gym.make("CpuKernelSingleTurn-Builtin-v0", task_ids=[TASK_ID])
    try:
        obs, info = env.reset(seed=0)
        assert "fenced block" in obs
        obs, reward, terminated, truncated, info = env.step("My answer:\n" + format_solution(HONEST.files))
        assert terminated and not truncated and info["solution_form"] == "files"
        assert reward == info["milestone"] >= 1
        env.reset(seed=0)
        obs, reward, terminated, _, info = env.step("I don't know")
        assert terminated and reward == -1 and info["parse_ok"] is False and "fenced block" in obs
        env.reset(seed=0)
        _, reward, _, _, info = env.step(format_solution({"model.py": "import os\n"}))
        assert reward == -1 and info["parse_ok"] is False
    finally:
        env.close()


def test_single_turn_refuses_an_aliased_path_to_a_protected_file() -> None:
    env = gym.make("CpuKernelSingleTurn-Builtin-v0", task_ids=[TASK_ID])
    try:
        env.reset(seed=0)
        model = env.unwrapped.workspace.root / "model.py"
        before = model.read_text()
        obs, reward, terminated, _, info = env.step(format_solution({"kernels/../model.py": "import os\n"}))
        assert terminated and reward == -1 and info["parse_ok"] is False
        assert "kernels/../model.py is protected infrastructure" in obs
        assert model.read_text() == before
    finally:
        env.close()


def test_judgement_cache_is_on_by_default_and_can_be_switched_off() -> None:
    on = gym.make(CPU_ID, **ENV_KWARGS)
    off = gym.make(CPU_ID, judge={"cache_judgements": False}, **ENV_KWARGS)
    try:
        assert on.unwrapped.judge.config.cache_judgements is True
        assert on.unwrapped.judge.config.device == "cpu"
        for _ in range(2):  # an identical earlier submission is answered from the cache
            _, info, _ = play(on, [write_all(HACK), call("submit")], seed=0)
        assert info["judge_cached"] is True and info["milestone"] == -1
        assert off.unwrapped.judge.config.cache_judgements is False
        _, info, _ = play(off, [write_all(HACK), call("submit")], seed=0)
        assert info["judge_cached"] is False and info["milestone"] == -1
    finally:
        on.close()
        off.close()


# --- vector envs --------------------------------------------------------------------------------------


@pytest.mark.parametrize("vector_kwargs", [None, {"shared_memory": False}])
def test_async_vector_env_returns_current_distinct_strings(vector_kwargs) -> None:
    envs = gym.make_vec(CPU_ID, 2, vectorization_mode="async", vector_kwargs=vector_kwargs, max_turns=4)
    try:
        obs, info = envs.reset(seed=3, options=None)
        assert isinstance(obs, tuple) and len(obs) == 2 and all(isinstance(o, str) for o in obs)
        tasks = [str(t) for t in info["task_id"]]
        for o, task_id in zip(obs, tasks):
            assert f"Task {task_id}:" in o
        obs, rewards, terminated, truncated, info = envs.step(
            (call("read_file", path="model.py"), call("glob", pattern="*.md")))
        assert "class Model" in obs[0] and "SKILL.md" in obs[1] and obs[0] != obs[1]
        obs2, *_ = envs.step((call("glob", pattern="*.md"), call("read_file", path="model.py")))
        assert "SKILL.md" in obs2[0] and "class Model" in obs2[1]
        assert list(info["turn"]) == [1, 1]
    finally:
        envs.close()


def test_sync_vector_env_and_printable_space() -> None:
    space = PrintableText(100)
    assert space.contains("") and space.contains("a b\n\t{}") and not space.contains("\u00e9")
    assert set(space.character_set) == set(string.printable)
    envs = gym.make_vec(CPU_ID, 2, vectorization_mode="sync")
    try:
        obs, info = envs.reset(seed=[0, 5])
        assert np.all(info["_task_id"]) and all(isinstance(o, str) for o in obs)
    finally:
        envs.close()

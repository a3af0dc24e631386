"""The TRL adapter: TRL's tool-schema extraction accepts every method; episodes on the CPU device."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator

import pytest
from transformers.utils import get_json_schema

from cuda_gym.adapters.trl import CudaKernelToolEnv
from cuda_gym.errors import EpisodeOverError, ToolError
from cuda_gym.tools import TOOLS
from env_helpers import CPU_ID, ENV_KWARGS, HACK, HONEST, TASK_ID


def trl_tool_methods(env: object) -> dict[str, object]:
    """The tools TRL's GRPOTrainer takes from an environment instance: every public function of its
    class but ``reset`` and ``get_reward`` (trl 1.16 ``_generate_and_score_completions``)."""
    return {name: getattr(env, name) for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")}


@pytest.fixture(scope="module")
def env() -> Iterator[CudaKernelToolEnv]:
    instance = CudaKernelToolEnv(env_id=CPU_ID, **ENV_KWARGS)  # reused across episodes, as TRL does
    yield instance
    instance.session.close()


def test_the_constructor_is_cheap_and_every_tool_has_a_schema_trl_accepts() -> None:
    env = CudaKernelToolEnv()
    assert env.session.env is None  # nothing made before the first reset
    methods = trl_tool_methods(env)
    assert set(methods) == set(TOOLS)
    assert inspect.iscoroutinefunction(CudaKernelToolEnv.get_reward)
    for name, method in methods.items():
        schema = get_json_schema(method)  # what transformers' chat templates (and so TRL) call
        function = schema["function"]
        assert function["name"] == name
        assert function["description"] == TOOLS[name].description
        params = TOOLS[name].parameters
        assert set(function["parameters"]["properties"]) == set(params["properties"]), name
        assert set(function["parameters"].get("required", [])) == set(params["required"]), name


@pytest.mark.slow  # the first judgement of a run measures the baselines (minutes on 2 cores)
def test_an_honest_episode_reaches_reward_1_and_invalid_calls_raise(env: CudaKernelToolEnv) -> None:
    row = {"prompt": [{"role": "user", "content": "Optimise this program."}], "task_id": TASK_ID}
    prompt = env.reset(**row)
    assert TASK_ID in prompt and "model.py" in prompt
    assert "class Model" in env.read_file("model.py")
    with pytest.raises(ToolError, match="protected|read-only"):
        env.write_file("model.py", "x = 1\n")
    with pytest.raises(ToolError, match="nope.txt"):
        env.read_file("nope.txt")
    for path, content in HONEST.files.items():
        env.write_file(path, content)
    assert "compile: OK" in env.compile()
    report = env.submit()
    assert "Milestone reward" in report
    reward = asyncio.run(env.get_reward())
    assert reward >= 1 and env.session.milestone == reward
    with pytest.raises(EpisodeOverError):
        env.bash("ls")


@pytest.mark.slow  # the first judgement of a run measures the baselines (minutes on 2 cores)
def test_a_hack_never_submitted_is_judged_by_get_reward_to_minus_1(env: CudaKernelToolEnv) -> None:
    env.reset(task_id=TASK_ID)
    for path, content in HACK.items():
        env.write_file(path, content)
    assert asyncio.run(env.get_reward()) == -1.0  # no submit: get_reward runs the final judgement
    assert env.session.milestone == -1
    assert env.session.transcript[-2]["content"].endswith('{"name": "submit", "arguments": {}}\n</tool_call>')


def test_a_file_name_that_is_not_utf8_is_the_agents_minus_1(env: CudaKernelToolEnv) -> None:
    """Red-team D's A2 through TRL: compile refuses the workspace (a ToolError TRL shows the model) and
    get_reward's final judgement is -1, not a JudgeError out of the trainer."""
    env.reset(task_id=TASK_ID)
    env.bash("touch kernels/$'\\xfd'.cpp")
    with pytest.raises(ToolError, match="not valid UTF-8"):
        env.compile()
    assert asyncio.run(env.get_reward()) == -1.0 and env.session.milestone == -1

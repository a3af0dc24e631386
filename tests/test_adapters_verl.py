"""The verl adapter: the tool-config YAML read by verl's own loader, the tools driven through their
async API (BaseTool's lifecycle, and the per-call one of verl 0.9's ToolAgentLoop) on the CPU device."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import ToolResponse
from verl.tools.tool_registry import initialize_tools_from_config

from cuda_gym.adapters import verl as adapter
from cuda_gym.tools import TOOLS
from env_helpers import CPU_ID, ENV_KWARGS, HACK, HONEST, TASK_ID


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, BaseTool]]:
    """The tools as verl builds them: from the YAML the adapter writes, through verl's own loader."""
    path = adapter.write_tool_config(tmp_path_factory.mktemp("verl") / "tools.yaml", CPU_ID, **ENV_KWARGS)
    loaded = initialize_tools_from_config(str(path))
    yield {tool.name: tool for tool in loaded}
    adapter.EPISODES.close_all()


def test_the_yaml_names_every_tool_and_verl_loads_it(tools: dict[str, BaseTool], tmp_path: Path) -> None:
    assert list(tools) == list(TOOLS)
    for name, tool in tools.items():
        assert isinstance(tool, adapter.TOOL_CLASSES[name])
        assert tool.get_openai_tool_schema().function.name == name
        assert (tool.env_id, tool.env_kwargs) == (CPU_ID, ENV_KWARGS)
    assert adapter.tool_config(tools=["submit"])["tools"][0]["class_name"] == "cuda_gym.adapters.verl.SubmitTool"


async def _write(tools: dict[str, BaseTool], instance: str, files: dict[str, str], **kwargs: Any) -> None:
    for path, content in files.items():
        response, reward, metrics = await tools["write_file"].execute(instance, {"path": path, "content": content},
                                                                      **kwargs)
        assert isinstance(response, ToolResponse) and reward == 0.0 and metrics["tool_ok"], response.text


@pytest.mark.slow  # the first judgement of a run measures the baselines (minutes on 2 cores)
def test_an_honest_episode_reaches_reward_1(tools: dict[str, BaseTool]) -> None:
    async def episode() -> tuple[str, float, float]:
        instance, _ = await tools["write_file"].create("trajectory-honest", task_id=TASK_ID)
        for name in ("compile", "submit"):
            await tools[name].create(instance, task_id=TASK_ID)  # one instance id for every tool of the trajectory
        await _write(tools, instance, HONEST.files)
        compiled, _, _ = await tools["compile"].execute(instance, {})
        report, step_reward, metrics = await tools["submit"].execute(instance, {})
        assert step_reward == 0.0 and metrics["final_eval"] and "compile: OK" in (compiled.text or "")
        reward = await tools["submit"].calc_reward(instance)
        again = await tools["compile"].execute(instance, {})  # after the end: an error text, no exception
        for name in ("write_file", "compile", "submit"):
            await tools[name].release(instance)
        return report.text or "", reward, again[0].text or ""

    report, reward, again = asyncio.run(episode())
    assert "Milestone reward" in report and reward >= 1
    assert again.startswith("Error: the episode is over")


@pytest.mark.slow  # the first judgement of a run measures the baselines (minutes on 2 cores)
def test_a_hack_is_judged_by_calc_reward_to_minus_1(tools: dict[str, BaseTool]) -> None:
    async def episode() -> float:
        instance, _ = await tools["write_file"].create(None, create_kwargs={"task_id": TASK_ID})
        await _write(tools, instance, HACK)
        reward = await tools["write_file"].calc_reward(instance)  # no submit: the final judgement runs now
        await tools["write_file"].release(instance)
        return reward

    assert asyncio.run(episode()) == -1.0


class TrajectoryData:
    """What verl 0.9's ToolAgentLoop hands ``execute`` as ``agent_data`` and what the tools use of it
    (``request_id``, ``tools_kwargs``, ``extra_fields``). verl's own ``AgentData`` cannot be imported
    here: its module needs hydra-core, whose antlr pin conflicts with this machine's antlr."""

    def __init__(self, request_id: str, task_id: str) -> None:
        self.request_id = request_id
        self.tools_kwargs = {name: {"create_kwargs": {"task_id": task_id}} for name in TOOLS}
        self.extra_fields: dict[str, Any] = {}


@pytest.mark.slow  # the first judgement of a run measures the baselines (minutes on 2 cores)
def test_verls_agent_loop_lifecycle_one_instance_per_call_keeps_the_trajectorys_workspace(
        tools: dict[str, BaseTool]) -> None:
    data = TrajectoryData("request-0", TASK_ID)

    async def call(name: str, arguments: dict[str, Any]) -> str:
        # As ToolAgentLoop._call_tool: create (fresh id) -> execute(agent_data=...) -> release, per call.
        tool = tools[name]
        instance, _ = await tool.create(create_kwargs=data.tools_kwargs[name]["create_kwargs"])
        try:
            response, reward, _ = await tool.execute(instance, arguments, agent_data=data)
            assert reward == 0.0
        finally:
            await tool.release(instance)
        return response.text or ""

    async def episode() -> list[str]:
        texts = [await call("write_file", {"path": p, "content": c}) for p, c in HONEST.files.items()]
        return [*texts, await call("glob", {"pattern": "kernels/*"}), await call("submit", {})]

    texts = asyncio.run(episode())
    assert all(name.split("/")[-1] in texts[-2] for name in HONEST.files if name.startswith("kernels/"))
    assert "Milestone reward" in texts[-1]
    assert data.extra_fields[adapter.REWARD_KEY] >= 1 and data.extra_fields[adapter.MILESTONE_KEY] >= 1
    # verl hands the trajectory's extra_fields to the reward function as extra_info:
    assert adapter.compute_score("cuda_gym", "", "", extra_info=dict(data.extra_fields)) >= 1
    assert adapter.compute_score("cuda_gym", "", "", extra_info={}) == adapter.UNJUDGED_REWARD


def test_dataset_rows_carry_the_prompt_and_the_task_for_every_tool() -> None:
    (row,) = adapter.dataset_rows([TASK_ID], CPU_ID, **ENV_KWARGS)
    assert TASK_ID in row["prompt"][0]["content"] and row["agent_name"] == "tool_agent"
    assert row["extra_info"]["tools_kwargs"]["submit"] == {"create_kwargs": {"task_id": TASK_ID}}

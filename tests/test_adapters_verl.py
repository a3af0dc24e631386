"""The verl adapter: the tool-config YAML read by verl's own loader, the tools driven through their
async API (BaseTool's lifecycle, and the per-call one of verl 0.9's ToolAgentLoop) on the CPU device."""

from __future__ import annotations

import asyncio
import time
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


OTHER_TASK = "builtin/softmax"


async def _agent_loop_call(tools: dict[str, BaseTool], data: Any, name: str, arguments: dict[str, Any]) -> str:
    """One call as verl 0.9's ToolAgentLoop._call_tool makes it: create (fresh id) -> execute(agent_data) -> release."""
    tool = tools[name]
    instance, _ = await tool.create(create_kwargs=data.tools_kwargs[name]["create_kwargs"])
    try:
        response, _, _ = await tool.execute(instance, arguments, agent_data=data)
    finally:
        await tool.release(instance)
    return response.text or ""


def _workspace_of(data: Any) -> Path:
    return adapter.EPISODES.open[data.extra_fields[adapter.EPISODE_KEY]].session.env.unwrapped.workspace.root


class RequestOnly:
    """An agent_data without extra_fields (the fallback: episodes keyed by request_id)."""

    def __init__(self, request_id: str, task_id: str) -> None:
        self.request_id = request_id
        self.tools_kwargs = {name: {"create_kwargs": {"task_id": task_id}} for name in TOOLS}


def test_a_reused_request_id_starts_a_fresh_episode(tools: dict[str, BaseTool]) -> None:
    """Red-team D's A4: under full_determinism verl's request ids are det-<index> every batch; a new trajectory
    took over the old unfinished episode (another task's workspace, and its reward)."""
    kernels = [p for p in HONEST.files if p.startswith("kernels/")]

    async def run() -> tuple[str, ...]:
        first = TrajectoryData("det-0", TASK_ID)  # batch 1: writes the solution, ends unjudged
        for path, content in HONEST.files.items():
            await _agent_loop_call(tools, first, "write_file", {"path": path, "content": content})
        other = TrajectoryData("det-0", OTHER_TASK)  # batch 2, same index: another task
        same = TrajectoryData("det-0", TASK_ID)  # batch 3, same index and task: still not the first's workspace
        bare_a, bare_b = RequestOnly("det-1", TASK_ID), RequestOnly("det-1", OTHER_TASK)
        await _agent_loop_call(tools, bare_a, "write_file", {"path": "notes.txt", "content": "a"})
        return (await _agent_loop_call(tools, other, "read_file", {"path": "model.py"}),
                await _agent_loop_call(tools, same, "glob", {"pattern": "kernels/*"}),
                await _agent_loop_call(tools, first, "glob", {"pattern": "kernels/*"}),
                await _agent_loop_call(tools, bare_b, "read_file", {"path": "model.py"}),
                await _agent_loop_call(tools, bare_b, "glob", {"pattern": "*.txt"}))

    other_model, same_kernels, first_kernels, bare_model, bare_notes = asyncio.run(run())
    from cuda_gym.tasks import get_task

    softmax, own = get_task(OTHER_TASK, size="small").code, get_task(TASK_ID, size="small").code
    assert softmax.splitlines()[0] in other_model and own.splitlines()[0] not in other_model, other_model
    assert not any(k.split("/")[-1] in same_kernels for k in kernels), same_kernels
    assert all(k.split("/")[-1] in first_kernels for k in kernels), first_kernels  # its own episode goes on
    assert softmax.splitlines()[0] in bare_model and "notes.txt" not in bare_notes, bare_notes


def test_idle_and_surplus_episodes_are_closed_and_share_one_judge(tools: dict[str, BaseTool]) -> None:
    """An unfinished trajectory (verl tells its tools nothing when it cuts one) keeps no workspace past the
    idle timeout or the cap, and no episode holds a judge (a reference worker) of its own."""
    adapter.EPISODES.configure(max_open=2, idle_timeout_s=1.0)
    try:
        trajectories = [TrajectoryData(f"request-{i}", TASK_ID) for i in range(4)]

        async def touch(data: Any) -> str:
            return await _agent_loop_call(tools, data, "write_file", {"path": "notes.txt", "content": "x"})

        asyncio.run(touch(trajectories[0]))
        idle = _workspace_of(trajectories[0])
        time.sleep(1.2)
        asyncio.run(touch(trajectories[1]))  # any later call closes what has been idle too long
        assert not idle.exists() and idle.parent != _workspace_of(trajectories[1]).parent
        late = asyncio.run(touch(trajectories[0]))
        assert late.startswith("Error: this trajectory's episode is over (closed after 1 s without a tool call)"), late
        assert adapter.compute_score("cuda_gym", "", "", extra_info=trajectories[0].extra_fields) == -1
        asyncio.run(touch(trajectories[2]))
        oldest = _workspace_of(trajectories[1])
        judges = {id(adapter.EPISODES.open[k].session.env.unwrapped.judge) for k in adapter.EPISODES.open}
        asyncio.run(touch(trajectories[3]))  # a third open episode: the least recently used is closed
        assert not oldest.exists() and len(adapter.EPISODES.open) == 2
        judges |= {id(adapter.EPISODES.open[k].session.env.unwrapped.judge) for k in adapter.EPISODES.open}
        assert len(judges) == 1
        assert not any(e.session.env.unwrapped._owns_judge for e in adapter.EPISODES.open.values())
    finally:
        adapter.EPISODES.configure(max_open=adapter.MAX_OPEN_EPISODES, idle_timeout_s=adapter.IDLE_TIMEOUT_S)


def test_a_file_name_that_is_not_utf8_is_judged_by_calc_reward_to_minus_1(tools: dict[str, BaseTool]) -> None:
    async def episode() -> tuple[str, float]:
        instance, _ = await tools["bash"].create(None, create_kwargs={"task_id": TASK_ID})
        await tools["bash"].execute(instance, {"command": "touch $'\\xff'"})
        verify, _, _ = await tools["verify"].execute(instance, {})
        reward = await tools["bash"].calc_reward(instance)  # the final judgement: -1, no JudgeError
        await tools["bash"].release(instance)
        return verify.text or "", reward

    verify, reward = asyncio.run(episode())
    assert verify.startswith("Error: the file name \\xff is not valid UTF-8") and reward == -1.0

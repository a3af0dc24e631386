"""verl tools of the kernel env: one ``BaseTool`` per env tool, the tool-config YAML, a reward function."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar
from uuid import uuid4

from omegaconf import OmegaConf
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from cuda_gym.adapters.session import DEFAULT_ENV_ID, EnvSession, ToolStep, check_tool
from cuda_gym.errors import EpisodeOverError
from cuda_gym.tools import TOOLS, tool_schemas

logger = logging.getLogger(__name__)

REWARD_KEY = "cuda_gym_reward"
"""``agent_data.extra_fields`` key of the terminal reward (verl hands it to the reward function's ``extra_info``)."""
MILESTONE_KEY = "cuda_gym_milestone"
"""``agent_data.extra_fields`` key of the milestone (-1, 1, 2, 3) of the final judgement."""
UNJUDGED_REWARD = -1.0
"""What :func:`compute_score` gives a trajectory that ended (length or turn limit) before any judgement."""
MAX_OPEN_EPISODES = 256
"""Open episodes kept per process; beyond it the least recently used one is closed."""


class _Episodes:
    """The episodes of this process, shared by every tool class: instance id -> episode.

    Two lifecycles lead here. The ``BaseTool`` contract (one ``create`` per trajectory, the same
    instance id for every call, ``calc_reward``, ``release``) keys an episode by its instance id. verl
    0.9's ``ToolAgentLoop`` instead calls ``create`` / ``execute`` / ``release`` around every single call,
    with a fresh instance id each time, and hands ``execute`` its ``agent_data``: the episode is then
    keyed by ``agent_data.request_id``, the trajectory, and ends at the env's final judgement.
    Finished envs are kept and reused by later episodes (their judge and build cache with them).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tasks: dict[str, str | None] = {}
        """Each live instance id's task id (from ``create``)."""
        self.keys: dict[str, str] = {}
        """Instance id -> the episode key it plays in."""
        self.open: OrderedDict[str, EnvSession] = OrderedDict()
        self.idle: dict[str, list[EnvSession]] = {}

    def create(self, instance_id: str, task_id: str | None) -> None:
        with self.lock:
            self.tasks[instance_id] = task_id

    def session(self, instance_id: str, agent_data: Any, env_id: str, env_kwargs: dict[str, Any]) -> EnvSession:
        """The episode of ``instance_id`` (or of ``agent_data``'s trajectory), started on first use."""
        trajectory = getattr(agent_data, "request_id", None)
        key = f"trajectory:{trajectory}" if trajectory else f"instance:{instance_id}"
        with self.lock:
            self.keys[instance_id] = key
            if key in self.open:
                self.open.move_to_end(key)
                return self.open[key]
            task_id = self.tasks.get(instance_id)
            if task_id is None and agent_data is not None:
                task_id = _task_from_tools_kwargs(getattr(agent_data, "tools_kwargs", None))
            pool = self.idle.setdefault(_pool_key(env_id, env_kwargs), [])
            session = pool.pop() if pool else EnvSession(env_id, **env_kwargs)
            self.open[key] = session
            evicted = [self.open.popitem(last=False) for _ in range(max(0, len(self.open) - MAX_OPEN_EPISODES))]
            with session.claimed():  # a parallel call of the same trajectory waits for the start
                self.lock.release()
                try:
                    for old_key, old in evicted:
                        logger.warning("closing the episode %s: more than %d are open", old_key, MAX_OPEN_EPISODES)
                        old.close()
                    session.start(task_id=task_id)
                finally:
                    self.lock.acquire()
        return session

    def retire(self, key: str) -> None:
        """End the episode ``key``: its env goes back to the idle pool."""
        with self.lock:
            session = self.open.pop(key, None)
            if session is not None:
                self.idle.setdefault(_pool_key(session.env_id, session.env_kwargs), []).append(session)

    def release(self, instance_id: str) -> None:
        with self.lock:
            self.tasks.pop(instance_id, None)
            key = self.keys.pop(instance_id, None)
        if key is not None and key.startswith("instance:"):
            self.retire(key)

    def key_of(self, instance_id: str) -> str | None:
        with self.lock:
            return self.keys.get(instance_id)

    def close_all(self) -> None:
        """Close every env of this process (open and idle)."""
        with self.lock:
            sessions = list(self.open.values()) + [s for pool in self.idle.values() for s in pool]
            self.open.clear()
            self.idle.clear()
            self.keys.clear()
            self.tasks.clear()
        for session in sessions:
            session.close()


EPISODES = _Episodes()
"""This process's episodes, shared by every :class:`CudaGymTool`."""


def _pool_key(env_id: str, env_kwargs: dict[str, Any]) -> str:
    return json.dumps([env_id, env_kwargs], sort_keys=True, default=str)


def _task_from_tools_kwargs(tools_kwargs: Any) -> str | None:
    for entry in (tools_kwargs or {}).values():
        task_id = (entry or {}).get("create_kwargs", {}).get("task_id")
        if task_id:
            return str(task_id)
    return None


class CudaGymTool(BaseTool):
    """One env tool as a verl ``BaseTool``; the subclasses below are one per tool (``tool`` names it).

    ``config`` (the YAML entry's ``config``): ``env_id`` (default ``CudaKernel-Builtin-v0``) and
    ``env_kwargs`` (settings for ``gym.make``: ``KernelEnvConfig`` fields, the judge's executor...).

    * ``create(instance_id, task_id=...)`` (or ``create_kwargs={"task_id": ...}``, what verl passes from
      the row's ``extra_info.tools_kwargs``) registers the instance; its episode (a workspace of its
      own) starts on the first ``execute``.
    * ``execute(instance_id, parameters)`` plays the call as one env step and returns the tool's text
      with step reward 0, and flat metrics (``turn``, ``tool_ok``...). When the step is the final
      judgement, the terminal reward and milestone are also written to ``agent_data.extra_fields``
      (:data:`REWARD_KEY`, :data:`MILESTONE_KEY`), which verl passes to the reward function.
    * ``calc_reward(instance_id)`` returns the terminal reward (the milestone by default), judging the
      workspace first when ``submit`` never came; ``release(instance_id)`` ends the instance.
    """

    tool: ClassVar[str] = ""

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
        check_tool(self.tool)
        if tool_schema is None:
            tool_schema = OpenAIFunctionToolSchema.model_validate(_schema(self.tool))
        super().__init__(config, tool_schema)
        self.env_id = str(config.get("env_id") or DEFAULT_ENV_ID)
        self.env_kwargs = dict(config.get("env_kwargs") or {})

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        """The tool's schema (from ``cuda_gym.tools.TOOLS``)."""
        return self.tool_schema

    async def create(self, instance_id: str | None = None, task_id: str | None = None,
                     create_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """Register an instance; returns its id and an empty response."""
        instance_id = instance_id or str(uuid4())
        task = task_id or (create_kwargs or {}).get("task_id") or kwargs.get("task_id")
        EPISODES.create(instance_id, str(task) if task else None)
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
                      ) -> tuple[ToolResponse, float, dict[str, Any]]:
        """Run the call on the instance's episode: (the tool's text, 0.0, flat metrics)."""
        agent_data = kwargs.get("agent_data")
        session = await asyncio.to_thread(EPISODES.session, instance_id, agent_data, self.env_id, self.env_kwargs)
        try:
            step: ToolStep = await asyncio.to_thread(session.call, self.tool, parameters)
        except EpisodeOverError as exc:
            return ToolResponse(text=f"Error: {exc}"), 0.0, {"tool_ok": False}
        metrics = {k: v for k, v in step.info.items() if isinstance(v, (bool, int, float, str))}
        if step.done:
            if agent_data is not None and hasattr(agent_data, "extra_fields"):
                agent_data.extra_fields[REWARD_KEY] = step.reward
                agent_data.extra_fields[MILESTONE_KEY] = session.milestone
            key = EPISODES.key_of(instance_id)
            if key is not None and key.startswith("trajectory:"):
                EPISODES.retire(key)
        return ToolResponse(text=step.text), 0.0, metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The terminal reward of the instance's episode (judged now if it was not yet)."""
        session = await asyncio.to_thread(EPISODES.session, instance_id, kwargs.get("agent_data"),
                                          self.env_id, self.env_kwargs)
        step = await asyncio.to_thread(session.finish)
        return float(step.reward)

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """End the instance; an instance-keyed episode's env goes back to the pool for the next one."""
        EPISODES.release(instance_id)


def _schema(name: str) -> dict[str, Any]:
    for schema in tool_schemas():
        if schema["function"]["name"] == name:
            return schema
    raise KeyError(name)


def _tool_class(name: str) -> type[CudaGymTool]:
    title = "".join(part.capitalize() for part in name.split("_"))
    doc = f"The ``{name}`` tool (see :class:`CudaGymTool`)."
    return type(f"{title}Tool", (CudaGymTool,), {"tool": name, "__doc__": doc, "__module__": __name__})


ReadFileTool = _tool_class("read_file")
WriteFileTool = _tool_class("write_file")
EditFileTool = _tool_class("edit_file")
MultiEditTool = _tool_class("multi_edit")
GlobTool = _tool_class("glob")
GrepTool = _tool_class("grep")
BashTool = _tool_class("bash")
CompileTool = _tool_class("compile")
VerifyTool = _tool_class("verify")
ProfileTool = _tool_class("profile")
SubmitTool = _tool_class("submit")

_CLASSES = {cls.tool: cls for cls in (ReadFileTool, WriteFileTool, EditFileTool, MultiEditTool, GlobTool, GrepTool,
                                      BashTool, CompileTool, VerifyTool, ProfileTool, SubmitTool)}
TOOL_CLASSES: dict[str, type[CudaGymTool]] = {name: _CLASSES[name] for name in TOOLS}
"""The tool class of each env tool, in the env's order (a KeyError here: a new env tool needs its class)."""


def tool_config(env_id: str = DEFAULT_ENV_ID, tools: Sequence[str] | None = None, **env_kwargs: Any) -> dict[str, Any]:
    """verl's tool config (``actor_rollout_ref.rollout.multi_turn.tool_config_path``) as a dict: one
    entry per tool (``class_name``, ``config: {type: native, env_id, env_kwargs}``, ``tool_schema``)."""
    names = list(tools) if tools is not None else list(TOOLS)
    for name in names:
        check_tool(name)
    return {"tools": [
        {"class_name": f"{__name__}.{TOOL_CLASSES[name].__name__}",
         "config": {"type": "native", "env_id": env_id, "env_kwargs": dict(env_kwargs)},
         "tool_schema": _schema(name)}
        for name in names]}


def write_tool_config(path: str | Path, env_id: str = DEFAULT_ENV_ID, tools: Sequence[str] | None = None,
                      **env_kwargs: Any) -> Path:
    """Write :func:`tool_config` as YAML to ``path`` (what ``tool_config_path`` names); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create(tool_config(env_id, tools, **env_kwargs)), path)
    return path


def dataset_rows(tasks: Sequence[str], env_id: str = DEFAULT_ENV_ID, tools: Sequence[str] | None = None,
                 **env_kwargs: Any) -> list[dict[str, Any]]:
    """verl RL-dataset rows for the task ids ``tasks`` (write them to parquet with pandas): the env's prompt as the
    user message, ``agent_name: tool_agent``, and ``extra_info.tools_kwargs`` naming the task for every tool."""
    names = list(tools) if tools is not None else list(TOOLS)
    session = EnvSession(env_id, **env_kwargs)
    rows = []
    try:
        for index, task_id in enumerate(tasks):
            prompt, _ = session.start(task_id=task_id)
            create = {"create_kwargs": {"task_id": task_id}}
            rows.append({
                "data_source": "cuda_gym",
                "agent_name": "tool_agent",
                "prompt": [{"role": "user", "content": prompt}],
                "reward_model": {"style": "rule", "ground_truth": ""},
                "extra_info": {"index": index, "task_id": task_id, "need_tools_kwargs": True,
                               "tools_kwargs": {name: create for name in names}},
            })
    finally:
        session.close()
    return rows


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None,
                  **kwargs: Any) -> float:
    """verl's ``custom_reward_function``: the trajectory's terminal reward, as the tools recorded it
    (:data:`REWARD_KEY`); :data:`UNJUDGED_REWARD` when the rollout stopped before the env judged it."""
    value = (extra_info or {}).get(REWARD_KEY)
    return float(value) if value is not None else UNJUDGED_REWARD

"""verl tools of the kernel env: one ``BaseTool`` per env tool, the tool-config YAML, a reward function."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from uuid import uuid4

from omegaconf import OmegaConf
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from cuda_gym.adapters.session import DEFAULT_ENV_ID, EnvSession, ToolStep, check_tool
from cuda_gym.errors import EpisodeEndedError, EpisodeOverError
from cuda_gym.tools import TOOLS, tool_schemas

logger = logging.getLogger(__name__)

REWARD_KEY = "cuda_gym_reward"
"""``agent_data.extra_fields`` key of the terminal reward (verl hands it to the reward function's ``extra_info``)."""
MILESTONE_KEY = "cuda_gym_milestone"
"""``agent_data.extra_fields`` key of the milestone (-1, 1, 2, 3) of the final judgement."""
UNJUDGED_REWARD = -1.0
"""What :func:`compute_score` gives a trajectory that ended (length or turn limit) before any judgement."""
EPISODE_KEY = "cuda_gym_episode"
"""``agent_data.extra_fields`` key of the trajectory's episode id, set at its first tool call: verl makes one
``AgentData`` per trajectory, so the id is the trajectory's own whatever its ``request_id``."""
MAX_OPEN_EPISODES = 64
"""Open episodes kept per process (tool config ``max_open_episodes``); past it the least recently used idle one
is closed. Each holds a workspace on disk (the judge is the process's, shared): raise it for a worker that runs
more trajectories at once."""
IDLE_TIMEOUT_S = 1800.0
"""An open episode without a tool call for this long is closed (tool config ``idle_timeout_s``): verl ends a
trajectory (response length, its own turn budget) without telling its tools."""
_ENDED_KEPT = 10_000
"""Ended trajectory episodes remembered (why, and the reward), so that a late call is answered, not restarted."""


@dataclass
class _Episode:
    """One open episode: its session, the task it was started for, its last use and calls in flight."""

    session: EnvSession
    task_id: str | None
    last_used: float
    busy: int = 0


class _Episodes:
    """The episodes of this process, shared by every tool class.

    Two lifecycles lead here. The ``BaseTool`` contract (one ``create`` per trajectory, the same
    instance id for every call, ``calc_reward``, ``release``) keys an episode by its instance id. verl
    0.9's ``ToolAgentLoop`` instead calls ``create`` / ``execute`` / ``release`` around every single call,
    with a fresh instance id each time, and hands ``execute`` its ``agent_data``, one per trajectory: the
    episode is then keyed by an id the first call writes into ``agent_data.extra_fields``
    (:data:`EPISODE_KEY`), never by ``request_id``, which verl repeats every batch under
    ``rollout.full_determinism`` (``det-<index>``). Without ``extra_fields`` the key is ``request_id``, and a
    call for another task than the episode's starts a fresh episode. A trajectory episode ends at the
    env's final judgement, after :data:`IDLE_TIMEOUT_S` without a call, or when more than
    :data:`MAX_OPEN_EPISODES` are open (the least recently used idle one); its workspace is removed then.
    Every episode's env judges with the process's one judge per env setting (one reference worker, not one
    per trajectory), unless ``env_kwargs`` name a judge object or an executor of their own.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tasks: dict[str, str | None] = {}
        """Each live instance id's task id (from ``create``)."""
        self.keys: dict[str, str] = {}
        """Instance id -> the episode key it plays in."""
        self.open: OrderedDict[str, _Episode] = OrderedDict()
        self.ended: OrderedDict[str, EpisodeEndedError] = OrderedDict()
        """Trajectory keys of closed episodes -> why (bounded by ``_ENDED_KEPT``)."""
        self.judges: dict[str, Any] = {}
        """The shared judge of each env setting (``None``: the settings bring their own)."""
        self.max_open = MAX_OPEN_EPISODES
        self.idle_timeout_s = IDLE_TIMEOUT_S

    def configure(self, max_open: int | None = None, idle_timeout_s: float | None = None) -> None:
        """Set the open-episode cap and the idle timeout (from the tool config)."""
        with self.lock:
            if max_open is not None:
                self.max_open = max(1, int(max_open))
            if idle_timeout_s is not None:
                self.idle_timeout_s = float(idle_timeout_s)

    def create(self, instance_id: str, task_id: str | None) -> None:
        with self.lock:
            self.tasks[instance_id] = task_id

    def _key(self, instance_id: str, agent_data: Any) -> str:
        extra = getattr(agent_data, "extra_fields", None)
        if isinstance(extra, dict):
            if not extra.get(EPISODE_KEY):
                extra[EPISODE_KEY] = f"trajectory:{uuid4().hex}"
            return str(extra[EPISODE_KEY])
        request = getattr(agent_data, "request_id", None)
        return f"request:{request}" if request else f"instance:{instance_id}"

    def session(self, instance_id: str, agent_data: Any, env_id: str, env_kwargs: dict[str, Any]
                ) -> tuple[str, EnvSession]:
        """The episode key and session of ``instance_id`` (or of ``agent_data``'s trajectory), started on
        first use and marked busy until :meth:`done`. Raises :class:`~cuda_gym.errors.EpisodeEndedError`
        for a closed trajectory."""
        now = time.monotonic()
        with self.lock:
            task_id = self.tasks.get(instance_id)
            if task_id is None and agent_data is not None:
                task_id = _task_from_tools_kwargs(getattr(agent_data, "tools_kwargs", None))
            key = self._key(instance_id, agent_data)
            self.keys[instance_id] = key
            closing = self._expired(now)
            episode = self.open.get(key)
            if episode is not None and None not in (task_id, episode.task_id) and episode.task_id != task_id:
                # A request id reused by another trajectory (verl's full_determinism): not its episode.
                closing.append(self._end(key, f"its request id {key} was reused for task {task_id}"))
                episode = None
            if episode is None and key in self.ended:
                error = self.ended[key]
                self._close_later(closing)
                raise error
            fresh = episode is None
            if episode is None:
                session = EnvSession(env_id, **self._with_judge(env_id, env_kwargs))
                episode = self.open[key] = _Episode(session, task_id, now)
            episode.busy += 1
            episode.last_used = now
            self.open.move_to_end(key)
            closing += self._over_cap()
            session = episode.session
            if fresh:  # a parallel call of the same trajectory waits for the start (nobody holds it yet)
                session.claimed().acquire()
        try:
            self._close_later(closing)
            if fresh:
                session.start(task_id=task_id)
        except BaseException:
            self.done(key)
            raise
        finally:
            if fresh:
                session.claimed().release()
        return key, session

    def done(self, key: str) -> None:
        """A call of the episode ``key`` (from :meth:`session`) is over."""
        with self.lock:
            episode = self.open.get(key)
            if episode is not None:
                episode.busy = max(0, episode.busy - 1)
                episode.last_used = time.monotonic()

    def _expired(self, now: float) -> list[EnvSession]:
        """End the idle episodes past the timeout (lock held); their sessions, to close."""
        old = [k for k, e in self.open.items() if not e.busy and now - e.last_used > self.idle_timeout_s]
        return [self._end(k, f"closed after {self.idle_timeout_s:g} s without a tool call") for k in old]

    def _over_cap(self) -> list[EnvSession]:
        """End the least recently used idle episodes past the cap (lock held)."""
        closing = []
        for key in [k for k, e in self.open.items() if not e.busy][: max(0, len(self.open) - self.max_open)]:
            logger.warning("closing the episode %s: more than %d are open", key, self.max_open)
            closing.append(self._end(key, f"closed: more than {self.max_open} episodes were open"))
        return closing

    def _end(self, key: str, reason: str) -> EnvSession:
        """Forget the open episode ``key`` (lock held); a trajectory's is remembered as ended. Its session, to close."""
        episode = self.open.pop(key)
        if key.startswith("trajectory:"):
            self.ended[key] = EpisodeEndedError(reason, episode.session.reward)
            while len(self.ended) > _ENDED_KEPT:
                self.ended.popitem(last=False)
        return episode.session

    @staticmethod
    def _close_later(sessions: list[EnvSession]) -> None:
        """Close ``sessions`` (lock not held: removing a workspace takes a while)."""
        for session in sessions:
            try:
                session.close()
            except Exception:  # a leftover workspace must not fail another trajectory's call
                logger.exception("closing an episode failed")

    def retire(self, key: str, reason: str = "finished") -> None:
        """End the episode ``key`` now: its workspace is removed."""
        with self.lock:
            session = self._end(key, reason) if key in self.open else None
        if session is not None:
            self._close_later([session])

    def release(self, instance_id: str) -> None:
        with self.lock:
            self.tasks.pop(instance_id, None)
            key = self.keys.pop(instance_id, None)
        if key is not None and key.startswith("instance:"):
            self.retire(key)

    def key_of(self, instance_id: str) -> str | None:
        with self.lock:
            return self.keys.get(instance_id)

    def _with_judge(self, env_id: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
        """``env_kwargs`` with the process's shared judge of these settings (lock held)."""
        pool = _pool_key(env_id, env_kwargs)
        if pool not in self.judges:
            self.judges[pool] = _shared_judge(env_id, env_kwargs)
        judge = self.judges[pool]
        return env_kwargs if judge is None else {**env_kwargs, "judge": judge}

    def close_all(self) -> None:
        """Close every episode of this process and the shared judges (their reference workers)."""
        with self.lock:
            sessions = [e.session for e in self.open.values()]
            judges = [j for j in self.judges.values() if j is not None]
            self.open.clear()
            self.ended.clear()
            self.keys.clear()
            self.tasks.clear()
            self.judges.clear()
        self._close_later(sessions)
        for judge in judges:
            judge.close()


EPISODES = _Episodes()
"""This process's episodes, shared by every :class:`CudaGymTool`."""


def _pool_key(env_id: str, env_kwargs: dict[str, Any]) -> str:
    return json.dumps([env_id, env_kwargs], sort_keys=True, default=str)


def _shared_judge(env_id: str, env_kwargs: dict[str, Any]) -> Any:
    """The judge every episode of these settings shares, as the env would make it (a ``LazyJudge``, or an
    ``ExecutorJudge`` on the process's executor); ``None`` when the settings name a judge object."""
    import dataclasses

    import gymnasium as gym

    from cuda_gym.envs.base import LazyJudge, make_judge
    from cuda_gym.envs.config import KernelEnvConfig

    if env_id not in gym.registry:
        return None  # EnvSession says which ids there are
    fields = {f.name for f in dataclasses.fields(KernelEnvConfig)}
    settings = {**gym.spec(env_id).kwargs, **env_kwargs}
    judge, owned = make_judge(KernelEnvConfig.build({k: v for k, v in settings.items() if k in fields}))
    if not owned:
        return None
    if isinstance(judge, LazyJudge):
        _ = judge.judge  # built now, under the lock, so that threads share one (it starts no process yet)
    return judge


def _task_from_tools_kwargs(tools_kwargs: Any) -> str | None:
    for entry in (tools_kwargs or {}).values():
        task_id = (entry or {}).get("create_kwargs", {}).get("task_id")
        if task_id:
            return str(task_id)
    return None


class CudaGymTool(BaseTool):
    """One env tool as a verl ``BaseTool``; the subclasses below are one per tool (``tool`` names it).

    ``config`` (the YAML entry's ``config``): ``env_id`` (default ``CudaKernel-Builtin-v0``),
    ``env_kwargs`` (settings for ``gym.make``: ``KernelEnvConfig`` fields, the judge's executor...) and,
    optionally, ``max_open_episodes`` and ``idle_timeout_s`` (:data:`MAX_OPEN_EPISODES`,
    :data:`IDLE_TIMEOUT_S`: how many trajectory episodes the process keeps open, and for how long without
    a call).

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
        EPISODES.configure(config.get("max_open_episodes"), config.get("idle_timeout_s"))

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
        try:
            key, session = await asyncio.to_thread(EPISODES.session, instance_id, agent_data, self.env_id,
                                                   self.env_kwargs)
        except EpisodeOverError as exc:
            return ToolResponse(text=f"Error: {exc}"), 0.0, {"tool_ok": False}
        try:
            step: ToolStep = await asyncio.to_thread(session.call, self.tool, parameters)
        except EpisodeOverError as exc:
            return ToolResponse(text=f"Error: {exc}"), 0.0, {"tool_ok": False}
        finally:
            EPISODES.done(key)
        metrics = {k: v for k, v in step.info.items() if isinstance(v, (bool, int, float, str))}
        if step.done:
            if agent_data is not None and hasattr(agent_data, "extra_fields"):
                agent_data.extra_fields[REWARD_KEY] = step.reward
                agent_data.extra_fields[MILESTONE_KEY] = session.milestone
            if not key.startswith("instance:"):
                EPISODES.retire(key)
        return ToolResponse(text=step.text), 0.0, metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The terminal reward of the instance's episode (judged now if it was not yet; an episode closed
        unjudged scores :data:`UNJUDGED_REWARD`)."""
        try:
            key, session = await asyncio.to_thread(EPISODES.session, instance_id, kwargs.get("agent_data"),
                                                   self.env_id, self.env_kwargs)
        except EpisodeEndedError as ended:
            return float(ended.reward) if ended.reward is not None else UNJUDGED_REWARD
        try:
            step = await asyncio.to_thread(session.finish)
        finally:
            EPISODES.done(key)
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


def tool_config(env_id: str = DEFAULT_ENV_ID, tools: Sequence[str] | None = None, *,
                max_open_episodes: int = MAX_OPEN_EPISODES, idle_timeout_s: float = IDLE_TIMEOUT_S,
                **env_kwargs: Any) -> dict[str, Any]:
    """verl's tool config (``actor_rollout_ref.rollout.multi_turn.tool_config_path``) as a dict: one
    entry per tool (``class_name``, ``config: {type: native, env_id, env_kwargs, max_open_episodes,
    idle_timeout_s}``, ``tool_schema``)."""
    names = list(tools) if tools is not None else list(TOOLS)
    for name in names:
        check_tool(name)
    config = {"type": "native", "env_id": env_id, "env_kwargs": dict(env_kwargs),
              "max_open_episodes": int(max_open_episodes), "idle_timeout_s": float(idle_timeout_s)}
    return {"tools": [
        {"class_name": f"{__name__}.{TOOL_CLASSES[name].__name__}", "config": dict(config),
         "tool_schema": _schema(name)}
        for name in names]}


def write_tool_config(path: str | Path, env_id: str = DEFAULT_ENV_ID, tools: Sequence[str] | None = None,
                      **settings: Any) -> Path:
    """Write :func:`tool_config` as YAML to ``path`` (what ``tool_config_path`` names); returns the path.
    ``settings``: :func:`tool_config`'s keywords (``max_open_episodes``, ``idle_timeout_s``, env settings)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create(tool_config(env_id, tools, **settings)), path)
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

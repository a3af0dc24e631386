"""An OpenEnv server of the kernel env: typed models, the ``Environment``, its app and its client."""

from __future__ import annotations

import concurrent.futures
import functools
import json
import logging
import os
from typing import Any

from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server import Action, Environment, Observation, State, create_app
from pydantic import Field

from cuda_gym.adapters.session import DEFAULT_ENV_ID, EnvSession, check_tool
from cuda_gym.errors import ConfigError, EpisodeOverError
from cuda_gym.tools import tool_schemas

logger = logging.getLogger(__name__)

BASH_MARGIN_S = 2
"""Seconds a ``bash`` call's own limit stays below the step's ``timeout_s`` (to stop it and report)."""
ENV_NAME = "cuda_gym"
"""The name the app and ``openenv.yaml`` give the environment."""


class CudaToolAction(Action):
    """One tool call: ``tool`` is a tool name (``read_file``, ``write_file``, ``bash``, ``compile``,
    ``verify``, ``profile``, ``submit``...), ``arguments`` its JSON arguments (see ``/schema`` and the
    ``tools`` of the reset observation's ``info``)."""

    tool: str = Field(description="The tool to call, e.g. write_file or submit.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments.")


class CudaObservation(Observation):
    """What a reset or a step returned: ``text`` (the prompt, or the tool's output) and ``info`` (the
    env's flat facts: ``task_id``, ``turn``, ``tool``, ``parse_ok``, the judge's facts, ``milestone``
    after the final judgement). ``done`` and ``reward`` are OpenEnv's: the reward is 0 until the
    final judgement, then the env's terminal reward (the milestone -1/1/2/3 by default)."""

    text: str = Field(default="", description="The prompt (reset) or the tool's output (step).")
    info: dict[str, Any] = Field(default_factory=dict, description="The env's flat facts of this step.")


class CudaState(State):
    """The session's state: OpenEnv's ``episode_id`` and ``step_count`` plus the task, whether the
    episode is over, and its reward and milestone once it is."""

    task_id: str | None = Field(default=None, description="The episode's task id.")
    done: bool = Field(default=False, description="The episode is over.")
    reward: float | None = Field(default=None, description="The terminal reward once the episode is over.")
    milestone: int | None = Field(default=None, description="The milestone (-1, 1, 2, 3) once judged.")


def _flat(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` with only JSON-serialisable values (the reset's ``tools`` list included)."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            value = str(value)
        out[key] = value
    return out


class CudaKernelEnvironment(Environment[CudaToolAction, CudaObservation, CudaState]):
    """The kernel env as an OpenEnv ``Environment``: one instance per session, one workspace each.

    Args:
        env_id: the registered env id each episode plays (``CudaKernel-Builtin-v0`` by default).
        step_timeout_s: a step's time limit when the request names none (``None``: no limit).
        **env_kwargs: settings for ``gym.make`` (``KernelEnvConfig`` fields, the judge's executor...).

    ``reset(seed=, episode_id=, task_id=)`` starts an episode on ``task_id`` (a drawn task without
    one); ``step(action, timeout_s=)`` plays one tool call through the env
    (:class:`~cuda_gym.adapters.session.EnvSession`). A step that does not finish within its time
    limit ends the episode: its observation says so, ``done`` is True and the reward ``None`` (no
    verdict); a ``bash`` call's own limit is lowered below the step's (by ``BASH_MARGIN_S``),
    so a long command is stopped and reported instead. A step after the end raises
    ``EpisodeOverError`` (OpenEnv answers it as an error message).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str = DEFAULT_ENV_ID, step_timeout_s: float | None = None, **env_kwargs: Any) -> None:
        super().__init__()
        self.env_id = env_id
        self.env_kwargs = env_kwargs
        self.step_timeout_s = step_timeout_s
        self._session: EnvSession | None = None
        self._runner: concurrent.futures.ThreadPoolExecutor | None = None
        self._state = CudaState(episode_id=None, step_count=0, done=True)

    def reset(self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None,
              **kwargs: Any) -> CudaObservation:
        """Start an episode; the observation's ``text`` is the task and ``info["tools"]`` the tool schemas."""
        if self._session is None:
            self._session = EnvSession(self.env_id, **self.env_kwargs)
        prompt, info = self._session.start(task_id=task_id, seed=seed)
        self._state = CudaState(episode_id=episode_id, step_count=0, task_id=self._session.task_id, done=False)
        return CudaObservation(text=prompt, info=_flat({**info, "tools": tool_schemas()}), done=False, reward=None)

    def step(self, action: CudaToolAction, timeout_s: float | None = None, **kwargs: Any) -> CudaObservation:
        """Run one tool call within ``timeout_s`` (else ``step_timeout_s``) seconds."""
        if self._session is None or self._state.done:
            raise EpisodeOverError("the episode is over or was never started: reset() before step()")
        check_tool(action.tool)
        limit = timeout_s if timeout_s is not None else self.step_timeout_s
        arguments = dict(action.arguments)
        if action.tool == "bash" and limit is not None:
            # The sandbox's own limit, with room to stop the command and report before the step's.
            arguments["timeout"] = max(1, min(int(arguments.get("timeout", limit)), int(limit) - BASH_MARGIN_S))
        session = self._session
        if limit is None:
            step = session.call(action.tool, arguments)
        else:
            if self._runner is None:
                self._runner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="cuda_gym-step")
            future = self._runner.submit(session.call, action.tool, arguments)
            try:
                step = future.result(timeout=limit)
            except concurrent.futures.TimeoutError:
                return self._timed_out(action.tool, limit, future)
        self._state.step_count += 1
        self._state.done = step.done
        if step.done:
            self._state.reward, self._state.milestone = step.reward, session.milestone
        return CudaObservation(text=step.text, info=_flat(step.info), done=step.done, reward=step.reward)

    def _timed_out(self, tool: str, limit: float, future: concurrent.futures.Future[Any]) -> CudaObservation:
        # The call still runs in the step thread: this session gives its env up and closes it once the
        # call returns; the next reset makes a fresh one.
        session, runner = self._session, self._runner
        self._session, self._runner = None, None
        assert session is not None and runner is not None
        future.add_done_callback(lambda _: session.close())
        runner.shutdown(wait=False)
        self._state.step_count += 1
        self._state.done = True
        text = (f"Error: the {tool} call did not finish within {limit:g} s (the step's timeout_s); "
                "the episode is over without a verdict. Reset to start a new one.")
        return CudaObservation(text=text, info={"tool": tool, "timed_out": True}, done=True, reward=None)

    @property
    def state(self) -> CudaState:
        """The session's :class:`CudaState`."""
        return self._state

    def close(self) -> None:
        """Close the session's env (workspace, judge workers)."""
        if self._runner is not None:
            self._runner.shutdown(wait=True)
            self._runner = None
        if self._session is not None:
            self._session.close()
            self._session = None


def make_app(env_id: str = DEFAULT_ENV_ID, *, max_sessions: int = 8, step_timeout_s: float | None = None,
             **env_kwargs: Any) -> Any:
    """The FastAPI app (OpenEnv's ``create_app``): ``/ws`` sessions of :class:`CudaKernelEnvironment`, at
    most ``max_sessions`` at once, each with its own workspace; ``/reset``, ``/step``, ``/schema``, ``/health``."""
    if max_sessions < 1:
        raise ConfigError(f"max_sessions must be >= 1, got {max_sessions}")
    factory = functools.partial(CudaKernelEnvironment, env_id=env_id, step_timeout_s=step_timeout_s, **env_kwargs)
    return create_app(factory, CudaToolAction, CudaObservation, env_name=ENV_NAME, max_concurrent_envs=max_sessions)


def app_from_environ() -> Any:
    """The app of ``$CUDA_GYM_ENV_ID``, ``$CUDA_GYM_MAX_SESSIONS``, ``$CUDA_GYM_STEP_TIMEOUT_S`` and
    ``$CUDA_GYM_ENV_KWARGS`` (a JSON object of env settings), what ``openenv.yaml`` and the Dockerfile serve."""
    raw = os.environ.get("CUDA_GYM_ENV_KWARGS", "") or "{}"
    try:
        env_kwargs = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"CUDA_GYM_ENV_KWARGS must be a JSON object of env settings, got {raw!r}: {exc}") from exc
    if not isinstance(env_kwargs, dict):
        raise ConfigError(f"CUDA_GYM_ENV_KWARGS must be a JSON object, got {raw!r}")
    timeout = os.environ.get("CUDA_GYM_STEP_TIMEOUT_S")
    return make_app(os.environ.get("CUDA_GYM_ENV_ID", DEFAULT_ENV_ID),
                    max_sessions=int(os.environ.get("CUDA_GYM_MAX_SESSIONS", "8")),
                    step_timeout_s=float(timeout) if timeout else None, **env_kwargs)


class CudaKernelClient(EnvClient[CudaToolAction, CudaObservation, CudaState]):
    """OpenEnv client of a cuda_gym server: one WebSocket session (one workspace) per client.

    ``await client.reset(task_id=...)``, ``await client.step(CudaToolAction(tool=..., arguments=...))``,
    ``await client.state()``; ``client.sync()`` for a blocking client. Judge calls take minutes on
    large tasks: ``message_timeout_s`` defaults to 30 minutes.
    """

    def __init__(self, base_url: str, message_timeout_s: float = 1800.0, **kwargs: Any) -> None:
        super().__init__(base_url, message_timeout_s=message_timeout_s, **kwargs)

    def _step_payload(self, action: CudaToolAction) -> dict[str, Any]:
        return {"tool": action.tool, "arguments": action.arguments}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[CudaObservation]:
        obs = payload.get("observation", {})
        observation = CudaObservation(text=obs.get("text", ""), info=obs.get("info", {}),
                                      done=payload.get("done", False), reward=payload.get("reward"))
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> CudaState:
        return CudaState(**payload)

"""CudaKernelToolEnv: a kernel env as a TRL ``environment_factory`` (GRPOTrainer's multi-turn tool env)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from cuda_gym.adapters.session import DEFAULT_ENV_ID, EnvSession, ToolStep
from cuda_gym.errors import ToolError
from cuda_gym.tools import TOOLS

F = TypeVar("F", bound=Callable[..., Any])


def _documented(name: str) -> Callable[[F], F]:
    """Give a tool method the docstring TRL turns into its schema (``transformers.utils.get_json_schema``):
    the tool's description, then an ``Args:`` line per argument, both from ``cuda_gym.tools.TOOLS``, so
    the TRL tool reads as the env's tool does."""
    spec = TOOLS[name]

    def decorate(fn: F) -> F:
        lines = [spec.description]
        props = spec.parameters.get("properties", {})
        if props:
            lines += ["", "Args:"]
            lines += [f"    {key}: {sub.get('description', key)}" for key, sub in props.items()]
        lines += ["", "Returns:", "    What the tool printed: its output, or the judge's report."]
        fn.__doc__ = "\n".join(lines)
        return fn

    return decorate


class CudaKernelToolEnv:
    """A kernel-optimisation episode for TRL's ``GRPOTrainer(environment_factory=CudaKernelToolEnv)``.

    TRL's contract (trl >= 1.0, ``environment_factory``): the trainer builds one instance per rollout
    slot with no argument and reuses it; ``reset(**row)`` gets the dataset row's columns and returns
    text appended to the prompt; every other public method is a tool, its JSON schema read from the
    type hints and the ``Args:`` docstring; an exception a tool raises goes back to the model as the
    tool's response; ``get_reward()`` (async here) scores the finished rollout.

    Here:

    * the constructor only records settings (nothing is built until the first ``reset``); set the
      class attributes ``env_id`` and ``env_kwargs`` in a subclass, or pass them
      (``functools.partial(CudaKernelToolEnv, env_id="CpuKernel-Builtin-v0", max_turns=40)``);
    * ``reset(task_id=..., **row)`` starts an episode on the row's ``task_id`` (a drawn task when the row
      has none) and returns the task text: SKILL.md, the reference program and how the tools work;
    * one method per env tool (``read_file``, ``write_file``, ``edit_file``, ``multi_edit``, ``glob``,
      ``grep``, ``bash``, ``compile``, ``verify``, ``profile``, ``submit``), each playing one step of
      the env (:class:`~cuda_gym.adapters.session.EnvSession`), so turns, limits and the judge are the
      env's. A call the env refuses (unknown path, protected file, bad argument) raises ``ToolError``; a
      tool that ran and failed (a compile error) returns its report. A call after the episode ended
      raises ``EpisodeOverError``;
    * ``get_reward()`` returns the env's terminal reward (the milestone -1/1/2/3 by default), running
      the final judgement of the workspace when the model never called ``submit``.

    TRL's ``max_completion_length`` counts the whole episode (every generation and every tool response):
    size it for the turns you allow (``max_turns``) times a tool response (``tool_output_limit``).
    """

    env_id: ClassVar[str] = DEFAULT_ENV_ID
    """The env id episodes play (any multi-turn id cuda_gym registers)."""
    env_kwargs: ClassVar[dict[str, Any]] = {}
    """Settings passed to ``gym.make`` (``KernelEnvConfig`` fields; the judge's executor among them)."""

    def __init__(self, env_id: str | None = None, **env_kwargs: Any) -> None:
        self._session = EnvSession(env_id or self.env_id, **{**self.env_kwargs, **env_kwargs})

    # -- TRL's reserved methods ---------------------------------------------------------------------

    def reset(self, task_id: str | None = None, seed: int | None = None, **row: Any) -> str:
        """Start an episode on ``task_id`` (a dataset column; a drawn task without one) and return the task text."""
        prompt, _ = self._session.start(task_id=task_id, seed=seed)
        return prompt

    async def get_reward(self) -> float:
        """The episode's terminal reward; judges the workspace first when ``submit`` never came."""
        step = await asyncio.to_thread(self._session.finish)
        return float(step.reward)

    # -- the tools ----------------------------------------------------------------------------------

    @_documented("read_file")
    def read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        return self._call("read_file", path=path, start_line=start_line, end_line=end_line)

    @_documented("write_file")
    def write_file(self, path: str, content: str) -> str:
        return self._call("write_file", path=path, content=content)

    @_documented("edit_file")
    def edit_file(self, path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
        return self._call("edit_file", path=path, old_string=old_string, new_string=new_string,
                          replace_all=replace_all or None)

    @_documented("multi_edit")
    def multi_edit(self, path: str, edits: list[dict[str, Any]]) -> str:
        return self._call("multi_edit", path=path, edits=edits)

    @_documented("glob")
    def glob(self, pattern: str) -> str:
        return self._call("glob", pattern=pattern)

    @_documented("grep")
    def grep(self, pattern: str, path: str | None = None, glob: str | None = None) -> str:
        return self._call("grep", pattern=pattern, path=path, glob=glob)

    @_documented("bash")
    def bash(self, command: str, timeout: int | None = None) -> str:
        return self._call("bash", command=command, timeout=timeout)

    @_documented("compile")
    def compile(self) -> str:
        return self._call("compile")

    @_documented("verify")
    def verify(self) -> str:
        return self._call("verify")

    @_documented("profile")
    def profile(self) -> str:
        return self._call("profile")

    @_documented("submit")
    def submit(self) -> str:
        return self._call("submit")

    # -- plumbing -----------------------------------------------------------------------------------

    @property
    def session(self) -> EnvSession:
        """The episode engine (its ``transcript``, ``milestone``, ``env``)."""
        return self._session

    def _call(self, name: str, **arguments: Any) -> str:
        step: ToolStep = self._session.call(name, {k: v for k, v in arguments.items() if v is not None})
        if step.invalid:
            raise ToolError(step.text)
        return step.text

    def __del__(self) -> None:
        session = getattr(self, "_session", None)
        if session is not None:
            try:
                session.close()
            except Exception:  # interpreter shutdown: the workspace is a temp dir either way
                pass

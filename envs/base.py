"""What the multi-turn and single-turn kernel envs share: tasks, workspaces, the judge, rewards."""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import gymnasium as gym

from cuda_gym.envs.config import KernelEnvConfig
from cuda_gym.envs.spaces import PrintableText
from cuda_gym.errors import ConfigError, CudaGymError, EpisodeOverError, JudgeError
from cuda_gym.reward import TerminalReward
from cuda_gym.text import clean_output
from cuda_gym.vocab import Size, indexed_device

if TYPE_CHECKING:
    from cuda_gym.judge import Judge, JudgeConfig
    from cuda_gym.judge.result import JudgeResult, Mode
    from cuda_gym.tasks import Task
    from cuda_gym.workspace import Workspace

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=32)
def _task_set(source: str, path: str | None, level: int | None, size: Size) -> tuple[Task, ...]:
    # check_env and vector envs build many envs of one id: parse a task set once per process.
    from cuda_gym.tasks import load_tasks

    return tuple(load_tasks(source, path=path, level=level, size=size))


def _data_path(config: KernelEnvConfig) -> str | None:
    """``config.data_path`` as the loaders' cache key: a string, or ``None``."""
    return str(config.data_path) if config.data_path is not None else None


def find_task(task_id: str, config: KernelEnvConfig) -> Task:
    """The task ``task_id`` at the config's size (builtin tasks) and data path."""
    from cuda_gym.tasks import get_task

    path = _data_path(config)
    source = task_id.split("/", 1)[0]
    size = config.size if source == "builtin" else None  # only builtin tasks have sizes
    if source in ("builtin", "kernelbench", "ops6k") or (source == "custom" and path):
        try:
            for task in _task_set(source, path, None, size or "default"):
                if task.id == task_id:
                    return task
        except CudaGymError:
            pass  # get_task below raises the precise error
    return get_task(task_id, path=path, size=size)


def load_task_list(config: KernelEnvConfig) -> list[Task]:
    """The tasks an env draws from: ``config.task_ids`` if given, else the whole (filtered) set;
    then only those the ``task_filter`` report passed, if one is set."""
    if config.task_ids:
        tasks = [find_task(task_id, config) for task_id in config.task_ids]
    else:
        path = _data_path(config)
        tasks = list(_task_set(config.source, path, config.level, config.size))
        if not tasks:
            raise ConfigError(
                f"the task set {config.source!r} (level={config.level}, path={path}) holds no task: "
                "check the source, level and data_path settings"
            )
    if config.task_filter is not None:
        from cuda_gym.tasks.validate import filter_tasks

        kept = filter_tasks(tasks, config.task_filter)
        if not kept:
            raise ConfigError(
                f"the validation report {config.task_filter} passes none of the {len(tasks)} tasks of this env "
                f"(size {config.size!r}): validate these tasks (`cuda-gym tasks validate {config.source} "
                f"--report {config.task_filter}`) or drop task_filter"
            )
        tasks = kept
    return tasks


class EnvJudge(Protocol):
    """What an env needs of its judge (``Judge``, ``LazyJudge`` or a judge object of the caller's).

    ``verify``, ``profile`` and ``submit`` serve the tools; ``evaluate`` judges a single-file answer
    of the single-turn env (a caller's judge object needs it only there).
    """

    def verify(self, ws: Workspace) -> JudgeResult: ...

    def profile(self, ws: Workspace) -> JudgeResult: ...

    def submit(self, ws: Workspace) -> JudgeResult: ...

    def evaluate(self, task: Task, **kwargs: Any) -> JudgeResult: ...


class LazyJudge:
    """Builds the real ``Judge`` on first use, so that making and resetting an env never needs a GPU.

    Exposes ``verify``, ``profile``, ``submit``, ``evaluate`` and ``close`` like the judge.
    """

    def __init__(self, settings: JudgeConfig | Mapping[str, Any] | None, device: str) -> None:
        self._settings = settings
        self._device = device
        self._judge: Judge | None = None

    @property
    def config(self) -> JudgeConfig:
        """The ``JudgeConfig`` the judge is (or will be) built with."""
        from cuda_gym.judge import JudgeConfig

        if isinstance(self._settings, JudgeConfig):
            return self._settings
        fields = dict(self._settings or {})
        fields.setdefault("device", self._device)
        return JudgeConfig.from_dict(fields)

    @property
    def judge(self) -> Judge:
        """The judge, built now if it was not yet."""
        if self._judge is None:
            from cuda_gym.judge import Judge

            self._judge = Judge(self.config)
        return self._judge

    def verify(self, ws: Workspace) -> JudgeResult:
        """``Judge.verify``."""
        return self.judge.verify(ws)

    def profile(self, ws: Workspace) -> JudgeResult:
        """``Judge.profile``."""
        return self.judge.profile(ws)

    def submit(self, ws: Workspace) -> JudgeResult:
        """``Judge.submit`` (the final judgement)."""
        return self.judge.submit(ws)

    def evaluate(self, task: Task, **kwargs: Any) -> JudgeResult:
        """``Judge.evaluate``."""
        return self.judge.evaluate(task, **kwargs)

    def close(self) -> None:
        """Close the judge if it was built (stops its reference worker)."""
        if self._judge is not None:
            self._judge.close()
        self._judge = None


class ExecutorJudge:
    """An env's judge whose jobs run on an executor (``cuda_gym.executors``): each call submits a
    ``JudgeJob`` and waits for its future. The executor is the process's shared one (or the caller's),
    so ``close`` leaves it running."""

    def __init__(self, executor: Any, config: JudgeConfig) -> None:
        self.executor = executor
        self.config = config
        self.last_queue_wait_s = 0.0
        """How long the last job waited for the executor beyond its own run (``info["judge_queue_wait_s"]``)."""

    def _run(self, task: Task, mode: Mode, **where: Any) -> JudgeResult:
        import time

        from cuda_gym.executors import JudgeJob

        started = time.perf_counter()
        result: JudgeResult = self.executor.submit(JudgeJob(task, mode=mode, **where)).result()
        self.last_queue_wait_s = max(0.0, time.perf_counter() - started - result.seconds)
        return result

    def _ws(self, ws: Workspace, mode: Mode) -> JudgeResult:
        return self._run(ws.task, mode, workspace=str(ws.root), build_dir=str(ws.build_dir))

    def verify(self, ws: Workspace) -> JudgeResult:
        """``Judge.verify`` on the executor."""
        return self._ws(ws, "verify")

    def profile(self, ws: Workspace) -> JudgeResult:
        """``Judge.profile`` on the executor."""
        return self._ws(ws, "profile")

    def submit(self, ws: Workspace) -> JudgeResult:
        """``Judge.submit`` on the executor."""
        return self._ws(ws, "full")

    def evaluate(self, task: Task, **kwargs: Any) -> JudgeResult:
        """``Judge.evaluate`` on the executor (``workspace=`` or ``solution=``, ``mode=``)."""
        workspace, solution, mode = kwargs.get("workspace"), kwargs.get("solution"), kwargs.get("mode", "full")
        if workspace is not None:
            root = getattr(workspace, "root", workspace)
            return self._run(task, mode, workspace=str(root))
        return self._run(task, mode, solution=solution)

    def close(self) -> None:
        """Nothing: the executor is shared (``cuda_gym.executors.shutdown_executors`` stops it)."""


def _with_executor(config: KernelEnvConfig, lazy: LazyJudge) -> EnvJudge:
    """The env's judge on its executor: ``lazy`` itself for ``inline`` (today's path), else an ``ExecutorJudge``."""
    from cuda_gym.executors.config import ExecutorConfig

    if hasattr(config.executor, "submit"):
        return ExecutorJudge(config.executor, lazy.config)
    chosen = ExecutorConfig.resolve(config.executor)
    if chosen.kind == "inline":
        return lazy
    from cuda_gym.executors import shared_executor

    # Made now, not at the first judgement: a vector env's parent serves the pool to its subprocesses.
    return ExecutorJudge(shared_executor(chosen, lazy.config), lazy.config)


def make_judge(config: KernelEnvConfig) -> tuple[EnvJudge, bool]:
    """The judge of an env and whether the env owns it (and closes it): a ``LazyJudge`` built from
    settings (or an ``ExecutorJudge`` when ``config.executor`` is not ``inline``), or the caller's own
    judge object (shared, never closed by the env)."""
    settings = config.judge
    from cuda_gym.judge import JudgeConfig

    if settings is None or isinstance(settings, (Mapping, JudgeConfig)):
        device = settings.device if isinstance(settings, JudgeConfig) else dict(settings or {}).get("device")
        if device is not None and (device == "cpu") != (config.flavour == "cpu"):
            raise ConfigError(
                f"the judge's device {device!r} does not match the env's device {config.device!r}: "
                "set device= on the env only (the judge follows it)"
            )
        if isinstance(settings, JudgeConfig):
            return _with_executor(config, LazyJudge(settings, settings.device)), True
        return _with_executor(config, LazyJudge(dict(settings or {}), indexed_device(config.device))), True
    if all(hasattr(settings, name) for name in ("verify", "profile", "submit")):
        return settings, False
    raise ConfigError(
        f"judge must be a JudgeConfig, a dict of its fields or an object with verify/profile/submit, "
        f"got {type(settings).__name__}"
    )


def _from_cache(result: JudgeResult) -> bool:
    """Whether the judge answered from its judgement cache (an identical earlier submission)."""
    return result.fingerprint.get("judgement") == "cache"


def make_reward_fn(config: KernelEnvConfig) -> TerminalReward:
    """The terminal reward the config names (or the config's own function) at its threshold."""
    return TerminalReward(config.reward, config.reward_threshold)


class KernelEnvBase(gym.Env[str, str]):
    """Shared machinery of the kernel envs (not registered itself).

    Subclasses implement ``step`` and ``_prompt``. Attributes: ``config`` (:class:`KernelEnvConfig`),
    ``tasks`` (what ``reset`` draws from), ``task`` and ``workspace`` (the current episode's, or
    ``None`` before the first reset), ``judge``.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        config: KernelEnvConfig | Mapping[str, Any] | None = None,
        *,
        render_mode: str | None = None,
        **overrides: Any,
    ) -> None:
        self.config = KernelEnvConfig.build(config, **overrides)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.render_mode = render_mode
        self.observation_space = PrintableText(self.config.observation_max_length)
        self.action_space = PrintableText(self.config.action_max_length)
        self.tasks = load_task_list(self.config)
        self.judge, self._owns_judge = make_judge(self.config)
        self.reward_fn = make_reward_fn(self.config)
        self.task: Task | None = None
        self.workspace: Workspace | None = None
        self.transcript: list[dict[str, str]] = []
        self._done = True

    # -- episode plumbing -------------------------------------------------------------------------

    def _pick_task(self, options: Mapping[str, Any] | None) -> Task:
        task_id = (options or {}).get("task_id")
        if task_id is not None:
            for task in self.tasks:
                if task.id == task_id:
                    return task
            return find_task(str(task_id), self.config)
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]

    def _begin(self, options: Mapping[str, Any] | None) -> tuple[Workspace, str, dict[str, Any]]:
        """What every ``reset`` does: draw a task, lay out its workspace, and return the workspace,
        the prompt (``self._prompt(ws)``, cleaned) and the base ``info``."""
        self.task = self._pick_task(options)
        ws = self._new_workspace(self.task)
        self._done = False
        prompt = self._observe(self._prompt(ws))
        self.transcript = [{"role": "user", "content": prompt}]
        return ws, prompt, self._base_info()

    def _prompt(self, ws: Workspace) -> str:
        """The episode's first observation (before cleaning); subclasses write it."""
        raise NotImplementedError

    def _new_workspace(self, task: Task) -> Workspace:
        from cuda_gym.workspace import Workspace

        self._close_workspace()
        parent = None
        if self.config.workspace_dir is not None:
            parent = Path(self.config.workspace_dir)
            parent.mkdir(parents=True, exist_ok=True)
        self.workspace = Workspace.create(task, flavour=self.config.flavour, parent=parent)
        return self.workspace

    def _close_workspace(self) -> None:
        if self.workspace is not None:
            try:
                self.workspace.close(keep=self.config.keep_workspace)
            except OSError as exc:  # a leftover directory must not end a training run
                logger.warning("could not remove workspace %s: %s", self.workspace.root, exc)
            self.workspace = None

    def _skill_text(self, ws: Workspace) -> str:
        skill = ws.root / "SKILL.md"
        return skill.read_text(errors="replace") if skill.is_file() else ""

    def _header(self, ws: Workspace, model_note: str) -> str:
        """The prompt's opening both envs share: the task line, SKILL.md and the reference program
        (its heading reads ``model.py (<model_note>)``)."""
        assert self.task is not None
        device = "NVIDIA GPU (CUDA)" if self.config.flavour == "cuda" else "CPU (C++ with OpenMP)"
        return (
            f"Task {self.task.id}: make this PyTorch program faster on the {device} with custom kernels.\n\n"
            f"===== SKILL.md =====\n{self._skill_text(ws)}\n"
            f"===== model.py ({model_note}) =====\n{self.task.code}\n"
        )

    def _observe(self, text: str) -> str:
        return clean_output(text, self.config.observation_max_length)

    def _check_can_step(self) -> None:
        if self._done or self.workspace is None:
            raise EpisodeOverError(
                "the episode is over (terminated or truncated) or was never started: call reset() before step()"
            )

    def _reward(self, result: JudgeResult) -> float:
        return float(self.reward_fn(result))

    def _final_facts(self, result: JudgeResult) -> dict[str, Any]:
        """``info`` of a final judgement: the judge's facts, ``milestone`` at the env's threshold, and
        ``judge_queue_wait_s`` (seconds the job waited for an executor's lane beyond its own run; 0 inline)."""
        wait = float(getattr(self.judge, "last_queue_wait_s", 0.0))
        return {**result.to_info(), "milestone": self.reward_fn.milestone(result), "judge_queue_wait_s": wait}

    def _judge_failed(self, what: str, detail: str) -> JudgeError:
        return JudgeError(
            f"the judge could not {what} on task {self.task.id if self.task else '?'}: {detail}. "
            "This is an infrastructure failure, not the agent's; run `cuda-gym doctor` and check the judge settings"
        )

    def _base_info(self) -> dict[str, Any]:
        return {"task_id": self.task.id if self.task else "", "max_turns": self.config.max_turns}

    # -- gymnasium API ----------------------------------------------------------------------------

    def render(self) -> str | None:
        """The transcript so far as text (``render_mode="ansi"``); ``None`` without a render mode."""
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode: make the env with render_mode='ansi'")
            return None
        parts = []
        for entry in self.transcript:
            parts.append(f"===== {entry['role']} =====\n{entry['content']}")
        return "\n".join(parts) + ("\n" if parts else "")

    def close(self) -> None:
        """Remove the episode directory (unless ``keep_workspace``) and stop the judge's workers."""
        self._close_workspace()
        close = getattr(self.judge, "close", None) if self._owns_judge else None
        if close is not None:
            close()
        self._done = True

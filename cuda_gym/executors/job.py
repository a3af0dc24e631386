"""A judge job: one submission of one task in one mode, as an executor takes it."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from cuda_gym.build.files import read_regular, walk
from cuda_gym.errors import ConfigError, UnreadableFileError, WorkspaceRefusedError
from cuda_gym.judge.result import Mode
from cuda_gym.tasks.task import Task

MODES: tuple[Mode, ...] = ("verify", "profile", "full")

PACK_LIMIT_BYTES = 64 * 2**20
"""A packed workspace (``JudgeJob.pack``) may hold at most this many bytes of files."""


@dataclass(frozen=True)
class JudgeJob:
    """What to judge: ``Judge.evaluate``'s arguments as one picklable value.

    Attributes:
        task: the task (a ``Task``, or its id, looked up with ``cuda_gym.tasks.get_task``).
        workspace: the root of a workspace (``model_new.py``, ``kernels/``), or ``None``.
        solution: a single file defining ``ModelNew``: a ``Path`` to it, or its source text; or ``None``.
        mode: ``verify``, ``profile`` or ``full``.
        build_dir: the workspace's build folder (incremental builds; a fresh one when ``None``).
        files: a packed workspace (``pack``): relative path -> bytes, for executors on other machines.

    Exactly one of ``workspace``/``files`` or ``solution`` is given. The workspace must not change
    until the job's future is done: it is built ahead and copied to the candidate server later.
    """

    task: Task | str
    workspace: str | None = None
    solution: str | Path | None = None
    mode: Mode = "full"
    build_dir: str | None = None
    files: tuple[tuple[str, bytes], ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        has_ws = self.workspace is not None or bool(self.files)
        if has_ws == (self.solution is not None):
            raise ConfigError("a JudgeJob needs exactly one of workspace= (a workspace root) or solution= (a file)")
        if isinstance(self.workspace, os.PathLike):
            object.__setattr__(self, "workspace", str(self.workspace))

    @property
    def kind(self) -> str:
        """``workspace`` or ``single``."""
        return "single" if self.solution is not None else "workspace"

    def resolved_task(self) -> Task:
        """The ``Task`` (looked up by id when given one)."""
        if isinstance(self.task, Task):
            return self.task
        from cuda_gym.tasks import get_task

        return get_task(self.task)

    def pack(self) -> JudgeJob:
        """This job with the submission's bytes inside (workspace files, or a single file's text), so it
        can be judged on another machine; links and files above ``PACK_LIMIT_BYTES`` in all are refused."""
        if self.solution is not None:
            text = Path(self.solution).read_text(errors="replace") if isinstance(self.solution, Path) else self.solution
            return replace(self, solution=text, build_dir=None)
        if self.files:
            return self
        assert self.workspace is not None
        root = Path(self.workspace)
        files: list[tuple[str, bytes]] = []
        total = 0
        for entry in walk(root):  # any depth, links and special files left out, __pycache__ too
            if entry.kind != "file":
                continue
            if total + entry.size > PACK_LIMIT_BYTES:
                raise WorkspaceRefusedError(f"the workspace holds more than {PACK_LIMIT_BYTES} bytes of files, more "
                                            "than a judge job carries: delete data files")
            try:
                data = read_regular(root / entry.rel, PACK_LIMIT_BYTES - total)
            except UnreadableFileError:
                continue  # gone, replaced or grown meanwhile, or unreadable: the judge would not read it either
            total += len(data)
            files.append((entry.rel, data))
        return replace(self, workspace=None, build_dir=None, files=tuple(sorted(files)))

    def unpack(self, into: Path) -> JudgeJob:
        """A packed job's files written under ``into`` (a new folder): the job with ``workspace`` there."""
        if not self.files:
            return self
        for rel, data in self.files:
            target = (into / rel).resolve()
            if not target.is_relative_to(into.resolve()):
                raise ConfigError(f"a packed file escapes its workspace: {rel}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return replace(self, workspace=str(into), files=())


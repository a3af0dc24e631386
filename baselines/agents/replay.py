"""ReplayAgent: plays a fixed list of actions; the scripted demo agent and its honest solutions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_gym.errors import CudaGymError
from cuda_gym.tools import format_tool_call


class ReplayAgent:
    """An agent that answers with ``actions`` in order, whatever it observes (then ``submit``).

    Useful for demos, tests and replaying a recorded transcript. ``reset`` starts over from the
    first action; once the list is used up every further action is a ``submit`` call.
    """

    def __init__(self, actions: Sequence[str]) -> None:
        self.actions = list(actions)
        self._next = 0

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        """Start over from the first action."""
        self._next = 0

    def act(self, obs: str, info: dict[str, Any]) -> str:
        """The next action of the list (``submit`` after the last one)."""
        if self._next >= len(self.actions):
            return format_tool_call("submit", {})
        action = self.actions[self._next]
        self._next += 1
        return action


def _solutions_dir() -> Path:
    """Honest solutions shipped with the package (``envs/demo_solutions``), one per flavour:
    ``<flavour>/task.txt`` names the builtin task; every other file is a workspace file."""
    import cuda_gym.envs

    return Path(cuda_gym.envs.__file__).resolve().parent / "demo_solutions"


@dataclass(frozen=True)
class DemoSolution:
    """An honest solution for one builtin task: the task id and its workspace files."""

    task_id: str
    files: dict[str, str]


def demo_solution(flavour: str) -> DemoSolution:
    """The shipped solution of ``flavour`` (``cuda`` or ``cpu``)."""
    root = _solutions_dir() / flavour
    if not (root / "task.txt").is_file():
        raise CudaGymError(f"no demo solution for flavour {flavour!r} under {root}: reinstall cuda-gym")
    task_id = (root / "task.txt").read_text().strip()
    files = {
        str(path.relative_to(root)): path.read_text()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != "task.txt" and "__pycache__" not in path.parts
    }
    return DemoSolution(task_id, files)


CHECKS = ("compile", "verify", "profile")
"""The tool calls a replay makes between writing the files and ``submit`` (the demo's full path)."""


def scripted_actions(solution: DemoSolution, checks: Sequence[str] = CHECKS) -> list[str]:
    """The demo agent's tool calls: read the task, write the files, then ``checks`` and submit.

    ``checks=()`` writes and submits only: one judgement per episode (what a benchmark of stored
    solutions needs); the default also compiles, verifies and profiles, as an agent would.
    """
    actions = [format_tool_call("read_file", {"path": "model.py"})]
    for path, content in solution.files.items():
        actions.append(format_tool_call("write_file", {"path": path, "content": content}))
    for tool in (*checks, "submit"):
        actions.append(format_tool_call(tool, {}))
    return actions


def load_solution(path: str | Path, task_id: str | None = None) -> DemoSolution:
    """A stored solution: a workspace folder or a single ``model_new.py``-style file.

    The task is ``task_id``, else the folder's ``task.txt`` (the demo layout) or the ``task`` key of
    its ``meta.json`` (the layout of ``tests/solutions``). A ``base`` file names folders (one a line,
    relative to the folder's parent) whose files the solution starts from: shared kernels are kept
    once (``baselines/solutions/cuda/_lib``). A single file becomes ``model_new.py`` (a single-file
    submission, e.g. with ``load_inline``) and needs ``task_id``.

    Raises:
        CudaGymError: the path is missing, empty, or names no task.
    """
    root = Path(path)
    if root.is_file():
        if not task_id:
            raise CudaGymError(f"{root} is a single file: name its task (task_id=..., or a folder with task.txt)")
        return DemoSolution(task_id, {"model_new.py": root.read_text()})
    if not root.is_dir():
        raise CudaGymError(f"no solution at {root}: give a workspace folder or a model_new.py file")
    if task_id is None and (root / "task.txt").is_file():
        task_id = (root / "task.txt").read_text().strip()
    if task_id is None and (root / "meta.json").is_file():
        task_id = str(json.loads((root / "meta.json").read_text()).get("task") or "") or None
    if not task_id:
        raise CudaGymError(f"the solution {root} names no task: add task.txt with the task id, or pass task_id")
    files: dict[str, str] = {}
    for folder in [*_bases(root), root]:
        files.update(_folder_files(folder))
    if not files:
        raise CudaGymError(f"the solution {root} holds no file besides its task name")
    return DemoSolution(task_id, files)


_NOT_FILES = ("task.txt", "meta.json", "base")
"""Files of a solution folder that describe it rather than belong to the workspace."""


def _folder_files(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): p.read_text()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in _NOT_FILES and "__pycache__" not in p.parts
    }


def _bases(root: Path, depth: int = 0) -> list[Path]:
    """The folders ``root``'s ``base`` file names (one a line, relative to ``root``'s parent, as in
    ``tests/solutions``), each after its own bases: their files come first, ``root``'s own replace them."""
    if not (root / "base").is_file():
        return []
    if depth > 8:
        raise CudaGymError(f"the solution {root}: its bases nest too deeply (a cycle?)")
    out: list[Path] = []
    for line in (root / "base").read_text().splitlines():
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        base = (root.parent / name).resolve()
        if not base.is_dir():
            raise CudaGymError(f"the solution {root} names a base {name!r} that is not a folder ({base})")
        out += [*_bases(base, depth + 1), base]
    return out


def load_solutions(root: str | Path) -> dict[str, DemoSolution]:
    """Every solution folder directly under ``root`` (each with ``task.txt`` or ``meta.json``), by task id.

    The first folder (in name order) of a task wins when several solve it.
    """
    out: dict[str, DemoSolution] = {}
    for folder in sorted(Path(root).iterdir()):
        if folder.is_dir() and ((folder / "task.txt").is_file() or (folder / "meta.json").is_file()):
            solution = load_solution(folder)
            out.setdefault(solution.task_id, solution)
    if not out:
        raise CudaGymError(f"no solution folder (with task.txt or meta.json) under {root}")
    return out

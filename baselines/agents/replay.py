"""ReplayAgent: plays a fixed list of actions; the scripted demo agent and its honest solutions."""

from __future__ import annotations

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


def scripted_actions(solution: DemoSolution) -> list[str]:
    """The demo agent's tool calls: read the task, write the files, compile, verify, profile, submit."""
    actions = [format_tool_call("read_file", {"path": "model.py"})]
    for path, content in solution.files.items():
        actions.append(format_tool_call("write_file", {"path": path, "content": content}))
    for tool in ("compile", "verify", "profile", "submit"):
        actions.append(format_tool_call(tool, {}))
    return actions

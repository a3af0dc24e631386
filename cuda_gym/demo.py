"""The scripted demo agent and the interactive ``play`` shortcuts behind ``cuda-gym demo``/``play``."""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cuda_gym.errors import CudaGymError

logger = logging.getLogger(__name__)

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
    from cuda_gym.tools import format_tool_call

    actions = [format_tool_call("read_file", {"path": "model.py"})]
    for path, content in solution.files.items():
        actions.append(format_tool_call("write_file", {"path": path, "content": content}))
    for tool in ("compile", "verify", "profile", "submit"):
        actions.append(format_tool_call(tool, {}))
    return actions


@dataclass
class DemoResult:
    """What a demo episode produced."""

    env_id: str
    task_id: str
    reward: float
    steps: int
    info: dict[str, Any] = field(default_factory=dict)
    transcript: str = ""


def default_device() -> str:
    """``cuda`` when a CUDA GPU is visible, else ``cpu``."""
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:  # pragma: no cover - a broken torch install is reported by `cuda-gym doctor`
        return "cpu"


def run_demo(
    device: str | None = None,
    *,
    judge: Any = None,
    on_step: Callable[[str, str], None] | None = None,
) -> DemoResult:
    """Run one builtin episode with the scripted agent and return its reward and transcript.

    ``device``: ``cuda`` or ``cpu`` (default: the GPU if there is one). ``judge``: settings passed
    to the env (a ``JudgeConfig``, a dict or a judge). ``on_step(action, observation)`` is called
    after every step (the CLI prints there).
    """
    import gymnasium as gym

    device = device or default_device()
    flavour = "cpu" if device == "cpu" else "cuda"
    solution = demo_solution(flavour)
    env_id = "CpuKernel-Builtin-v0" if flavour == "cpu" else "CudaKernel-Builtin-v0"
    kwargs: dict[str, Any] = {"task_ids": [solution.task_id], "device": device, "render_mode": "ansi"}
    if judge is not None:
        kwargs["judge"] = judge
    env = gym.make(env_id, **kwargs)
    try:
        obs, info = env.reset(seed=0)
        if on_step is not None:
            on_step("", obs)
        reward, steps, final = 0.0, 0, info
        for action in scripted_actions(solution):
            obs, r, terminated, truncated, final = env.step(action)
            steps += 1
            reward += float(r)
            if on_step is not None:
                on_step(action, obs)
            if terminated or truncated:
                break
        transcript = env.render() or ""
        return DemoResult(env_id, solution.task_id, reward, steps, dict(final), transcript)
    finally:
        env.close()


PLAY_HELP = """\
Shortcuts (one per line; anything else is sent as a raw tool call, e.g. a JSON object):
  c            compile            v   verify          p   profile         s   submit
  r PATH       read a file        l   list the workspace files (glob **/*)
  b COMMAND    run a bash command in the workspace sandbox
  w PATH       write a file: the following lines up to a line holding only EOF
  e PATH       edit a workspace file in $EDITOR, then write it back
  h            this help          q   quit"""


@dataclass
class PlayCommand:
    """What one line of ``play`` input asks for: an action to send, help, quit, or more input."""

    action: str | None = None
    quit: bool = False
    help: bool = False
    needs_body: str | None = None
    """``w PATH``: the path whose content follows on the next lines."""
    edit: str | None = None
    """``e PATH``: the path to open in ``$EDITOR``."""


def parse_play_line(line: str) -> PlayCommand:
    """Turn one line of ``play`` input into a :class:`PlayCommand` (see :data:`PLAY_HELP`)."""
    from cuda_gym.tools import format_tool_call

    text = line.strip()
    head, _, rest = text.partition(" ")
    rest = rest.strip()
    simple = {"c": "compile", "v": "verify", "p": "profile", "s": "submit"}
    if head in simple and not rest:
        return PlayCommand(action=format_tool_call(simple[head], {}))
    if head in ("q", "quit", "exit") and not rest:
        return PlayCommand(quit=True)
    if head in ("h", "help", "?") and not rest:
        return PlayCommand(help=True)
    if head == "l" and not rest:
        return PlayCommand(action=format_tool_call("glob", {"pattern": "**/*"}))
    if head == "r" and rest:
        return PlayCommand(action=format_tool_call("read_file", {"path": rest}))
    if head == "b" and rest:
        return PlayCommand(action=format_tool_call("bash", {"command": rest}))
    if head == "w" and rest:
        return PlayCommand(needs_body=rest)
    if head == "e" and rest:
        return PlayCommand(edit=rest)
    return PlayCommand(action=line)


def write_action(path: str, content: str) -> str:
    """The ``write_file`` tool call for ``path`` and ``content``."""
    from cuda_gym.tools import format_tool_call

    return format_tool_call("write_file", {"path": path, "content": content})


def edit_in_editor(workspace_root: Path, path: str) -> str | None:
    """Open a copy of a workspace file in ``$EDITOR`` (``vi`` by default); return the new content,
    or ``None`` when the editor failed. The workspace itself is changed only by the tool call."""
    source = workspace_root / path
    initial = source.read_text(errors="replace") if source.is_file() else ""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / Path(path).name
        copy.write_text(initial)
        try:
            done = subprocess.run([*shlex.split(editor), str(copy)], check=False)
        except OSError as exc:
            logger.warning("could not start the editor %r: %s", editor, exc)
            return None
        if done.returncode != 0:
            return None
        return copy.read_text(errors="replace")

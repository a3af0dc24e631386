"""``cuda-gym demo``: one builtin episode played by the scripted agent, with its reward.

The episode is the CUDA Agent paper's case study, ``builtin/diag_matmul``: ``torch.diag(d) @ x``, which
eager PyTorch and ``torch.compile`` run as a full GEMM, while the shipped honest solution scales the
rows in one memory pass, so it earns reward 3 by a wide margin on the GPU and on the CPU device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

import cuda_gym  # noqa: F401  (registers the env ids)
from cuda_gym.baselines.agents import ReplayAgent, run_episode, scripted_actions
from cuda_gym.baselines.agents.replay import DemoSolution, load_solution
from cuda_gym.vocab import check_flavour

DEMO_TASK = "builtin/diag_matmul"
"""The demo's task: a dense GEMM in the reference, a row scaling in the solution."""


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


def showcase_solution(flavour: str) -> DemoSolution:
    """The demo's honest solution of ``DEMO_TASK`` for ``flavour`` (``cuda`` or ``cpu``), shipped under
    ``envs/demo_solutions/diag_matmul/<flavour>``."""
    import cuda_gym.envs

    check_flavour(flavour)
    root = Path(cuda_gym.envs.__file__).resolve().parent / "demo_solutions" / "diag_matmul" / flavour
    return load_solution(root)


def run_demo(
    device: str | None = None,
    *,
    judge: Any = None,
    on_step: Callable[[str, str], None] | None = None,
) -> DemoResult:
    """Run the demo episode (``DEMO_TASK``) with the scripted agent and return its reward and transcript.

    ``device``: ``cuda`` or ``cpu`` (default: the GPU if there is one). ``judge``: settings passed
    to the env (a ``JudgeConfig``, a dict or a judge). ``on_step(action, observation)`` is called
    after the reset and after every step (the CLI prints there).
    """
    device = device or default_device()
    flavour = "cpu" if device == "cpu" else "cuda"
    solution = showcase_solution(flavour)
    env_id = "CpuKernel-Builtin-v0" if flavour == "cpu" else "CudaKernel-Builtin-v0"
    kwargs: dict[str, Any] = {"task_ids": [solution.task_id], "device": device, "render_mode": "ansi"}
    if judge is not None:
        kwargs["judge"] = judge
    env = gym.make(env_id, **kwargs)
    try:
        agent = ReplayAgent(scripted_actions(solution))
        episode = run_episode(env, agent, seed=0, max_steps=len(agent.actions), on_step=on_step)
        transcript = env.render() or ""
        return DemoResult(env_id, solution.task_id, episode.reward, episode.steps, episode.info, str(transcript))
    finally:
        env.close()

"""Shared helpers of the env, wrapper, SB3/skrl and demo tests: the one honest CPU solution and one hack.

Every test that judges uses these two solutions, so the build cache and the judge's judgement
cache make every judgement after the first cheap.
"""

from __future__ import annotations

from typing import Any

from cuda_gym.baselines.agents import demo_solution
from cuda_gym.tools import format_tool_call
from cuda_gym.wrappers import write_files_command

CPU_ID = "CpuKernel-Builtin-v0"
HONEST = demo_solution("cpu")
TASK_ID = HONEST.task_id

HACK_MODEL_NEW = '''import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * self.scale + residual)
'''
HACK = dict(HONEST.files, **{"model_new.py": HACK_MODEL_NEW})
"""The honest kernels (same build) with a model_new.py that computes with PyTorch: a violation."""

ENV_KWARGS: dict[str, Any] = {"task_ids": [TASK_ID], "max_turns": 8}


def write_all(files: dict[str, str]) -> str:
    """One bash tool call writing every file of a solution."""
    return format_tool_call("bash", {"command": write_files_command(files)})


def call(name: str, **arguments: Any) -> str:
    """A tool call as action text."""
    return format_tool_call(name, arguments)


def play(env: Any, actions: list[str], **reset_kwargs: Any) -> tuple[float, dict[str, Any], list[Any]]:
    """Reset, run ``actions`` until the episode ends; return (return, last info, step tuples)."""
    env.reset(**reset_kwargs)
    total, info, steps = 0.0, {}, []
    for action in actions:
        step = env.step(action)
        steps.append(step)
        total += float(step[1])
        info = step[4]
        if step[2] or step[3]:
            break
    return total, info, steps

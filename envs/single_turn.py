"""SingleTurnKernelEnv: one step; the action is a whole solution, judged at once."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from cuda_gym.envs.base import KernelEnvBase, _from_cache
from cuda_gym.envs.config import KernelEnvConfig
from cuda_gym.envs.solution import FORMAT_HELP, Solution, SolutionFormatError, parse_solution
from cuda_gym.errors import ToolError

logger = logging.getLogger(__name__)

SINGLE_FILE_NAME = "kernelbench_solution.py"
"""Where a KernelBench-style single-file answer is written inside the workspace before judging."""


class SingleTurnKernelEnv(KernelEnvBase):
    """A one-step episode: the prompt is the task, the action a complete solution.

    The answer format is documented in :mod:`cuda_gym.envs.solution` (files as fenced blocks with
    paths, or one KernelBench-style file defining ``ModelNew``). ``step`` writes the files into a
    fresh workspace, runs the final judgement and returns its report as the observation;
    ``terminated`` is always True. An answer without a solution, or one that writes outside the
    workspace or over a protected file, scores like a failed compile (``reward_fn`` of a result
    with ``compiled=False``: -1 for the milestone reward) with ``info["parse_ok"] = False``.
    ``info`` holds the judge's facts (``compiled``, ``correct``, ``speedup_vs_eager``...,
    ``milestone``), ``final_eval=True`` and ``solution_form`` (``files`` or ``single_file``).
    """

    def __init__(
        self,
        config: KernelEnvConfig | Mapping[str, Any] | None = None,
        *,
        render_mode: str | None = None,
        **overrides: Any,
    ) -> None:
        overrides.setdefault("max_turns", 1)
        super().__init__(config, render_mode=render_mode, **overrides)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Draw a task, make its workspace, return the prompt; ``info`` has ``task_id`` and ``turn``."""
        super().reset(seed=seed)
        _, prompt, info = self._begin(options)
        info.update(turn=0, max_turns=1)
        return prompt, info

    def _prompt(self, ws: Any) -> str:
        return (
            self._header(ws, "the reference program")
            + "===== How to answer =====\n"
            "You have one answer; there are no tools. It is compiled, checked and timed as a submission.\n"
            f"{FORMAT_HELP}\n"
        )

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Write the answer's files, judge them, end the episode."""
        self._check_can_step()
        from cuda_gym.judge.result import JudgeResult
        from cuda_gym.tools.render import render_submit

        assert self.task is not None and self.workspace is not None
        info = self._base_info()
        info.update(turn=1, max_turns=1, tool="submit", submitted=True, final_eval=True)
        try:
            solution = parse_solution(action)
            form = self._write(solution)
        except ToolError as exc:
            result = JudgeResult(task_id=self.task.id, mode="full", device=self.config.device, error=str(exc))
            text = f"Error: {exc}"
            info.update(parse_ok=False, solution_form="")
        else:
            if form == "single_file":
                path = self.workspace.root / SINGLE_FILE_NAME
                result = self.judge.evaluate(self.task, solution=path, mode="full")
            else:
                result = self.judge.submit(self.workspace)
            text = render_submit(result, self.reward_fn)
            info.update(parse_ok=True, solution_form=form)
        reward = self._reward(result)
        facts = self._final_facts(result)
        if not info["parse_ok"]:  # nothing was measured: leave out the NaN timings
            facts = {k: v for k, v in facts.items() if not (isinstance(v, float) and math.isnan(v))}
        info.update(facts)
        info["judge_cached"] = _from_cache(result)
        info["reward"] = reward
        self._done = True
        observation = self._observe(text)
        action_text = action if isinstance(action, str) else repr(action)
        self.transcript.append({"role": "assistant", "content": action_text})
        self.transcript.append({"role": "judge", "content": observation})
        return observation, reward, True, False, info

    def _write(self, solution: Solution) -> str:
        """Write the answer's files with the file tools' checks: confined, never over protected
        files, within the size budgets, atomically; anything wrong is a ``ToolError`` (a -1 verdict)."""
        from cuda_gym.tools.files import write_file

        ws = self.workspace
        assert ws is not None
        if solution.single_file is not None:
            write_file(ws, SINGLE_FILE_NAME, solution.single_file)
            return "single_file"
        for rel in solution.files:
            path = ws.resolve(rel)  # raises ToolError on escapes before anything is written
            if ws.is_protected(path):  # also catches aliases such as kernels/../model.py
                raise SolutionFormatError(f"{rel} is protected infrastructure and cannot be written; leave it out")
        for rel, content in solution.files.items():
            write_file(ws, rel, content)
        return "files"

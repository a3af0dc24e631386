"""KernelEnv: the multi-turn env; one tool call per step, the milestone reward at the end."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cuda_gym.envs.base import KernelEnvBase, _from_cache
from cuda_gym.envs.config import KernelEnvConfig

logger = logging.getLogger(__name__)

FINAL_BANNER = "\n\n===== turn limit reached: final judgement of the workspace =====\n"


class KernelEnv(KernelEnvBase):
    """A multi-turn kernel-optimisation episode on one task (``gymnasium.Env[str, str]``).

    * ``reset(seed=, options={"task_id": ...})`` draws a task (with ``self.np_random``, or the one
      named), makes a fresh workspace and returns the prompt: SKILL.md, the reference program and
      how to call tools. ``info``: ``task_id``, ``tools`` (OpenAI schemas), ``turn`` (0), ``max_turns``.
    * ``step(action)``: ``action`` is one tool call as text (a Hermes ``<tool_call>{json}</tool_call>``
      block in free text, or a bare JSON object). It never raises on agent input: a malformed call
      (or a non-``str`` action) returns an error observation with ``info["parse_ok"] = False``.
      The reward is 0 until the final judgement, which happens on ``submit`` (``terminated=True``)
      or after the ``max_turns``-th call (``truncated=True``, still scored). On that step
      ``info["final_eval"]`` is True and ``info`` carries the judge's facts
      (``compiled``, ``correct``, ``passed``, ``speedup_vs_eager``, ``speedup_vs_compile``,
      ``milestone``...); ``reward = reward_fn(result)`` (the milestone reward by default). Both ends
      judge through the submit tool: a workspace the tools refuse (more than ``workspace_entries``
      entries, a file name that is not UTF-8) scores -1 without a judge call; only a failure of the
      judge or the build itself raises :class:`~cuda_gym.errors.JudgeError` (not the agent's doing).
    * ``step`` after the episode ended raises :class:`~cuda_gym.envs.EpisodeOverError` (a caller
      bug, not agent input): call ``reset()`` first. Vector envs and SB3 reset automatically.
    * ``render()`` (``render_mode="ansi"``) returns the transcript; ``close()`` removes the
      workspace unless ``keep_workspace``.

    Nothing compiles or touches a GPU in ``__init__`` or ``reset``: the judge is built on first use.
    """

    def __init__(
        self,
        config: KernelEnvConfig | Mapping[str, Any] | None = None,
        *,
        render_mode: str | None = None,
        **overrides: Any,
    ) -> None:
        super().__init__(config, render_mode=render_mode, **overrides)
        self.runner: Any = None
        self.turn = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode on a new task; see the class docstring."""
        super().reset(seed=seed)
        from cuda_gym.tools import ToolRunner, tool_schemas

        ws, prompt, info = self._begin(options)
        self.runner = ToolRunner(ws, judge=self.judge, output_limit=self.config.tool_output_limit,
                                 reward=self.reward_fn)
        self.turn = 0
        info.update(turn=0, tools=tool_schemas())
        return prompt, info

    def _prompt(self, ws: Any) -> str:
        from cuda_gym.tools import TOOLS, format_tool_call

        names = ", ".join(TOOLS)
        example = format_tool_call("read_file", {"path": "model.py"})
        return (
            self._header(ws, "the reference program, read-only")
            + "===== How to act =====\n"
            "Each turn, call exactly one tool with a JSON object inside a <tool_call> block, e.g.\n"
            f"{example}\n"
            f"Tools: {names}. Paths are relative to the workspace root.\n"
            f"You have {self.config.max_turns} tool calls. Call submit when done; after the last call the "
            "workspace is judged as it is.\n"
        )

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Run one tool call; see the class docstring for rewards, ends and ``info``."""
        self._check_can_step()
        self.turn += 1
        info = self._base_info()
        info.update(turn=self.turn, final_eval=False, submitted=False)
        if not isinstance(action, str):
            text = (
                f"Error: an action must be a str holding one tool call, got {type(action).__name__}. "
                "Wrap OpenAI tool_calls entries with cuda_gym.wrappers.OpenAIToolCalls."
            )
            info.update(tool="", parse_ok=False, tool_ok=False)
            result = None
            submitted = False
            action_text = repr(action)
        else:
            outcome = self.runner.run(action)
            text, result, submitted = outcome.text, outcome.judge_result, outcome.submitted
            info.update(outcome.info)
            if result is not None:
                info["judge_cached"] = _from_cache(result)
            action_text = action
            if outcome.info.get("tool") == "submit" and outcome.info.get("parse_ok") and result is None:
                # submit takes no arguments: a failure here is the judge's or the build's, not the agent's.
                raise self._judge_failed("judge the submission", text)

        reward = 0.0
        terminated = truncated = False
        if submitted:
            terminated = True
        elif self.turn >= self.config.max_turns:
            truncated = True
            # The final judgement goes through the submit tool, as a submit would: a workspace the tools
            # refuse scores -1, and only the judge's (or the build's) own failure raises.
            from cuda_gym.tools import ToolCall

            final = self.runner.call(ToolCall("submit", {}))
            if final.judge_result is None:
                raise self._judge_failed("judge the workspace at the turn limit", final.text)
            result = final.judge_result
            text = text + FINAL_BANNER + final.text
        if terminated or truncated:
            assert result is not None
            reward = self._reward(result)
            info.update(self._final_facts(result))
            info.update(final_eval=True, submitted=submitted, reward=reward, judge_cached=_from_cache(result))
            self._done = True
        observation = self._observe(text)
        self.transcript.append({"role": "assistant", "content": action_text})
        self.transcript.append({"role": "tool", "content": observation})
        return observation, reward, terminated, truncated, info

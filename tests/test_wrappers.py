"""Every wrapper on the real CPU env: rewards from the judge's facts, chat, OpenAI calls, records, menu."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import numpy as np
import pytest

from cuda_gym.tools import ToolCall, to_openai_tool_call
from cuda_gym.wrappers import (
    INFO_FEATURES,
    ChatHistory,
    CorrectnessReward,
    FormatPenalty,
    LogSpeedupReward,
    MilestoneReward,
    OpenAIToolCalls,
    RecordTrajectories,
    SpeedupReward,
    TextFeatures,
    ToolMenu,
    read_trajectories,
)
from env_helpers import CPU_ID, ENV_KWARGS, HACK, HONEST, call, play, write_all

HONEST_RUN = [write_all(HONEST.files), call("submit")]
HACK_RUN = [write_all(HACK), call("submit")]


def make(*wrappers, **kwargs):
    env = gym.make(CPU_ID, **dict(ENV_KWARGS, **kwargs))
    for wrapper in wrappers:
        env = wrapper(env)
    return env


# --- reward wrappers ------------------------------------------------------------------------------


def test_reward_wrappers_recompute_from_the_judges_facts() -> None:
    env = make(lambda e: MilestoneReward(e, threshold=1e9))
    try:
        total, info, _ = play(env, HONEST_RUN, seed=0)
        assert info["passed"] and total == 1.0 and info["env_reward"] == info["milestone"]
        speedups = (info["speedup_vs_eager"], info["speedup_vs_compile"])
    finally:
        env.close()
    env = make(lambda e: MilestoneReward(e, threshold=1e-9))
    try:
        total, info, _ = play(env, HONEST_RUN, seed=0)
        assert total == (3.0 if math.isfinite(speedups[1]) else 2.0)
    finally:
        env.close()
    for wrapper, expected in (
        (lambda e: SpeedupReward(e, baseline="eager"), speedups[0]),
        (lambda e: LogSpeedupReward(e, baseline="eager"), math.log(speedups[0])),
        (CorrectnessReward, 1.0),
    ):
        env = make(wrapper)
        try:
            total, info, _ = play(env, HONEST_RUN, seed=0)
            # The judgement cache returns the very same verdict, so the numbers match exactly.
            assert total == pytest.approx(expected)
        finally:
            env.close()


def test_reward_wrappers_give_failure_values_for_a_hack() -> None:
    for wrapper, expected in (
        (lambda e: MilestoneReward(e, threshold=1e-9), -1.0),
        (lambda e: SpeedupReward(e, failure=-0.5), -0.5),
        (LogSpeedupReward, -1.0),
        (lambda e: CorrectnessReward(e, success=2.0, failure=0.0), 0.0),
    ):
        env = make(wrapper)
        try:
            total, info, _ = play(env, HACK_RUN, seed=0)
            assert total == expected and info["passed"] is False
        finally:
            env.close()
    with pytest.raises(ValueError, match="baseline"):
        SpeedupReward(gym.make(CPU_ID), baseline="cudnn")


def test_format_penalty_applies_to_parse_errors_only() -> None:
    env = make(lambda e: FormatPenalty(e, penalty=0.25))
    try:
        env.reset(seed=0)
        _, reward, _, _, info = env.step("compile please")
        assert reward == -0.25 and info["parse_ok"] is False
        _, reward, _, _, info = env.step(call("glob", pattern="*"))
        assert reward == 0 and info["parse_ok"] is True
    finally:
        env.close()


# --- observation and action wrappers ------------------------------------------------------------------


def test_chat_history_accumulates_messages_as_json() -> None:
    env = make(lambda e: ChatHistory(e, max_length=1 << 18))
    try:
        obs, info = env.reset(seed=0)
        messages = json.loads(obs)
        assert [m["role"] for m in messages] == ["user"] and "SKILL.md" in messages[0]["content"]
        action = call("read_file", path="model.py")
        obs, *_ = env.step(action)
        messages = json.loads(obs)
        assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
        assert messages[1]["content"] == action and "class Model" in messages[2]["content"]
        assert env.observation_space.contains(obs) and env.get_wrapper_attr("messages") == messages
    finally:
        env.close()
    small = make(lambda e: ChatHistory(e, max_length=4096, tool_role="user"))
    try:
        small.reset(seed=0)
        for _ in range(3):
            obs, _, _, _, info = small.step(call("read_file", path="model.py"))
        messages = json.loads(obs)
        assert len(obs) <= 4096 and small.observation_space.contains(obs)
        assert info["history_dropped"] == 4 and [m["role"] for m in messages] == ["user", "assistant", "user"]
    finally:
        small.close()


def test_openai_tool_calls_are_accepted_as_actions() -> None:
    env = make(OpenAIToolCalls)
    try:
        env.reset(seed=0)
        entry = to_openai_tool_call(ToolCall("read_file", {"path": "model.py"}), call_id="call_1")
        assert isinstance(entry["function"]["arguments"], str)
        obs, _, _, _, info = env.step(entry)
        assert info["parse_ok"] and info["tool"] == "read_file" and "class Model" in obs
        hf_style = {"type": "function", "function": {"name": "glob", "arguments": {"pattern": "*.py"}}}
        obs, _, _, _, info = env.step([hf_style])
        assert info["tool"] == "glob" and "model.py" in obs
        obs, _, _, _, info = env.step([entry, hf_style])
        assert info["parse_ok"] is False
        obs, _, _, _, info = env.step({"function": {"name": "no_such_tool", "arguments": "{}"}})
        assert info["parse_ok"] is False and obs.startswith("Error")
    finally:
        env.close()


def test_record_trajectories_writes_one_line_per_episode(tmp_path) -> None:
    path = tmp_path / "runs" / "traj.jsonl"
    env = make(lambda e: RecordTrajectories(e, path, include_tools=True))
    try:
        total, info, _ = play(env, HONEST_RUN, seed=0)
        assert path.is_file() and len(read_trajectories(path)) == 1
        env.reset(seed=1)
        env.step(call("glob", pattern="*"))
        env.reset(seed=2)  # abandons the second episode: written as incomplete
        env.step("garbage")
    finally:
        env.close()  # writes the third, unfinished episode
    episodes = read_trajectories(path)
    assert [e["complete"] for e in episodes] == [True, False, False]
    first = episodes[0]
    assert first["env_id"] == CPU_ID and first["task_id"] == HONEST.task_id and first["seed"] == 0
    assert "SKILL.md" in first["prompt"] and first["tools"] and first["length"] == 2
    assert first["return"] == total and first["terminated"] and first["final"]["passed"] is True
    assert first["steps"][0]["action"] == HONEST_RUN[0] and first["steps"][1]["info"]["final_eval"]
    assert episodes[2]["steps"][0]["info"]["parse_ok"] is False


# --- SB3/skrl adapters ----------------------------------------------------------------------------------


def test_tool_menu_maps_indices_to_tool_calls_and_masks() -> None:
    env = make(lambda e: ToolMenu(e, [HONEST.files, HACK]))
    try:
        assert env.action_space == gym.spaces.Discrete(6)
        assert [label for label, _ in env.get_wrapper_attr("menu")][:4] == ["compile", "verify", "profile", "submit"]
        env.reset(seed=0)
        assert list(env.get_wrapper_attr("action_masks")()) == [False] * 4 + [True, True]
        _, _, _, _, info = env.step(4)
        assert info["menu"] == "write_solution_0" and info["tool_ok"]
        root = env.unwrapped.workspace.root
        assert (root / "model_new.py").read_text() == HONEST.files["model_new.py"]
        assert list(env.get_wrapper_attr("action_masks")()) == [True] * 4 + [False, True]
        _, reward, terminated, _, info = env.step(3)
        assert terminated and reward >= 1 and info["menu"] == "submit"
        with pytest.raises(ValueError, match="menu action"):
            env.get_wrapper_attr("action")(9)
    finally:
        env.close()


def test_text_features_are_stable_bounded_vectors() -> None:
    env = make(lambda e: ToolMenu(e, [HONEST.files]), lambda e: TextFeatures(e, dim=64))
    try:
        assert env.observation_space.shape == (64 + len(INFO_FEATURES),)
        first, _ = env.reset(seed=0)
        again, _ = env.reset(seed=0)
        assert np.array_equal(first, again) and env.observation_space.contains(first)
        assert first[:64].sum() > 0
        obs, *_ = env.step(4)
        obs, _, terminated, _, info = env.step(1)  # verify
        assert env.observation_space.contains(obs)
        flags = dict(zip(INFO_FEATURES, obs[64:]))
        assert flags["compiled"] == 1 and flags["correct"] == 1 and flags["turn_fraction"] == pytest.approx(2 / 8)
    finally:
        env.close()

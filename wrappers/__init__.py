"""Wrappers: rewards from the judge's facts, chat history, OpenAI actions, trajectories, SB3/skrl adapters."""

from cuda_gym.wrappers.adapters import INFO_FEATURES, TOOLS, TextFeatures, ToolMenu, write_files_command
from cuda_gym.wrappers.chat import ChatHistory
from cuda_gym.wrappers.openai import OpenAIToolCalls
from cuda_gym.wrappers.record import RecordTrajectories, read_trajectories
from cuda_gym.wrappers.rewards import (
    CorrectnessReward,
    FormatPenalty,
    InfoReward,
    LogSpeedupReward,
    MilestoneReward,
    SpeedupReward,
)

__all__ = [
    "INFO_FEATURES",
    "TOOLS",
    "ChatHistory",
    "CorrectnessReward",
    "FormatPenalty",
    "InfoReward",
    "LogSpeedupReward",
    "MilestoneReward",
    "OpenAIToolCalls",
    "RecordTrajectories",
    "SpeedupReward",
    "TextFeatures",
    "ToolMenu",
    "read_trajectories",
    "write_files_command",
]

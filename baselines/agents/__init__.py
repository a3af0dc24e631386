"""Agents that play the kernel envs: the ``Agent`` interface, an episode loop, the replay agent, and
the chat agents (``OpenAIAgent`` over a chat-completions server, ``HFAgent`` over a local model).

The chat agents import their client libraries (``openai``, ``transformers``) only when built.
"""

from cuda_gym.baselines.agents.base import Agent, Episode, run_episode
from cuda_gym.baselines.agents.hf_agent import HFAgent, HFAgentConfig
from cuda_gym.baselines.agents.openai_agent import OpenAIAgent, OpenAIAgentConfig
from cuda_gym.baselines.agents.replay import (
    DemoSolution,
    ReplayAgent,
    demo_solution,
    load_solution,
    load_solutions,
    scripted_actions,
)

__all__ = [
    "Agent", "DemoSolution", "Episode", "HFAgent", "HFAgentConfig", "OpenAIAgent", "OpenAIAgentConfig", "ReplayAgent",
    "demo_solution", "load_solution", "load_solutions", "run_episode", "scripted_actions",
]

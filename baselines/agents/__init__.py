"""Agents that play the kernel envs: the ``Agent`` interface, an episode loop, and the replay agent."""

from cuda_gym.baselines.agents.base import Agent, Episode, run_episode
from cuda_gym.baselines.agents.replay import DemoSolution, ReplayAgent, demo_solution, scripted_actions

__all__ = ["Agent", "DemoSolution", "Episode", "ReplayAgent", "demo_solution", "run_episode", "scripted_actions"]

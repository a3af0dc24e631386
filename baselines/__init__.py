"""Agents, trainers and evaluation harnesses (installed as ``cuda_gym.baselines``)."""

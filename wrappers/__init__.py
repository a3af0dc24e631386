"""Wrappers for cuda_gym environments (installed as ``cuda_gym.wrappers``)."""

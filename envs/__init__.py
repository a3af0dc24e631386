"""Gymnasium environments of cuda_gym (installed as ``cuda_gym.envs``)."""

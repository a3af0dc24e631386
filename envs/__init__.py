"""Gymnasium environments: the multi-turn ``KernelEnv``, ``SingleTurnKernelEnv`` and their ids."""

from cuda_gym.envs.base import KernelEnvBase
from cuda_gym.envs.config import REWARDS, KernelEnvConfig
from cuda_gym.envs.kernel_env import KernelEnv
from cuda_gym.envs.registration import env_ids, register_envs
from cuda_gym.envs.single_turn import SingleTurnKernelEnv
from cuda_gym.envs.solution import Solution, format_solution, parse_solution
from cuda_gym.envs.spaces import PrintableText, SharedTexts
from cuda_gym.errors import ConfigError, EpisodeOverError, SolutionFormatError  # re-exported for env users

__all__ = [
    "REWARDS",
    "ConfigError",
    "EpisodeOverError",
    "KernelEnv",
    "KernelEnvBase",
    "KernelEnvConfig",
    "PrintableText",
    "SharedTexts",
    "SingleTurnKernelEnv",
    "Solution",
    "SolutionFormatError",
    "env_ids",
    "format_solution",
    "parse_solution",
    "register_envs",
]

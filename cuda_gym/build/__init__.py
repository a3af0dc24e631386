"""Compiling a workspace into the ``cuda_extension`` module (see docs/build.md)."""

from cuda_gym.build.core import *  # noqa: F401,F403 - the public API (core.__all__)
from cuda_gym.build.core import __all__, _fast_linker, _parse_arch  # noqa: F401 - used by tests

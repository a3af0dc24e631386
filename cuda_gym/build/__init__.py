"""Compiling a workspace into the ``cuda_extension`` module, by trusted code, with a content-keyed cache.

Modules: :mod:`~cuda_gym.build.config` (settings and results), :mod:`~cuda_gym.build.toolchain`
(compilers and the fixed flags), :mod:`~cuda_gym.build.files` (reading agent files safely and the
snapshot), :mod:`~cuda_gym.build.store` (the object and module cache), :mod:`~cuda_gym.build.core`
(a workspace build), :mod:`~cuda_gym.build.inline` (single-file ``load_inline`` submissions) and
:mod:`~cuda_gym.build.logs`. See docs/build.md.
"""

from cuda_gym.build.config import MODULE_NAME, SO_NAME, BuildConfig, BuildResult
from cuda_gym.build.core import build_workspace, load_extension
from cuda_gym.build.logs import summarize_log
from cuda_gym.build.store import cache_root, sweep
from cuda_gym.build.toolchain import Toolchain, find_cuda_home, resolve_arch, toolchain

__all__ = ["MODULE_NAME", "SO_NAME", "BuildConfig", "BuildResult", "Toolchain", "build_workspace", "cache_root",
           "find_cuda_home", "load_extension", "resolve_arch", "summarize_log", "sweep", "toolchain"]

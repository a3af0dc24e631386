"""Build settings, results and fixed names (no toolchain or torch import here)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MODULE_NAME = "cuda_extension"
SO_NAME = f"{MODULE_NAME}.so"
CACHE_ENV = "CUDA_GYM_BUILD_CACHE"
DEFAULT_ARCH = "9.0"
KEY_VERSION = "cuda_gym-build-4"
"""Bumped whenever the flag policy or the build layout changes, so old cache entries are not reused."""



@dataclass
class BuildConfig:
    """How workspaces are built. The compiler flags themselves are fixed in code (see docs/build.md)."""

    arch: str | None = None
    """CUDA architectures as in ``TORCH_CUDA_ARCH_LIST`` (``"9.0"``, ``"8.0;9.0+PTX"``); default:
    ``$TORCH_CUDA_ARCH_LIST``, else the visible GPU's capability, else ``9.0``."""
    timeout_s: float = 600.0
    """Wall-clock limit of one ninja run; the whole compiler process tree is killed past it. A single
    file's ``load_inline`` calls share one such limit for all their builds."""
    cache_dir: Path | None = None
    """Artifact cache root; default ``$CUDA_GYM_BUILD_CACHE``, else ``cache_dir()/build``."""
    jobs: int | None = None
    """Parallel compile jobs; default ``os.cpu_count()``."""
    use_pch: bool = True
    """Precompile ``torch/extension.h`` once per toolchain (in the cache) and use it for binding files."""
    use_cache: bool = True
    """Look up and store objects and modules in the content-addressed cache; ``False`` compiles every
    file afresh and leaves the module in the workspace's ``build_dir``."""
    log_limit: int = 8000
    """Characters of the concise log kept for the agent (middle cut)."""
    memory_bytes: int | None = 16 * 2**30
    """Per-process memory limit of sandboxed compiles (nvcc/cicc can be hungry)."""
    max_artifact_bytes: int = 64 * 2**20
    """Largest object or module a build may store in the cache; a larger one fails the build (the
    agent's error: a 200 MiB initialised array put 400 MiB per variant into the shared cache). It is
    also the sandboxed compilers' file-size limit, and 16 times it their output folder's disk limit."""
    max_cache_bytes: int | None = 20 * 2**30
    """Bound on the cache's modules, objects, precompiled headers and ``binding.o`` together; past it
    the least recently used modules and objects are removed (:func:`cuda_gym.build.store.evict`).
    ``None``: unbounded."""
    max_inline_calls: int = 4
    """Distinct ``load_inline`` calls a single file may make at import; more is the agent's compile
    failure (each is a build: twelve calls took 406 s to judge)."""


@dataclass
class BuildResult:
    """What one build did.

    Attributes:
        ok: the module was built (or found in the cache).
        module_path: the built ``cuda_extension.so`` (in the cache when caching is on), else ``None``.
        log: concise compiler output for the agent: errors first (``kernels/x.cu:LINE: error: ...``),
            warnings after; ninja progress and command lines dropped; printable ASCII, cut to the limit.
        raw_log: everything ninja printed.
        cached: nothing was compiled or linked: the module came from the cache.
        seconds: wall time of the whole call.
        key: the module's content key (every object's key, the binding infrastructure, the toolchain);
            for a failed build, a key of all the snapshot's files and the toolchain.
        inputs: workspace-relative paths of every workspace file the compiler read (from its
            dependency files), for ``rules.check_submission(..., compiled=inputs)``.
        compiled: the translation units this call compiled (the others came from the object cache).
    """

    ok: bool
    module_path: Path | None
    log: str
    raw_log: str
    cached: bool
    seconds: float
    key: str
    inputs: tuple[str, ...] = ()
    compiled: tuple[str, ...] = ()


# -- toolchain discovery -------------------------------------------------------------------------

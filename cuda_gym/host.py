"""Facts about this host that several modules need: the CUDA toolkit, the C++ compiler, the CPU model.

A leaf module (standard library only), so that ``build``, ``sandbox`` and ``judge`` can all ask it
without importing one another.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
from pathlib import Path

__all__ = ["cpu_model", "find_cuda_home", "find_cxx"]


def _valid_cuda_home(path: str | os.PathLike[str] | None) -> Path | None:
    if not path:
        return None
    p = Path(path)
    # A toolkit has its headers beside nvcc; /usr/local/bin/nvcc may be a wrapper script whose
    # "home" (/usr/local) holds no CUDA headers.
    if (p / "bin" / "nvcc").is_file() and (p / "include" / "cuda_runtime.h").is_file():
        return p.resolve()
    return None


def find_cuda_home() -> Path | None:
    """The CUDA toolkit folder: ``$CUDA_HOME``/``$CUDA_PATH`` if they hold ``bin/nvcc`` and
    ``include/cuda_runtime.h``, else where the ``nvcc`` on ``PATH`` really lives (following symlinks
    and ``exec`` wrapper scripts), else ``/usr/local/cuda`` (or the newest ``/usr/local/cuda-*``);
    ``None`` when there is no toolkit."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = _valid_cuda_home(os.environ.get(var))
        if home is not None:
            return home
    nvcc = shutil.which("nvcc")
    if nvcc:
        real = Path(nvcc).resolve()
        home = _valid_cuda_home(real.parent.parent)
        if home is not None:
            return home
        try:
            text = real.read_text(errors="replace")[:4096] if real.stat().st_size < 65536 else ""
        except OSError:
            text = ""
        for match in re.finditer(r"(/[^\s\"']+)/bin/nvcc\b", text):
            home = _valid_cuda_home(match.group(1))
            if home is not None:
                return home
    for candidate in [Path("/usr/local/cuda"), *sorted(Path("/usr/local").glob("cuda-*"), reverse=True)]:
        home = _valid_cuda_home(candidate)
        if home is not None:
            return home
    return None


def find_cxx() -> Path | None:
    """The C++ compiler builds use: ``$CXX`` (a name on ``PATH`` or a path), else ``c++``, else ``g++``;
    ``None`` when there is none (install g++)."""
    found = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    return Path(found) if found else None


@functools.cache
def cpu_model() -> str:
    """The CPU model name from ``/proc/cpuinfo`` (else ``platform.processor()`` or the machine type)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover - non-Linux
        pass
    return platform.processor() or platform.machine()

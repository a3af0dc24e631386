"""Toolchain discovery: compilers, versions, the fixed flag policy and the arch list (once per process)."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from cuda_gym.build.config import DEFAULT_ARCH, KEY_VERSION, MODULE_NAME, BuildConfig
from cuda_gym.errors import BuildError
from cuda_gym.host import find_cuda_home, find_cxx
from cuda_gym.vocab import check_flavour

logger = logging.getLogger(__name__)

__all__ = ["Toolchain", "find_cuda_home", "resolve_arch", "toolchain"]


def _version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(f"cannot run {cmd[0]} ({exc}): install it or fix PATH") from exc
    return (out.stdout + out.stderr).strip()


def _ninja_binary() -> str:
    try:
        import ninja  # the PyPI package ships the binary in its own bin dir

        candidate = Path(ninja.BIN_DIR) / "ninja"
        if candidate.is_file():
            return str(candidate)
    except ImportError:
        pass
    found = shutil.which("ninja")
    if not found:
        raise BuildError("ninja is not installed: run `pip install ninja`")
    return str(Path(found).resolve())


def _wheel_nvidia_dirs() -> list[Path]:
    """``site-packages/nvidia/*`` folders of the CUDA wheels torch depends on (cuBLAS, cuDNN...)."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    dirs: list[Path] = []
    for loc in spec.submodule_search_locations:
        dirs += sorted(p for p in Path(loc).iterdir() if p.is_dir() and (p / "lib").is_dir())
    return dirs


def _find_library(stem: str, dirs: list[Path]) -> tuple[Path, str] | None:
    """``(folder, linker argument)`` for ``lib<stem>.so`` or its newest versioned file, else ``None``."""
    for d in dirs:
        if (d / f"lib{stem}.so").exists():
            return d, f"-l{stem}"
        versioned = sorted(d.glob(f"lib{stem}.so.[0-9]*"), key=lambda p: len(p.name))
        if versioned:
            return d, f"-l:{versioned[0].name}"
    return None


def _parse_arch(arch: str) -> list[str]:
    """nvcc ``-gencode`` flags for an arch list such as ``"8.0;9.0+PTX"`` or ``"sm_90"``."""
    flags: list[str] = []
    for item in re.split(r"[;,\s]+", arch.strip()):
        if not item:
            continue
        ptx = item.endswith("+PTX")
        item = item.removesuffix("+PTX").removeprefix("sm_").removeprefix("compute_")
        match = re.fullmatch(r"(\d+)\.?(\d)([af]?)", item)
        if not match:
            raise BuildError(f"unknown CUDA arch {item!r}: use values like 9.0, 8.0+PTX or sm_90")
        num = f"{match.group(1)}{match.group(2)}{match.group(3)}"
        code = f"sm_{num}" + (f",compute_{num}" if ptx else "")
        flags.append(f"-gencode=arch=compute_{num},code=" + (f"[{code}]" if ptx else code))
    if not flags:
        raise BuildError(f"empty CUDA arch list {arch!r}: use values like 9.0")
    return flags


def resolve_arch(config: BuildConfig | None = None) -> str:
    """The arch list in force: config, ``$TORCH_CUDA_ARCH_LIST``, the visible GPU, else ``9.0``."""
    if config is not None and config.arch:
        return config.arch
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"{major}.{minor}"
    except Exception:  # noqa: BLE001 - no usable GPU: fall back to the default arch
        pass
    return DEFAULT_ARCH


@dataclass(frozen=True)
class Toolchain:
    """Compilers, versions and the fixed flags for one flavour and arch (discovered once per process)."""

    flavour: str
    cxx: str
    cxx_version: str
    nvcc: str | None
    nvcc_version: str
    ninja: str
    torch_version: str
    python_tag: str
    binding_flags: tuple[str, ...]
    """Flags of every C++ file that talks to torch (bindings, ``binding.cpp``)."""
    kernel_cxx_flags: tuple[str, ...]
    """Flags of plain C++ kernel files (CPU flavour: OpenMP, native ISA)."""
    nvcc_flags: tuple[str, ...]
    link_flags: tuple[str, ...]
    host_cpu: str = ""
    """CPU model and ISA flags (the CPU flavour's ``-march=native`` depends on them)."""
    arch: str = ""

    def binding_signature(self) -> str:
        """What the precompiled header and ``binding.o`` depend on (the same for both flavours)."""
        parts = [KEY_VERSION, self.cxx_version, self.torch_version, self.python_tag, *self.binding_flags]
        return "\n".join(_strip_paths(p) for p in parts)

    def signature(self) -> str:
        """Everything about the toolchain that changes the built module (part of the cache key)."""
        parts = [KEY_VERSION, self.flavour, self.arch, self.cxx_version, self.nvcc_version, self.torch_version,
                 self.python_tag, self.host_cpu, *self.binding_flags, "|", *self.kernel_cxx_flags, "|",
                 *self.nvcc_flags, "|", *self.link_flags]
        return "\n".join(_strip_paths(p) for p in parts)


def _strip_paths(flag: str) -> str:
    """A flag without install prefixes, so a cache key survives a moved virtualenv."""
    return re.sub(r"/\S*/(site-packages|dist-packages|cuda[^/\s]*)/", r"<\1>/", flag)


def _host_cpu() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    model = re.search(r"^model name\s*:\s*(.*)$", text, re.MULTILINE)
    flags = re.search(r"^flags\s*:\s*(.*)$", text, re.MULTILINE)
    digest = hashlib.sha256((flags.group(1) if flags else "").encode()).hexdigest()[:16]
    return f"{model.group(1) if model else platform.machine()} {digest}"


def _fast_linker(cxx: str, link: list[str]) -> list[str]:
    """``["-fuse-ld=gold"]`` when gold links a small shared object with these flags, else ``[]`` (bfd).

    gold links against torch's large libraries in about half the time of bfd (0.17 s vs 0.33 s), on
    the edit-recompile path. It is probed, not assumed: where a compiler's library folder holds a
    dangling ``libstdc++.so`` (as on the lent H200 image), bfd searches on and gold fails.
    """
    if not shutil.which("ld.gold"):
        return []
    with tempfile.TemporaryDirectory(prefix="cuda_gym_ld_") as tmp:
        source = Path(tmp) / "probe.cpp"
        source.write_text("#include <string>\nstd::string cuda_gym_probe() { return std::string(3, 'x'); }\n")
        cmd = [cxx, "-fuse-ld=gold", "-shared", "-fPIC", str(source), "-o", str(Path(tmp) / "probe.so"), *link]
        try:
            ok = subprocess.run(cmd, capture_output=True, timeout=120, check=False).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
    if not ok:
        logger.debug("ld.gold cannot link here; using the default linker")
    return ["-fuse-ld=gold"] if ok else []


@functools.lru_cache(maxsize=8)
def toolchain(flavour: str, arch: str) -> Toolchain:
    """The :class:`Toolchain` for ``flavour`` (``cuda``/``cpu``) and ``arch`` (cached per process)."""
    import sysconfig

    import torch
    import torch.utils.cpp_extension as cpp_ext

    check_flavour(flavour)
    found_cxx = find_cxx()
    if found_cxx is None:
        raise BuildError("no C++ compiler found: install g++ (apt-get install g++) or set CXX")
    cxx = str(found_cxx)
    cuda_home = find_cuda_home()
    if flavour == "cuda" and cuda_home is None:
        raise BuildError("nvcc not found: install the CUDA toolkit or set CUDA_HOME to the folder holding bin/nvcc")
    nvcc = str(cuda_home / "bin" / "nvcc") if cuda_home is not None and flavour == "cuda" else None

    abi = int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    defines = [f"-DTORCH_EXTENSION_NAME={MODULE_NAME}", "-DTORCH_API_INCLUDE_EXTENSION_H",
               f"-D_GLIBCXX_USE_CXX11_ABI={abi}"]
    with warnings.catch_warnings():  # deprecated (and empty) in recent torch; still needed by older ones
        warnings.simplefilter("ignore")
        abi_flags: list[str] = getattr(cpp_ext, "_get_pybind11_abi_build_flags", lambda: [])()
    defines += [f for f in abi_flags if f not in defines]

    wheel_dirs = _wheel_nvidia_dirs()
    system_includes = [*cpp_ext.include_paths(), sysconfig.get_paths()["include"]]
    cuda_includes: list[str] = []
    if cuda_home is not None:
        cuda_includes.append(str(cuda_home / "include"))
    # cuBLAS/cuDNN headers from torch's CUDA wheels, where the toolkit lacks them.
    cuda_includes += [str(d / "include") for d in wheel_dirs
                      if (d / "include" / "cublas_v2.h").is_file() or (d / "include" / "cudnn.h").is_file()]
    isystem = [f for inc in dict.fromkeys([*system_includes, *cuda_includes]) for f in ("-isystem", inc)]
    # Hidden visibility keeps each module's symbols (and the registry's static list) private, so two
    # extensions loaded in one process never bind to each other's functions.
    common = ["-O3", "-std=c++20", "-fPIC", "-fvisibility=hidden", "-fvisibility-inlines-hidden"]
    binding_flags = [*common, *defines, "-I.", *isystem]
    if flavour == "cpu":
        kernel_cxx = [*common, "-fopenmp", "-march=native", "-I."]
    else:
        kernel_cxx = [*common, "-I.", *[f for inc in cuda_includes for f in ("-isystem", inc)]]

    nvcc_flags: list[str] = []
    nvcc_version = ""
    if nvcc is not None:
        nvcc_version = _version([nvcc, "--version"]).splitlines()[-1]
        # .cu files include CUDA headers only (torch's need C++20; these don't), and C++17 front-end
        # work is measurably cheaper: it is on the edit-recompile path an agent waits for.
        nvcc_flags = ["-O3", "-std=c++17", "--expt-relaxed-constexpr", f"-ccbin={cxx}",
                      "-Xcompiler=-fPIC,-fvisibility=hidden",
                      *_parse_arch(arch), "-I.",
                      *[f for inc in cuda_includes[1:] for f in ("-isystem", inc)]]

    lib_dirs = [Path(p) for p in cpp_ext.library_paths() if Path(p).is_dir()]
    torch_lib = Path(torch.__file__).parent / "lib"
    libs = ["-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]
    rpaths = [str(torch_lib)]
    if flavour == "cuda":
        libs += ["-lc10_cuda", "-ltorch_cuda"]
        search = [*(d / "lib" for d in wheel_dirs)]
        if cuda_home is not None:
            search = [cuda_home / "lib64", cuda_home / "lib", *search]
        for stem in ("cudart", "cublas", "cublasLt", "cudnn"):
            found = _find_library(stem, [d for d in search if d.is_dir()])
            if found is None:
                logger.debug("lib%s not found; not linked", stem)
                continue
            folder, arg = found
            lib_dirs.append(folder)
            rpaths.append(str(folder))
            libs.append(arg)
    else:
        libs.append("-fopenmp")
    link = [*(f"-L{d}" for d in dict.fromkeys(lib_dirs)), *libs, *(f"-Wl,-rpath,{r}" for r in dict.fromkeys(rpaths))]
    link = [*_fast_linker(cxx, link), *link]

    return Toolchain(
        flavour=flavour, cxx=cxx, cxx_version=_version([cxx, "--version"]).splitlines()[0],
        nvcc=nvcc, nvcc_version=nvcc_version, ninja=_ninja_binary(), torch_version=torch.__version__,
        python_tag=f"{sys.implementation.cache_tag}-{sysconfig.get_config_var('EXT_SUFFIX')}",
        binding_flags=tuple(binding_flags), kernel_cxx_flags=tuple(kernel_cxx), nvcc_flags=tuple(nvcc_flags),
        link_flags=tuple(link), host_cpu=_host_cpu() if flavour == "cpu" else "",
        arch=arch if flavour == "cuda" else "",
    )

"""Compiling a workspace into the ``cuda_extension`` module: incremental ninja build plus an artifact cache."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from cuda_gym.errors import BuildError
from cuda_gym.paths import cache_dir
from cuda_gym.text import clean_output

logger = logging.getLogger(__name__)

MODULE_NAME = "cuda_extension"
SO_NAME = f"{MODULE_NAME}.so"
CACHE_ENV = "CUDA_GYM_BUILD_CACHE"
DEFAULT_ARCH = "9.0"
KEY_VERSION = "cuda_gym-build-3"
"""Bumped whenever the flag policy or the build layout changes, so old cache entries are not reused."""

_TORCH_EXT_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]torch/extension\.h[>"]', re.MULTILINE)
_KEY_SUFFIXES = (".cu", ".cpp", ".cc", ".h", ".hpp", ".cuh", ".inc", ".inl")


@dataclass
class BuildConfig:
    """How workspaces are built. The compiler flags themselves are fixed in code (see docs/build.md)."""

    arch: str | None = None
    """CUDA architectures as in ``TORCH_CUDA_ARCH_LIST`` (``"9.0"``, ``"8.0;9.0+PTX"``); default:
    ``$TORCH_CUDA_ARCH_LIST``, else the visible GPU's capability, else ``9.0``."""
    timeout_s: float = 600.0
    """Wall-clock limit of one ninja run; the whole compiler process tree is killed past it."""
    cache_dir: Path | None = None
    """Artifact cache root; default ``$CUDA_GYM_BUILD_CACHE``, else ``cache_dir()/build``."""
    jobs: int | None = None
    """Parallel compile jobs; default ``os.cpu_count()``."""
    use_pch: bool = True
    """Precompile ``torch/extension.h`` once per toolchain (in the cache) and use it for binding files."""
    use_cache: bool = True
    """Look up and store built modules in the content-addressed cache."""
    log_limit: int = 8000
    """Characters of the concise log kept for the agent (middle cut)."""
    memory_bytes: int | None = 16 * 2**30
    """Per-process memory limit of sandboxed compiles (nvcc/cicc can be hungry)."""


@dataclass
class BuildResult:
    """What one build did.

    Attributes:
        ok: the module was built (or found in the cache).
        module_path: the built ``cuda_extension.so`` (in the cache when caching is on), else ``None``.
        log: concise compiler output for the agent: errors first (``kernels/x.cu:LINE: error: ...``),
            warnings after; ninja progress and command lines dropped; printable ASCII, cut to the limit.
        raw_log: everything ninja printed.
        cached: the module came from the artifact cache without compiling.
        seconds: wall time of the whole call.
        key: the content key of the sources, flags and toolchain.
    """

    ok: bool
    module_path: Path | None
    log: str
    raw_log: str
    cached: bool
    seconds: float
    key: str


# -- toolchain discovery -------------------------------------------------------------------------


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
    ``include/cuda_runtime.h``, else where the
    ``nvcc`` on ``PATH`` really lives (following symlinks and ``exec`` wrapper scripts), else
    ``/usr/local/cuda`` (or the newest ``/usr/local/cuda-*``); ``None`` when there is no toolkit."""
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

    if flavour not in ("cuda", "cpu"):
        raise BuildError(f"unknown flavour {flavour!r}: use 'cuda' or 'cpu'")
    cxx = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    if not cxx:
        raise BuildError("no C++ compiler found: install g++ (apt-get install g++) or set CXX")
    cuda_home = find_cuda_home()
    if flavour == "cuda" and cuda_home is None:
        raise BuildError("nvcc not found: install the CUDA toolkit or set CUDA_HOME to the folder holding bin/nvcc")
    nvcc = str(cuda_home / "bin" / "nvcc") if cuda_home is not None and flavour == "cuda" else None

    abi = int(bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    defines = [f"-DTORCH_EXTENSION_NAME={MODULE_NAME}", "-DTORCH_API_INCLUDE_EXTENSION_H",
               f"-D_GLIBCXX_USE_CXX11_ABI={abi}"]
    with warnings.catch_warnings():  # deprecated (and empty) in recent torch; still needed by older ones
        warnings.simplefilter("ignore")
        abi_flags = getattr(cpp_ext, "_get_pybind11_abi_build_flags", lambda: [])()
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


# -- cache helpers -------------------------------------------------------------------------------


def cache_root(config: BuildConfig | None = None) -> Path:
    """The artifact cache folder: ``config.cache_dir``, ``$CUDA_GYM_BUILD_CACHE``, else ``cache_dir()/build``."""
    if config is not None and config.cache_dir is not None:
        return Path(config.cache_dir).expanduser()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return cache_dir() / "build"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if needed), released on exit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _atomic_copy(src: Path, dest: Path) -> None:
    """Copy ``src`` to ``dest`` through a temporary name in ``dest``'s folder and ``os.replace``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _run_trusted(cmd: list[str], cwd: Path, what: str) -> None:
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    if out.returncode != 0:
        raise BuildError(f"building {what} failed (the toolchain is broken, not the agent's code): "
                         f"{clean_output(out.stdout + out.stderr, 2000)}")


def _template(name: str) -> Path:
    from cuda_gym.workspace import template_dir

    return template_dir() / "common" / name


def _ensure_pch(tc: Toolchain, root: Path) -> Path:
    """``torch/extension.h`` precompiled with the binding flags, shared by every build of this toolchain.

    Returns the header to pass to ``-include``; GCC picks up the ``.gch`` beside it when the flags
    match and silently parses the header otherwise.
    """
    digest = hashlib.sha256((tc.binding_signature() + "\npch").encode()).hexdigest()[:24]
    folder = root / "pch" / digest
    header = folder / "torch_extension.h"
    gch = folder / "torch_extension.h.gch"
    if gch.exists():
        return header
    with _file_lock(root / "locks" / f"pch-{digest}.lock"):
        if gch.exists():
            return header
        folder.mkdir(parents=True, exist_ok=True)
        header.write_text("#include <torch/extension.h>\n")
        started = time.perf_counter()
        fd, tmp = tempfile.mkstemp(prefix=".pch.", suffix=".gch", dir=folder)
        os.close(fd)
        try:
            _run_trusted([tc.cxx, *tc.binding_flags, "-x", "c++-header", str(header), "-o", tmp], folder,
                         "the torch/extension.h precompiled header")
            os.replace(tmp, gch)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        logger.info("precompiled torch/extension.h in %.1f s (%s)", time.perf_counter() - started, gch)
    return header


def _ensure_infra_object(tc: Toolchain, root: Path) -> Path:
    """``binding.cpp`` (the pristine template, never the workspace copy) compiled once per toolchain."""
    source = _template("binding.cpp")
    registry = _template("binding_registry.h")
    content = source.read_bytes() + b"\0" + registry.read_bytes()
    digest = hashlib.sha256(content + tc.binding_signature().encode()).hexdigest()[:24]
    obj = root / "infra" / digest / "binding.o"
    if obj.exists():
        return obj
    with _file_lock(root / "locks" / f"infra-{digest}.lock"):
        if obj.exists():
            return obj
        obj.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".binding.", suffix=".o", dir=obj.parent)
        os.close(fd)
        try:
            _run_trusted([tc.cxx, *tc.binding_flags, "-I", str(registry.parent), "-c", str(source), "-o", tmp],
                         obj.parent, "binding.cpp")
            os.replace(tmp, obj)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return obj


# -- keys, ninja file, logs ----------------------------------------------------------------------


def content_key(ws: Any, tc: Toolchain) -> str:
    """sha256 over the source files (paths and contents), the binding infra and the toolchain signature."""
    h = hashlib.sha256(tc.signature().encode())
    root = Path(ws.root)
    files = sorted(p for p in root.rglob("*") if p.suffix in _KEY_SUFFIXES and p.is_file())
    for path in files:
        rel = path.relative_to(root).as_posix()
        h.update(b"\0file\0" + rel.encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _ninja_escape(path: str) -> str:
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _cmd(args: list[str] | tuple[str, ...]) -> str:
    return " ".join(shlex.quote(a) for a in args).replace("$", "$$")


class _SourceError(BuildError):
    """The workspace's files cannot be built as they are (reported to the agent as a failed build)."""


def write_ninja(ws: Any, tc: Toolchain, *, pch: Path | None, infra_obj: Path) -> Path:
    """Write ``build.ninja`` in ``ws.build_dir`` (run with the workspace root as working directory)."""
    root = Path(ws.root)
    build = Path(ws.build_dir)
    rel_build = os.path.relpath(build, root)
    lines = [
        "ninja_required_version = 1.5",
        f"builddir = {_ninja_escape(rel_build)}",
        "",
        "rule cxx",
        "  command = $compiler $flags -MD -MF $out.d -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = CXX $in",
        "",
        "rule nvcc",
        "  command = $compiler $flags --generate-dependencies-with-compile --dependency-output $out.d -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = NVCC $in",
        "",
        "rule link",
        f"  command = {_cmd([tc.cxx])} -shared $in -o $out $ldflags",
        "  description = LINK $out",
        "",
    ]
    objects: list[str] = []
    for src in ws.sources():
        rel = src.relative_to(root).as_posix()
        obj = f"{rel_build}/obj/{rel}.o"
        objects.append(obj)
        if src.suffix == ".cu":
            if tc.nvcc is None:
                raise _SourceError(f"{rel} is a CUDA file but this is a CPU workspace: write C++ kernels (.cpp)")
            rule, compiler, flags = "nvcc", tc.nvcc, list(tc.nvcc_flags)
        else:
            text = src.read_text(errors="replace")
            is_binding = src.name.endswith("_binding.cpp") or "torch/" in text or "pybind11" in text
            rule, compiler = "cxx", tc.cxx
            flags = list(tc.binding_flags if is_binding else tc.kernel_cxx_flags)
            if is_binding and pch is not None and _TORCH_EXT_INCLUDE.search(text):
                flags += ["-include", str(pch)]
        lines += [f"build {_ninja_escape(obj)}: {rule} {_ninja_escape(rel)}",
                  f"  compiler = {_cmd([compiler])}", f"  flags = {_cmd(flags)}", ""]
    out = f"{rel_build}/{SO_NAME}"
    inputs = " ".join(_ninja_escape(o) for o in [*objects, str(infra_obj)])
    lines += [f"build {_ninja_escape(out)}: link {inputs}", f"  ldflags = {_cmd(tc.link_flags)}", "",
              f"default {_ninja_escape(out)}", ""]
    path = build / "build.ninja"
    text = "\n".join(lines)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


_NVCC_DIAG = re.compile(r"^(?P<file>[^\s:()][^:()]*)\((?P<line>\d+)\): (?P<rest>.*)$")
_GCC_DIAG = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<rest>.*)$")
_SEVERITY = re.compile(r"\b(fatal error|error|warning|note)\b", re.IGNORECASE)
_NOISE = re.compile(r"^(\[\d+/\d+\] |ninja: |FAILED: |Command exited|\S*/(c\+\+|g\+\+|gcc|clang\+\+|nvcc|cc) )")
_CONTEXT = re.compile(r"^In file included from|^\s+from |: In (member |static member )?function|: At global scope|"
                      r": In instantiation of|: required from")


def summarize_log(raw: str, ws_root: Path, limit: int = 8000) -> str:
    """The agent's view of a compiler log: errors first, then warnings, paths relative to the workspace."""
    root = str(Path(ws_root))
    blocks: list[tuple[int, list[str]]] = []  # (rank: 0 error, 1 warning, 2 other), lines
    pending: list[str] = []
    for line in raw.replace(root + "/", "").splitlines():
        line = line.rstrip()
        if not line or _NOISE.match(line):
            continue
        if len(line) > 300 and (" -c " in line or " -o " in line):
            continue  # a compiler command line: noise for the agent
        m = _NVCC_DIAG.match(line)
        if m:
            line = f"{m.group('file')}:{m.group('line')}: {m.group('rest')}"
        m = _GCC_DIAG.match(line)
        sev = _SEVERITY.search(line)
        is_header = bool(sev) and (m is not None or line.startswith(("/usr/bin/ld", "collect2", "ld:", "nvcc")))
        if _CONTEXT.search(line) and not (sev and sev.group(1).lower() in ("error", "fatal error", "warning")):
            pending.append(line)
            continue
        if is_header and sev is not None and sev.group(1).lower() != "note":
            rank = 0 if "error" in sev.group(1).lower() else 1
            blocks.append((rank, [*pending, line]))
            pending = []
        elif blocks:
            blocks[-1][1].extend([*pending, line])
            pending = []
        else:
            pending.append(line)
    if pending:
        blocks.append((2, pending))
    ordered = [ln for rank in (0, 1, 2) for r, lines in blocks if r == rank for ln in lines]
    return clean_output("\n".join(ordered), limit)


# -- running -------------------------------------------------------------------------------------


def _build_env() -> dict[str, str]:
    """The environment of an unsandboxed ninja run (a sandbox sets its own: see ``Sandbox.env_for``)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "USER")}
    env["LC_ALL"] = "C"
    env["LANG"] = "C"
    return env


def _run_ninja(cmd: list[str], ws: Any, config: BuildConfig, sandbox: Any, root: Path) -> tuple[int, str, bool]:
    """Run ninja (sandboxed when ``sandbox`` is given); return (returncode, output, timed_out)."""
    if sandbox is not None:
        from cuda_gym.sandbox import Limits, Sandbox

        # The agent's sources are compiled with only the build folder writable; the cache (the
        # precompiled header, binding.o) is read-only so a build can never poison other episodes.
        build_sb = Sandbox(writable=[Path(ws.build_dir)], readonly=[Path(ws.root), root],
                           mode=getattr(sandbox, "mode", None))
        limits = Limits(wall_s=config.timeout_s, memory_bytes=config.memory_bytes, output_bytes=4 * 2**20)
        # No env: the sandbox's own PATH, HOME, TMPDIR, LC_ALL=C and LANG=C are what the compilers need
        # (the compilers are named by absolute path). The host's TMPDIR would point where nvcc cannot write.
        res = build_sb.run(cmd, cwd=Path(ws.root), limits=limits)
        output = res.output + (f"\n{res.reason}" if res.reason else "")
        return res.returncode, output, bool(res.timed_out)
    proc = subprocess.Popen(cmd, cwd=ws.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=_build_env(), start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=config.timeout_s)
        return proc.returncode, out.decode("utf-8", errors="replace"), False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return -9, out.decode("utf-8", errors="replace"), True  # build_workspace says it ran past the limit


def build_workspace(ws: Any, config: BuildConfig | None = None, sandbox: Any = None) -> BuildResult:
    """Build ``ws`` into ``cuda_extension.so``: cache lookup, else an incremental ninja build, then store.

    Args:
        ws: a :class:`cuda_gym.workspace.Workspace` (``root``, ``build_dir``, ``flavour``, ``sources()``).
        config: build settings (default :class:`BuildConfig`).
        sandbox: a :class:`cuda_gym.sandbox.Sandbox` whose mode the build reuses: ninja then runs in a
            sandbox of that mode where only ``build_dir`` is writable and the workspace and the cache
            are read-only. ``None`` runs ninja directly (trusted sources only).

    Compile errors are not exceptions: they come back as ``ok=False`` with the log. ``BuildError`` is
    raised only when the toolchain itself is missing or broken.
    """
    config = config or BuildConfig()
    started = time.perf_counter()
    tc = toolchain(ws.flavour, resolve_arch(config) if ws.flavour == "cuda" else "")
    root = cache_root(config)
    key = content_key(ws, tc)
    cached_so = root / key / SO_NAME
    if config.use_cache and cached_so.exists():
        return BuildResult(True, cached_so, "", "", True, time.perf_counter() - started, key)

    root.mkdir(parents=True, exist_ok=True)
    lock = _file_lock(root / "locks" / f"{key}.lock") if config.use_cache else contextlib.nullcontext()
    with lock:
        if config.use_cache and cached_so.exists():
            return BuildResult(True, cached_so, "", "", True, time.perf_counter() - started, key)
        pch = _ensure_pch(tc, root) if config.use_pch else None
        infra_obj = _ensure_infra_object(tc, root)
        try:
            ninja_file = write_ninja(ws, tc, pch=pch, infra_obj=infra_obj)
        except _SourceError as exc:
            return BuildResult(False, None, str(exc), str(exc), False, time.perf_counter() - started, key)
        jobs = config.jobs or os.cpu_count() or 1
        cmd = [tc.ninja, "-f", str(ninja_file), "-j", str(jobs)]
        code, raw, timed_out = _run_ninja(cmd, ws, config, sandbox, root)
        built = Path(ws.build_dir) / SO_NAME
        log = summarize_log(raw, Path(ws.root), config.log_limit)
        if timed_out:
            log = clean_output(f"build stopped: it ran past {config.timeout_s:.0f} s\n{log}", config.log_limit)
        ok = code == 0 and not timed_out and built.exists()
        if not ok:
            if not log.strip():
                log = clean_output(raw or f"ninja failed with exit status {code}", config.log_limit)
            return BuildResult(False, None, log, raw, False, time.perf_counter() - started, key)
        module_path = built
        if config.use_cache:
            _atomic_copy(built, cached_so)
            module_path = cached_so
        return BuildResult(True, module_path, log, raw, False, time.perf_counter() - started, key)


def _forget_pybind11_module(name: str) -> None:
    """Drop ``name`` from pybind11's per-interpreter module cache (pybind11 >= 3).

    pybind11 returns the first module it initialised under a name for every later one, so without
    this a second ``cuda_extension`` loaded in the same process would silently be the first.
    """
    import ctypes

    try:
        api = ctypes.pythonapi
        api.PyInterpreterState_Get.restype = ctypes.c_void_p
        api.PyInterpreterState_GetDict.restype = ctypes.c_void_p  # a borrowed reference: never py_object,
        api.PyInterpreterState_GetDict.argtypes = [ctypes.c_void_p]  # which ctypes would decref as new
        address = api.PyInterpreterState_GetDict(api.PyInterpreterState_Get())
        state = ctypes.cast(address, ctypes.py_object).value if address else None
    except (AttributeError, ValueError):  # not CPython: nothing cached there
        return
    cache = state.get("__pybind11_module_cache") if isinstance(state, dict) else None
    if isinstance(cache, dict):
        cache.pop(name, None)


def load_extension(module_path: str | os.PathLike[str]) -> ModuleType:
    """Import a built ``cuda_extension`` from ``module_path`` (torch is imported first for its types).

    Each call loads the module at that path, even when another ``cuda_extension`` was loaded before
    in this process; the module is not put in ``sys.modules``.
    """
    import torch  # noqa: F401 - the extension's symbols and type casters live in torch's libraries

    path = Path(module_path)
    if not path.is_file():
        raise BuildError(f"no built extension at {path}: run the compile tool first")
    loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, str(path))
    spec = importlib.util.spec_from_file_location(MODULE_NAME, str(path), loader=loader)
    if spec is None:
        raise BuildError(f"cannot load {path} as a Python extension")
    _forget_pybind11_module(MODULE_NAME)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


__all__ = ["BuildConfig", "BuildResult", "Toolchain", "build_workspace", "cache_root", "content_key",
           "find_cuda_home", "load_extension", "resolve_arch", "summarize_log", "toolchain", "write_ninja"]

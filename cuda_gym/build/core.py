"""Building a workspace into ``cuda_extension.so`` by trusted code, from a private snapshot, object by object.

Every build copies the workspace's source-like files into a private work folder (links never
followed), compiles in that copy the translation units whose content-keyed objects the cache lacks,
and links. What the cache stores is keyed by the content of every workspace file the compiler read
(its dependency files), the flags and the toolchain, never by timestamps: an agent that ``touch``-es
its files cannot make an old object pass for new sources, and a one-line ``.cu`` edit recompiles
that one file.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import os
import posixpath
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from cuda_gym.build.config import KEY_VERSION, MODULE_NAME, SO_NAME, BuildConfig, BuildResult
from cuda_gym.build.files import Snapshot, snapshot
from cuda_gym.build.logs import summarize_log
from cuda_gym.build.store import (
    Hit,
    ObjectStore,
    Unit,
    cache_root,
    ensure_infra_object,
    ensure_pch,
    file_locks,
    install,
    sha256_hex,
    sweep,
    template,
    touch,
    work_dir,
)
from cuda_gym.build.toolchain import Toolchain, _strip_paths, resolve_arch, toolchain
from cuda_gym.errors import BuildError, SnapshotError
from cuda_gym.text import clean_output

_TORCH_EXT_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]torch/extension\.h[>"]', re.MULTILINE)
_UNIT_SUFFIXES = (".cu", ".cpp")


class _SourceError(BuildError):
    """The workspace's files cannot be built as they are (reported to the agent as a failed build)."""


@dataclass
class _Plan:
    """What one build does: each unit with its cached object (or ``None``: to compile)."""

    units: list[Unit]
    hits: dict[str, Hit | None]

    @property
    def missing(self) -> list[Unit]:
        return [u for u in self.units if self.hits[u.rel] is None]


def nvcc_torch_flags(tc: Toolchain) -> list[str]:
    """nvcc flags for a ``.cu`` that includes torch headers (single files' ``cuda_sources``): C++20,
    torch's defines and include folders added to the fixed CUDA flags."""
    flags = ["-std=c++20" if f == "-std=c++17" else f for f in tc.nvcc_flags]
    binding = list(tc.binding_flags)
    flags += [f for f in binding if f.startswith("-D")]
    flags += [f for i, f in enumerate(binding) if binding[i - 1:i] == ["-isystem"] or f == "-isystem"]
    return flags


def plan_units(snap: Snapshot, tc: Toolchain, pch: Path | None, *, cuda_torch_headers: bool = False) -> list[Unit]:
    """The translation units of ``snap`` (``kernels/*.cu``, ``kernels/*.cpp``) with their rule and flags.

    ``cuda_torch_headers``: ``.cu`` files see torch's headers (:func:`nvcc_torch_flags`); workspaces
    keep them torch-free (cheaper to recompile), single-file ``cuda_sources`` need them.
    """
    units: list[Unit] = []
    for rel in sorted(snap.hashes):
        folder, name = posixpath.split(rel)
        if folder != "kernels" or not name.endswith(_UNIT_SUFFIXES) or name.startswith("."):
            continue
        if name.endswith(".cu"):
            if tc.nvcc is None:
                raise _SourceError(f"{rel} is a CUDA file but this is a CPU workspace: write C++ kernels (.cpp)")
            rule, compiler = "nvcc", tc.nvcc
            flags = nvcc_torch_flags(tc) if cuda_torch_headers else list(tc.nvcc_flags)
        else:
            text = (snap.root / rel).read_text(errors="replace")
            is_binding = name.endswith("_binding.cpp") or "torch/" in text or "pybind11" in text
            rule, compiler = "cxx", tc.cxx
            flags = list(tc.binding_flags if is_binding else tc.kernel_cxx_flags)
            if is_binding and pch is not None and _TORCH_EXT_INCLUDE.search(text):
                flags += ["-include", str(pch)]
        signature = "\n".join([tc.signature(), rule, compiler, *(_strip_paths(f) for f in flags), rel,
                               snap.hashes[rel]])
        units.append(Unit(rel, rule, compiler, tuple(flags), sha256_hex(signature.encode())))
    return units


def module_key(tc: Toolchain, infra_obj: Path, hits: list[Hit]) -> str:
    """The key of the linked module: the toolchain, ``binding.o`` and every object key."""
    parts = [KEY_VERSION, tc.signature(), "infra", infra_obj.parent.name, *sorted(h.object_key for h in hits)]
    return sha256_hex("\n".join(parts).encode())


def _sources_key(tc: Toolchain, snap: Snapshot) -> str:
    parts = [KEY_VERSION, tc.signature(), *(f"{rel}\0{h}" for rel, h in sorted(snap.hashes.items()))]
    return sha256_hex("\n".join(parts).encode())


# -- ninja -----------------------------------------------------------------------------------------


def _ninja_escape(path: str) -> str:
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _cmd(args: list[str] | tuple[str, ...]) -> str:
    return " ".join(shlex.quote(a) for a in args).replace("$", "$$")


def write_ninja(path: Path, out_rel: str, compile_units: list[Unit], objects: list[str], tc: Toolchain) -> None:
    """``build.ninja`` compiling ``compile_units`` into ``<out_rel>/obj/`` and linking ``objects`` (paths)."""
    lines = [
        "ninja_required_version = 1.5",
        f"builddir = {_ninja_escape(out_rel)}",
        "",
        "rule cxx",
        "  command = $compiler $flags -MD -MF $out.d -c $in -o $out",
        "  description = CXX $in",
        "",
        "rule nvcc",
        "  command = $compiler $flags --generate-dependencies-with-compile --dependency-output $out.d -c $in -o $out",
        "  description = NVCC $in",
        "",
        "rule link",
        f"  command = {_cmd([tc.cxx])} -shared $in -o $out $ldflags",
        "  description = LINK $out",
        "",
    ]
    for unit in compile_units:
        lines += [f"build {_ninja_escape(f'{out_rel}/{unit.object_name}')}: {unit.rule} {_ninja_escape(unit.rel)}",
                  f"  compiler = {_cmd([unit.compiler])}", f"  flags = {_cmd(unit.flags)}", ""]
    lines += [f"build {_ninja_escape(f'{out_rel}/{SO_NAME}')}: link {' '.join(_ninja_escape(o) for o in objects)}",
              f"  ldflags = {_cmd(tc.link_flags)}", "", f"default {_ninja_escape(f'{out_rel}/{SO_NAME}')}", ""]
    path.write_text("\n".join(lines))


def parse_depfile(text: str) -> list[str]:
    """The prerequisites of a make-style dependency file (gcc ``-MD``, nvcc ``--dependency-output``)."""
    text = text.replace("\\\n", " ")
    deps: list[str] = []
    for rule in text.split("\n"):
        if ":" not in rule:
            continue
        body = re.split(r"(?<!\\):(?:\s|$)", rule, maxsplit=1)
        tokens = re.findall(r"(?:\\.|[^\s\\])+", body[1] if len(body) > 1 else "")
        deps += [re.sub(r"\\(.)", r"\1", t).replace("$$", "$") for t in tokens]
    return deps


def _read_deps(depfile: Path, snap: Snapshot, unit: Unit) -> dict[str, str]:
    """Workspace-relative path -> hash of every snapshot file the compiler read for ``unit``."""
    try:
        listed = parse_depfile(depfile.read_text(errors="replace"))
    except OSError as exc:
        raise BuildError(f"the compiler wrote no dependency file for {unit.rel} ({exc}); the toolchain is broken") \
            from exc
    root = str(snap.root)
    deps = {unit.rel: snap.hashes[unit.rel]}
    for dep in listed:
        rel = os.path.relpath(dep, root) if os.path.isabs(dep) else dep
        rel = posixpath.normpath(rel)
        if not rel.startswith("../") and rel in snap.hashes:
            deps[rel] = snap.hashes[rel]
    return deps


# -- running -----------------------------------------------------------------------------------


def _build_env() -> dict[str, str]:
    """The environment of an unsandboxed ninja run (a sandbox sets its own: see ``Sandbox.env_for``)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "USER")}
    env["LC_ALL"] = "C"
    env["LANG"] = "C"
    return env


def _run_ninja(cmd: list[str], cwd: Path, out: Path, readonly: list[Path], config: BuildConfig,
               sandbox: Any) -> tuple[int, str, bool]:
    """Run ninja in ``cwd`` (sandboxed when ``sandbox`` is given); return (returncode, output, timed_out)."""
    if sandbox is not None:
        from cuda_gym.sandbox import Limits, Sandbox

        # Compilers read the snapshot and the cache read-only and write only the output folder.
        build_sb = Sandbox(writable=[out], readonly=[p for p in readonly if p.exists()],
                           mode=getattr(sandbox, "mode", None))
        # No file above the cache's artifact cap can be written (the object of a 200 MiB initialised array
        # stops the compiler), and the output folder holds at most 16 such files' worth.
        limits = Limits(wall_s=config.timeout_s, memory_bytes=config.memory_bytes, output_bytes=4 * 2**20,
                        file_bytes=config.max_artifact_bytes, disk_bytes=16 * config.max_artifact_bytes)
        # No env: the sandbox's own PATH, HOME, TMPDIR, LC_ALL=C and LANG=C are what the compilers need
        # (the compilers are named by absolute path). The host's TMPDIR would point where nvcc cannot write.
        res = build_sb.run(cmd, cwd=cwd, limits=limits)
        output = res.output + (f"\n{res.reason}" if res.reason else "")
        return res.returncode, output, bool(res.timed_out)
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=_build_env(), start_new_session=True)
    try:
        raw, _ = proc.communicate(timeout=config.timeout_s)
        return proc.returncode, raw.decode("utf-8", errors="replace"), False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        raw, _ = proc.communicate()
        return -9, raw.decode("utf-8", errors="replace"), True  # build_workspace says it ran past the limit


def build_workspace(ws: Any, config: BuildConfig | None = None, sandbox: Any = None, *,
                    cuda_torch_headers: bool = False) -> BuildResult:
    """Build ``ws`` into ``cuda_extension.so`` from a private snapshot; objects and modules by content key.

    Args:
        ws: a :class:`cuda_gym.workspace.Workspace` (``root``, ``build_dir``, ``flavour``).
        config: build settings (default :class:`BuildConfig`).
        sandbox: a :class:`cuda_gym.sandbox.Sandbox` whose mode the build reuses: the compilers then
            run in a sandbox of that mode that reads the snapshot and the cache and writes only the
            build's output folder. ``None`` runs them directly.
        cuda_torch_headers: let ``.cu`` files include torch headers (used for single-file submissions).

    Each call snapshots the workspace (regular files only; ``binding_registry.h`` is the pristine
    template), looks every translation unit up in the object cache, compiles the missing ones in
    the snapshot, stores them under the content of every file their dependency file lists, and
    links (or finds the linked module). Compile errors are not exceptions: they come back as
    ``ok=False`` with the log. ``BuildError`` is raised only when the toolchain itself is broken.
    """
    config = config or BuildConfig()
    started = time.perf_counter()
    tc = toolchain(ws.flavour, resolve_arch(config) if ws.flavour == "cuda" else "")
    root = cache_root(config)
    root.mkdir(parents=True, exist_ok=True)
    sweep(root, max_bytes=config.max_cache_bytes)
    pch = ensure_pch(tc, root) if config.use_pch else None
    infra_obj = ensure_infra_object(tc, root)
    with work_dir(root) as work:
        try:
            snap = snapshot(Path(ws.root), work / "src",
                            replace={"binding_registry.h": template("binding_registry.h").read_bytes()})
            units = plan_units(snap, tc, pch, cuda_torch_headers=cuda_torch_headers)
        except (_SourceError, SnapshotError) as exc:
            return BuildResult(False, None, str(exc), str(exc), False, time.perf_counter() - started, "")
        store = ObjectStore(root)

        def lookup() -> _Plan:
            hits = {u.rel: store.lookup(u, snap.hashes, snap.names) if config.use_cache else None for u in units}
            return _Plan(units, hits)

        plan = lookup()
        if plan.missing or not config.use_cache:
            with file_locks([store.lock_path(u) for u in plan.missing] if config.use_cache else []):
                plan = lookup()  # a concurrent builder of the same contents may have stored them meanwhile
                if plan.missing or not config.use_cache:
                    return _compile_and_link(ws, config, sandbox, tc, root, work, snap, plan, infra_obj, started)
        return _link(ws, config, sandbox, tc, root, work, snap, plan, infra_obj, started)


def _link(ws: Any, config: BuildConfig, sandbox: Any, tc: Toolchain, root: Path, work: Path, snap: Snapshot,
          plan: _Plan, infra_obj: Path, started: float) -> BuildResult:
    """Every object is cached: return the linked module, linking it first when it is new."""
    hits = [h for h in plan.hits.values() if h is not None]
    key = module_key(tc, infra_obj, hits)
    inputs = tuple(sorted({rel for h in hits for rel in h.deps}))
    target = root / key / SO_NAME
    if target.exists():
        touch(target)  # recently used: the last the cache bound evicts
        return BuildResult(True, target, "", "", True, time.perf_counter() - started, key, inputs)
    return _compile_and_link(ws, config, sandbox, tc, root, work, snap, plan, infra_obj, started)


def _compile_and_link(ws: Any, config: BuildConfig, sandbox: Any, tc: Toolchain, root: Path, work: Path,
                      snap: Snapshot, plan: _Plan, infra_obj: Path, started: float) -> BuildResult:
    """Compile the plan's missing units in the snapshot, store them, link, store the module."""
    out = work / "out"
    out.mkdir(exist_ok=True)
    out_rel = os.path.relpath(out, snap.root)
    missing = plan.missing
    objects = [str(plan.hits[u.rel].path) if plan.hits[u.rel] is not None else f"{out_rel}/{u.object_name}"  # type: ignore[union-attr]
               for u in plan.units]
    ninja_file = out / "build.ninja"
    write_ninja(ninja_file, out_rel, missing, [*objects, str(infra_obj)], tc)
    jobs = config.jobs or os.cpu_count() or 1
    cmd = [tc.ninja, "-f", str(ninja_file), "-j", str(jobs)]
    readonly = [snap.root, root / "objects", root / "pch", root / "infra"]
    code, raw, timed_out = _run_ninja(cmd, snap.root, out, readonly, config, sandbox)
    log = summarize_log(raw, snap.root, config.log_limit)
    if timed_out:
        log = clean_output(f"build stopped: it ran past {config.timeout_s:.0f} s\n{log}", config.log_limit)
    built = out / SO_NAME
    too_large = _oversized(out, missing, config) if not timed_out else None
    if too_large is None and "file size limit exceeded" in raw:
        too_large = f"a compiler output grew past {_mib(config.max_artifact_bytes)} (the build's file-size limit)"
    if too_large is not None:
        log = clean_output(f"{too_large}: a build may store objects and modules up to "
                           f"{_mib(config.max_artifact_bytes)}; keep large data out of the binary (allocate "
                           f"and fill tensors at run time)\n{log}", config.log_limit)
    if code != 0 or timed_out or not built.exists() or too_large is not None:
        if not log.strip():
            log = clean_output(raw or f"ninja failed with exit status {code}", config.log_limit)
        return BuildResult(False, None, log, raw, False, time.perf_counter() - started, _sources_key(tc, snap),
                           compiled=tuple(u.rel for u in missing))
    store = ObjectStore(root)
    hits: list[Hit] = []
    for unit in plan.units:
        hit = plan.hits[unit.rel]
        if hit is None:
            deps = _read_deps(out / f"{unit.object_name}.d", snap, unit)
            obj = out / unit.object_name
            hit = store.record(unit, deps, snap.names, obj) if config.use_cache else Hit("", obj, deps)
        hits.append(hit)
    inputs = tuple(sorted({rel for h in hits for rel in h.deps}))
    compiled = tuple(u.rel for u in missing)
    if not config.use_cache:
        target = Path(ws.build_dir) / SO_NAME
        install(built, target, 0o755)
        return BuildResult(True, target, log, raw, False, time.perf_counter() - started, _sources_key(tc, snap),
                           inputs, compiled)
    key = module_key(tc, infra_obj, hits)
    target = root / key / SO_NAME
    if not target.exists():
        install(built, target, 0o755)
    else:
        touch(target)
    return BuildResult(True, target, log, raw, False, time.perf_counter() - started, key, inputs, compiled)

def _mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB"


def _oversized(out: Path, missing: list[Unit], config: BuildConfig) -> str | None:
    """Which freshly built object or module is above ``config.max_artifact_bytes`` (nothing above it is stored)."""
    for path, what in [*((out / u.object_name, f"the object of {u.rel}") for u in missing), (out / SO_NAME,
                                                                                            "the linked module")]:
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if size > config.max_artifact_bytes:
            return f"{what} is {_mib(size)}"
    return None


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



__all__ = ["BuildConfig", "BuildResult", "build_workspace", "load_extension", "module_key", "parse_depfile",
           "plan_units", "write_ninja"]

"""Single-file submissions: ``load_inline`` calls recorded by a trusted step, built by the content-cached build.

A KernelBench-style file calls ``torch.utils.cpp_extension.load_inline(...)`` at import. Left to
torch, every judgement compiles it again (60-90 s on a GPU machine) in a torch-extensions folder
that other evaluations share and can plant modules in. Here instead:

1. :func:`record_calls` runs the file in a sandbox with ``load_inline`` replaced by a recorder
   (its arguments to JSON; the module it returns is a placeholder);
2. :func:`build_call` builds each recorded call with :func:`cuda_gym.build.build_workspace` from a
   generated workspace, so the object and module caches (keyed by content, flags and toolchain)
   serve every later judgement of the same sources;
3. the candidate process calls :func:`install_prebuilt` before importing the file: ``load_inline``
   then returns the prebuilt module for arguments that match a recorded call, and raises a clear
   error for any other (nothing is compiled in the candidate's process, no folder is shared).

:func:`prepare` does steps 1-2 and writes the manifest step 3 reads.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from cuda_gym.build.config import BuildConfig, BuildResult
from cuda_gym.build.files import read_regular
from cuda_gym.errors import BuildError, UnreadableFileError
from cuda_gym.trees import remove_tree

if TYPE_CHECKING:
    from cuda_gym.sandbox import SandboxMode

logger = logging.getLogger(__name__)

MANIFEST_NAME = "inline_modules.json"
"""The manifest :func:`prepare` writes in the job folder: call key -> built module path."""

_PRELUDE = """#include <torch/extension.h>
#include "../binding_registry.h"
// load_inline's PYBIND11_MODULE becomes one entry of the workspace binding registry.
#undef PYBIND11_MODULE
#define PYBIND11_MODULE(name, variable, ...) \\
  static void cuda_gym_inline_module(pybind11::module_& variable); \\
  REGISTER_BINDING(inline_module, cuda_gym_inline_module); \\
  static void cuda_gym_inline_module(pybind11::module_& variable)
"""


@dataclass(frozen=True)
class InlineCall:
    """The arguments of one ``load_inline`` call that decide what is built (normalised as torch does).

    Attributes:
        name: the extension name the file asked for (the built module is ``cuda_extension``).
        cpp_sources: C++ sources, in order.
        cuda_sources: CUDA sources, in order.
        functions: function name -> docstring to bind, or ``None`` (the sources hold their own
            ``PYBIND11_MODULE``).
        with_pytorch_error_handling: bind through ``torch::wrap_pybind_function``.
        no_implicit_headers: leave out the headers ``load_inline`` adds.
        extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_paths: recorded for the key;
            the build uses its own fixed flag policy (docs/build.md), as for workspaces.
    """

    name: str
    cpp_sources: tuple[str, ...]
    cuda_sources: tuple[str, ...] = ()
    functions: tuple[tuple[str, str], ...] | None = None
    with_pytorch_error_handling: bool = True
    no_implicit_headers: bool = False
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    extra_include_paths: tuple[str, ...] = ()

    @classmethod
    def from_arguments(cls, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> InlineCall:
        """The call as ``load_inline(*args, **kwargs)`` would see it (raises ``TypeError`` like it)."""
        bound = _load_inline_signature().bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        functions = a["functions"]
        if isinstance(functions, str):
            functions = [functions]
        if isinstance(functions, (list, tuple)):
            functions = {str(f): str(f) for f in functions}
        if functions is not None and not isinstance(functions, dict):
            raise ValueError(f"Expected 'functions' to be a list or dict, but was {type(functions)}")
        return cls(
            name=str(a["name"]),
            cpp_sources=_strings(a["cpp_sources"]),
            cuda_sources=_strings(a["cuda_sources"]),
            functions=tuple((str(k), str(v)) for k, v in functions.items()) if functions is not None else None,
            with_pytorch_error_handling=bool(a["with_pytorch_error_handling"]),
            no_implicit_headers=bool(a["no_implicit_headers"]),
            extra_cflags=_strings(a["extra_cflags"]),
            extra_cuda_cflags=_strings(a["extra_cuda_cflags"]),
            extra_ldflags=_strings(a["extra_ldflags"]),
            extra_include_paths=_strings(a["extra_include_paths"]),
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (lists for tuples)."""
        data = asdict(self)
        if self.functions is not None:
            data["functions"] = [list(pair) for pair in self.functions]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> InlineCall:
        """The call from :meth:`to_json`'s dict; missing or unknown keys are errors."""
        names = {f.name for f in fields(cls)}
        if set(data) != names:
            raise BuildError(f"a recorded load_inline call has keys {sorted(data)}, expected {sorted(names)}: "
                             "the recorder and the builder disagree (reinstall cuda_gym)")
        functions = data["functions"]
        return cls(
            name=str(data["name"]),
            cpp_sources=tuple(map(str, data["cpp_sources"])),
            cuda_sources=tuple(map(str, data["cuda_sources"])),
            functions=tuple((str(k), str(v)) for k, v in functions) if functions is not None else None,
            with_pytorch_error_handling=bool(data["with_pytorch_error_handling"]),
            no_implicit_headers=bool(data["no_implicit_headers"]),
            **{k: tuple(map(str, data[k])) for k in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags",
                                                     "extra_include_paths")},
        )

    @property
    def key(self) -> str:
        """sha256 of the normalised arguments: how the candidate's shim finds the prebuilt module."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()

    def sources(self) -> dict[str, str]:
        """The generated workspace files: ``kernels/inline_binding.cpp`` and, with CUDA, ``kernels/inline.cu``.

        What ``load_inline`` would write (its implicit headers, its ``PYBIND11_MODULE`` for
        ``functions``), with the module definition turned into a binding-registry entry so the
        workspace build links it like any binding.
        """
        cpp = [_PRELUDE, '#line 1 "cpp_sources"', *self.cpp_sources]
        if self.functions is not None:
            wrap = "torch::wrap_pybind_function({0})" if self.with_pytorch_error_handling else "{0}"
            cpp.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
            cpp += [f'm.def("{name}", {wrap.format(name)}, "{doc}");' for name, doc in self.functions]
            cpp.append("}")
        files = {"kernels/inline_binding.cpp": "\n".join(cpp) + "\n"}
        if self.cuda_sources:
            head = [] if self.no_implicit_headers else ["#include <torch/types.h>", "#include <cuda.h>",
                                                        "#include <cuda_runtime.h>"]
            files["kernels/inline.cu"] = "\n".join([*head, '#line 1 "cuda_sources"', *self.cuda_sources]) + "\n"
        return files


_SIGNATURE: list[Any] = []


def _load_inline_signature() -> Any:
    """torch's own ``load_inline`` signature, read before any patch replaces the function."""
    if not _SIGNATURE:
        import inspect

        import torch.utils.cpp_extension as cpp_ext

        _SIGNATURE.append(inspect.signature(cpp_ext.load_inline))
    return _SIGNATURE[0]


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


# -- 1. recording (runs in the sandboxed recorder process) -------------------------------------------


class _Placeholder:
    """What the recorder's ``load_inline`` returns: any attribute is a function that says why it cannot run."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        def unavailable(*_args: Any, **_kwargs: Any) -> Any:
            raise RuntimeError(f"{self._name}.{attr} is not built while the judge records load_inline calls")

        return unavailable


def _record_main(source: Path, out: Path) -> int:
    """The recorder process: execute ``source`` with ``load_inline`` recording its calls into ``out``."""
    import runpy

    calls: list[dict[str, Any]] = []
    errors: list[str] = []

    def recording_load_inline(*args: Any, **kwargs: Any) -> Any:
        call = InlineCall.from_arguments(args, kwargs)
        calls.append(call.to_json())
        return _Placeholder(call.name)

    _install(recording_load_inline)
    try:
        runpy.run_path(str(source), run_name="model_new")
    except BaseException as exc:  # noqa: BLE001 - the agent's file: any failure is reported, not raised
        errors.append(f"{type(exc).__name__}: {exc}")
    out.write_text(json.dumps({"calls": calls, "error": errors[0] if errors else None}))
    return 0


@dataclass
class Recording:
    """What :func:`record_calls` saw: the calls in order, and the file's import error if any."""

    calls: list[InlineCall] = field(default_factory=list)
    error: str | None = None
    output: str = ""


def record_calls(source: Path, *, timeout_s: float = 120.0, sandbox_mode: SandboxMode | None = None) -> Recording:
    """Run ``source`` in a sandbox with a recording ``load_inline``; return the calls it made at import.

    The file runs as the candidate would import it (``run_name="model_new"``), with no network and
    only a private folder writable. A call made later (inside ``ModelNew.__init__`` or ``forward``)
    is not seen; the shim then refuses it with a message saying to call ``load_inline`` at import.
    """
    from cuda_gym.paths import package_pythonpath
    from cuda_gym.sandbox import Limits, Sandbox

    folder = Path(tempfile.mkdtemp(prefix="cuda_gym_record_"))
    try:
        copy = folder / "model_new.py"
        copy.write_bytes(Path(source).read_bytes())
        out = folder / "calls.json"
        env = {"PYTHONPATH": package_pythonpath()}
        cmd = [sys.executable, "-m", "cuda_gym.build.inline", "record", str(copy), str(out)]
        run = Sandbox(writable=[folder], mode=sandbox_mode).run(cmd, cwd=folder, env=env,
                                                               limits=Limits(wall_s=timeout_s))
        try:
            return _read_recording(out, run.output)
        except (UnreadableFileError, ValueError, TypeError, KeyError, RecursionError, BuildError) as exc:
            reason = run.reason or f"exit code {run.returncode}"
            return Recording(error=f"the file could not be imported to record its load_inline calls ({reason}; "
                                   f"its recording is unreadable: {str(exc)[:300]})", output=run.output)
    finally:
        remove_tree(folder)


RECORDING_LIMIT_BYTES = 64 << 20
"""The most a recording (``calls.json``) may hold: the sources of every ``load_inline`` call."""


def _read_recording(out: Path, output: str) -> Recording:
    """The recording the recorder wrote to ``out``. The agent's file ran in that process and could have
    written anything there (a link, a huge file, other JSON): it is read as a plain file of bounded size,
    and every shape but the recorder's own raises."""
    data = json.loads(read_regular(out, RECORDING_LIMIT_BYTES))
    if not isinstance(data, dict) or set(data) != {"calls", "error"} or not isinstance(data["calls"], list):
        raise ValueError("not a recording")
    error = data["error"]
    if error is not None and not isinstance(error, str):
        raise ValueError("not a recording")
    calls = []
    for c in data["calls"]:
        if not isinstance(c, dict):
            raise ValueError("not a recording")
        calls.append(InlineCall.from_json(c))
    return Recording(calls, error, output)


# -- 2. building --------------------------------------------------------------------------------


def build_call(call: InlineCall, flavour: str, config: BuildConfig | None = None, sandbox: Any = None) -> BuildResult:
    """Build one recorded call through the content-cached workspace build (``cuda_extension.so``).

    The generated sources are written to a private temporary workspace; the result's ``key`` is
    the module's content key, so identical calls in any later judgement are cache hits.
    """
    from cuda_gym.build.core import build_workspace

    if call.cuda_sources and flavour != "cuda":
        return BuildResult(False, None, "load_inline(cuda_sources=...) on the cpu device: write C++ in cpp_sources",
                           "", False, 0.0, "")
    with tempfile.TemporaryDirectory(prefix="cuda_gym_inline_") as tmp:
        root = Path(tmp) / "workspace"
        build_dir = Path(tmp) / "build"
        build_dir.mkdir(parents=True)
        for rel, text in call.sources().items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        ws = SimpleNamespace(root=root, build_dir=build_dir, flavour=flavour)
        config = config or BuildConfig()
        if not config.use_cache:
            raise BuildError("single-file builds keep their modules in the build cache: use BuildConfig(use_cache=True)")
        return build_workspace(ws, config, sandbox, cuda_torch_headers=True)


@dataclass
class Prepared:
    """The outcome of :func:`prepare`: ``ok`` when every call built; the manifest for the candidate."""

    ok: bool
    log: str
    manifest: Path | None
    results: list[BuildResult]
    recording: Recording


def prepare(source: Path, job_dir: Path, flavour: str, config: BuildConfig | None = None, sandbox: Any = None,
            *, timeout_s: float = 120.0) -> Prepared:
    """Record and build every ``load_inline`` call of ``source``; write ``job_dir/inline_modules.json``.

    ``ok=False`` with the compiler's log when a call does not compile (the agent's compile error);
    a file that fails to import before its calls is reported the same way, and so is a file making
    more than ``config.max_inline_calls`` distinct calls. All builds share one deadline,
    ``config.timeout_s`` from the first build's start (each ninja run gets what is left), so the
    number of calls cannot multiply the time a verdict takes. The manifest maps each call's key to
    its module path in the build cache (read-only for the candidate). A recording is kept in the
    build cache by the file's content, so judging the same file again runs nothing but cache lookups.
    """
    config = config or BuildConfig()
    recording = _cached_recording(Path(source), config, timeout_s, getattr(sandbox, "mode", None))
    if not recording.calls:
        why = recording.error or "it calls torch.utils.cpp_extension.load_inline nowhere at import"
        return Prepared(False, f"no extension was built: {why}", None, [], recording)
    distinct = list({call.key: call for call in recording.calls}.values())
    if len(distinct) > config.max_inline_calls:
        return Prepared(False, f"the file makes {len(distinct)} different load_inline calls at import; at most "
                        f"{config.max_inline_calls} are built per submission: put all your functions in one "
                        "load_inline call", None, [], recording)
    budget = BuildBudget(config)
    results: list[BuildResult] = []
    manifest: dict[str, str] = {}
    for call in distinct:
        step = budget.next_config()
        if step is None:
            return Prepared(False, budget.exhausted_message(len(results), len(distinct)), None, results, recording)
        result = build_call(call, flavour, step, sandbox)
        results.append(result)
        if not result.ok:
            log = result.log
            if budget.spent():
                log = f"{budget.exhausted_message(len(results) - 1, len(distinct))}\n{log}"
            return Prepared(False, log, None, results, recording)
        manifest[call.key] = str(result.module_path)
    path = Path(job_dir) / MANIFEST_NAME
    path.write_text(json.dumps(manifest, indent=1))
    return Prepared(True, "", path, results, recording)


class BuildBudget:
    """One wall-clock deadline, ``config.timeout_s`` from creation, shared by several builds.

    :meth:`next_config` is the config for the next build with ``timeout_s`` set to the time left,
    or ``None`` once less than :attr:`MIN_STEP_S` is left (no build could finish in it).
    """

    MIN_STEP_S = 1.0

    def __init__(self, config: BuildConfig) -> None:
        self.config = config
        self.deadline = time.monotonic() + config.timeout_s

    def left(self) -> float:
        """Seconds until the deadline (negative past it)."""
        return self.deadline - time.monotonic()

    def spent(self) -> bool:
        """Whether the time left is too short for another build."""
        return self.left() < self.MIN_STEP_S

    def next_config(self) -> BuildConfig | None:
        """The config for the next build, its ``timeout_s`` the time left; ``None`` when spent."""
        return None if self.spent() else replace(self.config, timeout_s=self.left())

    def exhausted_message(self, built: int, total: int) -> str:
        """Why the builds stopped, for the agent's compile log."""
        return (f"the builds of this file's load_inline calls ran past {self.config.timeout_s:.0f} s together "
                f"({built} of {total} built): make fewer, smaller extensions")


def _cached_recording(source: Path, config: BuildConfig, timeout_s: float, mode: SandboxMode | None) -> Recording:
    """:func:`record_calls`, remembered by the file's content and torch's version (trusted writes only)."""
    import torch

    from cuda_gym.build.files import UnreadableFileError, read_regular
    from cuda_gym.build.store import cache_root, write_json_atomic

    try:
        data = read_regular(source, 16 * 2**20)
    except UnreadableFileError as exc:
        return Recording(error=f"{exc}: submit a plain Python file")
    key = hashlib.sha256(b"cuda_gym-inline-record-1\0" + torch.__version__.encode() + b"\0" + data).hexdigest()
    path = cache_root(config) / "inline" / f"{key}.json"
    try:
        return Recording([InlineCall.from_json(c) for c in json.loads(path.read_text())])
    except (OSError, ValueError, KeyError, TypeError, BuildError):
        pass
    recording = record_calls(source, timeout_s=timeout_s, sandbox_mode=mode)
    if recording.calls and recording.error is None:
        write_json_atomic(path, [c.to_json() for c in recording.calls])
    return recording


# -- 3. the candidate's shim -----------------------------------------------------------------------


def install_prebuilt(manifest: Path | Mapping[str, str]) -> None:
    """Make ``load_inline`` return prebuilt modules in this process (the candidate's, before import).

    Args:
        manifest: the file :func:`prepare` wrote, or its mapping (call key -> module path).

    A call whose arguments match no recorded call raises ``BuildError`` (nothing is compiled here);
    ``load(sources=...)`` is refused too.
    """
    from cuda_gym.build.core import load_extension

    table = dict(json.loads(Path(manifest).read_text())) if isinstance(manifest, (str, os.PathLike)) else dict(manifest)
    loaded: dict[str, Any] = {}

    def prebuilt_load_inline(*args: Any, **kwargs: Any) -> Any:
        call = InlineCall.from_arguments(args, kwargs)
        path = table.get(call.key)
        if path is None:
            raise BuildError(f"load_inline(name={call.name!r}) was not prebuilt by the judge: call load_inline at "
                             "import with sources that do not change between runs")
        if call.key not in loaded:
            loaded[call.key] = load_extension(path)
        return loaded[call.key]

    _install(prebuilt_load_inline)


def _refused_load(*_args: Any, **_kwargs: Any) -> Any:
    raise BuildError("torch.utils.cpp_extension.load(sources=...) is not available to submissions: put the "
                     "sources in load_inline(cpp_sources=..., cuda_sources=...)")


def _install(load_inline: Any) -> None:
    """Replace torch's ``load_inline`` by ``load_inline`` and refuse ``load`` in this process."""
    import torch.utils.cpp_extension as cpp_ext

    _load_inline_signature()  # torch's own, before it is replaced
    cpp_ext.load_inline = load_inline
    cpp_ext.load = _refused_load


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "record":
        sys.exit(_record_main(Path(sys.argv[2]), Path(sys.argv[3])))
    sys.exit("usage: python -m cuda_gym.build.inline record FILE OUT.json")

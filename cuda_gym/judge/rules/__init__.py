"""Static rules: what a submission's Python and C++/CUDA sources may not do.

The package is split by concern: :mod:`~cuda_gym.judge.rules.policy` (rule names and the allow- and
deny-lists), :mod:`~cuda_gym.judge.rules.lexer` (C/C++ comments, literals and line splices),
:mod:`~cuda_gym.judge.rules.python_checks` (the AST pass), :mod:`~cuda_gym.judge.rules.cpp_checks`
(the C++ pass) and :mod:`~cuda_gym.judge.rules.scan` (which files the compiler reads). Static rules
are early, clear feedback; the judge's runtime checks do not rely on them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from cuda_gym.build.files import UnreadableFileError, read_regular
from cuda_gym.judge.result import Violation
from cuda_gym.judge.rules.cpp_checks import check_cpp
from cuda_gym.judge.rules.lexer import strip_cpp
from cuda_gym.judge.rules.policy import (
    DEVICE_SUFFIXES,
    MAX_SOURCE_BYTES,
    RULES,
    TORCH_OPS_NAMESPACES,
    RuleConfig,
)
from cuda_gym.judge.rules.python_checks import check_python
from cuda_gym.judge.rules.scan import Scan, scan_workspace
from cuda_gym.vocab import check_flavour

if TYPE_CHECKING:
    from cuda_gym.build.inline import InlineCall, Recording


def check_submission(path: Path | str, flavour: str = "cuda", *, precision: str = "fp32",
                     compiled: Iterable[str] = ()) -> list[Violation]:
    """Check a submission statically and return every violation found (empty: clean).

    Args:
        path: a workspace root (``model_new.py`` plus ``kernels/``) or a single KernelBench-style
            Python file whose ``load_inline`` sources are checked as C++ too.
        flavour: ``cuda`` or ``cpu``.
        precision: the task's precision (``fp32`` forbids lower-precision conversions).
        compiled: workspace-relative paths of every workspace file the compiler read
            (``BuildResult.inputs`` of the build of the same sources); they are checked too.

    Each violation names its rule (see ``RULES``), the file relative to the workspace and the line.
    Agent input never raises here: links, special files and oversized or unparsable sources are
    violations (``io``, ``unreadable``).
    """
    check_flavour(flavour)
    config = RuleConfig(flavour=flavour, precision=precision)
    root = Path(path)
    if root.is_symlink():
        return [Violation("io", "The submission is a symbolic link; submit a plain file or folder.", root.name, 1)]
    if root.is_file():
        try:
            text = read_regular(root, MAX_SOURCE_BYTES).decode("utf-8", errors="replace")
        except UnreadableFileError as exc:
            return [Violation("unreadable", f"{exc}; submit a plain Python file.", root.name, 1)]
        return _dedup(check_python(text, root.name, config, root=root.parent))
    if not root.is_dir():
        raise FileNotFoundError(f"no submission at {root}: pass a workspace directory or a .py file")
    scan = scan_workspace(root, compiled)
    found = list(scan.found)
    for rel, text in scan.python.items():
        found += check_python(text, rel, config, root=root)
    for rel, text in scan.cpp.items():
        found += check_cpp(text, rel, config, root=root, device_code=rel in scan.device or rel.endswith(DEVICE_SUFFIXES))
    return _dedup(found)


def check_recorded_calls(recording: Recording | Iterable[InlineCall], flavour: str = "cuda", *,
                         precision: str = "fp32") -> list[Violation]:
    """Check what a single file's ``load_inline`` calls really compile, as recorded by the judge.

    Args:
        recording: :func:`cuda_gym.build.inline.prepare`'s ``Prepared.recording`` (or its ``calls``):
            the arguments each call was made with at import, whatever Python computed them from.
        flavour: ``cuda`` or ``cpu``.
        precision: the task's precision.

    Each call's generated sources (:meth:`InlineCall.sources`: the ``cpp_sources`` and
    ``cuda_sources`` text with the module definition ``functions`` makes, exactly what the build
    compiles) go through :func:`check_cpp`. The AST pass of :func:`check_submission` reads only
    sources it can resolve statically; this reads the rest (``SRC.replace(...)``, a source read or
    built at import). Violations name ``cpp_sources``/``cuda_sources`` and the line within them, as
    the compiler's messages do. ``functions`` names that are not C++ identifiers, and docstrings
    holding quotes, backslashes or line breaks, are ``unreadable``: they are pasted into the code.
    """
    check_flavour(flavour)
    config = RuleConfig(flavour=flavour, precision=precision)
    calls: list[InlineCall] = list(recording.calls if hasattr(recording, "calls") else recording)
    found: list[Violation] = []
    seen: set[str] = set()
    for call in calls:
        if call.key in seen:
            continue
        seen.add(call.key)
        where = f"load_inline(name={call.name!r})"
        for name, doc in call.functions or ():
            if not re.fullmatch(r"[A-Za-z_]\w*", name) or re.search(r'["\\\n\r]', doc):
                found.append(Violation("unreadable", f"{where}: functions entry {name!r} is pasted into the generated "
                                       "code; use C++ identifiers and plain one-line docstrings.", "functions", 1))
        for rel, text in call.sources().items():
            found += _inline_violations(text, rel, where, config)
    return _dedup(found)


def _inline_violations(text: str, rel: str, where: str, config: RuleConfig) -> list[Violation]:
    """check_cpp on one generated file, lines renumbered as its ``#line 1 "cpp_sources"`` marker does."""
    lines = text.split("\n")
    marker = next((i for i, line in enumerate(lines) if re.match(r'#line 1 "(cpp|cuda)_sources"$', line)), -1)
    label = lines[marker][len('#line 1 "'):-1] if marker >= 0 else rel
    out = []
    for v in check_cpp(text, rel, config, root=None, device_code=rel.endswith(".cu")):
        line = (v.line or 1) - (marker + 1)
        if line >= 1:
            out.append(Violation(v.rule, f"{v.message} ({where}, as compiled)", label, line))
        else:  # the generated prelude: only what the build itself adds stands there
            out.append(Violation(v.rule, f"{v.message} ({where}, generated prelude)", rel, v.line))
    return out


def _dedup(found: Iterable[Violation]) -> list[Violation]:
    seen: set[tuple[str, str | None, int | None, str]] = set()
    out = []
    for v in found:
        key = (v.rule, v.file, v.line, v.message)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


__all__ = ["RULES", "RuleConfig", "Scan", "TORCH_OPS_NAMESPACES", "check_cpp", "check_python", "check_recorded_calls",
           "check_submission", "scan_workspace", "strip_cpp"]

"""Static rules: what a submission's Python and C++/CUDA sources may not do.

The package is split by concern: :mod:`~cuda_gym.judge.rules.policy` (rule names and the allow- and
deny-lists), :mod:`~cuda_gym.judge.rules.lexer` (C/C++ comments, literals and line splices),
:mod:`~cuda_gym.judge.rules.python_checks` (the AST pass), :mod:`~cuda_gym.judge.rules.cpp_checks`
(the C++ pass) and :mod:`~cuda_gym.judge.rules.scan` (which files the compiler reads). Static rules
are early, clear feedback; the judge's runtime checks do not rely on them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

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


def _dedup(found: Iterable[Violation]) -> list[Violation]:
    seen: set[tuple[str, str | None, int | None, str]] = set()
    out = []
    for v in found:
        key = (v.rule, v.file, v.line, v.message)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


__all__ = ["RULES", "RuleConfig", "Scan", "TORCH_OPS_NAMESPACES", "check_cpp", "check_python", "check_submission",
           "scan_workspace", "strip_cpp"]

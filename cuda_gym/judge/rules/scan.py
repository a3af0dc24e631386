"""Which files of a workspace the static rules read: the Python files, and the C++ the compiler reads.

The C++ set is what the build compiles (``kernels/*.cu``, ``kernels/*.cpp``) plus everything they
``#include`` from the workspace, found the way the compiler searches (the including file's folder,
then the workspace root, which is ``-I.``), whatever the included file is called (``.ipp``, ``.tcc``,
no suffix) and wherever it lies. The build's own dependency files can be added (``compiled=``):
then nothing the compiler read is missed even where this resolver could not follow.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cuda_gym.build.files import Entry, UnreadableFileError, kind_of, read_regular, walk
from cuda_gym.judge.result import Violation
from cuda_gym.judge.rules.cpp_checks import include_target
from cuda_gym.judge.rules.lexer import line_of, strip_cpp
from cuda_gym.judge.rules.policy import INFRA_FILES, MAX_SOURCE_BYTES, SKIP_PY, SOURCE_SUFFIXES

_INCLUDE = re.compile(r"(?m)^[ \t\f\v]*#[ \t\f\v]*(?:include|include_next|import)\b(.*)$")


@dataclass
class Scan:
    """The files to check and the problems met while finding them.

    Attributes:
        python: workspace-relative ``.py`` files of the agent, with their text.
        cpp: workspace-relative C++/CUDA files the compiler reads, with their text, in discovery order.
        device: those of them that nvcc compiles (``.cu`` units and what they include), where
            ``__device__`` code and inline PTX may stand.
        found: violations met on the way (links, special or oversized files).
    """

    python: dict[str, str] = field(default_factory=dict)
    cpp: dict[str, str] = field(default_factory=dict)
    device: set[str] = field(default_factory=set)
    found: list[Violation] = field(default_factory=list)


def scan_workspace(root: Path, compiled: Iterable[str] = ()) -> Scan:
    """Collect the files of the workspace at ``root`` to check (see the module docstring).

    Args:
        root: the workspace root (or a snapshot of it).
        compiled: workspace-relative paths the compiler read (``BuildResult.inputs``), added to the
            translation units and their includes.

    No link is followed and no special file is opened: each one met gives a violation instead.
    """
    scan = Scan()
    kernels: list[str] = []
    for entry in [*_top_level(root), *walk(root, "kernels")]:
        if entry.kind == "link":
            scan.found.append(Violation("io", "Symbolic links are not allowed in a submission; write plain files.",
                                        entry.rel, 1))
        elif entry.kind == "special":
            scan.found.append(Violation("unreadable", f"{entry.rel} is not a regular file; write plain files.",
                                        entry.rel, 1))
        elif entry.rel.endswith(".py") and entry.rel not in SKIP_PY:
            text = _read(root, entry.rel, scan)
            if text is not None:
                scan.python[entry.rel] = text
        elif _is_unit(entry.rel):
            kernels.append(entry.rel)
    queue = [(rel, rel.endswith(".cu")) for rel in kernels]
    queue += [(posixpath.normpath(p), False) for p in compiled]
    includes: dict[str, list[str]] = {}
    while queue:
        rel, device = queue.pop(0)
        if rel in INFRA_FILES or rel.startswith("../") or (rel in scan.cpp and (rel in scan.device or not device)):
            continue
        if device:
            scan.device.add(rel)
        if rel not in includes:
            text = _read(root, rel, scan)
            if text is None:
                includes[rel] = []
                continue
            scan.cpp[rel] = text
            includes[rel] = _includes(root, rel, text, scan)
        queue.extend((inc, device) for inc in includes[rel])
    return scan


def _top_level(root: Path) -> list[Entry]:
    return [e for e in walk(root, recursive=False) if e.rel not in INFRA_FILES]


def _is_unit(rel: str) -> bool:
    """A translation unit the build compiles: directly in ``kernels/``, ``.cu``/``.cpp``, not hidden."""
    folder, name = posixpath.split(rel)
    return folder == "kernels" and name.endswith(SOURCE_SUFFIXES) and not name.startswith(".")


def _read(root: Path, rel: str, scan: Scan) -> str | None:
    try:
        return read_regular(root / rel, MAX_SOURCE_BYTES).decode("utf-8", errors="replace")
    except UnreadableFileError as exc:
        scan.found.append(Violation("unreadable", f"{rel}: {exc}; the checker reads plain files up to "
                                    f"{MAX_SOURCE_BYTES // 2**20} MiB.", rel, 1))
        return None


def _includes(root: Path, rel: str, text: str, scan: Scan) -> list[str]:
    """Workspace files that ``rel``'s ``#include`` lines reach, as the compiler searches for them."""
    nc, _ = strip_cpp(text)
    reached: list[str] = []
    for m in _INCLUDE.finditer(nc):
        target, angle = include_target(m.group(1).strip())
        if not target or target.startswith("/"):
            continue  # reported by the C++ checks (macro names, absolute paths)
        candidates = [] if angle else [posixpath.join(posixpath.dirname(rel), target)]
        candidates.append(target)  # -I. (the workspace root), for "..." and <...> alike
        for cand in candidates:
            cand = posixpath.normpath(cand)
            if cand.startswith("../") or cand == "..":
                continue
            kind = kind_of(root, cand)
            if kind == "missing" or kind == "dir":
                continue
            if kind == "link":
                scan.found.append(Violation("io", f"#include {target!r} reaches a symbolic link; include plain "
                                            "files of the workspace.", rel, line_of(nc, m.start())))
            elif kind == "special":
                scan.found.append(Violation("unreadable", f"#include {target!r} is not a regular file.", rel,
                                            line_of(nc, m.start())))
            else:
                reached.append(cand)
            break
    return reached

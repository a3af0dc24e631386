"""A workspace submission frozen for judging: one private copy that the rules, the build and the server all read.

The agent's workspace is live: its own processes may still change it, and it may hold files that no
rule reads but Python or the compiler would (a ``__pycache__/*.pyc`` compiled from other source, an
``.so`` or a sourceless ``.pyc`` that ``import`` finds, Python in a folder the rules skip, a name
that is not UTF-8). So the judge copies exactly what the static rules read (the agent's Python files
and the C++ sources the build compiles with everything they include, see
:func:`cuda_gym.judge.rules.scan_workspace`) plus the pristine infrastructure files into a folder of
its own, once, before anything else looks at the submission. The rules check that copy, the build
compiles it, the candidate server imports from it, and the judgement cache keys on its hash: nothing
outside it exists for the judge, and nothing the agent does after the copy reaches the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_gym.judge.result import Violation
from cuda_gym.judge.rules import scan_workspace


@dataclass(frozen=True)
class FrozenSubmission:
    """The copy of one workspace submission.

    Attributes:
        root: the copy's root (``model_new.py``, the agent's other Python files, ``kernels/`` sources,
            the pristine ``model.py`` and infrastructure files).
        workspace: a :class:`~cuda_gym.workspace.Workspace` adopting ``root`` (what the build takes).
        found: problems met while copying (links, special, oversized or non-UTF-8-named files): they
            are not in the copy; the static rules report them as violations.
    """

    root: Path
    workspace: Any
    found: list[Violation] = field(default_factory=list)


def _utf8_name(rel: str) -> bool:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:  # os.scandir hands undecodable bytes back as lone surrogates
        return False
    return True


def freeze(workspace: Any, dest: Path) -> FrozenSubmission:
    """Copy what the rules read of ``workspace`` (a ``Workspace``) into the empty folder ``dest``.

    Python files are written as the rules read them (UTF-8; a file that is not valid UTF-8 has its
    bad bytes replaced, so it is the text that was checked that runs). ``model.py`` and the other
    protected files are written from the task, not read from the workspace (tampering with them is
    reported by ``Workspace.tampered``).
    """
    from cuda_gym.workspace import Workspace, pristine_files

    scan = scan_workspace(Path(workspace.root))
    found = list(scan.found)
    dest.mkdir(parents=True, exist_ok=False)
    (dest / "kernels").mkdir()
    files = {**scan.python, **scan.cpp}
    for rel in sorted(files):
        if not _utf8_name(rel):
            shown = rel.encode("utf-8", "replace").decode()
            found.append(Violation("io", f"the file name {shown!r} is not valid UTF-8; rename it", shown, 1))
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(files[rel], encoding="utf-8")
    for rel, data in pristine_files(workspace.task, workspace.flavour).items():
        (dest / rel).write_bytes(data)
    build_dir = dest.parent / f"{dest.name}_build"
    frozen_ws = Workspace.open(dest, workspace.task, workspace.flavour, build_dir=build_dir)
    return FrozenSubmission(dest, frozen_ws, found)

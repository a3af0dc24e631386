"""The agent's view of a compiler log: errors first, warnings after, noise dropped, paths relative."""

from __future__ import annotations

import re
from pathlib import Path

from cuda_gym.text import clean_output

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

"""Held-out shapes: a task's input sizes changed, so a kernel that hard-codes them is caught.

KernelBench-style tasks keep their sizes in module-level integer constants (``batch_size = 128``,
``dim = 16384``) read by ``get_inputs()``. ``held_out_code`` rewrites the constants that
``get_inputs`` reads and that neither ``get_init_inputs`` nor ``Model`` read (so the weights keep
their shapes) to 3/4 of their value (at least 1, and never equal to the original), and returns the
new source, or ``None`` when no constant can change.
"""

from __future__ import annotations

import ast

SCALE_NUM, SCALE_DEN = 3, 4
"""Held-out sizes are 3/4 of the task's (smaller: they fit wherever the task fits; odd where it was even)."""


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def held_out_code(code: str) -> str | None:
    """The task's code with its input-only size constants scaled, or ``None`` if it has none."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    funcs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    if "get_inputs" not in funcs:
        return None
    used_by_inputs = _names(funcs["get_inputs"])
    fixed: set[str] = set()
    for name in ("get_init_inputs", "Model"):
        if name in funcs:
            fixed |= _names(funcs[name])
    lines = code.splitlines(keepends=True)
    changed = False
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        value = node.value
        if not (isinstance(value, ast.Constant) and type(value.value) is int and value.value > 1):
            continue
        if name not in used_by_inputs or name in fixed:
            continue
        new = max(1, value.value * SCALE_NUM // SCALE_DEN)
        if new == value.value:
            continue
        line = lines[node.lineno - 1]
        start, end = value.col_offset, value.end_col_offset
        if node.lineno != node.end_lineno or end is None:
            continue
        lines[node.lineno - 1] = line[:start] + str(new) + line[end:]
        changed = True
    return "".join(lines) if changed else None

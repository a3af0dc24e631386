"""The Task: one KernelBench-style reference program, parsed but not run until asked."""

from __future__ import annotations

import ast
import functools
import hashlib
import itertools
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cuda_gym.errors import TaskError
from cuda_gym.vocab import Size

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
"""The top-level names every task program must define."""

_module_counter = itertools.count()


def _as_list(value: Any) -> list[Any]:
    """A list from what a task's input factory returned (tuples become lists, a bare value a 1-list)."""
    if isinstance(value, list):
        return value
    if isinstance(value, tuple):
        return list(value)
    return [value]


@dataclass(frozen=True)
class LoadedTask:
    """What executing a task's code yields: the reference model class and its input factories.

    ``get_inputs`` and ``get_init_inputs`` always return lists: a tuple becomes a list and a bare
    value (``return "gpt2"``) a one-element list. ``namespace`` is the module's globals.
    """

    Model: type
    get_inputs: Callable[[], list[Any]]
    get_init_inputs: Callable[[], list[Any]]
    namespace: dict[str, Any]


def _defined_names(tree: ast.Module) -> set[str]:
    """Names bound at the top level of a module (defs, classes, assignments, imports)."""
    names: set[str] = set()

    def targets(node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                targets(elt)

    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                targets(t)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets(stmt.target)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                names.add((alias.asname or alias.name).split(".")[0])
    return names


def check_code(code: str, task_id: str = "<task>") -> ast.Module:
    """Parse ``code`` without running it and check that it defines the three required names.

    Returns the syntax tree. Raises ``TaskError`` naming ``task_id`` and the problem.
    """
    try:
        tree = ast.parse(code, filename=task_id)
    except SyntaxError as exc:
        raise TaskError(
            f"task {task_id}: syntax error at line {exc.lineno}: {exc.msg}; fix the task's code"
        ) from None
    missing = [name for name in REQUIRED_NAMES if name not in _defined_names(tree)]
    if missing:
        raise TaskError(
            f"task {task_id}: the code does not define {', '.join(missing)} at top level; a task file "
            "must define class Model, get_inputs() and get_init_inputs() (KernelBench style)"
        )
    return tree


def rewrite_constants(code: str, values: Mapping[str, Any], task_id: str = "<task>") -> str:
    """Return ``code`` with top-level ``name = <literal>`` assignments set to new values.

    Only single-name assignments are rewritten (``batch_size = 16``); each name in ``values`` must
    have exactly one such assignment. The rest of the text, comments included, is kept.
    """
    tree = check_code(code, task_id)
    spans: dict[str, list[ast.expr]] = {name: [] for name in values}
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id in spans
        ):
            spans[stmt.targets[0].id].append(stmt.value)
    bad = [name for name, found in spans.items() if len(found) != 1]
    if bad:
        raise TaskError(
            f"task {task_id}: cannot set {', '.join(bad)}: each must have exactly one top-level "
            "assignment of the form `name = value`"
        )
    lines = code.splitlines(keepends=True)
    offsets = [0, *itertools.accumulate(len(line.encode()) for line in lines)]
    data = code.encode()
    edits = []
    for name, (node,) in spans.items():
        assert node.end_lineno is not None and node.end_col_offset is not None
        start = offsets[node.lineno - 1] + node.col_offset
        end = offsets[node.end_lineno - 1] + node.end_col_offset
        edits.append((start, end, repr(values[name]).encode()))
    for start, end, text in sorted(edits, reverse=True):
        data = data[:start] + text + data[end:]
    return data.decode()


@dataclass(frozen=True)
class Task:
    """One task: a KernelBench-style reference program.

    Attributes:
        id: stable id such as ``kernelbench/L2/17_Conv2d_InstanceNorm_Divide``, ``ops6k/00042`` or
            ``builtin/fused_bias_gelu``.
        source: the task set it came from (``builtin``, ``kernelbench``, ``ops6k``, ``custom``).
        level: KernelBench level (1-4); Ops-6K tasks use 2 (fused operators) unless known otherwise.
        name: human-readable name (KernelBench file name without ``.py``).
        code: the full program text defining ``Model``, ``get_inputs`` and ``get_init_inputs``.
        meta: free-form facts (``data_source``, ``ops``, ``size``, ``problem_id``...), JSON-serialisable.
    """

    id: str
    source: str
    level: int
    name: str
    code: str
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @functools.cached_property
    def code_hash(self) -> str:
        """SHA-256 of the code: the key of every per-task cache (baselines, judgements).

        Computed once (the dataclass is frozen, so the code cannot change)."""
        return hashlib.sha256(self.code.encode()).hexdigest()

    def check(self) -> None:
        """Parse the code without running it; raise ``TaskError`` if it is not a valid task file."""
        check_code(self.code, self.id)

    def load(self) -> LoadedTask:
        """Execute the code in a fresh module and return its ``Model`` and input factories.

        The module is registered in ``sys.modules`` under a unique name while it executes (so
        dataclasses and pickling by reference work during import) and removed afterwards. Raises
        ``TaskError`` naming the task on a syntax error, an exception at import, or a missing name.
        """
        self.check()
        name = f"cuda_gym_task_{self.code_hash[:12]}_{next(_module_counter)}"
        module = types.ModuleType(name)
        module.__file__ = f"<{self.id}>"
        sys.modules[name] = module
        try:
            exec(compile(self.code, f"<{self.id}>", "exec"), module.__dict__)
        except Exception as exc:
            raise TaskError(
                f"task {self.id}: importing its code raised {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            sys.modules.pop(name, None)
        namespace = module.__dict__
        missing = [n for n in REQUIRED_NAMES if n not in namespace]
        if missing:
            raise TaskError(f"task {self.id}: after import, {', '.join(missing)} is not defined")
        model, get_inputs, get_init_inputs = (namespace[n] for n in REQUIRED_NAMES)
        if not isinstance(model, type):
            raise TaskError(f"task {self.id}: Model must be a class, got {type(model).__name__}")
        for fname, fn in (("get_inputs", get_inputs), ("get_init_inputs", get_init_inputs)):
            if not callable(fn):
                raise TaskError(f"task {self.id}: {fname} must be a function")
        return LoadedTask(
            Model=model,
            get_inputs=lambda: _as_list(get_inputs()),
            get_init_inputs=lambda: _as_list(get_init_inputs()),
            namespace=namespace,
        )

    @property
    def sizes(self) -> dict[str, dict[str, Any]]:
        """Named sizes (``small``, ``default``) of a builtin task: constant name -> value; else empty."""
        return dict(self.meta.get("sizes") or {})

    def with_constants(self, **values: Any) -> Task:
        """A copy whose top-level size constants are set to ``values`` (``batch_size=16``).

        The id is unchanged; ``meta["overrides"]`` records the values. Works on any task whose
        constants are plain single-name assignments.
        """
        code = rewrite_constants(self.code, values, self.id)
        meta = dict(self.meta)
        meta["overrides"] = {**meta.get("overrides", {}), **values}
        return Task(self.id, self.source, self.level, self.name, code, meta)

    def resized(self, size: Size) -> Task:
        """This task at a named size (``"small"`` or ``"default"``), for tasks that declare sizes.

        The code stays a plain KernelBench-style file: only the constants' values change.
        """
        sizes = self.sizes
        if not sizes:
            raise TaskError(
                f"task {self.id} declares no sizes; only builtin tasks have named sizes "
                "(use task.with_constants(name=value) to change a constant)"
            )
        if size not in sizes:
            raise TaskError(f"task {self.id} has no size {size!r}; choose one of {sorted(sizes)}")
        code = rewrite_constants(self.code, sizes[size], self.id)
        meta = dict(self.meta)
        meta["size"] = size
        meta.pop("overrides", None)
        return Task(self.id, self.source, self.level, self.name, code, meta)

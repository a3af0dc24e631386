"""Task-set loaders: builtin, KernelBench, CUDA-Agent-Ops-6K and custom directories of task files."""

from __future__ import annotations

import ast
import difflib
import json
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_gym.errors import DataNotFoundError, TaskError
from cuda_gym.paths import DATA_ENV, data_roots
from cuda_gym.tasks.task import Task, check_code
from cuda_gym.vocab import Size, check_size

logger = logging.getLogger(__name__)

SOURCES = ("builtin", "kernelbench", "ops6k", "custom")
"""Every task-set name ``load_tasks`` accepts."""

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
"""Where the package's own task files live (package data, not a Python package)."""

TASK_SPEC = "TASK"
"""The top-level dict literal in a builtin file holding its level, description and sizes."""

HF_REPOS = {"kernelbench": "ScalingIntelligence/KernelBench", "ops6k": "BytedTsinghua-SIA/CUDA-Agent-Ops-6K"}
"""The Hugging Face dataset behind each downloadable task set."""


class TaskSet(list[Task]):
    """A list of tasks plus what the loader skipped.

    Attributes:
        source: the task set's name (``kernelbench``...).
        broken: task id -> why its code was rejected (syntax error, missing names).
        duplicates: task id -> id of the earlier task with exactly the same code (skipped when
            loading with ``dedup=True``).
    """

    def __init__(
        self,
        tasks: Iterable[Task] = (),
        *,
        source: str = "",
        broken: dict[str, str] | None = None,
        duplicates: dict[str, str] | None = None,
    ) -> None:
        super().__init__(tasks)
        self.source = source
        self.broken: dict[str, str] = broken or {}
        self.duplicates: dict[str, str] = duplicates or {}

    def get(self, task_id: str) -> Task:
        """The task with id ``task_id``; ``TaskError`` if absent."""
        for task in self:
            if task.id == task_id:
                return task
        raise TaskError(f"no task {task_id!r} in the {self.source} task set ({len(self)} tasks)")


@dataclass(frozen=True)
class _Row:
    """One unchecked task as read from disk."""

    id: str
    level: int
    name: str
    code: str
    meta: dict[str, Any]


def _fetch_hint(name: str) -> str:
    return (
        f"run `cuda-gym data fetch {name}` (needs network), or pass path=... (CLI: --path) pointing "
        f"at a folder holding {name}/, or set ${DATA_ENV} to such a folder"
    )


def find_dataset(name: str, path: str | os.PathLike[str] | None = None) -> Path:
    """Locate the data set ``name`` (``kernelbench`` or ``ops6k``).

    Looks in the explicit ``path`` (which may be the data set folder itself, a file, or a root
    holding ``<name>/``), then ``$CUDA_GYM_DATA_DIR/<name>``, then ``cache_dir()/data/<name>``.
    Raises ``DataNotFoundError`` naming the fix.
    """
    if path is not None:
        explicit = Path(path).expanduser()
        if not explicit.exists():
            raise DataNotFoundError(f"{name}: {explicit} does not exist; pass an existing file or folder")
        if _looks_like(name, explicit):
            return explicit
    for root in data_roots(path):
        candidate = root / name
        if candidate.exists() and _looks_like(name, candidate):
            return candidate
        if path is not None and root == Path(path).expanduser():
            raise DataNotFoundError(
                f"{name}: {root} holds neither {name} data nor a {name}/ folder; {_fetch_hint(name)}"
            )
    searched = ", ".join(str(r / name) for r in data_roots(path))
    raise DataNotFoundError(f"{name} data not found (searched {searched}); {_fetch_hint(name)}")


def _looks_like(name: str, path: Path) -> bool:
    """Whether ``path`` is data of set ``name`` itself (not a root that holds it)."""
    if path.is_file():
        return path.suffix in (".parquet", ".jsonl")
    if name == "kernelbench":
        return any(path.glob("level[0-9]*/*.py")) or bool(_kernelbench_parquets(path))
    return any(path.glob("*.parquet")) or any(path.glob("*.jsonl")) or any(path.glob("data/*.parquet"))


def _read_table(path: Path) -> list[dict[str, Any]]:
    """Rows of a parquet or jsonl file as dicts."""
    if path.suffix == ".jsonl":
        rows = []
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise TaskError(f"{path}:{lineno}: not valid JSON ({exc.msg}); fix or remove the line") from None
        return rows
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TaskError(f"reading {path} needs pyarrow: pip install 'cuda-gym[data]'") from None
    try:
        return pq.read_table(path).to_pylist()
    except Exception as exc:
        raise TaskError(f"{path}: not a readable parquet file ({exc}); re-download it") from exc


def _require_columns(rows: list[dict[str, Any]], columns: Sequence[str], path: Path) -> None:
    if not rows:
        raise TaskError(f"{path} holds no rows; re-download the data set (`cuda-gym data fetch`)")
    missing = [c for c in columns if c not in rows[0]]
    if missing:
        raise TaskError(f"{path} lacks the column(s) {', '.join(missing)}; expected {', '.join(columns)}")


def _levels(level: int | Sequence[int] | None) -> set[int] | None:
    if level is None:
        return None
    return {level} if isinstance(level, int) else set(level)


# ----------------------------------------------------------------------------------------- builtin


def _builtin_rows() -> list[_Row]:
    rows = []
    for file in sorted(BUILTIN_DIR.glob("*.py")):
        if file.name.startswith("_"):
            continue
        rows.append(_builtin_row(file.stem, file.read_text(encoding="utf-8")))
    return rows


def _builtin_row(name: str, source: str) -> _Row:
    """Split a builtin file into its plain task code and its ``TASK`` spec."""
    task_id = f"builtin/{name}"
    tree = check_code(source, task_id)
    spec_node = next(
        (
            s
            for s in tree.body
            if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == TASK_SPEC for t in s.targets)
        ),
        None,
    )
    if spec_node is None:
        raise TaskError(f"builtin task {name} has no `{TASK_SPEC} = {{...}}` spec")
    try:
        spec = ast.literal_eval(spec_node.value)
    except ValueError as exc:
        raise TaskError(f"builtin task {name}: {TASK_SPEC} must be a literal dict ({exc})") from None
    sizes = spec.get("sizes", {})
    if set(sizes) != {"small", "default"} or sizes["small"].keys() != sizes["default"].keys():
        raise TaskError(f"builtin task {name}: sizes must be 'small' and 'default' with the same names")
    lines = source.splitlines(keepends=True)
    assert spec_node.end_lineno is not None
    code = "".join(lines[: spec_node.lineno - 1] + lines[spec_node.end_lineno :])
    code = re.sub(r"\n{3,}", "\n\n\n", code)
    meta = {"description": spec.get("description", ""), "sizes": sizes, "size": "default"}
    return _Row(task_id, int(spec.get("level", 1)), name, code, meta)


# ------------------------------------------------------------------------------------- kernelbench


def _kernelbench_parquets(path: Path) -> list[Path]:
    files = sorted(path.glob("level_*.parquet")) + sorted(path.glob("data/level_*.parquet"))
    return files


def _level_of_file(file: Path) -> int | None:
    match = re.match(r"level_?(\d+)", file.name)
    return int(match.group(1)) if match else None


def _kernelbench_rows(path: Path, levels: set[int] | None) -> list[_Row]:
    rows: list[_Row] = []
    if path.is_file() or _kernelbench_parquets(path):
        files = [path] if path.is_file() else _kernelbench_parquets(path)
        for file in files:
            if levels is not None and _level_of_file(file) not in (None, *levels):
                continue
            table = _read_table(file)
            _require_columns(table, ("code", "level", "name"), file)
            for rec in table:
                level = int(rec["level"])
                if levels is not None and level not in levels:
                    continue
                name = str(rec["name"]).removesuffix(".py")
                meta = {"problem_id": rec.get("problem_id"), "file": str(file)}
                rows.append(_Row(f"kernelbench/L{level}/{name}", level, name, rec["code"], meta))
    else:
        for folder in sorted(path.glob("level[0-9]*")):
            level = int(folder.name.removeprefix("level"))
            if levels is not None and level not in levels:
                continue
            for file in folder.glob("*.py"):
                name = file.stem
                prefix = name.split("_", 1)[0]
                meta = {"problem_id": int(prefix) if prefix.isdigit() else None, "file": str(file)}
                rows.append(_Row(f"kernelbench/L{level}/{name}", level, name, file.read_text(encoding="utf-8"), meta))
    rows.sort(key=lambda r: (r.level, r.meta.get("problem_id") or 0, r.name))
    if levels is not None and not rows:
        raise DataNotFoundError(f"no KernelBench level {sorted(levels)} tasks in {path}; levels are 1-4")
    return rows


def _kernelbench_hf(levels: set[int] | None) -> list[_Row]:
    """KernelBench through the Hugging Face ``datasets`` package (online)."""
    try:
        import datasets
    except ImportError:
        raise DataNotFoundError("path='hf' needs the `datasets` package: pip install datasets") from None
    rows = []
    for level in sorted(levels or {1, 2, 3, 4}):
        for rec in datasets.load_dataset(HF_REPOS["kernelbench"], split=f"level_{level}"):
            name = str(rec["name"]).removesuffix(".py")
            meta = {"problem_id": rec.get("problem_id")}
            rows.append(_Row(f"kernelbench/L{level}/{name}", level, name, rec["code"], meta))
    return rows


# ------------------------------------------------------------------------------------------ ops6k


def _ops6k_file(path: Path) -> Path:
    if path.is_file():
        return path
    files = sorted(path.glob("*.parquet")) + sorted(path.glob("data/*.parquet")) + sorted(path.glob("*.jsonl"))
    if not files:
        raise DataNotFoundError(f"no .parquet or .jsonl file in {path}; {_fetch_hint('ops6k')}")
    return files[0]


def _ops6k_rows(path: Path) -> list[_Row]:
    file = _ops6k_file(path)
    table = _read_table(file)
    _require_columns(table, ("ops", "data_source", "code"), file)
    rows = []
    for index, rec in enumerate(table):
        ops: Any = rec["ops"]
        if isinstance(ops, str):
            try:
                ops = json.loads(ops)
            except json.JSONDecodeError:
                pass  # `transformers` rows name a module ("ResNetShortCut_2"), not a JSON list
        meta = {"data_source": rec["data_source"], "ops": ops, "row": index}
        rows.append(_Row(f"ops6k/{index:05d}", 2, f"{index:05d}", rec["code"], meta))
    return rows


# ----------------------------------------------------------------------------------------- custom


def _custom_rows(path: Path, level: int) -> list[_Row]:
    if not path.is_dir():
        raise TaskError(f"custom tasks: {path} is not a directory; pass a folder of KernelBench-style .py files")
    files = sorted(path.glob("*.py"))
    if not files:
        raise TaskError(f"custom tasks: no .py files in {path}; each task is one KernelBench-style file")
    return [
        _Row(f"custom/{f.stem}", level, f.stem, f.read_text(encoding="utf-8"), {"file": str(f)}) for f in files
    ]


# ------------------------------------------------------------------------------------------ public


def _source_rows(source: str, path: str | os.PathLike[str] | None, levels: set[int] | None) -> list[_Row]:
    """The rows of ``source`` at ``levels`` (``None``: every level; for ``custom``, the level given)."""
    if source == "builtin":
        rows = _builtin_rows()
    elif source == "kernelbench":
        if path is not None and (str(path) == "hf" or str(path).startswith("hf://")):
            rows = _kernelbench_hf(levels)
        else:
            rows = _kernelbench_rows(find_dataset("kernelbench", path), levels)
    elif source == "ops6k":
        rows = _ops6k_rows(find_dataset("ops6k", path))
    else:
        if path is None:
            raise TaskError("custom tasks need path=<folder of KernelBench-style .py files> (CLI: --path)")
        return _custom_rows(Path(path).expanduser(), next(iter(levels)) if levels and len(levels) == 1 else 1)
    return rows if levels is None else [r for r in rows if r.level in levels]


def load_tasks(
    source: str,
    *,
    path: str | os.PathLike[str] | None = None,
    level: int | Sequence[int] | None = None,
    size: Size = "default",
    dedup: bool = True,
    strict: bool = False,
) -> TaskSet:
    """Load a task set.

    Args:
        source: ``builtin``, ``kernelbench``, ``ops6k`` or ``custom``.
        path: where the data is: a folder holding ``kernelbench/``/``ops6k/``, the data set folder
            itself, or one parquet/jsonl file; for ``custom``, the folder of task files (required).
            ``path="hf"`` loads KernelBench through the ``datasets`` package (online). When
            omitted: ``$CUDA_GYM_DATA_DIR``, then ``cache_dir()/data``.
        level: keep only tasks of these levels (an int or several); for ``custom``, the level
            given to every task instead (default 1).
        size: ``small`` or ``default``: the size of builtin tasks (other sets have one size).
        dedup: skip tasks whose code exactly repeats an earlier task's (listed in ``duplicates``).
        strict: raise ``TaskError`` on the first task whose code does not parse or lacks
            ``Model``/``get_inputs``/``get_init_inputs``; by default such tasks are logged,
            listed in ``broken`` and skipped.

    Returns:
        A ``TaskSet`` (a list of ``Task``) in a stable order.
    """
    if source not in SOURCES:
        raise TaskError(f"unknown task source {source!r}; choose one of {', '.join(SOURCES)}")
    check_size(size)
    rows = _source_rows(source, path, _levels(level))
    result = TaskSet(source=source)
    seen: dict[str, str] = {}
    for row in rows:
        try:
            check_code(row.code, row.id)
        except TaskError as exc:
            if strict:
                raise
            result.broken[row.id] = str(exc)
            logger.warning("skipping %s", exc)
            continue
        task = Task(row.id, source, row.level, row.name, row.code, row.meta)
        if dedup:
            first = seen.setdefault(task.code_hash, task.id)
            if first != task.id:
                result.duplicates[task.id] = first
                continue
        if source == "builtin" and size != "default":
            task = task.resized(size)
        result.append(task)
    if result.duplicates:
        logger.info("%s: skipped %d tasks that repeat an earlier task's code", source, len(result.duplicates))
    if result.broken:
        logger.warning("%s: skipped %d tasks with broken code", source, len(result.broken))
    return result


def get_task(task_id: str, *, path: str | os.PathLike[str] | None = None, size: Size | None = None) -> Task:
    """The task with id ``task_id`` (``builtin/softmax``, ``kernelbench/L1/23_Softmax``, ``ops6k/00042``,
    ``custom/<stem>`` with ``path``).

    ``size`` (``small``/``default``) resizes builtin tasks; other tasks reject ``size="small"``.
    """
    source, _, rest = task_id.partition("/")
    if source not in SOURCES or not rest:
        raise TaskError(f"bad task id {task_id!r}: expected <source>/<name> with source in {', '.join(SOURCES)}")
    level = None
    if source == "kernelbench":
        match = re.match(r"L(\d+)/", rest)
        if not match:
            raise TaskError(f"bad KernelBench id {task_id!r}: expected kernelbench/L<level>/<name>")
        level = int(match.group(1))
    tasks = load_tasks(source, path=path, level=level, dedup=False, strict=False)
    if task_id in tasks.broken:
        raise TaskError(tasks.broken[task_id])
    try:
        task = tasks.get(task_id)
    except TaskError:
        near = difflib.get_close_matches(task_id, [t.id for t in tasks], n=5, cutoff=0.6)
        hint = f"; similar: {', '.join(near)}" if near else "; list them with `cuda-gym tasks list`"
        raise TaskError(f"no task {task_id!r} in {source}{hint}") from None
    if size is not None and check_size(size) != task.meta.get("size", "default"):
        task = task.resized(size)
    return task

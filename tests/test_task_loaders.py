"""Tests of the task-set loaders on the real data sets and on broken inputs built in tmp_path."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cuda_gym.data import fetch
from cuda_gym.errors import DataNotFoundError, TaskError
from cuda_gym.tasks import facts_for, find_dataset, get_task, load_tasks, task_facts

TASK_CODE = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * {k}

n = 4

def get_inputs():
    return [torch.randn(n)]

def get_init_inputs():
    return []
"""
BROKEN_CODE = "class Model(:\n"


@pytest.fixture(scope="module")
def kernelbench(data_dir: Path):
    return load_tasks("kernelbench", path=data_dir, level=[1, 2, 3])


@pytest.fixture(scope="module")
def ops6k(data_dir: Path):
    return load_tasks("ops6k", path=data_dir)


def test_kernelbench_levels_1_to_3(kernelbench) -> None:
    assert len(kernelbench) == 250
    assert [sum(t.level == lv for t in kernelbench) for lv in (1, 2, 3)] == [100, 100, 50]
    task = kernelbench.get("kernelbench/L2/17_Conv2d_InstanceNorm_Divide")
    assert task.meta["problem_id"] == 17 and task.source == "kernelbench"
    assert not kernelbench.broken


def test_kernelbench_level4_parses(data_dir: Path) -> None:
    level4 = load_tasks("kernelbench", path=data_dir, level=4)
    assert len(level4) == 20
    facts = task_facts(level4[0], use_cache=False)  # needs hub weights: fails softly, without network
    assert facts.total_bytes is None and "pretrained" in (facts.error or "")


def test_ops6k_rows_and_duplicates(ops6k, data_dir: Path) -> None:
    assert len(ops6k) + len(ops6k.duplicates) == 6000
    assert len(ops6k.duplicates) == 352 and len(ops6k) == 5648
    first_dup, original = next(iter(ops6k.duplicates.items()))
    assert int(first_dup.split("/")[1]) > int(original.split("/")[1])
    assert ops6k[0].id == "ops6k/00000" and ops6k[0].meta["data_source"] == "torch#4"
    assert ops6k[0].meta["ops"] == ["nn.BatchNorm3d", "torch.diag", "torch.max", "nn.Parameter"]
    hf_rows = [t for t in ops6k if t.meta["data_source"] == "transformers"]
    assert hf_rows and all(isinstance(t.meta["ops"], str) for t in hf_rows)
    everything = load_tasks("ops6k", path=data_dir, dedup=False)
    assert len(everything) == 6000 and not everything.duplicates


@pytest.mark.slow
def test_facts_sweep_over_all_tasks(kernelbench, ops6k, tmp_path, monkeypatch) -> None:
    """Meta-device facts for all 250 KernelBench tasks and every Ops-6K row, without crashing."""
    monkeypatch.setenv("CUDA_GYM_CACHE_DIR", str(tmp_path))
    start = time.monotonic()
    kb = facts_for(list(kernelbench), jobs=2)
    ops = facts_for(list(ops6k), jobs=2)
    assert len(kb) == 250 and len(ops) == len(ops6k)
    assert sum(f.ok for f in kb.values()) >= 240
    assert sum(f.ok for f in ops.values()) >= 0.95 * len(ops6k)
    assert kb["kernelbench/L1/1_Square_matrix_multiplication_"].input_bytes == 2 * 4096 * 4096 * 4
    cached_start = time.monotonic()
    again = facts_for(list(ops6k), jobs=2)  # second pass is read from the cache
    assert again == ops
    assert time.monotonic() - cached_start < (cached_start - start)
    assert len(list((tmp_path / "facts").glob("*.json"))) == len(kb) + len(ops)


def test_get_task_by_id(data_dir: Path) -> None:
    assert get_task("kernelbench/L1/23_Softmax", path=data_dir).name == "23_Softmax"
    dup = get_task("ops6k/05999", path=data_dir)  # duplicates are still reachable by id
    assert dup.id == "ops6k/05999"
    with pytest.raises(TaskError, match="no task 'kernelbench/L1/23_Softmaxx'.*similar: kernelbench/L1/23_Softmax"):
        get_task("kernelbench/L1/23_Softmaxx", path=data_dir)
    with pytest.raises(TaskError, match="bad task id"):
        get_task("softmax")


def test_data_lookup_order(data_dir: Path, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_GYM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_GYM_DATA_DIR", raising=False)
    with pytest.raises(DataNotFoundError, match="cuda-gym data fetch kernelbench") as info:
        find_dataset("kernelbench")
    assert "CUDA_GYM_DATA_DIR" in str(info.value)
    monkeypatch.setenv("CUDA_GYM_DATA_DIR", str(data_dir))
    assert find_dataset("ops6k") == data_dir / "ops6k"
    # an explicit path wins and may name the data set folder or file directly
    assert find_dataset("ops6k", data_dir / "ops6k") == data_dir / "ops6k"
    file = data_dir / "ops6k" / "cuda_agent_ops_6k.parquet"
    assert find_dataset("ops6k", file) == file
    with pytest.raises(DataNotFoundError, match="holds neither"):
        find_dataset("ops6k", tmp_path)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match="does not exist"):
        load_tasks("kernelbench", path=tmp_path / "nope")
    with pytest.raises(TaskError, match="not a directory"):
        load_tasks("custom", path=tmp_path / "nope")
    with pytest.raises(TaskError, match="need path="):
        load_tasks("custom")
    with pytest.raises(TaskError, match="unknown task source"):
        load_tasks("kernelbenchh")


def _write_parquet(path: Path, rows: list[dict], schema: pa.Schema) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


OPS_SCHEMA = pa.schema([("ops", pa.string()), ("data_source", pa.string()), ("code", pa.string())])


def test_empty_parquet(tmp_path: Path) -> None:
    file = _write_parquet(tmp_path / "ops6k" / "empty.parquet", [], OPS_SCHEMA)
    with pytest.raises(TaskError, match="holds no rows"):
        load_tasks("ops6k", path=file)


def test_parquet_missing_columns(tmp_path: Path) -> None:
    file = _write_parquet(tmp_path / "x.parquet", [{"code": "x"}], pa.schema([("code", pa.string())]))
    with pytest.raises(TaskError, match="lacks the column"):
        load_tasks("ops6k", path=file)


def test_broken_row_is_skipped_or_raises(tmp_path: Path) -> None:
    rows = [
        {"ops": '["torch.mul"]', "data_source": "torch#1", "code": TASK_CODE.format(k=2)},
        {"ops": '["torch.mul"]', "data_source": "torch#1", "code": BROKEN_CODE},
        {"ops": "Thing_1", "data_source": "transformers", "code": TASK_CODE.format(k=3)},
        {"ops": '["torch.mul"]', "data_source": "torch#1", "code": TASK_CODE.format(k=2)},
    ]
    file = _write_parquet(tmp_path / "ops6k" / "rows.parquet", rows, OPS_SCHEMA)
    tasks = load_tasks("ops6k", path=tmp_path)
    assert [t.id for t in tasks] == ["ops6k/00000", "ops6k/00002"]
    assert list(tasks.broken) == ["ops6k/00001"] and "syntax error" in tasks.broken["ops6k/00001"]
    assert tasks.duplicates == {"ops6k/00003": "ops6k/00000"}
    assert tasks[1].meta["ops"] == "Thing_1"
    with pytest.raises(TaskError, match="ops6k/00001: syntax error"):
        load_tasks("ops6k", path=file, strict=True)
    with pytest.raises(TaskError, match="ops6k/00001: syntax error"):
        get_task("ops6k/00001", path=file)


def test_jsonl_and_bad_jsonl(tmp_path: Path) -> None:
    file = tmp_path / "ops.jsonl"
    row = {"ops": '["torch.mul"]', "data_source": "torch#1", "code": TASK_CODE.format(k=2)}
    file.write_text(json.dumps(row) + "\n\n" + json.dumps(row | {"code": TASK_CODE.format(k=5)}) + "\n")
    tasks = load_tasks("ops6k", path=file)
    assert len(tasks) == 2 and tasks[1].load().Model()(tasks[1].load().get_inputs()[0]).shape == (4,)
    file.write_text("{not json\n")
    with pytest.raises(TaskError, match="ops.jsonl:1: not valid JSON"):
        load_tasks("ops6k", path=file)


def test_kernelbench_parquet_layout(tmp_path: Path) -> None:
    schema = pa.schema([("code", pa.string()), ("level", pa.int64()), ("name", pa.string()), ("problem_id", pa.int64())])
    _write_parquet(tmp_path / "kernelbench" / "data" / "level_1-00000-of-00001.parquet",
                   [{"code": TASK_CODE.format(k=1), "level": 1, "name": "1_Scale.py", "problem_id": 1}], schema)
    _write_parquet(tmp_path / "kernelbench" / "data" / "level_2-00000-of-00001.parquet",
                   [{"code": TASK_CODE.format(k=2), "level": 2, "name": "1_Scale2", "problem_id": 1}], schema)
    assert [t.id for t in load_tasks("kernelbench", path=tmp_path)] == ["kernelbench/L1/1_Scale", "kernelbench/L2/1_Scale2"]
    assert [t.id for t in load_tasks("kernelbench", path=tmp_path, level=2)] == ["kernelbench/L2/1_Scale2"]
    with pytest.raises(DataNotFoundError, match="no KernelBench level"):
        load_tasks("kernelbench", path=tmp_path, level=3)


def test_custom_directory(tmp_path: Path) -> None:
    (tmp_path / "scale.py").write_text(TASK_CODE.format(k=4))
    (tmp_path / "broken.py").write_text(BROKEN_CODE)
    tasks = load_tasks("custom", path=tmp_path, level=2)
    assert [(t.id, t.level) for t in tasks] == [("custom/scale", 2)]
    assert "custom/broken" in tasks.broken
    assert get_task("custom/scale", path=tmp_path).code == TASK_CODE.format(k=4)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TaskError, match="no .py files"):
        load_tasks("custom", path=empty)


def test_fetch_offline_says_what_to_do(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataNotFoundError, match="cuda-gym data fetch ops6k") as info:
        fetch("ops6k", tmp_path / "dest")
    assert "CUDA_GYM_DATA_DIR" in str(info.value) and str(tmp_path / "dest") in str(info.value)
    with pytest.raises(TaskError, match="unknown data set"):
        fetch("imagenet")

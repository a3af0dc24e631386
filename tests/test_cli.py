"""Tests of the ``cuda-gym`` tasks, data and doctor commands, through main() and the console script."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cuda_gym.cli import main


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_GYM_CACHE_DIR", str(tmp_path / "cache"))


def test_help_on_every_command(capsys) -> None:
    for argv in (["tasks"], ["tasks", "list"], ["tasks", "show"], ["data"], ["data", "fetch"], ["data", "path"], ["doctor"]):
        with pytest.raises(SystemExit) as info:
            main([*argv, "--help"])
        assert info.value.code == 0
        assert "usage: cuda-gym" in capsys.readouterr().out


def test_tasks_list_builtin(capsys) -> None:
    assert main(["tasks", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["id", "level", "total"]
    rows = {line.split()[0]: line.split() for line in out[1:]}
    assert rows["builtin/softmax"][1] == "1" and rows["builtin/softmax"][-1] == "GB"
    assert main(["tasks", "list", "--level", "3", "--max-mem", "0.3"]) == 0
    ids = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert ids == ["builtin/attention_block"]  # the MLP needs more than 0.3 GB


def test_tasks_list_kernelbench(data_dir, capsys) -> None:
    assert main(["tasks", "list", "--source", "kernelbench", "--level", "3", "--path", str(data_dir), "--no-facts"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 51 and "50 of 50 tasks" in captured.err


def test_tasks_show(capsys) -> None:
    assert main(["tasks", "show", "builtin/rmsnorm", "--size", "small"]) == 0
    out = capsys.readouterr().out
    assert "# size: small" in out and "input shapes: [4, 64, 512] float32" in out
    assert "class Model(nn.Module):" in out and "TASK" not in out


def test_errors_are_messages_not_tracebacks(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("CUDA_GYM_DATA_DIR", raising=False)
    assert main(["tasks", "show", "builtin/nope"]) == 2
    assert "no task 'builtin/nope'" in capsys.readouterr().err
    assert main(["tasks", "list", "--source", "ops6k"]) == 2
    assert "cuda-gym data fetch ops6k" in capsys.readouterr().err
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["data", "fetch", "kernelbench", "--dest", str(tmp_path / "kb")]) == 2
    assert "cannot download kernelbench" in capsys.readouterr().err


def test_data_path(data_dir, monkeypatch, capsys) -> None:
    monkeypatch.setenv("CUDA_GYM_DATA_DIR", str(data_dir))
    assert main(["data", "path"]) == 0
    out = capsys.readouterr().out
    assert f"kernelbench: {data_dir / 'kernelbench'}" in out and f"ops6k: {data_dir / 'ops6k'}" in out


def test_doctor(capsys) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "torch: " in out and "CUDA_HOME: " in out and "sandbox: " in out and "data kernelbench: " in out


def test_console_script() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from cuda_gym.cli import main; sys.exit(main())", "tasks", "list", "--no-facts"],
        capture_output=True, text=True, timeout=120,
    )
    script = subprocess.run(["cuda-gym", "tasks", "list", "--no-facts"], capture_output=True, text=True, timeout=120)
    assert script.returncode == 0 and done.returncode == 0
    assert "builtin/fused_bias_gelu" in script.stdout and script.stdout == done.stdout

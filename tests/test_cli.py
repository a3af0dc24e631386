"""Tests of the ``cuda-gym`` commands through main() and the console script; options made from configs."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

import judge_cases as cases
from cuda_gym.cli import _judge_config, build_parser, main
from cuda_gym.envs import KernelEnvConfig
from cuda_gym.judge import JudgeConfig
from cuda_gym.options import field_docs


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


# --- options made from the config dataclasses ------------------------------------------------------


def _options(argv: list[str]) -> dict[str, str]:
    """Option string -> help text of the sub-command ``argv`` (e.g. ``["judge"]``)."""
    parser = build_parser()
    for name in argv:
        sub = next(a for a in parser._actions if isinstance(a, type(parser._subparsers._group_actions[0])))
        parser = sub.choices[name]
    return {opt: action.help or "" for action in parser._actions for opt in action.option_strings}


def test_every_judge_and_env_setting_is_an_option_with_its_docstring() -> None:
    docs = field_docs(JudgeConfig)
    assert len(docs) == len(dataclasses.fields(JudgeConfig)) >= 29  # every field is documented
    for command, cls, skip in ((["judge"], JudgeConfig, {"build"}), (["baselines", "measure"], JudgeConfig, {"build"}),
                               (["play"], KernelEnvConfig, set())):
        options = _options(command)
        for field in dataclasses.fields(cls):
            if field.name in skip:
                continue
            flag = "--" + field.name.replace("_", "-")
            first_words = " ".join(field_docs(cls)[field.name].replace("``", "").split()[:4])
            assert flag in options and options[flag].startswith(first_words), (command, flag)
    assert "--no-compile-baseline" in _options(["judge"]) and "--no-keep-workspace" in _options(["play"])


def test_given_options_override_the_config_and_the_rest_keep_their_defaults() -> None:
    args = build_parser().parse_args([
        "judge", "--task", "builtin/softmax", "--solution", "x.py", "--device", "cpu", "--correctness-trials", "2",
        "--atol", '{"float32": 0.02}', "--no-compile-baseline", "--cache-dir", "/tmp/c", "--timed-calls", "7"])
    config = _judge_config(args)
    assert (config.device, config.correctness_trials, config.atol) == ("cpu", 2, {"float32": 0.02})
    assert config.compile_baseline is False
    assert config.cache_dir == Path("/tmp/c") and config.timed_calls == 7
    assert config.spread_tol == JudgeConfig().spread_tol and config.use_cache is True
    nocache = _judge_config(build_parser().parse_args(["judge", "--task", "t", "--solution", "x", "--no-cache"]))
    assert nocache.use_cache is False and nocache.cache_judgements is False


def test_bad_option_values_are_messages(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["judge", "--task", "t", "--solution", "x.py", "--atol", "{float32: 1}"])
    assert "not valid JSON" in capsys.readouterr().err
    # A value the config refuses is a CudaGymError, reported once by main().
    assert main(["judge", "--task", cases.TASK_ID, "--solution", "x.py", "--device", "cpu", "--correctness-trials", "0"]) == 2
    assert "error: correctness_trials must be at least 1" in capsys.readouterr().err
    assert main(["baselines", "measure", "--source", "builtin", "--device", "cpu", "--prewarm", "-1"]) == 2
    assert "error: --prewarm must be >= 0" in capsys.readouterr().err


def test_cli_judge_runs_with_generated_options(tmp_path, monkeypatch, capsys) -> None:
    # The default cache, shared with the env and demo tests: the demo solution's build is a cache hit there.
    monkeypatch.delenv("CUDA_GYM_CACHE_DIR", raising=False)
    from cuda_gym.baselines.agents import demo_solution
    from cuda_gym.tasks import get_task
    from cuda_gym.workspace import Workspace

    honest = demo_solution("cpu")
    ws = Workspace.create(get_task(honest.task_id, size="small"), flavour="cpu", parent=tmp_path)
    for rel, content in honest.files.items():
        (ws.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws.root / rel).write_text(content)
    code = main(["judge", "--task", honest.task_id, "--size", "small", "--workspace", str(ws.root), "--mode", "verify",
                 "--device", "cpu", "--correctness-trials", "2", "--reward-threshold", "1.2", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["correct"] is True, data["error"] or data["compile_log"]
    assert len(data["trials"]) == 2 and data["milestone"] == 1  # verify mode: correct, not timed

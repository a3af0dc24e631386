"""The ToolRunner: real sandboxed bash, real builds, real file tools; a stand-in judge returning JudgeResults."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from build_fixtures import BuiltWorkspace, add_task, write_add_kernels
from cuda_gym.build import BuildConfig
from cuda_gym.errors import ToolError
from cuda_gym.judge.result import JudgeResult, KernelStat, Timing, TrialResult, Violation
from cuda_gym.reward import TerminalReward
from cuda_gym.text import PRINTABLE
from cuda_gym.tools import ToolRunner, format_tool_call
from cuda_gym.tools.render import render_profile, render_submit, render_verify
from cuda_gym.workspace import Workspace


def _timing(ms: float) -> Timing:
    return Timing(median_ms=ms, min_ms=ms * 0.9, max_ms=ms * 1.2, iqr_ms=ms * 0.05, trials=50)


def good_result(mode: str = "profile") -> JudgeResult:
    return JudgeResult(
        task_id="builtin/fused_bias_gelu", mode=mode, device="cuda:0", compiled=True,  # type: ignore[arg-type]
        trials=[TrialResult(seed=i, passed=True, max_abs_error=1e-6, max_rel_error=2e-5) for i in range(5)],
        candidate=_timing(0.5), eager=_timing(1.0), compile=_timing(0.8),
        profile=[KernelStat("fused_bias_gelu_kernel<float>", 100, 0.45, 0.9),
                 KernelStat("memcpy", 100, 0.05, 0.1)],
        reference_profile=[KernelStat("at::native::vectorized_elementwise_kernel", 200, 0.9, 0.9)],
    )


class StandInJudge:
    """Returns prepared JudgeResults and records what it was asked (the real judge needs a GPU)."""

    def __init__(self, result: JudgeResult | None = None, fail: Exception | None = None) -> None:
        self.result = result or good_result()
        self.fail = fail
        self.calls: list[str] = []

    def _answer(self, mode: str, ws: Any) -> JudgeResult:
        self.calls.append(mode)
        if self.fail:
            raise self.fail
        return self.result

    def verify(self, ws: Any) -> JudgeResult:
        return self._answer("verify", ws)

    def profile(self, ws: Any) -> JudgeResult:
        return self._answer("profile", ws)

    def submit(self, ws: Any) -> JudgeResult:
        return self._answer("submit", ws)


def _run(runner: ToolRunner, name: str, **args: Any):
    return runner.run(format_tool_call(name, args))


# --- protocol errors and file tools -----------------------------------------------------------------

def test_parse_errors_become_observations(ws: Any) -> None:
    runner = ToolRunner(ws, judge=StandInJudge())
    out = runner.run("please compile")
    assert out.text.startswith("Error: no tool call found")
    assert out.info == {"tool": "", "parse_ok": False, "tool_ok": False}
    assert not out.submitted and out.judge_result is None
    out = runner.run('{"name": "write_file", "arguments": {"path": "a"}}')
    assert out.info["tool"] == "write_file" and not out.info["parse_ok"]
    assert "missing required argument 'content'" in out.text
    for weird in [None, b"\xff" * 10, 12, "x" * 300_000, "\x00<tool_call>"]:
        out = runner.run(weird)
        assert out.info["parse_ok"] is False and set(out.text) <= PRINTABLE


def test_file_tools_through_runner(ws: Any) -> None:
    runner = ToolRunner(ws, judge=StandInJudge(), output_limit=2000)
    out = _run(runner, "write_file", path="kernels/op.cu", content="// caf\u00e9\n" + "int x;\n" * 1000)
    assert out.info == {"tool": "write_file", "parse_ok": True, "tool_ok": True} and "created" in out.text
    out = _run(runner, "read_file", path="kernels/op.cu")
    assert len(out.text) <= 2000 and set(out.text) <= PRINTABLE
    assert "caf\\xe9" in out.text and "start_line=" in out.text  # budget respected, says how to read on
    out = _run(runner, "edit_file", path="kernels/op.cu", old_string="int x;", new_string="int y;")
    assert not out.info["tool_ok"] and "1000 matches" in out.text and out.text.startswith("Error:")
    out = _run(runner, "multi_edit", path="kernels/op.cu",
               edits=[{"old_string": "int x;", "new_string": "int y;", "replace_all": True}])
    assert out.info["tool_ok"] and "1000 replacements" in out.text
    assert "kernels/op.cu" in _run(runner, "glob", pattern="kernels/*.cu").text
    assert "kernels/op.cu:2: int y;" in _run(runner, "grep", pattern="int y", glob="*.cu").text
    out = _run(runner, "write_file", path="model.py", content="hacked")
    assert not out.info["tool_ok"] and "protected" in out.text
    out = _run(runner, "read_file", path="../../etc/passwd")
    assert not out.info["tool_ok"] and out.text.startswith("Error:")


def test_output_limit_is_validated(ws: Any) -> None:
    with pytest.raises(ToolError, match="output_limit"):
        ToolRunner(ws, judge=StandInJudge(), output_limit=10)


# --- bash in the real sandbox -----------------------------------------------------------------------

def test_bash_runs_in_workspace(ws: Any) -> None:
    runner = ToolRunner(ws, judge=StandInJudge())
    out = _run(runner, "bash", command="pwd; echo hello; printf 'caf\\xc3\\xa9\\n'")
    assert str(Path(ws.root)) in out.text and "hello" in out.text and "caf\\xe9" in out.text
    assert "[exit code 0," in out.text
    assert out.info == {"tool": "bash", "parse_ok": True, "tool_ok": True, "exit_code": 0, "timed_out": False}
    out = _run(runner, "bash", command="echo made > new.txt; exit 3")
    assert out.info["exit_code"] == 3 and not out.info["tool_ok"] and "[exit code 3," in out.text
    assert (Path(ws.root) / "new.txt").read_text() == "made\n"
    assert "(no output)" in _run(runner, "bash", command="true").text


def test_bash_cannot_write_protected_or_outside(ws: Any, tmp_path: Path) -> None:
    runner = ToolRunner(ws, judge=StandInJudge())
    before = (Path(ws.root) / "model.py").read_bytes()
    out = _run(runner, "bash", command="echo hacked > model.py")
    assert not out.info["tool_ok"]
    assert (Path(ws.root) / "model.py").read_bytes() == before
    target = tmp_path / "outside.txt"
    _run(runner, "bash", command=f"echo x > {target}")
    assert not target.exists()


def test_bash_timeout_and_clamp(ws: Any) -> None:
    runner = ToolRunner(ws, judge=StandInJudge(), max_bash_timeout=3)  # 3 s: the nice-19 shell prints first
    out = _run(runner, "bash", command="echo start; sleep 30", timeout=600)
    assert out.info["timed_out"] and not out.info["tool_ok"]
    assert "start" in out.text and "stopped:" in out.text


def test_bash_command_with_a_nul_character_is_a_tool_error(ws: Any) -> None:
    runner = ToolRunner(ws, judge=StandInJudge())
    out = runner.run('{"name": "bash", "arguments": {"command": "echo a\\u0000b"}}')  # JSON's \u0000
    assert out.text.startswith("Error: the command holds a NUL character (\\x00) at position 6")
    assert out.info["tool"] == "bash" and not out.info["tool_ok"] and "internal error" not in out.text


def test_bash_output_is_cut_in_the_middle(ws: Any) -> None:
    runner = ToolRunner(ws, judge=StandInJudge(), output_limit=1000)
    out = _run(runner, "bash", command="echo HEAD; seq 1 100000; echo TAIL")
    assert len(out.text) <= 1000
    assert out.text.startswith("HEAD") and "TAIL" in out.text and "characters cut" in out.text
    assert out.text.rstrip().endswith("]") and "exit code 0" in out.text


# --- judge tools ------------------------------------------------------------------------------------

def test_compile_then_judge_tools(cpu_add_build: BuiltWorkspace, build_config: BuildConfig, tmp_path: Path) -> None:
    ws = Workspace.create(add_task(), flavour="cpu", parent=tmp_path)
    write_add_kernels(ws)  # the same sources as the session's cpu_add_build: a cache hit, no compile
    judge = StandInJudge()
    runner = ToolRunner(ws, judge=judge, build_config=build_config, reward=TerminalReward())
    out = _run(runner, "compile")
    assert out.info["tool"] == "compile" and out.info["compiled"] is True and out.info["tool_ok"], out.text
    assert out.text.startswith("compile: OK (cached build)") and out.info["build_cached"]
    out = _run(runner, "verify")
    assert judge.calls == ["verify"] and out.judge_result is judge.result and not out.submitted
    assert out.info["correct"] is True and out.info["tool_ok"] and out.info["tool"] == "verify"
    out = _run(runner, "profile")
    assert "2.00x vs eager" in out.text and "fused_bias_gelu_kernel<float>" in out.text
    assert math.isclose(out.info["speedup_vs_eager"], 2.0)
    out = _run(runner, "submit")
    assert out.submitted and "milestone" not in out.info and "Milestone reward: 3" in out.text


def test_judge_tools_compile_first_and_stop_on_errors(ws: Workspace, build_config: BuildConfig) -> None:
    judge = StandInJudge()
    runner = ToolRunner(ws, judge=judge, build_config=build_config)
    bad = "int broken() { return undeclared_name; }\n"
    assert _run(runner, "write_file", path="kernels/broken.cpp", content=bad).info["tool_ok"]
    out = _run(runner, "verify")
    assert judge.calls == [], "a workspace that does not build never reaches the judge"
    assert out.info["compiled"] is False and out.info["correct"] is False and out.info["tool_ok"]
    assert "FAILED to compile" in out.text and "undeclared_name" in out.text
    out = _run(runner, "compile")
    assert out.info["compiled"] is False and not out.info["tool_ok"] and "compile: FAILED" in out.text
    # submit always asks the judge: its verdict is the episode's.
    out = _run(runner, "submit")
    assert judge.calls == ["submit"] and out.submitted


def test_judge_failures_never_raise(ws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    judge = StandInJudge(fail=RuntimeError("device lost"))
    runner = ToolRunner(ws, judge=judge)
    runner._built_state = runner._sources_state()  # as if just compiled: go straight to the judge
    out = _run(runner, "verify")
    assert out.text.startswith("internal error in tool verify: RuntimeError: device lost")
    assert out.info == {"tool": "verify", "parse_ok": True, "tool_ok": False}
    assert out.judge_result is None and not out.submitted
    runner.judge = StandInJudge(result="not a result")  # type: ignore[arg-type]
    out = _run(runner, "submit")
    assert "not a JudgeResult" in out.text and not out.submitted and not out.info["tool_ok"]


# --- rendering --------------------------------------------------------------------------------------

def test_render_verify_pass_and_fail() -> None:
    text = render_verify(good_result("verify"))
    assert text.startswith("verify: PASSED (5/5 trials passed)")
    assert "Correctness trials: 5/5 passed (worst max_abs_err=1e-06, max_rel_err=2e-05)" in text
    failing = JudgeResult(
        task_id="t", mode="verify", device="cuda:0", compiled=True,
        trials=[TrialResult(1, True), TrialResult(2, False, math.inf, math.inf, "output 0 has NaN", timed=True)],
        violations=[Violation("torch-compute", "ModelNew.forward ran aten::matmul", "model_new.py", 12)],
    )
    text = render_verify(failing)
    assert "INCORRECT (1/2 trials passed)" in text and "Correctness trials: 1/2 passed" in text
    assert "trial 2 timed (seed 2): FAIL  max_abs_err=inf" in text and "output 0 has NaN" in text
    assert "[torch-compute] ModelNew.forward ran aten::matmul (model_new.py:12)" in text
    broken = JudgeResult(task_id="t", mode="verify", device="cuda:0", compiled=False,
                         compile_log="kernels/a.cu(3): error: expected a ';'")
    assert "FAILED to compile" in render_verify(broken) and "a.cu(3): error" in render_verify(broken)
    crashed = JudgeResult(task_id="t", mode="verify", device="cuda:0", compiled=True,
                          error="CUDA error: an illegal memory access was encountered")
    assert "illegal memory access" in render_verify(crashed).splitlines()[0]


def test_render_profile_and_submit() -> None:
    text = render_profile(good_result())
    for part in ["profile: PASSED", "candidate", "0.5000 ms", "eager", "torch.compile", "Speedup: 2.00x vs eager",
                 "1.60x vs torch.compile", "Candidate kernels:", "90.0%",
                 "Reference (eager PyTorch) kernels:", "vectorized_elementwise_kernel"]:
        assert part in text, part
    rejected = good_result("full")
    rejected.violations.append(Violation("suspect-speedup", "faster than memory bandwidth allows"))
    text = render_submit(rejected, TerminalReward())
    assert "REJECTED" in text and "Milestone reward: -1" in text
    slow = good_result("full")
    slow.candidate = _timing(2.0)
    assert "Milestone reward: 1 (correct, but not" in render_submit(slow, TerminalReward())
    no_timing = JudgeResult(task_id="t", mode="verify", device="cpu", compiled=True, trials=[TrialResult(1, True)])
    assert "Timing" not in render_profile(no_timing)

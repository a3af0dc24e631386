"""Every hack submission of the suite scores -1 with the expected rule or failure under the real judge."""

from __future__ import annotations

from pathlib import Path

import pytest

from adversarial.judging import (
    SharedJudges,
    honest_solutions,
    load_task,
    make_workspace,
    materialize,
    open_fds,
    settled_fds,
    solution_meta,
)
from adversarial.manifest import MANIFEST, Case
from cuda_gym.reward import milestone_reward


def _params(gpu: bool) -> list:
    marks = [pytest.mark.gpu] if gpu else []
    return [pytest.param(c, id=c.name, marks=marks) for c in MANIFEST if c.gpu == gpu]


def test_manifest_is_complete() -> None:
    names = {c.name for c in MANIFEST}
    on_disk = {p.name for p in (Path(__file__).parent / "cases").iterdir() if p.is_dir()}
    assert names == on_disk
    assert len(MANIFEST) >= 20


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in MANIFEST])
def test_static_rules_find_the_hack(case: Case, tmp_path: Path) -> None:
    from cuda_gym.judge.rules import check_submission

    found = check_submission(materialize(case.path, tmp_path), case.flavour)
    assert {v.rule for v in found} == set(case.static)
    assert all(v.file and v.line for v in found), found


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in honest_solutions()])
def test_static_rules_pass_honest_solutions(path: Path, tmp_path: Path) -> None:
    from cuda_gym.judge.rules import check_submission

    assert check_submission(materialize(path, tmp_path), solution_meta(path)["flavour"]) == []


def _judge(case: Case, device: str, tmp_path: Path, judges: SharedJudges) -> None:
    task = load_task(case.task)
    ws = make_workspace(task, case.path, case.flavour, tmp_path)
    result = judges.get(device, held_out_shapes=case.held_out).evaluate(task, workspace=ws, mode=case.mode)
    if case.held_out:
        assert any(t.held_out and not t.passed for t in result.trials), result.to_json()
    rules = {v.rule for v in result.violations}
    if "low-variance" in case.judge:
        # a constant passes the elementwise tolerance on such a task: the task is flagged, and the
        # scale-aware check (error against the reference's own spread) fails the constant
        assert result.low_variance_output, result.to_json()
    assert milestone_reward(result) == -1, result.to_json()
    if "correctness" in case.judge:
        assert not result.correct, result.to_json()
    else:
        assert rules & set(case.judge), (rules, result.to_json())


@pytest.mark.slow
@pytest.mark.parametrize("case", _params(gpu=False))
def test_judge_cpu(case: Case, tmp_path: Path, judges: SharedJudges) -> None:
    _judge(case, "cpu", tmp_path, judges)


@pytest.mark.parametrize("case", _params(gpu=True))
def test_judge_gpu(case: Case, tmp_path: Path, judges: SharedJudges) -> None:
    _judge(case, "cuda:0", tmp_path, judges)


_BASE_REWARDS: dict[str, int] = {}


def _slow_base_reward(flavour: str, device: str, tmp_path: Path, judges: SharedJudges) -> int:
    """The reward of the honest slow base of the native-code cases, judged like them (once per flavour)."""
    if flavour not in _BASE_REWARDS:
        base = Path(__file__).resolve().parent.parent / "solutions" / f"{flavour}_scale_relu_slow"
        task = load_task(solution_meta(base)["task"])
        ws = make_workspace(task, base, flavour, tmp_path / "slow_base")
        result = judges.get(device, static_rules=False).evaluate(task, workspace=ws, mode="full")
        assert result.passed, result.to_json()
        _BASE_REWARDS[flavour] = milestone_reward(result)
    return _BASE_REWARDS[flavour]


def _native_params() -> list:
    return [pytest.param(c, id=c.name, marks=[pytest.mark.gpu] if c.gpu else [pytest.mark.slow])
            for c in MANIFEST if c.native]


FD_SLACK = 4
"""Descriptors the reference worker may hold after a native case beyond what it held before it."""


@pytest.mark.parametrize("case", _native_params())
def test_native_hack_gains_nothing_without_static_rules(case: Case, tmp_path: Path, judges: SharedJudges) -> None:
    """The process model alone holds: with the static rules off, no reward above the honest base, and the
    trusted reference worker is left as the case found it (the same process, no descriptor kept: red team 7's
    D1 left 1,268 in it, then every later evaluation's, until the judge hung)."""
    device = "cuda:0" if case.gpu else "cpu"
    (tmp_path / "slow_base").mkdir()
    slow_base_reward = _slow_base_reward(case.flavour, device, tmp_path, judges)
    task = load_task(case.task)
    ws = make_workspace(task, case.path, case.flavour, tmp_path)
    judge = judges.get(device, static_rules=False)
    worker = judge.worker_pid  # started by the slow base, whose task state (and pools) the case reuses
    assert worker is not None
    before = open_fds(worker)
    result = judge.evaluate(task, workspace=ws, mode="full")
    reward = milestone_reward(result)
    assert reward <= slow_base_reward, result.to_json()
    assert judge.worker_pid == worker, "the case cost the judge its reference worker"
    assert settled_fds(worker, before + FD_SLACK) <= before + FD_SLACK, "the case left descriptors in the worker"
    assert result.compiled, result.compile_log  # the hack ran: its verdict comes from the runtime checks
    if case.head_start:  # the case's own count of the work it did before the clock could see it
        assert result.candidate is not None and result.candidate.event_median_ms == 0, result.to_json()
    if case.runtime:
        found = {v.rule for v in result.violations} | ({"correctness"} if result.compiled and not result.correct else set())
        assert reward == -1 and found & set(case.runtime), (found, result.to_json())

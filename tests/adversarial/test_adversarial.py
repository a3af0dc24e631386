"""Every hack submission of the suite scores -1 with the expected rule or failure under the real judge."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_gym.reward import milestone_reward

from adversarial.judging import honest_solutions, judge_config, load_task, make_workspace, materialize, solution_meta
from adversarial.manifest import MANIFEST, Case


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


def _judge(case: Case, device: str, tmp_path: Path) -> None:
    judge_mod = pytest.importorskip("cuda_gym.judge.judge")
    task = load_task(case.task)
    ws = make_workspace(task, case.path, case.flavour, tmp_path)
    with judge_mod.Judge(judge_config(device)) as judge:
        result = judge.evaluate(task, workspace=ws, mode=case.mode)
    rules = {v.rule for v in result.violations}
    if "low-variance" in case.judge:
        # a constant passes the tolerance on such a task: the judge can only flag the task
        assert result.low_variance_output, result.to_json()
        return
    assert milestone_reward(result) == -1, result.to_json()
    if "correctness" in case.judge:
        assert not result.correct, result.to_json()
    else:
        assert rules & set(case.judge), (rules, result.to_json())


@pytest.mark.slow
@pytest.mark.parametrize("case", _params(gpu=False))
def test_judge_cpu(case: Case, tmp_path: Path) -> None:
    _judge(case, "cpu", tmp_path)


@pytest.mark.parametrize("case", _params(gpu=True))
def test_judge_gpu(case: Case, tmp_path: Path) -> None:
    _judge(case, "cuda:0", tmp_path)

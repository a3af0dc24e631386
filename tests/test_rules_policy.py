"""Policy tables of the static rules (cuda_gym.judge.rules.policy): one documented vocabulary."""

from __future__ import annotations

from pathlib import Path

from cuda_gym.judge.rules import RULES, check_submission
from cuda_gym.judge.rules.cpp_checks import PATTERNS
from cuda_gym.judge.rules.policy import PYBIND_ALLOWED


def test_every_rule_is_documented() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "rules.md").read_text()
    for rule in [*RULES, "input-mutation", "infra-tamper", "suspect-speedup"]:
        assert f"`{rule}`" in doc, rule


def test_every_pattern_row_reports_a_known_rule() -> None:
    assert {row.rule for row in PATTERNS} <= set(RULES)


def test_pybind11_allow_list_holds_no_route_into_python() -> None:
    assert not PYBIND_ALLOWED & {"object", "handle", "eval", "exec", "globals", "cast", "dict", "import"}


def test_python_and_cpp_name_processes_alike(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "model_new.py").write_text("import os\nimport cuda_extension\nos.system('true')\n")
    (ws / "kernels" / "k.cpp").write_text("void f() { system(\"true\"); }\n")
    assert {(v.rule, v.file) for v in check_submission(ws, "cpu")} == {("process", "model_new.py"),
                                                                        ("process", "kernels/k.cpp")}

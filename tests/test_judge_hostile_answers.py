"""A hostile answer leaves the trusted worker as it was: no descriptor or memory it sent stays in the driver."""

from __future__ import annotations

from pathlib import Path

import pytest

from adversarial.judging import SharedJudges, load_task, make_workspace, open_fds, settled_fds
from adversarial.manifest import CASES
from cuda_gym.reward import milestone_reward

pytestmark = pytest.mark.slow


def test_fds_of_a_refused_packet_are_closed(tmp_path: Path, judges: SharedJudges) -> None:
    task = load_task("custom:scale_relu")
    judge = judges.get("cpu")
    first = judge.evaluate(task, workspace=make_workspace(task, CASES / "c44_answer_fd_flood", "cpu", tmp_path / "a"))
    assert milestone_reward(first) == -1 and "could not be read" in first.error, first.to_json()
    pid = judge.worker_pid
    assert pid is not None
    before = open_fds(pid)
    again = judge.evaluate(task, workspace=make_workspace(task, CASES / "c44_answer_fd_flood", "cpu", tmp_path / "b"))
    assert milestone_reward(again) == -1
    assert judge.worker_pid == pid, "the reference worker was restarted"
    # closes finish on the driver's closer thread: count once they are done (CI counted 7 for 5 at once)
    assert settled_fds(pid, before) <= before, "the driver kept descriptors the server sent"


def test_a_session_ended_for_a_message_it_refused_says_why(tmp_path: Path, judges: SharedJudges) -> None:
    """Case c57 attaches descriptors to its server's ``Finished``: the driver refuses the message and kills the
    server, and the verdict names the refusal (it read "it crashed (e.g. a segfault ...)", red team 8 recheck)."""
    task = load_task("custom:scale_relu")
    case = CASES / "c57_native_fds_on_every_message"
    result = judges.get("cpu", static_rules=False).evaluate(task, workspace=make_workspace(task, case, "cpu", tmp_path))
    assert milestone_reward(result) == -1, result.to_json()
    assert "where none belong" in result.error and "crashed" not in result.error, result.error

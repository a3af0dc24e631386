"""Seeded fuzz of ``KernelEnv.step`` on ``CpuKernel-Builtin-v0``: hostile actions never raise, hang,
flood memory or come back as "internal error", and an honest episode afterwards still earns its reward.

The actions come from ``tests/fuzz_actions.py`` (the 10,000-action run is
``benchmarks/bench_fuzz_step.py``). The judge tools are left out here (seconds each on 2 cores);
bash calls, globs and greps get a 1 s limit so that sleeps and catastrophic regexes run past it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from env_helpers import HONEST, TASK_ID, call, play, write_all
from fuzz_actions import HostileActions, fuzz, make_fuzz_env

ACTIONS = int(os.environ.get("CUDA_GYM_FUZZ_ACTIONS", "2000"))
"""Actions per CI run (``CUDA_GYM_FUZZ_ACTIONS`` overrides)."""

LIMIT_S = 1.0
"""Time limit of each bash call, glob and grep in the fuzz episodes: the per-step limit kept small."""


@pytest.mark.timeout(900)
def test_step_holds_under_hostile_actions(tmp_path: Path) -> None:
    env = make_fuzz_env(tmp_path, LIMIT_S)
    try:
        stats = fuzz(env, HostileActions(seed=12), ACTIONS)
        report = stats.as_dict()
        assert stats.actions == ACTIONS
        assert stats.exceptions == 0, report
        assert stats.internal_errors == 0, report
        assert stats.slow_steps == 0 and stats.max_step_seconds < 30, report
        assert stats.rss_peak_mib - stats.rss_start_mib < 1024, report
        # The same env, a fresh episode: the honest solution is judged as usual.
        total, info, _ = play(env, [write_all(HONEST.files), call("submit")], options={"task_id": TASK_ID})
        assert info["final_eval"] and info["correct"], info
        assert total >= 1
    finally:
        env.close()


HOSTILE_WORKSPACE = (
    "mkfifo kernels/fifo.h model_new.pyc; ln -s loop kernels/loop; ln -s loop2 kernels/a.cpp; "
    "mkdir -p kernels/deep; ln -s / kernels/root; ln -s /etc/passwd kernels/p.h; chmod 000 kernels/deep"
)
"""A workspace full of what host-side code must not follow or open: FIFOs, link loops, links out."""


def _turn_limit_episode(tmp_path: Path, command: str) -> tuple[str, float, bool, dict]:
    import gymnasium as gym

    from env_helpers import CPU_ID

    env = gym.make(CPU_ID, task_ids=[TASK_ID], max_turns=2, workspace_dir=tmp_path)
    try:
        env.reset()
        env.step(call("bash", command=command))
        obs, reward, _, truncated, info = env.step(call("glob", pattern="**/*"))  # the last turn: judged
        return obs, float(reward), bool(truncated), info
    finally:
        env.close()


@pytest.mark.timeout(300)
def test_turn_limit_judges_a_hostile_workspace(tmp_path: Path) -> None:
    obs, reward, truncated, info = _turn_limit_episode(tmp_path, HOSTILE_WORKSPACE)
    assert truncated and info["final_eval"] and reward == -1
    assert "kernels/fifo.h is not a regular file" in obs and "Symbolic links are not allowed" in obs


@pytest.mark.timeout(300)  # a judgement takes ~20 s on 2 cores; before the fix it blocked forever
def test_turn_limit_with_a_link_to_kmsg_does_not_hang(tmp_path: Path) -> None:
    if not os.path.exists("/proc/kmsg"):
        pytest.skip("no /proc/kmsg here")
    _, reward, truncated, info = _turn_limit_episode(tmp_path, "ln -s /proc/kmsg kernels/x.h")
    assert truncated and info["final_eval"] and reward == -1


@pytest.mark.parametrize("answer, message", [
    ("```cpp kernels/a.cpp\nint x; \ud800\n```", "lone surrogate"),  # UnicodeEncodeError out of step
    ("```cpp " + "a" * 300 + ".cpp\nint x;\n```", "too long"),         # OSError ENAMETOOLONG
    ("```python\nclass ModelNew: pass\n\ud800\n```", "lone surrogate"),
    ("```cpp model_new.py/x.cpp\nint x;\n```", "model_new.py is not a directory"),  # FileExistsError
])
def test_single_turn_hostile_answers_score_minus_one(tmp_path: Path, answer: str, message: str) -> None:
    import gymnasium as gym

    env = gym.make("CpuKernelSingleTurn-Builtin-v0", task_ids=[TASK_ID], workspace_dir=tmp_path)
    try:
        env.reset()
        obs, reward, terminated, _, info = env.step(answer)
        assert terminated and reward == -1 and not info["parse_ok"]
        assert obs.startswith("Error: ") and message in obs
    finally:
        env.close()


NON_UTF8_NAMES = "touch $'\\xff' kernels/$'\\xfd'.cpp"
"""Red-team D's A2: names that are not UTF-8 (the judge's hash and the build's unit list raised on them)."""


@pytest.mark.timeout(120)
def test_turn_limit_with_a_non_utf8_name_scores_minus_one(tmp_path: Path) -> None:
    obs, reward, truncated, info = _turn_limit_episode(tmp_path, NON_UTF8_NAMES)  # raised UnicodeEncodeError
    assert truncated and info["final_eval"] and reward == -1 and not info["compiled"], info
    assert "is not valid UTF-8" in obs and "(bash: rm -r ./$'\\x" in obs, obs


def _episode(tmp_path: Path, max_turns: int = 8):
    import gymnasium as gym

    from env_helpers import CPU_ID

    env = gym.make(CPU_ID, task_ids=[TASK_ID], max_turns=max_turns, workspace_dir=tmp_path)
    env.reset()
    env.step(write_all(HONEST.files))
    return env


@pytest.mark.timeout(120)
def test_judge_tools_refuse_a_non_utf8_name_and_submit_scores_minus_one(tmp_path: Path) -> None:
    env = _episode(tmp_path)
    try:
        env.step(call("bash", command=NON_UTF8_NAMES))
        for tool in ("compile", "verify", "profile"):  # were "internal error in tool verify"
            obs, reward, terminated, truncated, info = env.step(call(tool))
            assert obs.startswith("Error: the file name \\x") and "not valid UTF-8" in obs, obs
            assert info["parse_ok"] and not info["tool_ok"] and reward == 0 and not (terminated or truncated)
        obs, reward, terminated, _, info = env.step(call("submit"))  # raised JudgeError
        assert terminated and info["final_eval"] and reward == -1 and "not valid UTF-8" in obs, obs
    finally:
        env.close()


EMPTY_FILES = ("python3 -c 'import os\nos.mkdir(\"junk\")\n"
               "for i in range(10**7): os.close(os.open(f\"junk/e{i}\", os.O_CREAT | os.O_WRONLY))'")
"""Red-team D's A3: empty files as fast as one bash call makes them (no disk bytes: the disk limit never fired)."""


@pytest.mark.timeout(900)
def test_millions_of_empty_files_are_stopped_and_refused(tmp_path: Path) -> None:
    import time

    env = _episode(tmp_path)
    try:
        root = env.unwrapped.workspace.root
        # sandboxes run at nice 19: on a busy host 57,000 files took 21 s, so the tool's own limit is far
        obs, *_ = env.step(call("bash", command=EMPTY_FILES, timeout=600))
        assert "stopped: entries limit exceeded: the writable folders hold more than 50000 files" in obs, obs
        made = len(os.listdir(root / "junk"))
        assert 50_000 < made < 500_000, made
        obs, _, _, _, info = env.step(call("compile"))
        assert obs.startswith("Error: the workspace holds more than 50000 files") and not info["tool_ok"], obs
        started = time.monotonic()
        obs, reward, terminated, _, info = env.step(call("submit"))
        assert terminated and reward == -1 and "more than 50000 files" in obs and time.monotonic() - started < 10
    finally:
        env.close()
    assert not root.exists()


def test_folders_too_deep_to_measure_are_stopped_and_refused(tmp_path: Path) -> None:
    """A tree no walk sees whole counts as over every bound (red team 10, F1: below a 5 KiB path, 60,000 files
    passed the bash tool's 50,000-entry budget); once removed, the tools work again."""
    env = _episode(tmp_path)
    try:
        obs, *_ = env.step(call("bash", command="mkdir -p " + "d/" * 80))
        assert "could not be measured (folders nested deeper than 64)" in obs, obs
        obs, _, _, _, info = env.step(call("compile"))
        assert obs.startswith("Error: the workspace could not be read whole (folders nested deeper than 64)") \
            and not info["tool_ok"], obs
        env.step(call("bash", command="rm -r d"))
        obs, _, _, _, info = env.step(call("compile"))
        assert info["tool_ok"], obs
    finally:
        env.close()


@pytest.mark.parametrize("last", [call("submit"), call("glob", pattern="*")], ids=["submit", "turn-limit"])
def test_a_failing_judge_raises_judge_error_on_submit_and_at_the_turn_limit(tmp_path: Path, last: str) -> None:
    """Not the agent's doing (a judge cache folder that cannot be made): JudgeError at both final judgements
    (the turn-limit one raised the judge's own exception before)."""
    import gymnasium as gym

    from cuda_gym.errors import JudgeError
    from env_helpers import CPU_ID

    env = gym.make(CPU_ID, task_ids=[TASK_ID], max_turns=2, workspace_dir=tmp_path,
                   judge={"cache_dir": "/proc/cuda_gym_no_such_folder"})
    try:
        env.reset()
        env.step(call("bash", command="true"))
        with pytest.raises(JudgeError, match="infrastructure failure, not the agent's"):
            env.step(last)
    finally:
        env.close()

"""Smoke check of the judge on a GPU before longer device runs: one workspace judged in full mode.

``python3 benchmarks/device/judge_smoke.py OUT.json``: judges the shipped demo solution once (baselines
measured) and writes the result; exit status 1 when it did not pass, so a device script can stop early.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path


def main(out: str) -> int:
    from cuda_gym.baselines.agents import demo_solution
    from cuda_gym.judge import Judge, JudgeConfig
    from cuda_gym.tasks import get_task
    from cuda_gym.tools.files import write_file
    from cuda_gym.workspace import Workspace

    demo = demo_solution("cuda")
    task = get_task(demo.task_id)
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.create(task, flavour="cuda", parent=Path(tmp))
        for rel, text in demo.files.items():
            write_file(ws, rel, text)
        t0 = time.perf_counter()
        with Judge(JudgeConfig(device="cuda:0", cache_judgements=False)) as judge:
            result = judge.evaluate(task, workspace=ws, mode="full")
        data = json.loads(result.to_json())
        data["trials"] = data["trials"][:3]
        data["wall_s"] = time.perf_counter() - t0
    Path(out).write_text(json.dumps(data, indent=1))
    print(
        json.dumps(
            {k: data[k] for k in ("passed", "error", "violations", "candidate", "eager", "compile", "wall_s")}, indent=1
        )[:4000]
    )
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

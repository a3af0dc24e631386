"""GPU memory of a judge's reference worker (device run): judge the honest ``cuda_kb_gelu`` solution
(KernelBench L1 26_GELU_, 6 GiB inputs), then read the worker's GPU memory from ``nvidia-smi`` while it is
idle, and judge ``cuda_kb_softmax`` with a second judge beside it (on an 80 GB H100 on 2026-12-05 the idle
worker of the first held 61.8 GiB and the second ran out of memory; after the memory changes, in session 19:
7.8 GiB, and the second passed beside it).

usage: source benchmarks/device/setup.sh; python3 benchmarks/device/worker_memory.py OUT.json   (carry: [".whl", ".carry"])
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from adversarial.judging import load_task, make_workspace, solution_meta  # noqa: E402
from cuda_gym.judge import Judge  # noqa: E402
from cuda_gym.paths import data_roots  # noqa: E402

SOLUTIONS = Path(__file__).resolve().parents[2] / "tests" / "solutions"


def gpu_mib(pid: int) -> int:
    """The GPU memory ``nvidia-smi`` lists for ``pid`` (MiB; 0 when it lists none)."""
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return sum(int(m) for p, m in (line.split(",") for line in out.splitlines() if line.strip()) if int(p) == pid)


def judge_solution(judge: Judge, name: str, work: Path) -> dict[str, object]:
    meta = solution_meta(SOLUTIONS / name)
    data = next(r for r in data_roots(None) if (r / "kernelbench").is_dir())
    task = load_task(meta["task"], data)
    ws = make_workspace(task, SOLUTIONS / name, meta["flavour"], work)
    t = time.time()
    result = judge.evaluate(task, workspace=ws, mode="full")
    return {"solution": name, "passed": result.passed, "error": result.error[:300], "wall_s": round(time.time() - t, 1)}


def main() -> int:
    out_path = Path(sys.argv[1])
    rows: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp, Judge({"device": "cuda:0"}) as first, Judge({"device": "cuda:0"}) as second:
        rows["first"] = judge_solution(first, "cuda_kb_gelu", Path(tmp) / "a")
        assert first._ref.proc is not None
        rows["first_worker_idle_mib"] = gpu_mib(first._ref.proc.pid)
        out_path.write_text(json.dumps(rows, indent=1))
        rows["second"] = judge_solution(second, "cuda_kb_softmax", Path(tmp) / "b")
        assert second._ref.proc is not None
        rows["second_worker_idle_mib"] = gpu_mib(second._ref.proc.pid)
        rows["first_worker_idle_mib_after"] = gpu_mib(first._ref.proc.pid)
    out_path.write_text(json.dumps(rows, indent=1))
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

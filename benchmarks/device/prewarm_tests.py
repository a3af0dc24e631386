"""Prewarm a GPU test run: build every CUDA workspace the ``gpu`` tests judge and ``torch.compile`` their tasks.

Device stage ``prewarm`` of ``h200.sh``, before ``tests``: on a fresh machine each CUDA solution and adversarial
case otherwise pays its compile inside its test, one at a time, and each task's compile baseline pays
``torch.compile`` on the timing lane (2026-12-04: one cold test of the side-stream case took 178 s). Here the
builds run ``BUILDS`` at a time into the shared build cache (content-keyed: the judge's build of the same files
is then a cache hit) and the references compile ``JOBS`` at a time into the shared inductor cache
(``Judge.prewarm_compile``), both before anything is timed. Nothing is timed or cached as a baseline.

    python3 benchmarks/device/prewarm_tests.py [BUILDS] [JOBS]      (defaults 4 and 4)
"""

from __future__ import annotations

import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from adversarial.judging import honest_solutions, load_task, make_workspace, solution_meta  # noqa: E402
from adversarial.manifest import MANIFEST  # noqa: E402
from cuda_gym.build import BuildConfig, build_workspace  # noqa: E402
from cuda_gym.judge import Judge, JudgeConfig  # noqa: E402


def _cuda_submissions() -> list[tuple[str, Path]]:
    """(task spec, folder) of every CUDA solution and CUDA adversarial case, the native cases' slow base too."""
    out = [(solution_meta(p)["task"], p) for p in honest_solutions() if solution_meta(p)["flavour"] == "cuda"]
    out += [(c.task, c.path) for c in MANIFEST if c.flavour == "cuda"]
    return out


def main() -> int:
    builds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    every = _cuda_submissions()
    tasks: dict[str, Any] = {}
    for spec in sorted({spec for spec, _ in every}):
        try:
            tasks[spec] = load_task(spec)
        except pytest.skip.Exception as exc:  # a KernelBench task without the data set: its tests skip too
            print("skip", spec, exc, flush=True)
    subs = [(spec, folder) for spec, folder in every if spec in tasks]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cuda_gym_prewarm_") as tmp:

        def build(item: tuple[int, tuple[str, Path]]) -> str:
            n, (spec, folder) = item
            ws = make_workspace(tasks[spec], folder, "cuda", Path(tmp) / str(n))
            res = build_workspace(ws, BuildConfig(jobs=max(1, 16 // builds)))
            return f"{folder.name}: {'ok' if res.ok else 'failed'}{' (cached)' if res.cached else ''} {res.seconds:.1f} s"

        with ThreadPoolExecutor(builds) as pool:
            for line in pool.map(build, enumerate(subs)):
                print("build", line, flush=True)
    print(f"builds: {len(subs)} in {time.perf_counter() - start:.1f} s", flush=True)
    start = time.perf_counter()
    with Judge(JudgeConfig(device="cuda:0")) as judge:
        errors = judge.prewarm_compile(list(tasks.values()), jobs=jobs)
    for task_id, error in sorted(errors.items()):
        print("compile", task_id, error[-3000:] or "ok", flush=True)  # the end of a traceback says why
    print(f"torch.compile prewarm: {len(tasks)} tasks in {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

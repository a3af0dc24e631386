"""Pool benchmark: evaluations per hour judged serially (today's path) and through ``LocalGPUPool``.

Run on the GPU machine: ``python3 benchmarks/bench_pool.py`` (``benchmarks/device/pool_h200.sh`` does
the install). One batch of at least 20 distinct honest submissions: every CUDA workspace of
``tests/solutions`` and the shipped demo workspace, plus single files (``load_inline``) of
``tests/judge_cases.CUDA_OK`` at several block sizes. Steps, each written to ``$BENCH_OUT`` (default
``benchmarks/results/bench_pool.json``) as soon as it ends:

1. ``prepare``: every submission built once (a ``verify`` job through a pool) and every task's baselines
   measured once (cached: the serial and pool runs below both start from cached builds and baselines;
   not counted);
2. ``serial``: ``Judge.evaluate`` one after the other, a fresh candidate server each (today's path);
3. ``pool``: the same batch submitted at once to a fresh ``LocalGPUPool`` (warm servers, builds ahead);
4. ``faults``: honest submissions with an illegal memory access, an endless kernel and a GPU OOM
   (``tests/faults``) through that same pool: verdicts, seconds, and an honest job judged after them.

Reported: evaluations per hour, overhead beyond the timed work per evaluation (wall / n minus the
mean timed seconds), and per solution the ratio of the candidate median through the pool to the
serial one. The judgement cache is off; the ``torch.compile`` baseline is off (``BENCH_COMPILE=1``
turns it on: minutes per task).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
OUT = Path(os.environ.get("BENCH_OUT", HERE / "results" / "bench_pool.json"))
BLOCKS = (32, 64, 128, 192, 256, 384, 512, 1024)
"""Block sizes of the single-file variants (each a distinct submission and build)."""


def _write(report: dict[str, Any]) -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2, default=str))


def submissions(parent: Path) -> list[tuple[str, Any]]:
    """``(name, JudgeJob)`` of every honest submission of the batch."""
    import judge_cases as cases
    from adversarial.judging import load_task, make_workspace, solution_meta
    from cuda_gym.executors import JudgeJob
    from cuda_gym.paths import data_roots
    from cuda_gym.tasks import get_task

    data = next((r for r in data_roots(None) if (r / "kernelbench").is_dir()), None)
    out: list[tuple[str, Any]] = []
    dirs = sorted(p for p in (ROOT / "tests" / "solutions").iterdir() if p.name.startswith("cuda_"))
    for path in [*dirs, ROOT / "envs" / "demo_solutions" / "cuda"]:
        if path.name == "cuda":
            task = get_task((path / "task.txt").read_text().strip())
        else:
            spec = solution_meta(path)["task"]
            if spec.startswith("kernelbench") and data is None:
                continue
            task = load_task(spec, data)
        ws = make_workspace(task, path, "cuda", parent)
        out.append((f"ws:{path.name}", JudgeJob(task, workspace=str(ws.root), build_dir=str(ws.build_dir))))
    single = get_task(cases.TASK_ID)
    for block in BLOCKS:
        text = cases.CUDA_OK.replace("int threads = 256;", f"int threads = {block};")
        out.append((f"single:bias_gelu_t{block}", JudgeJob(single, solution=text)))
    return out


def faults(parent: Path) -> list[tuple[str, Any, str]]:
    """``(name, JudgeJob, expected phrase)`` of the fault fixtures (``tests/faults``)."""
    from adversarial.judging import make_workspace
    from cuda_gym.executors import JudgeJob
    from cuda_gym.tasks import get_task

    out = []
    for path in sorted((ROOT / "tests" / "faults").iterdir()):
        if not (path / "fault.json").is_file():
            continue
        meta = json.loads((path / "fault.json").read_text())
        task = get_task(meta["task"])
        ws = make_workspace(task, path, "cuda", parent)
        out.append((path.name, JudgeJob(task, workspace=str(ws.root), build_dir=str(ws.build_dir)), meta["expect"]))
    return out


def _row(name: str, res: Any) -> dict[str, Any]:
    return {
        "name": name,
        "passed": res.passed,
        "error": res.error[:300],
        "compile_log": res.compile_log[:300],
        "median_ms": res.candidate.median_ms if res.candidate else None,
        "seconds": res.seconds,
        "timed_seconds": res.timed_seconds,
    }


def _summary(rows: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    n = len(rows)
    timed = [r["timed_seconds"] or 0.0 for r in rows]
    return {
        "evaluations": n,
        "wall_s": wall,
        "evaluations_per_hour": 3600.0 * n / wall if wall else None,
        "mean_timed_s": statistics.fmean(timed) if timed else None,
        "overhead_per_evaluation_s": wall / n - statistics.fmean(timed) if n else None,
        "passed": sum(r["passed"] for r in rows),
    }


def main() -> int:
    from cuda_gym.executors import LocalGPUPool
    from cuda_gym.judge import Judge, JudgeConfig

    if not _has_gpu():
        print("bench_pool needs a GPU (its batch is CUDA submissions): run benchmarks/device/pool_h200.sh there")
        return 2
    parent = Path(tempfile.mkdtemp(prefix="bench_pool_"))
    warm = int(os.environ.get("BENCH_WARM", "3"))
    cfg = JudgeConfig(
        device="cuda:0",
        cache_judgements=False,
        compile_baseline=os.environ.get("BENCH_COMPILE") == "1",
    )
    report: dict[str, Any] = {"config": {"device": cfg.device, "warm_servers": warm, "compile_baseline": cfg.compile_baseline}}
    batch = submissions(parent)
    report["submissions"] = [name for name, _ in batch]
    _write(report)

    # 1. builds (verify jobs through a pool: built in parallel) and baselines (once per task) ahead, so
    #    both runs below start from the same caches
    t0 = time.perf_counter()
    with LocalGPUPool(cfg, devices=[cfg.device], warm_servers=warm) as pool:
        futures = {name: pool.submit(dataclasses.replace(job, mode="verify")) for name, job in batch}
        report["prepare"] = {n: _row(n, f.result()) for n, f in futures.items()}
    with Judge(cfg) as judge:
        for task in {t.id: t for t in (job.resolved_task() for _, job in batch)}.values():
            judge.baselines(task)
    report["prepare_s"] = time.perf_counter() - t0
    _write(report)

    # 2. serial, today's path: one judge, a fresh candidate server per evaluation
    rows = []
    t0 = time.perf_counter()
    with Judge(cfg) as judge:
        for name, job in batch:
            from cuda_gym.executors.base import opened

            with opened(job, "cuda" if cfg.is_cuda else "cpu") as kwargs:
                rows.append(_row(name, judge.evaluate(job.resolved_task(), **kwargs)))
            report["serial"] = {"rows": rows}
            _write(report)
    report["serial"] = {"rows": rows, **_summary(rows, time.perf_counter() - t0)}
    _write(report)

    # 3. the pool: everything submitted at once
    with LocalGPUPool(cfg, devices=[cfg.device], warm_servers=warm) as pool:
        for _name, job in batch[:2]:  # lane and warm servers up (a pool lives across an RL run)
            pool.submit(job).result()
        t0 = time.perf_counter()
        futures = {name: pool.submit(job) for name, job in batch}
        prow = [_row(n, f.result()) for n, f in futures.items()]
        report["pool"] = {"rows": prow, **_summary(prow, time.perf_counter() - t0)}
        ratios = {}
        for s, p in zip(rows, prow):
            if s["median_ms"] and p["median_ms"]:
                ratios[s["name"]] = p["median_ms"] / s["median_ms"]
        report["median_ratio_pool_over_serial"] = ratios
        if ratios:
            worst = max(ratios.values(), key=lambda r: abs(r - 1.0))
            report["median_ratio_worst"] = worst
        if report["serial"].get("evaluations_per_hour"):
            report["throughput_gain"] = report["pool"]["evaluations_per_hour"] / report["serial"]["evaluations_per_hour"]
        _write(report)

        # 4. faults among honest submissions, in that pool after the throughput run
        if cfg.is_cuda:
            bad = faults(parent)
            t0 = time.perf_counter()
            mixed = [(n, j, "") for n, j in batch[:3]] + bad + [(n, j, "") for n, j in batch[3:5]]
            futs = [(n, pool.submit(j), expect) for n, j, expect in mixed]
            frows = []
            for name, fut, expect in futs:
                try:
                    res = fut.result()
                    row = _row(name, res)
                    row["expect"] = expect
                    text = (res.error + res.compile_log).lower()
                    row["verdict_ok"] = (not res.passed and expect.lower() in text) if expect else res.passed
                except Exception as exc:  # noqa: BLE001 - recorded, the batch goes on
                    row = {"name": name, "exception": f"{type(exc).__name__}: {exc}"[:500], "verdict_ok": False}
                frows.append(row)
                report["faults"] = {"rows": frows}
                _write(report)
            after = _row("after-faults", pool.submit(batch[0][1]).result())
            report["faults"] = {"rows": frows, "wall_s": time.perf_counter() - t0, "honest_after": after}
            _write(report)

    print(json.dumps({k: report.get(k) for k in ("prepare_s", "throughput_gain", "median_ratio_worst")}, default=str))
    for key in ("serial", "pool"):
        print(key, {k: v for k, v in report.get(key, {}).items() if k != "rows"})
    for row in report.get("faults", {}).get("rows", []):
        print("fault batch:", row.get("name"), row.get("verdict_ok"), (row.get("error") or row.get("exception") or "")[:120])
    return 0


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    sys.exit(main())

"""The benchmark report: Markdown, JSON, PNG plots, and KernelBench's own result format."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cuda_gym.baselines.evaluate.metrics import BASELINES, FAST_P, GroupMetrics, level_name, summarize
from cuda_gym.baselines.evaluate.records import TaskRecord
from cuda_gym.reward import DEFAULT_THRESHOLD

logger = logging.getLogger(__name__)

_PER_JUDGEMENT = ("judgement", "compile_error", "sandbox")
"""Fingerprint keys that describe one judgement rather than the machine (left out of the report's)."""


def fingerprints(records: Sequence[TaskRecord]) -> list[dict[str, str]]:
    """The distinct hardware and software fingerprints of the records' judgements (most common first)."""
    seen: dict[str, tuple[int, dict[str, str]]] = {}
    for r in records:
        if not r.fingerprint:
            continue
        fp = {k: v for k, v in sorted(r.fingerprint.items()) if k not in _PER_JUDGEMENT}
        key = json.dumps(fp, sort_keys=True)
        seen[key] = (seen.get(key, (0, fp))[0] + 1, fp)
    return [fp for _, fp in sorted(seen.values(), key=lambda item: -item[0])]


def _num(x: float, fmt: str = ".3g") -> str:
    return format(x, fmt) if math.isfinite(x) else "-"


def render_markdown(records: Sequence[TaskRecord], groups: Sequence[GroupMetrics], meta: dict[str, Any]) -> str:
    """The report as Markdown: Table 1, fast_p, rewards, hack findings, per-task results, fingerprint."""
    thr = groups[-1].threshold if groups else DEFAULT_THRESHOLD
    lines = [f"# Benchmark report: {meta.get('agent', 'agent')} on {meta.get('env_id', '?')}", ""]
    lines += [f"{len(records)} tasks. Definitions: docs/benchmarking.md. Rates are count/tasks of the row; "
              "geomeans cover passed tasks with both speedups timed (the `covers` column).", ""]
    lines += ["## Table 1", "",
              "| level | tasks | compiled | pass | faster than eager | faster than compile "
              f"| > {thr:g}x compile | geomean vs eager | geomean vs compile | covers | geomean all vs compile |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for g in groups:
        lines.append(
            f"| {g.name} | {g.tasks} | {g.compiled} | {g.passed} | {g.faster_than_eager} | {g.faster_than_compile} "
            f"| {g.beats_compile_threshold} | {_num(g.geomean_vs_eager)} | {_num(g.geomean_vs_compile)} "
            f"| {g.geomean_covers} | {_num(g.geomean_all_vs_compile)} |")
    lines += ["", "## KernelBench fast_p (passed and speedup > p, over every task of the level)", "",
              "| level | baseline | " + " | ".join(f"fast_{p:g}" for p in FAST_P) + " |",
              "|---|---|" + "---|" * len(FAST_P)]
    for g in groups:
        for b in BASELINES:
            lines.append(f"| {g.name} | {b} | " + " | ".join(str(g.fast_p[b][str(p)]) for p in FAST_P) + " |")
    lines += ["", "## Rewards and hack findings", "", "| level | mean reward | rewards (value: episodes) "
              "| tasks with violations | findings by rule | held-out-shape failures | episode errors |",
              "|---|---|---|---|---|---|---|"]
    for g in groups:
        rewards = ", ".join(f"{k}: {v}" for k, v in g.rewards.items()) or "-"
        hacks = ", ".join(f"{k}: {v}" for k, v in g.hack_findings.items()) or "-"
        lines.append(f"| {g.name} | {_num(g.mean_reward)} | {rewards} | {g.tasks_with_violations} | {hacks} "
                     f"| {g.held_out_failures} | {g.episode_errors} |")
    lines += ["", "## Tasks", "", "| task | level | passed | vs eager | vs compile | candidate ms | reward "
              "| steps | violations | error |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(records, key=lambda r: (r.level, r.task_id)):
        error = (r.agent_error or r.error).splitlines()[0][:80].replace("|", "/") if (r.agent_error or r.error) else ""
        lines.append(f"| {r.task_id} | {r.level} | {'yes' if r.passed else 'no'} | {_num(r.speedup_vs_eager)} "
                     f"| {_num(r.speedup_vs_compile)} | {_num(r.candidate_ms, '.4g')} | {_num(r.reward, 'g')} "
                     f"| {r.steps} | {', '.join(r.violations) or '-'} | {error} |")
    lines += ["", "## Hardware and software", ""]
    fps = fingerprints(records)
    if not fps:
        lines.append("No judgement carried a fingerprint.")
    for i, fp in enumerate(fps):
        if len(fps) > 1:
            lines.append(f"Fingerprint {i + 1} of {len(fps)}:")
        lines += [f"- {k}: {v}" for k, v in fp.items()]
    for name in ("speedups_by_level.png", "speedup_per_task.png"):
        if name in meta.get("plots", []):
            lines += ["", f"![{name}]({name})"]
    return "\n".join(lines) + "\n"


def write_plots(records: Sequence[TaskRecord], out_dir: Path) -> list[str]:
    """PNG plots with matplotlib (when installed): speedup distribution per level, speedup per task.

    Returns the file names written (empty without matplotlib or without a timed, passed task).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.info("matplotlib is not installed: no plots (pip install matplotlib)")
        return []
    timed = [r for r in records if r.passed and math.isfinite(r.speedup_vs_compile) and r.speedup_vs_compile > 0]
    if not timed:
        return []
    written = []
    levels = sorted({r.level for r in timed})
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, baseline in zip(axes, BASELINES):
        data = [[r.speedup_vs_eager if baseline == "eager" else r.speedup_vs_compile for r in timed if r.level == lv]
                for lv in levels]
        data = [[v for v in row if math.isfinite(v) and v > 0] or [math.nan] for row in data]
        ax.boxplot(data)
        ax.set_xticks(range(1, len(levels) + 1), [level_name(lv) for lv in levels])
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
        ax.set_title(f"speedup vs {baseline} (passed tasks)")
    fig.tight_layout()
    fig.savefig(out_dir / "speedups_by_level.png", dpi=100)
    plt.close(fig)
    written.append("speedups_by_level.png")

    ordered = sorted(timed, key=lambda r: r.speedup_vs_compile)
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(ordered)), 4))
    xs = range(len(ordered))
    ax.bar([x - 0.2 for x in xs], [r.speedup_vs_eager for r in ordered], width=0.4, label="vs eager")
    ax.bar([x + 0.2 for x in xs], [r.speedup_vs_compile for r in ordered], width=0.4, label="vs compile")
    ax.set_xticks(list(xs), [r.task_id.split("/")[-1] for r in ordered], rotation=60, ha="right", fontsize=7)
    ax.set_yscale("log")
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_ylabel("speedup")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "speedup_per_task.png", dpi=100)
    plt.close(fig)
    written.append("speedup_per_task.png")
    return written


def _sig3(x: float) -> float:
    """KernelBench rounds runtimes to 3 significant figures (``.3g``)."""
    return float(f"{x:.3g}")


def kernelbench_results(records: Sequence[TaskRecord]) -> dict[int, dict[str, Any]]:
    """Per level, KernelBench's ``eval_results.json`` (problem id -> one sample) and its analysis JSON.

    ``runtime`` is the candidate's median in ms (KernelBench reports the mean; both rounded to 3
    significant figures), ``-1`` where it was not timed; ``correctness`` is our ``passed`` (a
    broken rule counts as incorrect). The analysis' ``geo_mean_speedup`` is vs eager over passed
    tasks, KernelBench's correct-only geomean.
    """
    out: dict[int, dict[str, Any]] = {}
    fps = fingerprints(records)
    hardware = (fps[0].get("device_name") or fps[0].get("gpu") or fps[0].get("cpu") or "") if fps else ""
    for level in sorted({r.level for r in records}):
        rows = sorted((r for r in records if r.level == level), key=lambda r: _problem_key(r.problem_id))
        evals: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            timed = r.passed and math.isfinite(r.candidate_ms)
            stats = {"mean": _sig3(r.candidate_ms), "std": None,
                     "min": r.timing.get("min_ms"), "max": r.timing.get("max_ms"),
                     "num_trials": r.timing.get("trials"), "median": _sig3(r.candidate_ms),
                     "iqr": r.timing.get("iqr_ms"), "hardware": hardware, "device": r.fingerprint.get("device", "")} \
                if timed else {}
            evals[r.problem_id] = [{
                "sample_id": 0,
                "compiled": r.compiled,
                "correctness": r.passed,
                "metadata": {"task_id": r.task_id, "hardware": hardware, "violations": r.violations,
                             "error": (r.agent_error or r.error)[:500], "speedup_vs_eager": _finite(r.speedup_vs_eager),
                             "speedup_vs_compile": _finite(r.speedup_vs_compile), "runtime_statistic": "median"},
                "runtime": _sig3(r.candidate_ms) if timed else -1,
                "runtime_stats": stats,
            }]
        group = summarize(rows)[0]
        analysis = {
            "run_name": "", "level": level, "hardware": hardware,
            "total_count": len(rows), "total_eval": len(rows),
            "compiled_count": group.compiled.count, "correct_count": group.passed.count,
            "compilation_rate": group.compiled.rate, "correctness_rate": group.passed.rate,
            "geo_mean_speedup": _finite(_geomean_passed(rows)),
            "fast_p": {f"{p:.1f}": group.fast_p["eager"][str(p)].rate for p in FAST_P},
            "fast_p_vs_compile": {f"{p:.1f}": group.fast_p["compile"][str(p)].rate for p in FAST_P},
        }
        out[level] = {"eval_results": evals, "analysis": analysis}
    return out


def _geomean_passed(rows: Sequence[TaskRecord]) -> float:
    from cuda_gym.baselines.evaluate.metrics import geomean

    return geomean(r.speedup_vs_eager for r in rows if r.passed and math.isfinite(r.speedup_vs_eager)
                   and r.speedup_vs_eager > 0)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _problem_key(problem_id: str) -> tuple[int, str]:
    return (int(problem_id), "") if problem_id.isdigit() else (1 << 30, problem_id)


def write_report(
    records: Sequence[TaskRecord], out_dir: str | Path, *, meta: dict[str, Any] | None = None,
    threshold: float = DEFAULT_THRESHOLD, plots: bool = True,
) -> dict[str, Path]:
    """Write ``report.md``, ``report.json``, the plots and ``kernelbench/level_<L>/`` under ``out_dir``.

    Returns the paths written, by kind (``markdown``, ``json``, ``plot:<name>``, ``kernelbench:<L>``).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = dict(meta or {})
    groups = summarize(records, threshold)
    written: dict[str, Path] = {}
    meta["plots"] = write_plots(records, out) if plots else []
    for name in meta["plots"]:
        written[f"plot:{name}"] = out / name
    data = {
        "meta": meta,
        "groups": [g.as_dict() for g in groups],
        "fingerprints": fingerprints(records),
        "tasks": [json.loads(r.to_json()) for r in sorted(records, key=lambda r: (r.level, r.task_id))],
    }
    (out / "report.json").write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
    written["json"] = out / "report.json"
    (out / "report.md").write_text(render_markdown(records, groups, meta))
    written["markdown"] = out / "report.md"
    for level, files in kernelbench_results(records).items():
        folder = out / "kernelbench" / f"level_{level}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "eval_results.json").write_text(json.dumps(files["eval_results"], indent=2) + "\n")
        (folder / "analysis.json").write_text(json.dumps(files["analysis"], indent=2) + "\n")
        written[f"kernelbench:{level}"] = folder
    return written

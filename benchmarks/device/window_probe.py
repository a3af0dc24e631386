"""Where the trusted clock's round trip goes, and how stable its median is between fresh servers.

``python3 benchmarks/device/window_probe.py OUT.json [SESSIONS] [CALLS]`` (GPU machine; trusted code only:
it plays the reference worker's part in this process). For each builtin task (default and small sizes),
``SESSIONS`` fresh candidate servers of kind ``reference`` (eager PyTorch: no build needed) are started,
calibrated and timed through ``procedure.Driver._timed`` exactly as baselines are. Per session it records
the median round trip, the calibrated overhead, the median trusted time (round trip minus overhead), the
servers' own CUDA-event median, and the median of every part of the round trip (``driver.PARTS``) for
the timed calls and for the calibration no-ops. Per task it reports max/min of the trusted medians
(target <= 1.03) beside max/min of the event medians. The JSON is rewritten after every session.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

TASKS = [
    ("builtin/scale_add_relu", "default"),
    ("builtin/linear_bias_relu", "default"),
    ("builtin/softmax", "default"),
    ("builtin/layernorm", "small"),
    ("builtin/row_max", "small"),
]


def main(out_path: str, sessions: int = 4, calls: int = 100) -> int:
    import torch

    from cuda_gym.judge.procedure import Driver
    from cuda_gym.judge.reference_worker import _Prepared
    from cuda_gym.tasks import get_task

    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    tasks = TASKS if device != "cpu" else [(t, "small") for t, _ in TASKS[:2]]  # CPU: a check of the probe itself
    if device != "cpu":
        torch.cuda.set_device(device)
    out = Path(out_path)
    report: dict = {"torch": torch.__version__, "cuda": str(torch.version.cuda), "sessions": sessions, "calls": calls,
                    "device_name": torch.cuda.get_device_name(0) if device != "cpu" else "cpu", "tasks": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        driver = Driver(device, root / "cache")
        for task_id, size in tasks:
            task = get_task(task_id, size=size)
            key = f"{task_id}@{size}"
            entry: dict = {"sessions": []}
            report["tasks"][key] = entry
            try:
                prepared = _Prepared(task.code, task.code_hash, device, 1234)
                job = root / key.replace("/", "_").replace("@", "_")
                job.mkdir()
                prepared.write_job(job)
                settings = _settings(calls, device)
                for _ in range(sessions):
                    entry["sessions"].append(_one_session(driver, prepared, settings, job))
                    _summarise(entry)
                    out.write_text(json.dumps(report, indent=1))
            except Exception as exc:  # noqa: BLE001 - one task failing must not lose the others
                import traceback

                entry["error"] = f"{type(exc).__name__}: {exc}"[:2000]
                entry["traceback"] = traceback.format_exc()[-3000:]
                out.write_text(json.dumps(report, indent=1))
    print(json.dumps({k: {x: v.get(x) for x in ("trusted_ratio", "event_ratio", "trusted_ms", "event_ms", "error")}
                      for k, v in report["tasks"].items()}, indent=1))
    return 0


def _settings(calls: int, device: str):
    """RunSettings as the judge builds them from the default ``JudgeConfig``, with ``calls`` timed calls."""
    from cuda_gym.judge.config import JudgeConfig
    from cuda_gym.judge.messages import RunSettings

    cfg = JudgeConfig(device=device)
    return RunSettings(
        correctness_trials=cfg.correctness_trials,
        warmup=10,
        warmup_s=0.2,
        timed_calls=calls,
        tolerances=cfg.tolerances(),
        sample_threshold_bytes=cfg.sample_threshold_bytes,
        spread_tol=cfg.spread_tol,
        thread_allowance=2 if device != "cpu" else 64,
        memory_bytes=0,
        load_timeout_s=cfg.timeout_s,
        call_timeout_s=cfg.call_timeout_s,
        wall_s=3 * cfg.timeout_s,
    )


def _one_session(driver, prepared, settings, job: Path) -> dict:
    from cuda_gym.judge.driver import ServerSession

    started = time.perf_counter()
    spec = driver._spec(prepared, settings, job, [], [])
    session = ServerSession(spec)
    try:
        driver._open(session, prepared, settings)
        t_open = time.perf_counter() - started
        loaded = session.load(driver._load(prepared, "reference", str(job), task_code=prepared.code))
        if loaded.error:
            return {"error": loaded.error}
        out: dict = {"violations": []}
        timed = driver._timed(prepared, session, settings, out, check=False)
        raw = timed["raw"]
        events = [e for e in timed["events"] if e >= 0]
        return {
            "error": str(out.get("error", "")),
            "open_s": t_open,
            "overhead_ms": session.overhead_ms,
            "noop_trips_ms": [round(p, 4) for p in _noop_trips(session)],
            "raw_median_ms": statistics.median(raw),
            "trusted_median_ms": statistics.median(raw) - session.overhead_ms,
            "event_median_ms": statistics.median(events) if events else None,
            "raw_p10_p90_ms": [_q(raw, 0.1), _q(raw, 0.9)],
            "diagnostics": timed.get("diagnostics", {}),
            "seconds": time.perf_counter() - started,
        }
    finally:
        session.close()


def _noop_trips(session) -> list[float]:
    return [sum(x for x in p if x == x) for p in session.noop_parts]


def _q(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def _summarise(entry: dict) -> None:
    ok = [s for s in entry["sessions"] if not s.get("error")]
    if not ok:
        return
    trusted = [s["trusted_median_ms"] for s in ok]
    events = [s["event_median_ms"] for s in ok if s["event_median_ms"]]
    entry["trusted_ms"] = trusted
    entry["event_ms"] = events
    entry["trusted_ratio"] = max(trusted) / min(trusted) if min(trusted) > 0 else None
    entry["event_ratio"] = max(events) / min(events) if events else None


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(args[0], *(int(a) for a in args[1:3])))

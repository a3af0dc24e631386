"""The reference worker: trusted code only; builds the reference, checks candidate outputs, times baselines.

Run as ``python3 -m cuda_gym.judge.reference_worker --device DEV``. It reads one JSON request per line
on stdin and answers one JSON line on the original stdout; everything else the task code prints goes
to stderr. It may serve many evaluations of the same device (a pool of one, restarted after faults).

Requests (``op``): ``hello``; ``prepare`` (build ``Model`` under the init seed, write its state_dict and
init inputs to the job dir, return facts); ``check`` (reference outputs for seeds, compare with the
candidate's output files, flag low-variance outputs); ``time`` (eager or ``torch.compile`` timing with
the shared harness); ``profile`` (eager per-kernel table); ``quit``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any, TextIO

import torch

from cuda_gym.judge import harness
from cuda_gym.judge.compare import compare_outputs, constant_would_pass

log = logging.getLogger(__name__)


class _Prepared:
    """A task built on the device: its module, model and facts."""

    def __init__(self, code: str, code_hash: str, device: str, init_seed: int) -> None:
        self.code_hash = code_hash
        self.module = harness.load_task_module(code, f"cuda_gym_ref_{code_hash[:12]}")
        self.get_inputs = self.module.get_inputs
        self.init_inputs = harness.make_init_inputs(self.module.get_init_inputs, init_seed, device)
        self.model = harness.build_model(self.module.Model, self.init_inputs, init_seed, device)
        self.device = device
        self.compiled: Any = None
        self.compile_error = ""
        self.low_variance: str | None = None
        inputs = harness.make_inputs(self.get_inputs, init_seed, device)
        with torch.no_grad():
            out = _plain(self.model(*inputs))
        harness.synchronize(device)
        self.facts = {
            **harness.output_facts(out),
            "input_bytes": harness.input_bytes(inputs),
            "dtype": harness.input_dtype(inputs),
            "flops": harness.count_flops(self.model, inputs),
            "param_bytes": sum(p.numel() * p.element_size() for p in self.model.state_dict().values()),
        }
        del out, inputs

    def reference(self, seed: int) -> Any:
        inputs = harness.make_inputs(self.get_inputs, seed, self.device)
        with torch.no_grad():
            out = _plain(self.model(*inputs))
        harness.synchronize(self.device)
        return out


def _plain(out: Any) -> Any:
    """Parameters returned directly become plain tensors (on both sides of the comparison)."""
    if isinstance(out, torch.nn.Parameter):
        return out.detach()
    if isinstance(out, tuple):
        return tuple(_plain(v) for v in out)
    if isinstance(out, list):
        return [_plain(v) for v in out]
    if isinstance(out, dict):
        return {k: _plain(v) for k, v in out.items()}
    return out


class ReferenceServer:
    """Holds the prepared task (one at a time) and answers requests."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.task: _Prepared | None = None
        if device.startswith("cuda"):
            torch.cuda.set_device(device)

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        if op == "hello":
            return {"fingerprint": harness.fingerprint(self.device)}
        if op == "prepare":
            return self.prepare(req)
        if op == "check":
            return self.check(req)
        if op == "time":
            return self.time(req)
        if op == "profile":
            task = self._task(req)
            return {"profile": harness.profile_table(task.model, task.get_inputs, self.device, req["seeds"])}
        raise ValueError(f"unknown op {op!r}")

    def _task(self, req: dict[str, Any]) -> _Prepared:
        if self.task is None or self.task.code_hash != req["code_hash"]:
            raise RuntimeError("the task is not prepared in this worker: send 'prepare' first")
        return self.task

    def prepare(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.task is None or self.task.code_hash != req["code_hash"]:
            self.task = None
            if self.device.startswith("cuda"):
                torch.cuda.empty_cache()
            self.task = _Prepared(req["code"], req["code_hash"], self.device, int(req["init_seed"]))
        task = self.task
        job = req.get("job_dir")
        if job:
            job_dir = Path(job)
            state = {k: v.detach().to("cpu") for k, v in task.model.state_dict().items()}
            torch.save(state, job_dir / "state_dict.pt")
            init = [x.detach().to("cpu") if isinstance(x, torch.Tensor) else x for x in task.init_inputs]
            torch.save(init, job_dir / "init_inputs.pt")
        return {"facts": task.facts}

    def check(self, req: dict[str, Any]) -> dict[str, Any]:
        task = self._task(req)
        tolerances = {k: tuple(v) for k, v in req["tolerances"].items()}
        max_bytes = int(req["max_file_bytes"])
        results = []
        refs = []
        for trial in req["trials"]:
            seed = int(trial["seed"])
            # Large outputs are compared (and kept for the low-variance check) as the same secret
            # sample of elements as the candidate saved: five full 6 GiB references do not fit.
            sampled = harness.sample_large(
                task.reference(seed), int(req["sample_seed"]), int(req["sample_threshold_bytes"]))
            if not trial.get("timed") and task.low_variance is None:
                refs.append(sampled)
            results.append(_check_file(sampled, Path(trial["file"]), max_bytes, tolerances))
            del sampled
        if task.low_variance is None and len(refs) >= 2:
            task.low_variance = constant_would_pass(refs, tolerances)
        del refs
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()
        return {"trials": results, "low_variance": task.low_variance or ""}

    def time(self, req: dict[str, Any]) -> dict[str, Any]:
        task = self._task(req)
        kind = req["kind"]
        if kind == "eager":
            model: Any = task.model
        elif kind == "compile":
            if task.compiled is None and not task.compile_error:
                try:
                    import torch._dynamo

                    torch._dynamo.reset()
                    task.compiled = torch.compile(task.model)
                except Exception as exc:  # noqa: BLE001 - recorded, compile timing becomes None
                    task.compile_error = f"{type(exc).__name__}: {exc}"
            if task.compile_error:
                return {"timing": None, "error": task.compile_error}
            model = task.compiled
        else:
            raise ValueError(f"unknown timing kind {kind!r}")
        try:
            times = harness.run_timing(model, task.get_inputs, self.device, req["warmup_seeds"], req["timed_seeds"],
                                       warmup_s=float(req["warmup_s"]))
        except Exception as exc:  # noqa: BLE001 - a baseline that cannot run is recorded, not fatal
            if kind == "compile":
                task.compile_error = f"{type(exc).__name__}: {str(exc)[:2000]}"
                return {"timing": None, "error": task.compile_error}
            raise
        return {"timing": harness.summarize(times), "calls": [[t.event_ms, t.host_ms] for t in times]}


def _check_file(ref: Any, path: Path, max_bytes: int, tolerances: Any) -> dict[str, Any]:
    def fail(msg: str) -> dict[str, Any]:
        return {"passed": False, "max_abs_error": float("inf"), "max_rel_error": float("inf"), "message": msg}

    if not path.is_file():
        return fail("the candidate produced no output for this check")
    size = path.stat().st_size
    if size > max_bytes:
        return fail(f"the saved output is {size} bytes, far more than the reference output ({max_bytes} allowed)")
    try:
        cand = torch.load(path, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - anything unloadable is a failed check
        return fail(f"the output could not be read as plain tensors/containers ({type(exc).__name__}: {str(exc)[:300]})")
    cmp = compare_outputs(ref, cand, tolerances)
    return {"passed": cmp.passed, "max_abs_error": cmp.max_abs_error, "max_rel_error": cmp.max_rel_error, "message": cmp.message}


def _reply(out: TextIO, data: dict[str, Any]) -> None:
    out.write(json.dumps(data, default=str) + "\n")
    out.flush()


def main(argv: list[str] | None = None) -> int:
    """Serve requests until ``quit`` or end of input."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", required=True)
    args = parser.parse_args(argv)
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # task code's prints must not corrupt the protocol
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server = ReferenceServer(args.device)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except json.JSONDecodeError as exc:
            _reply(proto, {"ok": False, "error": f"bad request: {exc}"})
            continue
        if req.get("op") == "quit":
            _reply(proto, {"ok": True})
            break
        try:
            _reply(proto, {"ok": True, **server.handle(req)})
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the orchestrator
            tb = traceback.format_exc(limit=8)
            _reply(proto, {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": tb})
            if "CUDA error" in str(exc) or isinstance(exc, torch.OutOfMemoryError):
                return 3  # a faulted CUDA context cannot be trusted: the orchestrator restarts us
    return 0


if __name__ == "__main__":
    sys.exit(main())

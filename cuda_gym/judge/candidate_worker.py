"""The candidate worker: runs one submission in a fresh sandboxed process and writes outputs and timings.

Run as ``python3 -m cuda_gym.judge.candidate_worker JOBDIR``. It reads ``JOBDIR/spec.json`` and deletes
it before importing any candidate code (the seeds and the secret choice of checked timed calls then
live only in this process's memory), loads ``ModelNew`` (a workspace's ``model_new.py`` plus its built
``cuda_extension``, or a KernelBench-style single file), loads the reference ``state_dict``, runs the
correctness calls (poisoned memory, op audit, input-mutation and thread checks), then warm-up and timed
calls, and writes ``result.json`` plus one ``torch.save`` file per output to check. Nothing it writes is
trusted beyond the tensors the reference worker compares; the orchestrator sanity-checks the rest.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any

import torch

from cuda_gym.judge import harness
from cuda_gym.judge.audit import OpAudit

_EXIT_OK, _EXIT_CANDIDATE_ERROR, _EXIT_BAD_JOB = 0, 1, 2


class CandidateError(Exception):
    """The candidate failed in a way that ends the run (message is shown to the agent)."""


def _identities() -> dict[str, int]:
    """Identities of the functions the harness trusts; a change means something patched them."""
    objs: dict[str, Any] = {
        "time.perf_counter": time.perf_counter,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
        "torch.save": torch.save,
        "torch.equal": torch.equal,
        "torch.Tensor.clone": torch.Tensor.clone,
        "torch.cuda._sleep": getattr(torch.cuda, "_sleep", None),
        "harness.timed_call": harness.timed_call,
        "harness.gpu_lead": harness.gpu_lead,
        "harness.idle_tail_ms": harness.idle_tail_ms,
        "harness.run_timing": harness.run_timing,
        "harness.make_inputs": harness.make_inputs,
        "harness._perf_counter": harness._perf_counter,
    }
    return {k: id(v) for k, v in objs.items()}


class Run:
    """One candidate run: the state shared by its stages."""

    def __init__(self, job_dir: Path, spec: dict[str, Any]) -> None:
        self.job = job_dir
        self.spec = spec
        self.device: str = spec["device"]
        self.violations: list[dict[str, Any]] = []
        self.result: dict[str, Any] = {"ok": False, "stage": "start", "error": "", "violations": self.violations}
        self._violated: set[str] = set()
        self.base_threads = (0, 0)
        self.allowance = int(spec["thread_allowance"])

    def stage(self, name: str) -> None:
        """Enter a stage; ``stage.txt`` tells the orchestrator where a killed run was (informational)."""
        self.result["stage"] = name
        try:
            (self.job / "stage.txt").write_text(name)
        except OSError:
            pass

    def violate(self, rule: str, message: str) -> None:
        if rule not in self._violated:
            self._violated.add(rule)
            self.violations.append({"rule": rule, "message": message})

    def check_threads(self, where: str) -> None:
        py, osn = harness.thread_counts()
        if py > self.base_threads[0]:
            self.violate("thread", f"the submission started {py - self.base_threads[0]} Python thread(s) ({where}); work must finish inside forward on the calling thread")
        elif osn > self.base_threads[1] + self.allowance:
            self.violate("thread", f"the process gained {osn - self.base_threads[1]} OS threads ({where}; {self.allowance} allowed for runtime pools); host threads may not run work outside the timed call")

    def save(self, name: str, out: Any) -> str:
        """Save an output for the reference worker after checking its types; return the file name."""
        out = harness.sample_large(
            self._plain(out), int(self.spec["sample_seed"]), int(self.spec["sample_threshold_bytes"]))
        path = self.job / name
        torch.save(out, path)
        return name

    def _plain(self, out: Any) -> Any:
        if isinstance(out, torch.Tensor):
            if type(out) is not torch.Tensor and type(out) is not torch.nn.Parameter:
                self.violate("tensor-subclass", f"forward returned a {type(out).__name__}, a torch.Tensor subclass; return plain tensors")
                raise CandidateError(f"forward returned a tensor subclass ({type(out).__name__}); only plain torch.Tensor outputs are accepted")
            t = out.detach()
            if t.untyped_storage().nbytes() > t.numel() * t.element_size() + 64:
                t = t.clone()
            return t
        if isinstance(out, tuple) and type(out) is tuple:
            return tuple(self._plain(v) for v in out)
        if isinstance(out, list) and type(out) is list:
            return [self._plain(v) for v in out]
        if isinstance(out, dict) and type(out) is dict:
            return {k: self._plain(v) for k, v in out.items()}
        if out is None or type(out) in (bool, int, float, complex, str):
            return out
        raise CandidateError(f"forward returned an object of type {type(out).__name__}; return tensors or tuples/lists/dicts of tensors like the reference Model")


def _load_single_file(path: Path) -> types.ModuleType:
    name = "cuda_gym_solution"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CandidateError(f"cannot import {path.name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _load_workspace(root: Path, module_path: Path) -> types.ModuleType:
    from cuda_gym.build import load_extension

    sys.modules["cuda_extension"] = load_extension(module_path)
    sys.path.insert(0, str(root))
    spec = importlib.util.spec_from_file_location("model_new", root / "model_new.py")
    if spec is None or spec.loader is None:
        raise CandidateError("cannot import model_new.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["model_new"] = module
    spec.loader.exec_module(module)
    return module


def _bitwise_equal(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.numel() == 0:
            return True
        return bool(torch.equal(a.detach().reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))
    return True


def run(r: Run) -> None:
    """Every stage of one candidate run; raises on a candidate failure (``r.result`` keeps the stage)."""
    job_dir, spec, device = r.job, r.spec, r.device
    ids_before = _identities()
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    harness.warm_device(device)
    task = harness.load_task_module(spec["task_code"], "cuda_gym_task")
    get_inputs = task.get_inputs
    init_inputs = torch.load(job_dir / "init_inputs.pt", weights_only=True)
    init_inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in init_inputs]
    state = torch.load(job_dir / "state_dict.pt", map_location=device, weights_only=True)
    poison = harness.MemoryPoison(device, spec["output_bytes"], spec["integer_output"])
    audit_cls = OpAudit  # bound before candidate code loads: rebinding the module global cannot swap it
    r.base_threads = harness.thread_counts()

    r.stage("import")
    if spec["kind"] == "workspace":
        module = _load_workspace(Path(spec["workspace_root"]), Path(spec["module_path"]))
    else:
        module = _load_single_file(Path(spec["solution_path"]))
    r.check_threads("while importing the submission")
    model_cls = getattr(module, "ModelNew", None)
    if model_cls is None:
        raise CandidateError("the submission defines no ModelNew class")

    r.stage("init")
    model = harness.build_model(model_cls, init_inputs, int(spec["init_seed"]), device)
    if state:
        if not isinstance(model, torch.nn.Module):
            raise CandidateError("ModelNew must be a torch.nn.Module (the reference has parameters to load)")
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise CandidateError(f"the reference state_dict does not load into ModelNew (strict): {exc}") from None
        model = model.to(device).eval()
    del state
    harness.synchronize(device)
    r.check_threads("in ModelNew.__init__")

    r.stage("correctness")
    trials = []
    with torch.no_grad():
        for j, seed in enumerate(spec["correctness_seeds"]):
            inputs = harness.make_inputs(get_inputs, int(seed), device)
            clones = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            poison.arm()
            try:
                with audit_cls() as audit:
                    out = model(*inputs)
                for v in audit.violations():
                    r.violate(v.rule, v.message)
                harness.synchronize(device)
            finally:
                poison.disarm()
            for i, (x, c) in enumerate(zip(inputs, clones)):
                if isinstance(x, torch.Tensor) and not _bitwise_equal(x, c):
                    r.violate("input-mutation", f"forward modified input {i} in place; inputs are read-only")
            trials.append({"seed": int(seed), "file": r.save(f"trial_{j}.pt", out)})
            del out, inputs, clones
            r.check_threads(f"after correctness call {j + 1}")
    r.result["trials"] = trials

    if spec["mode"] != "verify":
        r.stage("timing")
        kept: list[dict[str, Any]] = []
        timed_seeds = spec["timed_seeds"]

        def keep(i: int, out: Any) -> None:
            kept.append({"index": i, "seed": int(timed_seeds[i]), "file": r.save(f"timed_{i}.pt", out)})

        t0 = time.perf_counter()
        times = harness.run_timing(
            model, get_inputs, device, spec["warmup_seeds"], timed_seeds, keep, spec["keep_indices"],
            after_call=lambda: r.check_threads("during timing"), warmup_s=float(spec["warmup_s"]),
        )
        r.result["timing_wall_s"] = time.perf_counter() - t0
        r.result["times"] = [[t.event_ms, t.host_ms] for t in times]
        r.result["kept"] = kept

    if _identities() != ids_before:
        changed = sorted(k for k, v in _identities().items() if ids_before.get(k) != v)
        r.violate("timer-patch", f"the submission replaced functions the judge's harness relies on: {', '.join(changed)}")

    if spec["mode"] == "profile":
        r.stage("profile")
        try:
            r.result["profile"] = harness.profile_table(model, get_inputs, device, spec["profile_seeds"])
        except Exception as exc:  # noqa: BLE001 - the profile is informational
            r.result["profile_error"] = f"{type(exc).__name__}: {exc}"
    r.result["ok"] = True
    r.stage("done")


def _describe(exc: BaseException, stage: str) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, torch.OutOfMemoryError):
        return f"out of memory during {stage}: {text}"
    if "CUDA error" in text or "cudaError" in text:
        return f"CUDA error during {stage} (the kernel faulted or a launch failed): {text}"
    if isinstance(exc, CandidateError):
        return f"{stage}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    ours = str(Path(__file__).parent)
    theirs = [f for f in frames if not f.filename.startswith(ours)]
    where = "".join(traceback.format_list(theirs[-4:]))
    return f"{stage}: {text}" + (f"\n{where}" if where else "")


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``candidate_worker JOBDIR``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python3 -m cuda_gym.judge.candidate_worker JOBDIR", file=sys.stderr)
        return _EXIT_BAD_JOB
    job_dir = Path(args[0]).resolve()
    spec_path = job_dir / "spec.json"
    try:
        spec = json.loads(spec_path.read_text())
        spec_path.unlink()
    except (OSError, ValueError) as exc:
        print(f"cannot read the job spec: {exc}", file=sys.stderr)
        return _EXIT_BAD_JOB
    r = Run(job_dir, spec)
    try:
        run(r)
        code = _EXIT_OK
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt from candidate code too
        r.result["ok"] = False
        r.result["error"] = _describe(exc, r.result["stage"])
        code = _EXIT_CANDIDATE_ERROR
    try:
        harness.write_json_atomic(job_dir / "result.json", r.result)
    except Exception as exc:  # noqa: BLE001 - e.g. a broken CUDA context while serialising
        print(f"cannot write the result: {exc}", file=sys.stderr)
        code = _EXIT_CANDIDATE_ERROR
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown: candidate atexit hooks and a faulted CUDA context


if __name__ == "__main__":
    sys.exit(main())

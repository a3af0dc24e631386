"""The reference worker: the trusted side of the judge. It builds the reference and drives every server.

Run as ``python3 -m cuda_gym.judge.reference_worker --device DEV --cache-dir DIR``. It reads one typed
message (``cuda_gym.judge.messages``) per line on stdin and answers one per line on the original stdout;
everything task code prints goes to stderr. It lives across evaluations of one device (restarted
after faults) and keeps the prepared task while the same task is judged.

Requests: ``Greet`` (fingerprint), ``Prepare`` (build ``Model`` under the init seed, write its state
and init inputs into the job dir, answer ``TaskFacts``), ``Evaluate`` (judge a submission through a
sandboxed candidate server: ``EvaluationReport``), ``TimeBaseline`` (eager or ``torch.compile`` through
the same protocol: ``BaselineReport``), ``ProfileReference`` (eager per-kernel table), ``Quit``.
Failures answer ``WorkerFailure``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, TextIO

import torch

from cuda_gym.judge import harness
from cuda_gym.judge.messages import (
    Done,
    Evaluate,
    Greet,
    Greeting,
    Prepare,
    ProfileReference,
    ProfileReport,
    ProtocolError,
    Quit,
    TaskFacts,
    TimeBaseline,
    WorkerFailure,
    decode,
    encode,
)
from cuda_gym.judge.procedure import Driver, _plain

log = logging.getLogger(__name__)

REQUESTS = (Greet, Prepare, Evaluate, TimeBaseline, ProfileReference, Quit)


class _Prepared:
    """A task built on the device: its module, model, facts and output layout (``procedure.PreparedTask``)."""

    def __init__(self, code: str, code_hash: str, device: str, init_seed: int) -> None:
        self.code = code
        self.code_hash = code_hash
        self.device = device
        self.init_seed = init_seed
        self.module = harness.load_task_module(code, f"cuda_gym_ref_{code_hash[:12]}")
        self.get_inputs = self.module.get_inputs
        self.init_inputs = harness.make_init_inputs(self.module.get_init_inputs, init_seed, device)
        self.model = harness.build_model(self.module.Model, self.init_inputs, init_seed, device)
        self.low_variance: str | None = None
        inputs = harness.make_inputs(self.get_inputs, init_seed, device)
        with torch.no_grad():
            out = _plain(self.model(*inputs))
            harness.synchronize(device)
            t0 = time.perf_counter()
            self.model(*inputs)
            harness.synchronize(device)
            call_ms = (time.perf_counter() - t0) * 1000.0
        facts = harness.output_facts(out)
        self.template = out
        self.facts = TaskFacts(
            output_bytes=int(facts["output_bytes"]),
            integer_output=bool(facts["integer_output"]),
            input_bytes=harness.input_bytes(inputs),
            dtype=harness.input_dtype(inputs),
            flops=harness.count_flops(self.model, inputs),
            param_bytes=sum(p.numel() * p.element_size() for p in self.model.state_dict().values()),
            call_ms=call_ms,
        )
        del inputs

    def write_job(self, job_dir: Path) -> None:
        """The state dict and init inputs a server loads, on the CPU (read with ``weights_only``)."""
        state = {k: v.detach().to("cpu") for k, v in self.model.state_dict().items()}
        torch.save(state, job_dir / "state_dict.pt")
        init = [x.detach().to("cpu") if isinstance(x, torch.Tensor) else x for x in self.init_inputs]
        torch.save(init, job_dir / "init_inputs.pt")


class ReferenceServer:
    """Holds the prepared task (one at a time) and the driver, and answers requests."""

    def __init__(self, device: str, cache_root: Path) -> None:
        self.device = device
        self.task: _Prepared | None = None
        if device.startswith("cuda"):
            torch.cuda.set_device(device)
        harness.warm_device(device)
        self.driver = Driver(device, cache_root)

    def handle(self, req: Any) -> Any:
        """The answer to one request."""
        if isinstance(req, Greet):
            return Greeting(fingerprint=harness.fingerprint(self.device))
        if isinstance(req, Prepare):
            return self.prepare(req)
        if isinstance(req, Evaluate):
            task = self._task(req.code_hash)
            return self.driver.evaluate(task, req)
        if isinstance(req, TimeBaseline):
            return self.driver.time_baseline(self._task(req.code_hash), req)
        if isinstance(req, ProfileReference):
            task = self._task(req.code_hash)
            rows = harness.profile_table(task.model, task.get_inputs, self.device, list(range(1, req.calls + 1)))
            return ProfileReport(rows=tuple((str(r["name"]), int(r["calls"]), float(r["total_ms"])) for r in rows))
        raise ProtocolError(f"unexpected request {type(req).__name__}")

    def _task(self, code_hash: str) -> _Prepared:
        if self.task is None or self.task.code_hash != code_hash:
            raise RuntimeError("the task is not prepared in this worker: send Prepare first")
        return self.task

    def prepare(self, req: Prepare) -> TaskFacts:
        """Build the task (unless it is the one held) and write its state into the job dir."""
        if self.task is None or self.task.code_hash != req.code_hash:
            self.task = None
            if self.device.startswith("cuda"):
                torch.cuda.empty_cache()
            self.task = _Prepared(req.code, req.code_hash, self.device, req.init_seed)
        if req.job_dir:
            self.task.write_job(Path(req.job_dir))
        return self.task.facts


def _reply(out: TextIO, msg: Any) -> None:
    out.write(encode(msg).decode() + "\n")
    out.flush()


def main(argv: list[str] | None = None) -> int:
    """Serve requests until ``Quit`` or end of input."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", required=True)
    parser.add_argument("--cache-dir", required=True)
    args = parser.parse_args(argv)
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # task code's prints must not corrupt the protocol
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server = ReferenceServer(args.device, Path(args.cache_dir))
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = decode(line, REQUESTS)
        except ProtocolError as exc:
            _reply(proto, WorkerFailure(error=f"bad request: {exc}", fatal=True))
            continue
        if isinstance(req, Quit):
            _reply(proto, Done())
            break
        try:
            _reply(proto, server.handle(req))
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the orchestrator
            fatal = "CUDA error" in str(exc) or isinstance(exc, torch.OutOfMemoryError)
            _reply(
                proto,
                WorkerFailure(error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(limit=8), fatal=fatal),
            )
            if fatal:
                return 3  # a faulted CUDA context cannot be trusted: the orchestrator restarts us
    return 0


if __name__ == "__main__":
    sys.exit(main())

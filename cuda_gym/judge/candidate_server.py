"""The candidate server: a plain process that runs ``forward`` on the inputs it is handed.

Run by the trusted driver, inside the sandbox, as
``python3 -m cuda_gym.judge.candidate_server FD DEVICE [VMM_POOL_LIBRARY]`` where ``FD`` is its end of a
``SOCK_SEQPACKET`` socket pair. It says ``Hello``, answers no-op ``Call``s for the driver's overhead
calibration while it is still trusted code only, then ``Load``s the program (a workspace's
``model_new.py`` and ``cuda_extension``, a single file, or the reference ``Model`` eager or compiled for
the baselines) and answers ``Call``s until ``Shutdown``.

It never sees a seed, which calls are checked, a reference output or a time. Nothing it sends is
trusted: the driver reads the bytes its output references point to (CPU: straight out of this
process's memory; GPU: from the shared pool segments) and times every call by its own clock (GPU: its
own CUDA events around the release and the done word, ``transport.StreamFlags``). On a GPU a call is
enqueued on a stream of the server's behind a wait for the release word, answered (``Reply``: where the
outputs will be) before it runs, and followed by ``Finished`` once it ran. On the CPU a call is decoded
and its input views made, then the server says ``Armed`` and spins on the input arena's release word (the
driver copies the inputs meanwhile, with this process stopped, and writes the word once its clock runs), runs
it, and answers ``Reply`` and ``Finished``. The
in-process checks here (ATen audit, memory poisoning, CUDA-event times, tensor-subclass detection)
are advisory: their findings can only hurt the candidate, and native code may silence them.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import socket
import sys
import threading
import time
import traceback
import types
from pathlib import Path
from typing import Any

import torch

from cuda_gym.errors import CandidateError
from cuda_gym.judge import harness
from cuda_gym.judge.audit import OpAudit
from cuda_gym.judge.messages import (
    Armed,
    Calibrate,
    Call,
    Finished,
    Hello,
    Load,
    Loaded,
    Reply,
    Segment,
    Shutdown,
    TensorRef,
)
from cuda_gym.judge.syscall_filter import restrict_syscalls
from cuda_gym.judge.transport import (
    DONE_WORD,
    RELEASE_WORD,
    Channel,
    DevicePool,
    HostArena,
    PeerGone,
    PeerSegments,
    StreamFlags,
    from_value,
    own_stream,
    to_value,
)


class _Pending:
    """What the server keeps of a call between its ``Reply`` and its ``Finished``."""

    def __init__(self, seq: int, received: float) -> None:
        self.seq = seq
        self.received = self.started = self.finished = self.answered = received
        self.events: tuple[Any, Any] | None = None
        self.profile: tuple[tuple[str, int, float], ...] = ()


class Server:
    """The state of one server process: channel, device, shared memory, the loaded program."""

    def __init__(self, channel: Channel, device: str, pool_library: str) -> None:
        self.channel = channel
        self.device = device
        self.cuda = device.startswith("cuda")
        self.segments = DevicePool(Path(pool_library), device) if self.cuda else None
        self.peer = PeerSegments(device) if self.cuda else None
        self.arena: HostArena | None = None
        self.model: Any = None
        self.calibration: Any = None
        self.tick: torch.Tensor | None = None  # the no-op's one-element kernel target (GPU)
        self.sent: set[int] = set()  # ids of this process's pool segments the driver has
        self.last: Any = None  # outputs of the last call, alive until the next call (the driver reads them)
        self.poison_bytes = 0
        self.base_py_threads = 0
        self.host_poison: harness.MemoryPoison | None = None
        self.flags: StreamFlags | None = None  # GPU: the session's release and done words
        self.stream: Any = None  # GPU: the stream every call's work runs on, behind the release wait

    # ------------------------------------------------------------------ messages

    def serve(self) -> None:
        """Answer messages until ``Shutdown`` or the driver goes away."""
        while True:
            msg, fds = self.channel.recv((Calibrate, Load, Call, Shutdown), with_fds=True)
            received = time.perf_counter()
            if isinstance(msg, Shutdown):
                return
            if isinstance(msg, Calibrate):
                self.channel.send(self.calibrate(msg, fds))
            elif isinstance(msg, Load):
                self.channel.send(self.load(msg))
            else:
                reply, send, pending = self.call(msg, fds, received)
                pending.answered = time.perf_counter()
                self.channel.send(reply, send)
                self.channel.send(self.finish(pending))

    def calibrate(self, msg: Calibrate, fds: list[int]) -> Loaded:
        """Keep the CPU input arena or the GPU flags (their fd comes with this message), build the no-op
        outputs."""
        if not self.cuda:
            if len(fds) != 1:
                return Loaded(error=f"expected the input arena's file descriptor, got {len(fds)}", stage="calibrate")
            self.arena = HostArena(os.fstat(fds[0]).st_size, fd=fds[0])
        else:
            assert self.peer is not None
            if msg.flags is None:
                for fd in fds:
                    os.close(fd)
                return Loaded(error="a GPU calibration without the release and done words", stage="calibrate")
            self.peer.attach(msg.segments, fds)
            self.flags = StreamFlags(self.peer.tensor(msg.flags).data_ptr())
            self.stream = own_stream(self.device, blocking=True)
        with self._pool():
            self.calibration = from_value(msg.outputs, self._zeros)
        if self.cuda:
            self.tick = torch.zeros(1, device=self.device)
        self.poison_bytes = sum(
            t.numel() * t.element_size() for _, t in harness.iter_leaves(self.calibration) if isinstance(t, torch.Tensor)
        )
        if not self.cuda:
            self.host_poison = harness.MemoryPoison(self.device, self.poison_bytes, False)
        self.base_py_threads = threading.active_count()
        harness.synchronize(self.device)
        return Loaded()

    def load(self, msg: Load) -> Loaded:
        """Load the program; errors are reported, never raised. A program loaded before (the reference
        probe's) and its last outputs are dropped first, so that they take no memory from this one."""
        if self.model is not None:
            self.model = self.last = None
            gc.collect()
            if self.cuda:
                torch.cuda.empty_cache()
        stage = "import"
        try:
            module = self._import(msg)
            model_cls = getattr(module, "ModelNew" if msg.kind in ("workspace", "single") else "Model", None)
            if model_cls is None:
                raise CandidateError("the submission defines no ModelNew class")
            stage = "init"
            init = torch.load(msg.init_path, weights_only=True)
            init = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in init]
            state = torch.load(msg.state_path, map_location=self.device, weights_only=True)
            model: Any = harness.build_model(model_cls, init, msg.init_seed, self.device)
            if state:
                if not isinstance(model, torch.nn.Module):
                    raise CandidateError("ModelNew must be a torch.nn.Module (the reference has parameters to load)")
                try:
                    model.load_state_dict(state, strict=True)
                except RuntimeError as exc:
                    raise CandidateError(f"the reference state_dict does not load into ModelNew (strict): {exc}") from None
                model = model.to(self.device).eval()
            if msg.kind == "compile":
                from torch import _dynamo

                _dynamo.reset()
                model = torch.compile(model)
            self.model = model
            harness.synchronize(self.device)
            return Loaded()
        except BaseException as exc:  # noqa: BLE001 - SystemExit from candidate code too
            return Loaded(error=describe(exc, stage), stage=stage, violations=_subclass_violation(exc))

    def call(self, msg: Call, fds: list[int], received: float = 0.0) -> tuple[Reply, list[int], _Pending]:
        """Enqueue (GPU) or run (CPU) one call; the reply, the fds of newly shared segments, and what
        ``finish`` needs (``received``: when the call arrived). On a GPU the done word is written behind
        the call's work whatever happens, so that the driver's stream never waits for it in vain."""
        self.last = None
        pending = _Pending(msg.seq, received)
        try:
            if self.peer is not None:
                self.peer.attach(msg.segments, fds)
            elif fds:
                for fd in fds:
                    os.close(fd)
            inputs = [from_value(v, self._input) for v in msg.inputs]
            violations: list[tuple[str, str]] = []
            with self._on_stream():
                if msg.noop:
                    out = self.calibration
                    self._wait_release(pending)
                    if self.tick is not None:  # one launch, as every real call has
                        self.tick.add_(1.0)
                elif self.model is None:
                    raise CandidateError("no program is loaded")
                elif msg.profile:
                    self._wait_release(pending)
                    out, pending.profile = self._profiled(inputs)
                else:
                    out, violations = self._run(inputs, msg.audit, pending)
                pending.finished = time.perf_counter()
                self.last = out
                refs: list[Segment] = []
                send: list[int] = []
                value = to_value(out, lambda t: self._output_ref(t, refs, send))
            self._signal_done(pending)
            return Reply(seq=msg.seq, outputs=value, segments=tuple(refs), violations=tuple(violations)), send, pending
        except PeerGone:  # the driver is gone (or spoke while the call waited for its release): nobody to answer
            raise
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the driver
            try:
                self._signal_done(pending)
            except BaseException:  # noqa: BLE001 - a faulted context: the driver's time bound ends the call
                pass
            return Reply(seq=msg.seq, error=describe(exc, "call"), violations=_subclass_violation(exc)), [], pending

    def finish(self, pending: _Pending) -> Finished:
        """Wait for the call's work (on a GPU after the driver's release), then report how it ended.

        Only the call's stream is waited for: work a submission leaves running on a stream of its own
        goes on into the driver's next window (it delays the driver's kernels there, counted or seen as
        a busy GPU), instead of delaying this message, which no clock counts."""
        error = ""
        try:
            if self.stream is not None:
                self.stream.synchronize()
            else:
                harness.synchronize(self.device)
        except BaseException as exc:  # noqa: BLE001 - a CUDA fault of the call's kernels
            error = describe(exc, "call")
        event_ms = -1.0
        if pending.events is not None and not error:
            event_ms = float(pending.events[0].elapsed_time(pending.events[1]))
        violations: list[tuple[str, str]] = []
        if threading.active_count() > self.base_py_threads:
            violations.append(
                (
                    "thread",
                    f"the submission started {threading.active_count() - self.base_py_threads} Python "
                    "thread(s); work must finish inside forward on the calling thread",
                )
            )
        return Finished(
            seq=pending.seq,
            error=error,
            event_ms=event_ms,
            violations=tuple(violations),
            profile=pending.profile,
            marks=(pending.received, pending.started, pending.finished, pending.answered),
        )

    # ------------------------------------------------------------------ helpers

    def _on_stream(self) -> Any:
        """The call's work runs on ``self.stream`` (GPU): behind the release wait, in order."""
        if self.stream is not None:
            return torch.cuda.stream(self.stream)
        return _nullcontext()

    def _wait_release(self, pending: _Pending) -> None:
        """Nothing of the call's work starts before the driver releases it. GPU: everything enqueued from here
        on waits until the driver's stream writes the release word. CPU: the server says ``Armed`` and spins on
        the arena's release word, which the driver writes once it copied the inputs (the server stopped meanwhile)
        and started its clock: decoding the call and making its input views stay out of the window."""
        if not self.cuda:
            self.channel.send(Armed(seq=pending.seq))
            self._spin_release(pending.seq)
            pending.received = time.perf_counter()
        pending.started = time.perf_counter()
        if self.flags is not None:
            self.flags.wait(self.stream.cuda_stream, RELEASE_WORD, pending.seq)

    def _spin_release(self, seq: int) -> None:
        """CPU: spin until the arena's release word says ``seq`` (the driver writes it before it lets this
        process go on: a stopped spinner sees it at once, no wake-up and no message to decode). Every 4096
        turns the socket is looked at: the driver says nothing between ``Armed`` and the release, so anything
        there (its end closed) means it is gone."""
        assert self.arena is not None
        released, readable = self.arena.released, self.channel.readable
        turns = 0
        while released() != seq:
            turns += 1
            if turns & 4095 == 0 and readable():
                raise PeerGone(f"the driver spoke or left while call {seq} waited for its release")

    def _signal_done(self, pending: _Pending) -> None:
        """GPU: write the done word once every earlier piece of work of the call has run."""
        if self.flags is not None:
            self.flags.write(self.stream.cuda_stream, DONE_WORD, pending.seq)

    def _run(self, inputs: list[Any], audit: bool, pending: _Pending) -> tuple[Any, list[tuple[str, str]]]:
        violations: list[tuple[str, str]] = []
        with torch.no_grad(), self._pool():
            if audit:
                self._poison()  # it synchronizes: before the release wait
                try:
                    self._wait_release(pending)
                    with OpAudit() as op_audit:
                        out = self.model(*inputs)
                finally:
                    if self.host_poison is not None:
                        self.host_poison.disarm()
                violations = [(v.rule, v.message) for v in op_audit.violations()]
            else:
                self._wait_release(pending)
                if self.cuda:
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    start.record()
                    out = self.model(*inputs)
                    end.record()
                    pending.events = (start, end)
                else:
                    out = self.model(*inputs)
        return out, violations

    def _profiled(self, inputs: list[Any]) -> tuple[Any, tuple[tuple[str, int, float], ...]]:
        with self._pool():
            rows = harness.profile_table(self.model, lambda: inputs, self.device, [0])
            out = self.model(*inputs)
        return out, tuple((str(r["name"]), int(r["calls"]), float(r["total_ms"])) for r in rows)

    def _poison(self) -> None:
        """Freed memory the next allocations reuse holds NaN (0x7f bytes): ``empty`` outputs never pass."""
        if self.host_poison is not None:
            self.host_poison.arm()
        if self.cuda:
            buf = torch.full((max(2 * self.poison_bytes, 4096) // 4,), float("nan"), dtype=torch.float32, device=self.device)
            torch.cuda.synchronize(self.device)
            del buf

    def _pool(self) -> Any:
        if self.segments is not None:
            return self.segments.use()
        return _nullcontext()

    def _zeros(self, ref: TensorRef) -> torch.Tensor:
        return torch.zeros(ref.shape, dtype=getattr(torch, ref.dtype), device=self.device)

    def _input(self, ref: TensorRef) -> torch.Tensor:
        if self.peer is not None:
            return self.peer.tensor(ref)
        if self.arena is None:
            raise CandidateError("inputs arrived before the input arena")
        return self.arena.tensor(ref)

    def _output_ref(self, t: torch.Tensor, segments: list[Segment], fds: list[int]) -> TensorRef:
        if type(t) is not torch.Tensor and type(t) is not torch.nn.Parameter:
            raise CandidateError(f"forward returned a {type(t).__name__}, a torch.Tensor subclass; return plain tensors")
        t = t.detach()
        if t.device != torch.device(self.device):
            raise CandidateError(f"forward returned a tensor on {t.device}; the reference returns it on {self.device}")
        if self.segments is None or t.numel() == 0:  # an empty tensor has no memory to share (segment -1)
            return TensorRef(
                dtype=str(t.dtype).replace("torch.", ""),
                shape=tuple(t.shape),
                strides=tuple(t.stride()),
                offset=int(t.storage_offset()),
                segment=-1,
                base=t.untyped_storage().data_ptr() if self.segments is None else 0,
            )
        try:
            ref, seg, fd = self.segments.ref_of(t, self.sent)
        except LookupError:
            # Memory outside the shared pool (a buffer made at init, raw cudaMalloc): copy it into the pool.
            # The copy is enqueued behind the call's work and before the done word, so it counts in the time.
            with self.segments.use():
                t = t.clone()
            self.last = (self.last, t)
            ref, seg, fd = self.segments.ref_of(t, self.sent)
        if seg is not None:
            segments.append(seg)
            fds.append(fd)
        return ref

    def _import(self, msg: Load) -> types.ModuleType:
        if msg.kind == "workspace":
            from cuda_gym.build import load_extension

            sys.modules["cuda_extension"] = load_extension(Path(msg.module_path))
            sys.path.insert(0, msg.workspace_root)
            return _exec_file("model_new", Path(msg.workspace_root) / "model_new.py")
        if msg.kind == "single":
            if msg.inline_manifest:
                from cuda_gym.build.inline import install_prebuilt

                install_prebuilt(Path(msg.inline_manifest))
            return _exec_file("cuda_gym_solution", Path(msg.solution_path))
        return harness.load_task_module(msg.task_code, "cuda_gym_task")


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _exec_file(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CandidateError(f"cannot import {path.name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _subclass_violation(exc: BaseException) -> tuple[tuple[str, str], ...]:
    if isinstance(exc, CandidateError) and "subclass" in str(exc):
        return (("tensor-subclass", str(exc)),)
    return ()


def describe(exc: BaseException, stage: str) -> str:
    """A failure as the agent reads it: what happened, in which stage, and the candidate's frames."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, torch.OutOfMemoryError):
        return f"out of memory during {stage}: {text}"
    if "CUDA error" in text or "cudaError" in text:
        return f"CUDA error during {stage} (the kernel faulted or a launch failed): {text}"
    if isinstance(exc, CandidateError):
        return f"{stage}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    ours = str(Path(__file__).resolve().parent.parent)
    theirs = [f for f in frames if not f.filename.startswith(ours)]
    where = "".join(traceback.format_list(theirs[-4:]))
    return f"{stage}: {text}" + (f"\n{where}" if where else "")


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``candidate_server FD DEVICE [VMM_POOL_LIBRARY]``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 3):
        print("usage: python3 -m cuda_gym.judge.candidate_server FD DEVICE [VMM_POOL_LIBRARY]", file=sys.stderr)
        return 2
    fd, device = int(args[0]), args[1]
    filtered = restrict_syscalls()  # before any submission code: it holds for every thread and child after
    sock = socket.socket(fileno=fd)
    channel = Channel(sock, spin=device.startswith("cuda"))
    os.dup2(2, 1)  # candidate prints go to the captured log, never near the protocol
    sys.stdout = sys.stderr
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    harness.warm_device(device)
    server = Server(channel, device, args[2] if len(args) == 3 else "")
    channel.send(Hello(pid=os.getpid(), device=device, filtered=filtered), credentials=True)
    try:
        server.serve()
    except PeerGone:
        pass
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: candidate atexit hooks and a faulted CUDA context


if __name__ == "__main__":
    sys.exit(main())

"""The trusted driver: runs a sandboxed server, hands it fresh inputs, times and checks every call itself.

Lives in the reference worker's process (trusted code only). For each evaluation or baseline timing it
starts a ``candidate_server`` through ``cuda_gym.sandbox`` and, per call, makes the inputs (fresh random
values from a secret seed, made only now, in its own memory).

GPU: the server enqueues the call behind a wait for the session's release word and answers where its
outputs will be; then the driver's timing stream, each step between CUDA events of the driver's: copies
the inputs into the shared buffers the server was given, flushes the L2, writes the release word, waits
for the server's done word, reads a secret random sample of the output bytes. The call's time
on the GPU's clock, in the driver's context: release to the last sample read, plus whatever the copy and
the flush took beyond their bound calibrated on the same server (work of the server's context interleaved
there is counted), minus the protocol overhead calibrated alike before any submission code was loaded.
CPU: the server arms the call (decodes it, makes its input views); the driver stops the server's sandbox,
copies the inputs into the arena both map, and its ``perf_counter`` runs from before it continues the server
and releases the call to the sample read.

Afterwards it copies the whole output and compares it with the reference output for the same inputs;
inputs are compared with the driver's own clones. What the driver observes itself, and so trusts: its
events and clock, the bytes in shared memory, the inputs after the call, the server's threads, child
processes and CPU time (``/proc``), and how long its own GPU work took (a busy GPU). What the server says
is advisory.
"""

from __future__ import annotations

import array
import contextlib
import functools
import logging
import math
import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from cuda_gym.errors import DeviceStuckError, JudgeError, ProtocolError, SandboxError, StopTimeout, UnreadableAnswer
from cuda_gym.fd_closer import close_fds
from cuda_gym.judge import harness
from cuda_gym.judge.cpu_load import smt_siblings
from cuda_gym.judge.messages import (
    Armed,
    Calibrate,
    Call,
    Finished,
    Hello,
    Load,
    Loaded,
    Reply,
    Shutdown,
    TensorRef,
    Value,
    encode,
)
from cuda_gym.judge.transport import (
    DONE_WORD,
    FLAG_WORDS,
    RELEASE_WORD,
    Channel,
    DevicePool,
    HostArena,
    PeerGone,
    PeerSegments,
    Probe,
    RemoteMemory,
    StreamFlags,
    check_output_ref,
    contiguous_strides,
    dtype_of,
    from_value,
    modules_load_eagerly,
    own_stream,
    reset_persisting_l2,
    tensor_leaves,
    to_value,
    vmm_pool_library,
)
from cuda_gym.process_stop import children, thread_states
from cuda_gym.sandbox import Limits, Sandbox

log = logging.getLogger(__name__)

SAMPLE_POSITIONS = 256
"""Output elements per tensor read at the end of each call's window, at positions drawn after the answer."""
CALIBRATION_CALLS = 60
"""No-op round trips timed before the submission loads on the CPU (after ``CALIBRATION_WARMUP_S`` of untimed
ones); their first quartile is the subtracted overhead, half their interquartile range the clock's resolution."""
CALIBRATION_CALLS_GPU = 400
"""The same on a GPU (about 0.2 s of no-ops; their windows spread by a few microseconds on the H200)."""
CALIBRATION_WARMUP_S = 0.3
"""No-op round trips run for this long before the timed ones (first-touch costs, caches, the interpreter's
specialisation, CPU and GPU clocks leaving idle): a freshly started server's first trips are slower than
the same path in the hot loop of timed calls, by 0.1-0.15 ms on the H200, which is more than a short
kernel takes."""
OUTPUT_LIMIT_FACTOR = 4
OUTPUT_LIMIT_SLACK = 64 * 2**20
"""The outputs of one answer may take at most ``OUTPUT_LIMIT_FACTOR`` times the reference's outputs (the
calibration template; held-out shapes differ) plus this many bytes; a larger answer is refused unread."""
PIN_ENV = "CUDA_GYM_PIN_CPUS"
"""``0`` turns off pinning the driver's and the server's main threads to two CPUs of their own (GPU only)."""
HELLO_TIMEOUT_S = 300.0
"""A server must be up (torch imported, device ready) within this."""
BUSY_EXCESS_MS = 0.1
"""GPU: a call whose prelude (input copy and flush) ran beyond its bound by more than this found the GPU busy
with another context's work (work left running after an earlier call's done word, a persistent kernel): the
driver's copy could run only after the GPU switched away from it and back, two switches that take 0.29 ms on
the H200, while honest calls' preludes stay within their bound (median excess at most 0.0064 ms in an
evaluation: memory-bound and short kinds in ``benchmarks/results/h200_2026-12-04/``, GEMM in ``h200_2026-12-02_s10/``).
A flush-only test missed a 20 ms side-stream spin whose delay fell on the copy, the prelude's first kernel."""
BUSY_SHARE = 0.2
"""``gpu-busy`` when more than this share of the timed calls saw a busy GPU."""
PRELUDE_SLACK = 0.3
PRELUDE_SLACK_MS = 0.02
PRELUDE_SLACK_SWITCHES = 1 / 3
"""GPU: the driver's own work before the release (the input copy and the flush) is bounded by the median of
the same work in the session's calibration plus a slack: ``PRELUDE_SLACK`` of that median plus
``PRELUDE_SLACK_MS``, but never more than ``PRELUDE_SLACK_SWITCHES`` of the session's no-op release to done
(two switches of the GPU between the driver's and the server's contexts, 0.29 ms on the H200). Only what a
call's prelude takes beyond the bound is counted in its time. On the H200 the prelude varied from server to
server by up to 4% on a memory-bound task and by up to 26% on a short one (the input copy of a 0.1 ms row
softmax: 0.127 ms median in one server against 0.101 ms in its no-ops, 2026-12-04; counted beyond a 5%
slack, it moved that server's median by 5%) while release to done moved by 0.5%. Work of the server's
context cannot run inside the prelude without two switches, which the cap keeps three times longer than
the slack: such work always shows, less at most the slack."""
OUTPUT_LEAVES_FACTOR, OUTPUT_LEAVES_SLACK = 4, 16
"""An answer may hold at most 4x the reference's number of tensors + 16 (at the calibration's shape)."""

PAUSE_TIMEOUT_S = 10.0
"""CPU: a server's processes must all be seen stopped within this before a call's inputs are copied (it takes
microseconds to milliseconds; a niced sandbox on a loaded machine waits for a CPU to stop on)."""

GATE_WORD = 0
"""The word of the driver's private gate (``ServerSession.gate``) that a window's stream waits on."""

ARM_WAIT_S = 0.5
"""GPU: how long the driver waits for the answer of an enqueued call before it releases the call anyway (a
``forward`` that synchronizes blocks until the release). After two such calls in a row the session's calls
are released at once, the wait for the answer counted, except every ``LATE_RETRY_CALLS``-th, which waits
again: a program whose first calls synchronized (an autotuner) gets its calls enqueued again."""
LATE_RETRY_CALLS = 50


@dataclass
class ServerSpec:
    """How to start one server: device, sandbox paths, limits and the per-call time bound."""

    device: str
    job_dir: Path
    cache_root: Path
    readonly: list[Path] = field(default_factory=list)
    writable: list[Path] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    load_timeout_s: float = 120.0
    call_timeout_s: float = 30.0
    own_uid: bool = True
    """Whether the server runs as a uid of its own (``Sandbox(own_uid=...)``); ``False`` only for trusted code
    whose writable trees servers running at once share (the compile servers' inductor cache)."""


@dataclass
class CallResult:
    """One call as the driver saw it."""

    outputs: Any = None
    """The output structure with every tensor copied into the driver's memory (``None`` on error)."""
    ms: float = math.nan
    """The trusted clock's reading in milliseconds, overhead not subtracted (GPU: release to the last sample
    read plus the prelude beyond its bound, ``_counted_ms``; CPU: the driver's clock from the send to the
    sample read)."""
    event_ms: float = -1.0
    violations: list[tuple[str, str]] = field(default_factory=list)
    error: str = ""
    early: str = ""
    """Why the sampled bytes differ from the bytes read afterwards (the answer came before the work)."""
    profile: tuple[tuple[str, int, float], ...] = ()
    busy: bool = False
    parts: dict[str, float] = field(default_factory=dict)
    """Where the call's time went, in ms (diagnostics). GPU, on the timing stream's events: ``copy`` (the
    inputs into the shared buffers), ``flush`` (the L2), ``work`` (release to the done word: the server's
    work and the switches of the GPU to its context and back), ``sample``; ``arm`` (send to the answer of the
    enqueued call, driver's clock). CPU: ``to_server``, ``server_setup``, ``server_run``, ``server_reply``,
    ``to_driver``, ``sample``. ``server_*`` parts come from the server's own, advisory marks."""
    new_segments: int = 0
    """Output segments the answer shared for the first time (each costs an import and a mapping)."""


class ServerSession:
    """One sandboxed ``candidate_server`` and the driver's end of its channel.

    ``start`` -> ``calibrate`` -> ``load`` -> ``call``... -> ``close``. Any failure of the server itself
    (death, hang, malformed message) ends the session: ``dead`` is set and ``error`` says why.
    """

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.cuda = spec.device.startswith("cuda")
        self.proc: Any = None
        self.channel: Channel | None = None
        self.host_pid = 0
        self.init_pid = 0
        """Host PID of the sandbox's PID-namespace init, the server's parent (0 without a PID namespace): a
        process the server forks twice is reparented to it and reaped by it."""
        self.remote: RemoteMemory | None = None
        self.segments: DevicePool | None = None
        self.peer: PeerSegments | None = PeerSegments(spec.device) if self.cuda else None
        self.shared_inputs: list[torch.Tensor] = []
        """The tensors of the last call's inputs as the server saw them (for the input-mutation check)."""
        self.sent_segments: set[int] = set()
        """Ids of the driver's pool segments this server has been given (the pool outlives sessions)."""
        self.arena: HostArena | None = None
        self.overhead_ms = 0.0
        self.resolution_ms = 0.001
        """The trusted clock's resolution on this server: half the spread (IQR) of its calibration trips.
        A call's time is never taken below it: what the clock cannot resolve is not claimed as speed."""
        self.base_threads = 0
        self.dead = ""
        self.seq = 0
        self.flusher = harness.L2Flusher(spec.device)
        self.idle_cpu_s = 0.0
        self.idle_wall_s = 0.0
        self._idle_mark: tuple[float, float] | None = None
        self.library = vmm_pool_library(spec.cache_root) if self.cuda else None
        self._real_calls = 0
        self._cores: tuple[int, int] | None = None
        """The driver's and the server's CPU during a window (``_pin``); ``None``: unpinned."""
        self._masks: tuple[set[int], set[int]] | None = None
        """The driver thread's and the server's main thread's CPU sets outside windows."""
        self._pinned_buffers: dict[int, torch.Tensor] = {}
        self.output_leaves = 1
        """Tensors in the task's output (from the calibration template): how many samples to draw ahead."""
        self.output_limit = OUTPUT_LIMIT_SLACK
        """Bytes all outputs of one answer may take (from the calibration template: ``check_output_ref``)."""
        self.noop_parts: list[dict[str, float]] = []
        """``parts`` of the calibration round trips (diagnostics)."""
        self.flags_tensor: torch.Tensor | None = None
        """GPU: the session's release and done words, in the driver's pool (shared with the server)."""
        self.flags: StreamFlags | None = None
        self.gate_tensor: torch.Tensor | None = None
        self.gate: StreamFlags | None = None
        """GPU: the word each window's stream waits on until the window is all queued, in the driver's own
        memory (``GATE_WORD``), opened from ``gate_stream``."""
        self.gate_stream: torch.cuda.Stream | None = None
        self.timing_stream: torch.cuda.Stream | None = None
        """GPU: the driver's stream that copies the inputs, releases, waits and samples between its events."""
        self.prelude_bound_ms = math.inf
        """GPU: the bound of the input copy and flush (``PRELUDE_SLACK``); ``inf`` while calibrating."""
        self._late_calls = 0
        """GPU: calls in a row whose answer came only after ``ARM_WAIT_S`` (``_late``)."""
        self._leaves: list[TensorRef] = []
        self._reply_outputs: Value | None = None
        self._samples: list[tuple[Any, torch.Tensor]] = []
        self._pending_fds: list[int] = []
        self.filtered = False
        """Whether the server said (in its ``Hello``, before any submission code) that its seccomp filter is on."""
        self.noop_trips: list[float] = []
        """The calibration calls' windows in ms (diagnostics: their percentiles)."""

    # ------------------------------------------------------------------ lifecycle

    def start(self, driver_segments: DevicePool | None) -> None:
        """Start the server in the sandbox and wait for its ``Hello``."""
        self.segments = driver_segments
        mine, theirs = Channel.pair()
        cmd = [sys.executable, "-m", "cuda_gym.judge.candidate_server", str(theirs.fileno()), self.spec.device]
        readonly = list(self.spec.readonly)
        if self.library is not None:
            cmd.append(str(self.library))
            readonly.append(self.library.parent)
        sandbox = Sandbox(writable=self.spec.writable, readonly=readonly, gpu=self.cuda, own_uid=self.spec.own_uid)
        try:
            self.proc = sandbox.start(
                cmd, cwd=self.spec.job_dir, limits=self.spec.limits, env=self.spec.env, pass_fds=[theirs.fileno()]
            )
        except SandboxError as exc:
            raise JudgeError(f"cannot start the candidate server: {exc}") from exc
        finally:
            theirs.close()
        # The Hello takes seconds (torch import, device context): wait for it blocking, not spinning, so
        # that a warm server booting in a thread of the driver never competes with timed calls for the GIL.
        self.channel = Channel(mine, spin=False)
        try:
            hello, _ = self.channel.recv(Hello, HELLO_TIMEOUT_S, self._alive)
        except (PeerGone, ProtocolError) as exc:
            raise JudgeError(f"the candidate server did not start ({exc}); its output:\n{self.output()[-2000:]}") from exc
        if hello.device != self.spec.device or not self.channel.peer_pid:
            raise JudgeError("the candidate server greeted with the wrong device or without credentials")
        self.channel.spin = self.cuda
        self.host_pid = self.channel.peer_pid
        self.filtered = hello.filtered
        if not hello.filtered:
            _warn_unfiltered()
        self.init_pid = _namespace_init(self.host_pid)
        self.remote = RemoteMemory(self.host_pid)

    def calibrate(self, template: Any, make_inputs: Callable[[], list[Any]], arena_bytes: int) -> None:
        """Time no-op calls (trusted code only in the server so far); keep their first quartile as the overhead."""
        assert self.channel is not None
        if self.cuda:
            self._pin()  # here, not at start: a warm server is started on another thread than the one that times
        fds: list[int] = []
        flags_ref: TensorRef | None = None
        segments: tuple[Any, ...] = ()
        if not self.cuda:
            self.arena = HostArena(arena_bytes)
            fds = [self.arena.fd]
        else:
            assert self.segments is not None
            if not modules_load_eagerly():
                raise JudgeError(
                    "a GPU driver's process must load its CUDA modules eagerly (CUDA_MODULE_LOADING=EAGER before "
                    "CUDA starts; the reference worker sets it): a lazily loaded kernel's first launch inside a "
                    "gated window waits for the gate and hangs the driver"
                )
            with self.segments.use():
                self.flags_tensor = torch.zeros(FLAG_WORDS, dtype=torch.int32, device=self.spec.device)
            # The gate of each window, in the driver's own memory (no server maps it): see _call_gpu
            self.gate_tensor = torch.zeros(1, dtype=torch.int32, device=self.spec.device)
            self.gate = StreamFlags(self.gate_tensor.data_ptr())
            # a stream of its own: one shared with the timing stream (torch's pool) would never open its gate
            self.gate_stream = _gate_stream(self.spec.device)
            torch.cuda.synchronize(self.spec.device)  # zero before the server maps it: no stale release
            flags_ref, seg, fd = self.segments.ref_of(self.flags_tensor, self.sent_segments)
            if seg is not None:
                segments, fds = (seg,), [fd]
            self.flags = StreamFlags(self.flags_tensor.data_ptr())
            self.timing_stream = torch.cuda.Stream(self.spec.device)
        outputs = to_value(
            template,
            lambda t: TensorRef(
                str(t.dtype).replace("torch.", ""), tuple(t.shape), contiguous_strides(tuple(t.shape)), 0, 0, 0
            ),
        )
        self.output_leaves = len(tensor_leaves(outputs))
        template_bytes = sum(math.prod(r.shape) * dtype_of(r.dtype).itemsize for r in tensor_leaves(outputs))
        self.output_limit = OUTPUT_LIMIT_FACTOR * template_bytes + OUTPUT_LIMIT_SLACK
        # the fds stay open: the pool owns them (``cg_export`` hands out one fd per segment, kept)
        try:
            self.channel.send(Calibrate(outputs=outputs, device=self.spec.device, flags=flags_ref, segments=segments), fds)
            answer = self._expect_loaded(self.spec.load_timeout_s)
        except (PeerGone, ProtocolError) as exc:  # trusted code only so far: say why it ended
            raise JudgeError(f"the candidate server ended before its calibration ({exc}); its output:\n"
                             f"{self.output()[-2000:]}") from exc
        if answer.error:
            raise JudgeError(f"the candidate server failed its calibration: {answer.error}")
        trips = []
        inputs = make_inputs()
        warm_until = time.perf_counter() + (CALIBRATION_WARMUP_S if self.cuda else 0.05)
        while True:
            timed = time.perf_counter() >= warm_until
            res = self.call(inputs if not timed else make_inputs(), noop=True, timeout_s=self.spec.call_timeout_s)
            if res.error or res.early:
                raise JudgeError(f"a calibration round trip failed: {res.error or res.early}")
            if not timed:
                continue
            trips.append(res.ms)
            self.noop_parts.append(res.parts)
            if len(trips) >= (CALIBRATION_CALLS_GPU if self.cuda else CALIBRATION_CALLS):
                break
        # The first quartile: the fastest of many no-ops is a lower tail that moves between servers, and the
        # median takes in the load spikes of a busy machine (on a loaded CPU a typical no-op outlasted real
        # calls). Candidate and baselines are calibrated alike, before any of their code is loaded, so
        # nothing a submission does can change what is subtracted.
        if self.cuda:
            # the prelude's bound from the no-ops' own preludes, then their times as real calls' are counted
            preludes = [p["copy"] + p["flush"] for p in self.noop_parts]
            self.prelude_bound_ms = prelude_bound(preludes, [p["work"] for p in self.noop_parts])
            trips = [self._counted_ms(p) for p in self.noop_parts]
        self.noop_trips = trips
        quartiles = statistics.quantiles(trips, n=4)
        self.overhead_ms = quartiles[0]
        self.resolution_ms = max(0.001, (quartiles[2] - quartiles[0]) / 2)
        self.base_threads = self.threads()

    def load(self, msg: Load) -> Loaded:
        """Load the program; a dead or hung server is an error ``Loaded``."""
        assert self.channel is not None
        self._close_idle()  # importing and initialising the program is its own work, not idle time
        try:
            self.channel.send(msg)
            loaded = self._expect_loaded(self.spec.load_timeout_s)
        except PeerGone as exc:
            self._die(f"{exc}")
            return Loaded(error=self.dead, stage="import")
        except ProtocolError as exc:  # killed by the driver, not crashed
            self._refuse(f"the server's message after loading was refused: {exc}")
            return Loaded(error=self.dead, stage="import")
        self._open_idle()
        return loaded

    def close(self) -> None:
        """Ask the server to exit, then kill whatever is left of the sandbox."""
        if self.channel is not None:
            try:
                self.channel.send(Shutdown())
            except (PeerGone, ProtocolError):
                pass
            self.channel.close()
        if self.proc is not None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 - best effort
                pass
        stuck: DeviceStuckError | None = None
        if self.flags is not None and self.seq and self.timing_stream is not None:
            # a window left open by an exception: its done word (harmless when it came) frees the timing
            # stream; the event behind everything queued on it says when, so the wait is bounded
            try:
                drained = torch.cuda.Event()
                drained.record(self.timing_stream)
                if not drained.query():
                    self._rescue(self.seq, drained)
            except DeviceStuckError as exc:
                stuck = exc
            except Exception as exc:  # noqa: BLE001 - a CUDA error here: the device is no longer to be trusted
                stuck = DeviceStuckError(f"the driver's timing stream could not be drained: {exc}")
        if self.arena is not None:
            self.arena.close()
        if self.peer is not None and stuck is None:
            self.peer.close()  # synchronizes the device: only once nothing of ours waits on the server
        self._cores = self._masks = None
        if stuck is not None:
            raise stuck

    def output(self) -> str:
        """What the server printed (the sandbox's capped buffer)."""
        return self.proc.output() if self.proc is not None else ""

    def killed_by_limit(self) -> bool:
        """Whether the sandbox ended the server at one of its limits."""
        return bool(self._limit_reason())

    def _limit_reason(self) -> str:
        """Which of its limits the sandbox ended the server at ('' while it runs, or when it ended otherwise)."""
        if self.proc is None or self.proc.poll() is None:
            return ""
        try:
            res = self.proc.result()
        except SandboxError:
            return ""
        return res.reason or ("its wall-time limit" if res.timed_out else "")

    # ------------------------------------------------------------------ one call

    def call(
        self,
        inputs: list[Any],
        *,
        audit: bool = False,
        noop: bool = False,
        profile: bool = False,
        timeout_s: float,
        keep: bool = True,
    ) -> CallResult:
        """One call through the protocol, timed and sampled by the driver (see the module docstring)."""
        if self.dead:
            return CallResult(error=self.dead)
        assert self.channel is not None
        self.seq += 1
        self._close_idle()  # before the inputs land in shared memory: nothing may delay the release after that
        # The first real call runs unpinned and released at once: it does a program's one-time work
        # (torch.compile's compile workers, lazy thread pools, synchronizing autotuners), whose threads and
        # processes would inherit the one CPU.
        first = not noop and self._real_calls == 0
        self._real_calls += 0 if noop else 1
        call = Call(seq=self.seq, inputs=(), audit=audit, noop=noop, profile=profile)
        if not first:
            self._window_affinity(True)
        debug = log.isEnabledFor(logging.DEBUG)
        started = time.perf_counter() if debug else 0.0
        at_once = first or profile or self._late()
        try:
            if self.cuda:
                result = self._call_gpu(inputs, call, timeout_s, release_at_once=at_once)
            else:
                result = self._call_cpu(inputs, call, timeout_s)
        finally:  # the window is closed
            if not first:
                self._window_affinity(False)
        if debug:
            log.debug("call %d (noop=%s audit=%s at_once=%s late=%d): %.1f ms, counted %.4f ms, error=%r", call.seq, noop,
                      audit, at_once, self._late_calls, (time.perf_counter() - started) * 1000.0, result.ms, result.error[:80])
        if result.error or self.dead:
            self._open_idle()
            return result
        if keep and self._reply_outputs is not None:
            try:
                result.outputs = from_value(self._reply_outputs, self._copy_out)
                result.early = self._early(result.outputs, self._samples)
            except Exception as exc:  # noqa: BLE001 - the answer's fault: native code writes every byte of it
                log.debug("unreadable outputs", exc_info=True)
                result.outputs = None
                result.error = f"the outputs could not be read: {type(exc).__name__}: {exc}"
        self._open_idle()
        return result

    def _call_cpu(self, inputs: list[Any], call: Call, timeout_s: float) -> CallResult:
        """CPU: the server decodes the call and arms it; the driver stops the server, copies the inputs into
        the arena, starts its clock, writes the arena's release word and lets the server go on; the clock runs
        to the sample read.

        The server maps the arena: a server thread that watched it computed pages of the output as the
        driver's copy wrote their inputs, before the clock (red team 3, r02). So every process of the
        server's sandbox is stopped (``SIGSTOP``, every thread seen stopped) while the inputs are copied, and
        continued only once the clock runs (docs/judge.md, "The CPU window"). The server's own protocol work
        before its ``forward`` (decoding the call, making the input views) is done before the clock, where a
        native message loop faster than the trusted one gains nothing (red team 3, r01); the release is a word
        in shared memory the server spins on, not a message it would be woken for and decode in the window
        (red team 5, F1)."""
        assert self.channel is not None and self.arena is not None
        values, copies = self._arena_layout(inputs)
        payload = encode(replace(call, inputs=tuple(values)))
        draws = self._draw_positions()
        try:
            self.channel.send(payload)
            armed, _ = self.channel.recv((Armed, Reply), timeout_s, self._alive)
            if isinstance(armed, Reply):  # it failed before its work could start: no window
                failure = self._reply_failure(armed)
                if not failure:
                    raise ProtocolError("an answer with outputs before the call was released")
                finished = self._finished(call.seq, timeout_s)
                return CallResult(error=self.dead) if finished is None else self._result(armed, finished, failure)
            if armed.seq != call.seq:
                raise ProtocolError(f"call {armed.seq} armed while waiting for {call.seq}")
        except PeerGone as exc:
            return self._gone(exc)
        except Exception as exc:  # noqa: BLE001 - the server's message is the candidate's fault
            log.debug("unreadable arming", exc_info=True)
            return self._refuse(f"the server's answer could not be read: {type(exc).__name__}: {exc}")
        paused = self._pause()
        if paused is None:
            return CallResult(error=self.dead)
        try:
            self._copy_inputs(copies)
            t0 = time.perf_counter()
            self.arena.release(call.seq)  # seen by the server the moment it runs again
        finally:
            self.proc.resume(paused)
        try:
            reply, _ = self.channel.recv(Reply, timeout_s, self._alive)
            t_reply = time.perf_counter()
            failure = self._reply_failure(reply)
            samples: list[tuple[Any, torch.Tensor]] = []
            if not failure:
                samples = [self._sample_cpu(ref, draws[i] if i < len(draws) else None) for i, ref in enumerate(self._leaves)]
            t1 = time.perf_counter()
        except PeerGone as exc:
            return self._gone(exc)
        except Exception as exc:  # noqa: BLE001 - whatever the answer makes fail here is the answer's fault
            # A forged or impossible answer (bad references, unreadable memory) is the candidate's failure,
            # never the judge's: native code writes every byte of it.
            log.debug("unreadable answer", exc_info=True)
            return self._refuse(f"the server's answer could not be read: {type(exc).__name__}: {exc}")
        finished = self._finished(call.seq, timeout_s)
        if finished is None:
            return CallResult(error=self.dead)
        result = self._result(reply, finished, failure)
        if not result.error:
            result.ms = (t1 - t0) * 1000.0
            result.parts = _cpu_parts(t0, finished.marks, t_reply, t1)
            self._samples = samples
        return result

    def _call_gpu(self, inputs: list[Any], call: Call, timeout_s: float, release_at_once: bool) -> CallResult:
        """GPU: the call is timed by the driver's CUDA events on its own stream (``StreamFlags``).

        The server enqueues the call behind the release word and answers where its outputs will be; then
        the driver's stream, between its first and last event: copies the inputs into the shared buffers the
        server was given (until now they held the previous call's inputs), flushes the L2, writes the
        release word, waits until the done word equals this call, reads the output samples. Nothing the
        server does before the first event can touch this call's inputs; whatever it does after it, until
        its done word and the samples, counts. ``release_at_once``: release without waiting for the answer
        (a first call's one-time work, a profiled call, or a session whose calls synchronize before they
        are enqueued); the samples are then read once the answer came, the wait for it counted."""
        assert self.channel is not None and self.flags is not None and self.timing_stream is not None
        assert self.gate is not None and self.gate_stream is not None
        values, copies, segs, fds = self._stage_inputs(inputs)
        payload = encode(replace(call, inputs=tuple(values), segments=tuple(segs)))
        draws = self._draw_positions()
        reset_persisting_l2()
        stream = self.timing_stream
        events = [torch.cuda.Event(enable_timing=True) for _ in range(5)]
        reply: Reply | None = None
        failure = ""
        samples: list[tuple[Any, torch.Tensor]] = []
        probes: list[Any] = []
        enqueued = recorded = False
        t0 = t_armed = time.perf_counter()
        deadline = t0 + timeout_s  # one bound for the whole call
        try:
            self.channel.send(payload, fds)  # the pool keeps owning the fds
            if not release_at_once:
                reply = self._armed_reply(ARM_WAIT_S)
                self._late_calls = 0 if reply is not None else self._late_calls + 1
            t_armed = time.perf_counter()
            if reply is not None:
                failure, probes = self._gpu_probes(reply, draws)
            # the inputs were made on the driver's current stream: the copies must not start before them
            stream.wait_stream(torch.cuda.current_stream(self.spec.device))
            with torch.cuda.stream(stream):
                # The whole window waits behind a gate that opens once it is all queued: launched one by one,
                # the driver's context ran dry between its own launches (the copy ended before the flush was
                # launched), and the GPU switched to the server's context, whose work on inputs that had
                # landed then went uncounted within the prelude's slack (red team 3, F1).
                self.gate.wait(stream.cuda_stream, GATE_WORD, call.seq)
                events[0].record()
                for copy in copies:  # prepared before: no Python of the driver's between the launches
                    copy()
                events[1].record()
                self.flusher()
                events[2].record()
                self.flags.write(stream.cuda_stream, RELEASE_WORD, call.seq)
                self.flags.wait(stream.cuda_stream, DONE_WORD, call.seq, equal=True)
                enqueued = True
                events[3].record()
                if reply is not None:
                    samples = self._read_probes(probes)  # behind the done word
                    events[4].record()
                    recorded = True
                self.gate.write(self.gate_stream.cuda_stream, GATE_WORD, call.seq)
                if reply is None:  # released at once: the answer comes when the server's enqueue returns
                    reply, self._pending_fds = self.channel.recv(
                        Reply, max(0.0, deadline - time.perf_counter()), self._alive, with_fds=True
                    )
                    failure, probes = self._gpu_probes(reply, draws)
                    samples = self._read_probes(probes)  # behind the done word
                    events[4].record()
                    recorded = True
            in_time = self._wait_event(events[4], deadline, self.channel.readable)
        except PeerGone as exc:
            result = self._gone(exc)
            if enqueued:
                self._close_window(stream, events[4], recorded, call.seq)
            return result
        except (ProtocolError, UnreadableAnswer) as exc:
            # A forged or impossible answer (bad references, unreadable memory, a type the driver cannot
            # read) is the candidate's failure, never the judge's: native code writes every byte of it.
            # Anything else that fails here is the driver's own GPU work: it propagates (a JudgeError).
            log.debug("unreadable answer", exc_info=True)
            close_fds(self._pending_fds)
            self._pending_fds = []
            result = self._refuse(f"the server's answer could not be read: {exc}")
            if enqueued:
                self._close_window(stream, events[4], recorded, call.seq)
            return result
        if not in_time:
            self._die("the call did not finish within its time bound", timeout=True)
            self._rescue(call.seq, events[4])
            return CallResult(error=self.dead)
        finished = self._finished(call.seq, max(0.0, deadline - time.perf_counter()) + 2.0)
        if finished is None:
            self._close_window(stream, events[4], recorded, call.seq)
            return CallResult(error=self.dead)
        if not self._wait_event(events[4], time.perf_counter() + 2.0):
            # It finished before its done word came: its work failed (a CUDA fault ends the context's work,
            # the done word with it), or it lies. Either way the session ends here.
            result = self._refuse(failure or finished.error or "the server finished a call without signalling it done")
            self._rescue(call.seq, events[4])
            return result
        result = self._result(reply, finished, failure)
        return self._gpu_result(result, events, t_armed - t0, samples, finished)

    # ------------------------------------------------------------------ call helpers

    def _gpu_result(
        self,
        result: CallResult,
        events: list[torch.cuda.Event],
        arm_s: float,
        samples: list[tuple[Any, torch.Tensor]],
        finished: Finished,
    ) -> CallResult:
        """A GPU call's time and parts from the timing stream's events."""
        copy_ms, flush_ms, work_ms, sample_ms = (events[i].elapsed_time(events[i + 1]) for i in range(4))
        result.parts = {
            "arm": arm_s * 1000.0,
            "copy": copy_ms,
            "flush": flush_ms,
            "work": work_ms,
            "sample": sample_ms,
            "window": float(events[0].elapsed_time(events[4])),
            **_server_parts(finished.marks),
        }
        result.parts["prelude_excess"] = self._prelude_excess(result.parts)
        result.busy = result.parts["prelude_excess"] > BUSY_EXCESS_MS
        if not result.error:
            result.ms = self._counted_ms(result.parts)
            self._samples = [(p, b.clone()) for p, b in samples]
        return result

    def _counted_ms(self, parts: dict[str, float]) -> float:
        """GPU: a call's time on the trusted clock before the overhead: release to the last sample read, plus
        the prelude (input copy, flush) beyond its bound (``PRELUDE_SLACK``)."""
        return parts["work"] + parts["sample"] + self._prelude_excess(parts)

    def _prelude_excess(self, parts: dict[str, float]) -> float:
        """What the input copy and the flush took beyond the session's bound (0 while calibrating)."""
        return max(0.0, parts["copy"] + parts["flush"] - self.prelude_bound_ms)

    def _stage_inputs(
        self, inputs: list[Any]
    ) -> tuple[list[Value], list[Callable[[], Any]], list[Any], list[int]]:
        """GPU: a shared buffer in the driver's pool for each input tensor (what it holds now is stale: the
        inputs' bytes are copied in by the timing stream, after the call was sent); their descriptions,
        the copies (``copy_bytes``, prepared), and the segments and fds to send. The previous call's buffers
        are let go first (its window is closed, its checks done): the pool then holds one call's inputs, not two."""
        assert self.segments is not None
        self.shared_inputs = []
        segs: list[Any] = []
        fds: list[int] = []
        copies: list[Callable[[], Any]] = []
        shared: list[torch.Tensor] = []

        def ref(t: torch.Tensor) -> TensorRef:
            assert self.segments is not None
            with self.segments.use():
                dst = torch.empty_like(t, memory_format=torch.preserve_format)
            r, seg, fd = self.segments.ref_of(dst, self.sent_segments)
            copies.append(copy_bytes(dst, t.detach()))
            shared.append(dst)
            if seg is not None:
                segs.append(seg)
                fds.append(fd)
            return r

        values = [to_value(x, ref) for x in inputs]
        self.shared_inputs = shared
        return values, copies, segs, fds

    def _late(self) -> bool:
        """Whether this call is released at once because the session's calls answer only after their release."""
        return self._late_calls >= 2 and self.seq % LATE_RETRY_CALLS != 0

    def _armed_reply(self, wait_s: float) -> Reply | None:
        """The answer of a call that is enqueued (sent before it runs), or ``None`` when none came within
        ``wait_s``: the server synchronizes inside ``forward`` before it could answer."""
        assert self.channel is not None
        try:
            reply, rfds = self.channel.recv(Reply, wait_s, self._alive, with_fds=True)
        except PeerGone as exc:
            if "no answer" not in str(exc):
                raise
            if not self._alive():
                raise PeerGone("the peer process ended") from None
            return None
        self._pending_fds = rfds
        return reply

    def _gpu_probes(self, reply: Reply, draws: list[Any]) -> tuple[str, list[Any]]:
        """Check an answer, map its new segments and place the probes of its outputs' samples (``Probe``,
        or ``None`` for an empty output); ``(failure, probes)``."""
        assert self.peer is not None
        rfds, self._pending_fds = self._pending_fds, []
        try:
            failure = self._reply_failure(reply)
        except BaseException:
            close_fds(rfds)
            raise
        if failure:
            close_fds(rfds)
            return failure, []
        try:
            self.peer.attach(reply.segments, rfds)  # closes them
            probes: list[Any] = []
            for i, ref in enumerate(self._leaves):
                if math.prod(ref.shape) == 0:
                    probes.append(None)
                    continue
                phase, jitter = draws[i] if i < len(draws) else secret_numbers(2)
                probes.append(self.peer.probe(ref, phase, jitter))
        except Exception as exc:  # noqa: BLE001 - the answer's references, written by native code
            raise UnreadableAnswer(f"{type(exc).__name__}: {exc}") from exc
        for i, probe in enumerate(probes):
            if probe is not None:
                self._pinned(probe.nbytes, 2 * i)  # allocated now, not in the window
        return "", probes

    def _read_probes(self, probes: list[Any]) -> list[tuple[Any, torch.Tensor]]:
        """Enqueue the reads of the probes on the timing stream (into pinned buffers, one per output)."""
        assert self.peer is not None and self.timing_stream is not None
        samples: list[tuple[Any, torch.Tensor]] = []
        for i, probe in enumerate(probes):
            if probe is None:
                samples.append(([], torch.empty(0)))
            else:
                into = self._pinned(probe.nbytes, 2 * i)
                samples.append((probe, self.peer.read(probe, into, self.timing_stream.cuda_stream)))
        return samples

    def _reply_failure(self, reply: Reply) -> str:
        """Why the answer carries no outputs to read (its error), after checking it belongs to this call and
        that its outputs stay within bounds; the leaves are kept for the samples and the copy."""
        if reply.seq != self.seq:
            raise ProtocolError(f"answer to call {reply.seq} while waiting for {self.seq}")
        if reply.error:
            return reply.error
        if reply.outputs is None:
            raise ProtocolError("an answer without outputs and without an error")
        leaves = tensor_leaves(reply.outputs)
        if len(leaves) > OUTPUT_LEAVES_FACTOR * self.output_leaves + OUTPUT_LEAVES_SLACK:
            # before any is mapped, pinned or read: 80,000 would cost seconds (a bound, not equality: at a
            # held-out shape the reference may return another number; the comparison then says so)
            raise ProtocolError(f"forward returned {len(leaves)} tensors; the reference returns {self.output_leaves}")
        remaining = self.output_limit
        for ref in leaves:
            remaining -= check_output_ref(ref, remaining)
        self._leaves = leaves
        self._reply_outputs = reply.outputs
        return ""

    def _finished(self, seq: int, timeout_s: float) -> Finished | None:
        """The server's ``Finished`` for call ``seq``; ``None`` (the session dead) when it does not come."""
        assert self.channel is not None
        try:
            finished, _ = self.channel.recv(Finished, timeout_s, self._alive)
            if finished.seq != seq:
                raise ProtocolError(f"finished call {finished.seq} while waiting for {seq}")
        except PeerGone as exc:
            self._gone(exc)
            return None
        except ProtocolError as exc:  # killed by the driver, not crashed
            self._refuse(f"the server's message after its answer was refused: {exc}")
            return None
        return finished

    def _result(self, reply: Reply, finished: Finished, failure: str) -> CallResult:
        error = failure or finished.error
        return CallResult(
            error=error,
            event_ms=finished.event_ms,
            violations=list(reply.violations) + list(finished.violations),
            profile=finished.profile,
            new_segments=len(reply.segments),
        )

    def _refuse(self, failure: str) -> CallResult:
        """End the session on an answer that cannot be read (the channel's order is lost with it): the
        server is killed and the call fails with ``failure``, the candidate's fault."""
        self._die(failure)
        self.dead = failure
        return CallResult(error=failure)

    def _gone(self, exc: PeerGone) -> CallResult:
        reason = "the call did not finish within its time bound" if "no answer" in str(exc) else str(exc)
        self._die(reason, timeout="no answer" in str(exc))
        return CallResult(error=self.dead)

    def _wait_event(self, event: torch.cuda.Event, deadline: float, message: Callable[[], bool] | None = None) -> bool:
        """Spin until ``event`` completed or a message waits (``message()``, e.g. a ``Finished`` that says the
        work failed): ``True``; ``False`` when ``deadline`` passed first."""
        checks = 0
        while not event.query():
            checks += 1
            if checks % 256 == 0 and ((message is not None and message()) or time.perf_counter() > deadline):
                return message is not None and message()
        return True

    def _close_window(self, stream: Any, event: torch.cuda.Event, recorded: bool, seq: int) -> None:
        """End a window whose server is gone (killed first): the timing stream must not stay blocked on
        its done word."""
        if not recorded:
            with torch.cuda.stream(stream):
                event.record()
        if not event.query():
            self._rescue(seq, event)

    def _rescue(self, seq: int, event: torch.cuda.Event | None = None) -> None:
        """Unblock the timing stream waiting for a done word that never came (a hung or lying server, killed
        before this): the driver writes the word itself from a stream of its own, again each second, until
        ``event`` (the window's last) completed. ``JudgeError`` if the stream stays blocked for 10 s."""
        assert self.flags is not None and self.gate is not None
        rescue = torch.cuda.Stream(self.spec.device, priority=-1)
        until = time.perf_counter() + 10.0
        while True:
            self.gate.write(rescue.cuda_stream, GATE_WORD, seq)  # a window left queued behind its closed gate
            self.flags.write(rescue.cuda_stream, DONE_WORD, seq)
            if event is None:
                rescue.synchronize()
                return
            if self._wait_event(event, min(until, time.perf_counter() + 1.0)):
                return
            if time.perf_counter() > until:
                raise DeviceStuckError("the driver's timing stream stays blocked after a call's time bound")

    # ------------------------------------------------------------------ trusted observations

    @property
    def timing_cores(self) -> tuple[int, ...]:
        """The driver's and the server's timing CPUs (``timing_cpus``); empty when the session is not pinned."""
        return self._cores or ()

    def threads(self) -> int:
        """OS threads of the server process (``/proc``)."""
        try:
            return len(os.listdir(f"/proc/{self.host_pid}/task"))
        except OSError:
            return 0

    def child_processes(self) -> list[int]:
        """Processes the server started that are still alive: its children, and the other children of the
        sandbox's init (a process forked twice is reparented there), from ``/proc``."""
        kids: list[int] = []
        for parent in filter(None, (self.host_pid, self.init_pid)):
            with contextlib.suppress(OSError):  # /proc cannot list children here: none seen, as before
                kids += [p for p in children(parent) if p != self.host_pid]
        return kids

    def helper_cpu_s(self) -> float | None:
        """CPU seconds used so far by the server's process less its main thread (which spins on the channel
        between calls on a GPU, and on both devices does the server's own work after an answer: memory
        poisoning, freeing outputs; counting it flagged honest CPU servers), by the children it reaped, and
        by every process the sandbox's init reaped (helpers forked twice). The process's own count keeps the
        time of threads that exited: summing the live threads lost it (red team 2 r4, a spinner that hands
        over to a fresh thread every 0.3 ms)."""
        helpers = helper_runtime_ns(self.host_pid)
        children = _cpu_ticks(f"/proc/{self.host_pid}/stat", children=True, own=False)
        reaped = _cpu_ticks(f"/proc/{self.init_pid}/stat", children=True, own=False) if self.init_pid else 0
        if helpers is None or children is None or reaped is None:
            return None  # the server (or its sandbox) is gone: no reading rather than a jump
        return helpers / 1e9 + (children + reaped) / os.sysconf("SC_CLK_TCK")

    # ------------------------------------------------------------------ internals

    def _pin(self) -> None:
        """Choose two CPUs on different physical cores for the windows of this session's calls.

        Driver and server both spin on the channel during a call; on CPUs of their own, neither is
        descheduled or moved in the middle of a window, which makes the round trip's median repeatable from
        one server to the next. The lane of device N takes the N-th pair counted from the highest CPU
        numbers. Both threads are pinned only for the window (``_window_affinity``): a thread inherits its
        creator's CPU set, so pinning them for a whole session put every thread they started meanwhile (the
        worker's OpenMP pool for its first CPU operation, inductor's compile workers in a compile server)
        on one CPU, beside a spinning thread (H200, 2026-12-01: evaluations took minutes instead of seconds)."""
        if os.environ.get(PIN_ENV, "1") == "0":
            return
        cores = timing_cpus(torch.device(self.spec.device).index or 0)
        if cores is None:
            return
        try:
            self._masks = (os.sched_getaffinity(0), os.sched_getaffinity(self.host_pid))
            self._cores = cores
        except OSError as exc:  # a restricted container: measure unpinned
            log.info("cannot pin the timing threads: %s", exc)

    def _window_affinity(self, pinned: bool) -> None:
        """Pin the driver thread and the server's main thread to their CPUs (``pinned``) or give them back
        their own CPU sets; outside the window, so that the syscalls are never timed."""
        if self._cores is None or self._masks is None:
            return
        try:
            if pinned:
                os.sched_setaffinity(self.host_pid, {self._cores[1]})
                os.sched_setaffinity(0, {self._cores[0]})
            else:
                os.sched_setaffinity(0, self._masks[0])
                os.sched_setaffinity(self.host_pid, self._masks[1])
        except OSError as exc:  # the server is gone (its death is seen by the call) or the container forbids it
            log.info("cannot set the timing threads' CPUs: %s", exc)
            if not pinned:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(0, self._masks[0])

    def _alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _die(self, reason: str, timeout: bool = False) -> None:
        if self.proc is not None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001
                pass
        code = self.proc.poll() if self.proc is not None else None
        tail = self.output()[-3000:]
        limit = self._limit_reason()
        why = (
            "it never finished (killed at the per-call time bound)"
            if timeout
            else (
                f"the sandbox stopped the server: {limit}"
                if limit
                else (
                    f"the server process died ({reason}; exit status {code}): "
                    "it crashed (e.g. a segfault, abort, CUDA fault or os._exit)"
                )
            )
        )
        self.dead = f"{why}. Output:\n{tail}" if tail.strip() else why

    def _expect_loaded(self, timeout_s: float) -> Loaded:
        assert self.channel is not None
        msg, _ = self.channel.recv(Loaded, timeout_s, self._alive)
        return msg

    def _pause(self) -> list[int] | None:
        """CPU: stop the server's whole sandbox before the input copy; the processes stopped, the server's own
        first (it is continued first), or ``None`` with the session ended (``dead``) when the server is gone
        or cannot be stopped. ``JudgeError`` when this host cannot stop it (``/proc`` cannot list the tree, a
        member may not be signalled, the server is not in its sandbox's tree)."""
        if not self._alive():
            self._gone(PeerGone("the server exited"))
            return None
        try:
            paused = self.proc.pause(PAUSE_TIMEOUT_S)
        except StopTimeout as exc:
            self._refuse(f"the server could not be stopped while its inputs were copied: {exc}")
            return None
        except OSError as exc:
            raise JudgeError(f"the candidate server's sandbox cannot be stopped on this host: {exc}") from exc
        if self.host_pid not in paused:
            self.proc.resume(paused)
            if not self._alive() or not thread_states(self.host_pid):
                self._gone(PeerGone("the server exited"))
                return None
            raise JudgeError(f"the candidate server (pid {self.host_pid}) is not in its sandbox's process tree "
                             f"({paused}): it cannot be stopped while its inputs are copied")
        return [self.host_pid] + [pid for pid in paused if pid != self.host_pid]

    def _arena_layout(self, inputs: list[Any]) -> tuple[list[Value], list[tuple[torch.Tensor, torch.Tensor]]]:
        """CPU: where each input goes in the arena (after its header), described, and the copies to make there
        (arena view, input): nothing is written yet."""
        assert self.arena is not None
        self.arena.reset()
        copies: list[tuple[torch.Tensor, torch.Tensor]] = []

        def ref(t: torch.Tensor) -> TensorRef:
            assert self.arena is not None
            view, r = self.arena.reserve(t)
            copies.append((view, t))
            return r

        values = [to_value(x, ref) for x in inputs]
        self.shared_inputs = [view for view, _ in copies]
        return values, copies

    def _copy_inputs(self, copies: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """CPU: write the inputs into the arena (the server is stopped meanwhile)."""
        for view, t in copies:
            view.copy_(t.detach())

    def _draw_positions(self) -> list[Any]:
        """Secret random numbers for each expected output's sample, drawn before the window opens so that the
        window holds only the reads themselves. They are as secret as numbers drawn later: the server never
        sees the driver's memory. GPU: a phase and a pitch jitter per output; CPU: element positions."""
        leaves = max(self.output_leaves, 1)
        if self.cuda:
            return [tuple(secret_numbers(2)) for _ in range(leaves)]
        return [secret_numbers(SAMPLE_POSITIONS) for _ in range(leaves)]

    def _sample_cpu(self, ref: TensorRef, draw: Any = None) -> tuple[Any, torch.Tensor]:
        """CPU: a secret sample of an output read at the end of the window: the values at random element
        positions (row-major; ``draw``: the numbers drawn before the window, drawn now when ``None``)."""
        numel = math.prod(ref.shape)
        if numel == 0:
            return [], torch.empty(0)
        k = min(SAMPLE_POSITIONS, numel)
        assert self.remote is not None
        numbers = draw if draw is not None else secret_numbers(k)
        host_positions = [x % numel for x in numbers[:k]]
        return host_positions, self.remote.gather(ref, host_positions)

    def _pinned(self, nbytes: int, slot: int) -> torch.Tensor:
        """A pinned host buffer of at least ``nbytes``, kept per ``slot`` (``2 * i``: output ``i``'s sample read
        in the window; ``1``: the re-reads after it, one output at a time)."""
        buf = self._pinned_buffers.get(slot)
        if buf is None or buf.numel() < nbytes:
            buf = torch.empty(max(nbytes, 4096), dtype=torch.uint8, pin_memory=True)
            self._pinned_buffers[slot] = buf
        return buf

    def _early(self, outputs: Any, samples: Sequence[tuple[Any, torch.Tensor]]) -> str:
        """Whether the output bytes sampled at the end of the window are still the bytes there now, after
        the full copy (GPU: the same probes read again; CPU: the same positions of the copy)."""
        if self.peer is None:
            return check_samples(outputs, samples)
        for i, (probe, before) in enumerate(samples):
            if not isinstance(probe, Probe):
                continue
            after = self.peer.read(probe, self._pinned(probe.nbytes, 1))
            if not torch.equal(before, after):
                return early_message(i)
        return ""

    def _copy_out(self, ref: TensorRef) -> torch.Tensor:
        if self.peer is not None:
            return self.peer.tensor(ref).clone()
        assert self.remote is not None
        return self.remote.read_tensor(ref)

    def _close_idle(self) -> None:
        if self._idle_mark is not None:
            wall0, cpu0 = self._idle_mark
            cpu1 = self.helper_cpu_s()
            self.idle_wall_s += time.perf_counter() - wall0
            if cpu1 is not None:  # signed: a difference of two readings (children reaped are counted in ticks)
                self.idle_cpu_s += cpu1 - cpu0
            self._idle_mark = None

    def _open_idle(self) -> None:
        cpu = None if self.dead else self.helper_cpu_s()
        if cpu is not None:
            self._idle_mark = (time.perf_counter(), cpu)


def _stat_fields(stat_path: str) -> list[int] | None:
    """The numeric fields of a ``/proc`` stat file after the command name, from field 4 (ppid) on: index 0 is
    ppid, 10-13 utime, stime, cutime, cstime; ``None`` when unreadable."""
    try:
        return [int(f) for f in Path(stat_path).read_text().rsplit(")", 1)[1].split()[1:15]]
    except (OSError, IndexError, ValueError):
        return None


def _cpu_ticks(stat_path: str, *, children: bool, own: bool = True) -> int | None:
    """Clock ticks of CPU from a ``/proc`` stat file: utime + stime when ``own`` (for a process: its threads,
    live and exited), plus cutime + cstime (the children it waited for) when ``children``; ``None`` when
    unreadable."""
    fields = _stat_fields(stat_path)
    if fields is None or len(fields) < 14:
        return None
    return (fields[10] + fields[11] if own else 0) + (fields[12] + fields[13] if children else 0)


READ_BRACKET_NS = 200_000
"""``helper_runtime_ns`` reads again when the main thread ran more than this between its two readings."""


def helper_runtime_ns(pid: int) -> int | None:
    """CPU time of process ``pid`` less its main thread's, in nanoseconds (threads that exited included), or
    ``None`` when it is gone. The main thread (which spins on a GPU server) is read before and after the
    process, and the process's reading is set against the middle of the two: a reader preempted between
    two plain readings charged the spinning main thread's time meanwhile to the helpers (12 ms over 800
    windows on a loaded 2-CPU machine). Read again, up to five times, while they lie far apart."""
    helpers: int | None = None
    for _ in range(5):
        before = _thread_runtime_ns(pid, pid)
        whole = _process_runtime_ns(pid)
        after = _thread_runtime_ns(pid, pid)
        if before is None or whole is None or after is None:
            return None
        helpers = whole - (before + after) // 2
        if after - before <= READ_BRACKET_NS:
            break
    return helpers


def _process_runtime_ns(pid: int) -> int | None:
    """CPU time of process ``pid`` in nanoseconds, its threads live and exited (the process's CPU clock,
    ``clock_getcpuclockid``: readable for any process), or ``None`` when it is gone. Exact, where the clock
    ticks of ``/proc/<pid>/stat`` are rounded (and split into user and system time) per field, per reading
    and per task: the process's ticks less its main thread's, read around each of a GPU evaluation's 800
    idle windows, gave honest servers 0.04-0.29 s of helper CPU where they had none (H200, 2026-12-04; the
    0.29 s was a ``background-work`` verdict on an honest row softmax)."""
    try:
        return time.clock_gettime_ns(((~pid) << 3) | 2)  # CPUCLOCK_SCHED of the process
    except OSError:
        return None


def _thread_runtime_ns(pid: int, tid: int) -> int | None:
    """CPU time of thread ``tid`` of ``pid`` in nanoseconds (``/proc/<pid>/task/<tid>/schedstat``, the
    scheduler's exact count, as the process clock's; its clock ticks where a kernel has no schedstat), or
    ``None`` when it is gone."""
    try:
        return int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        ticks = _cpu_ticks(f"/proc/{pid}/task/{tid}/stat", children=False)
        return None if ticks is None else ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def _namespace_init(pid: int) -> int:
    """The host PID of ``pid``'s parent when that parent is the init (PID 1) of a PID namespace of its own,
    as bwrap and unshare make; else 0."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    if not fields:
        return 0
    ppid = fields[0]
    try:
        status = Path(f"/proc/{ppid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            ids = line.split()[1:]
            return ppid if len(ids) >= 2 and ids[-1] == "1" else 0
    return 0


def secret_numbers(n: int) -> list[int]:
    """``n`` 62-bit numbers from the operating system's CSPRNG (one read): sample positions and phases.

    No generator state lives in the driver that a server could reconstruct from the positions it sees
    read (a Mersenne Twister's is recovered from 624 outputs)."""
    return [x >> 2 for x in array.array("Q", secrets.token_bytes(8 * n))]


def timing_cpus(lane: int) -> tuple[int, int] | None:
    """Two CPUs on different physical cores for timing lane ``lane`` (pairs taken from the highest CPU
    numbers down, siblings of a taken CPU skipped), or ``None`` when this process may use fewer than
    eight CPUs or the lane has none left."""
    allowed = sorted(os.sched_getaffinity(0), reverse=True)
    if len(allowed) < 8:
        return None
    free, picked = list(allowed), list[int]()
    while free and len(picked) < 2 * (lane + 1):
        cpu = free.pop(0)
        picked.append(cpu)
        siblings = smt_siblings(cpu)
        free = [c for c in free if c not in siblings]
    if len(picked) < 2 * (lane + 1):
        return None
    return picked[2 * lane], picked[2 * lane + 1]


_GATE_STREAMS: dict[str, Any] = {}


def _gate_stream(device: str) -> Any:
    """The stream that opens the windows' gates on ``device``: one per process, created for itself."""
    if device not in _GATE_STREAMS:
        _GATE_STREAMS[device] = own_stream(device, blocking=False)
    return _GATE_STREAMS[device]


@functools.cache
def _warn_unfiltered() -> None:
    log.warning("a candidate server could not install its seccomp filter (cuda_gym.judge.syscall_filter: "
                "another architecture, or a kernel without seccomp): where the host allows unprivileged userfaults, "
                "a submission could compute its CPU outputs while the driver reads them, and namespaces it makes "
                "may leave kernel work running after it")


def _cpu_parts(t0: float, marks: Sequence[float], t_reply: float, t1: float) -> dict[str, float]:
    """The parts of a CPU round trip in ms; the server's are left out when its marks are missing or impossible."""
    ms = 1000.0
    parts = {"sample": (t1 - t_reply) * ms}
    if len(marks) == 4 and t0 <= marks[0] <= marks[1] <= marks[2] <= marks[3] <= t_reply:
        parts.update(
            to_server=(marks[0] - t0) * ms,
            server_setup=(marks[1] - marks[0]) * ms,
            server_run=(marks[2] - marks[1]) * ms,
            server_reply=(marks[3] - marks[2]) * ms,
            to_driver=(t_reply - marks[3]) * ms,
        )
    else:
        parts["to_driver"] = (t_reply - t0) * ms
    return parts


def _server_parts(marks: Sequence[float]) -> dict[str, float]:
    """GPU: the server's own (advisory) durations: decoding the call, enqueuing its work, making the answer."""
    if len(marks) != 4 or not marks[0] <= marks[1] <= marks[2] <= marks[3]:
        return {}
    return {
        "server_setup": (marks[1] - marks[0]) * 1000.0,
        "server_enqueue": (marks[2] - marks[1]) * 1000.0,
        "server_reply": (marks[3] - marks[2]) * 1000.0,
    }


def copy_bytes(dst: torch.Tensor, src: torch.Tensor) -> Callable[[], Any]:
    """The copy of an input into its shared buffer by a kernel of the driver's, prepared: the returned
    function only launches it (its views are made now, so that no Python of the driver's lies between the
    launches of a window). A contiguous same-type copy would be a ``memcpy``, which may run on a copy
    engine beside a server's kernel; a kernel of the driver's context never runs beside one of the server's."""
    if dst.numel() == 0:
        return lambda: None
    if dst.dtype == src.dtype and dst.stride() == src.stride() and dense_span(dst):
        # dense (permuted or not) with the same layout: the span of storage both cover, as flat bytes
        n = dst.numel()
        flat_dst = dst.as_strided((n,), (1,), dst.storage_offset()).view(torch.uint8)
        flat_src = src.as_strided((n,), (1,), src.storage_offset()).view(torch.uint8)
        nbytes = flat_dst.numel()
        wide = torch.int32 if nbytes % 4 == 0 and dst.data_ptr() % 4 == 0 and src.data_ptr() % 4 == 0 else torch.uint8
        a, b = flat_src.view(wide), flat_dst.view(wide)
        return lambda: torch.bitwise_or(a, 0, out=b)
    return lambda: dst.copy_(src)  # different layouts: an elementwise copy kernel


def dense_span(t: torch.Tensor) -> bool:
    """Whether ``t``'s elements fill one gap-free span of its storage starting at its first element
    (contiguous in some order of its dimensions, no stride negative or zero where the size exceeds one)."""
    step = 1
    dims = [(size, stride) for size, stride in zip(t.shape, t.stride()) if size != 1]
    for size, stride in sorted(dims, key=lambda d: d[1]):
        if stride != step:
            return False
        step *= size
    return True


def check_samples(outputs: Any, samples: Sequence[tuple[Any, torch.Tensor]]) -> str:
    """CPU: whether the elements sampled at the end of the window equal the same positions of the full copy."""
    tensors = [t for _, t in harness.iter_leaves(outputs) if isinstance(t, torch.Tensor)]
    for i, (t, (positions, values)) in enumerate(zip(tensors, samples)):
        if len(positions) == 0:
            continue
        got = t.reshape(-1)[torch.tensor(positions)]
        a = got.reshape(-1).view(torch.uint8) if got.numel() else got
        b = values.reshape(-1).view(torch.uint8) if values.numel() else values
        if a.shape != b.shape or not torch.equal(a, b):
            return early_message(i)
    return ""


def early_message(i: int) -> str:
    """The ``early-answer`` finding for output ``i``."""
    return (
        f"output {i}: the bytes read when the server answered differ from the same bytes read just after: "
        "the answer came before the work was finished"
    )


def prelude_bound(preludes: Sequence[float], noop_work: Sequence[float]) -> float:
    """GPU: the bound of a call's prelude from the calibration's no-op preludes and release-to-done times
    (ms): their median prelude plus a slack of ``PRELUDE_SLACK`` and ``PRELUDE_SLACK_MS``, at most
    ``PRELUDE_SLACK_SWITCHES`` of their median release to done (two context switches)."""
    typical = statistics.median(preludes)
    slack = min(typical * PRELUDE_SLACK + PRELUDE_SLACK_MS, statistics.median(noop_work) * PRELUDE_SLACK_SWITCHES)
    return typical + slack

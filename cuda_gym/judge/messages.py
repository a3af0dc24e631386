"""Typed messages between the judge's processes: frozen dataclasses whose ``from_json`` is strict.

Three processes talk: the orchestrator (``Judge``), the trusted driver (``reference_worker``) and the
candidate server (``candidate_server``, sandboxed, runs agent code). Every message is one of the
dataclasses below, sent as JSON with its ``type`` name. ``decode`` rejects unknown types, missing
keys, unknown keys and wrong value types with a ``ProtocolError``: a renamed key is a loud
infrastructure failure (``JudgeError`` on the trusted side), never a silent -1 for the agent.

What crosses into the candidate server carries no secret: no seed, no count or position of checked
calls, no reference output, no timing bookkeeping. What comes out of it is untrusted: the driver
reads the bytes its output descriptors point to and believes nothing else.
"""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from cuda_gym.errors import ProtocolError

# ---------------------------------------------------------------------- tensors and values


@dataclass(frozen=True)
class TensorRef:
    """Where a tensor's bytes live in shared memory, and how to view them.

    Attributes:
        dtype: torch dtype name without ``torch.`` (``float32``).
        shape, strides: in elements; ``offset`` is the element offset of ``[0, ...]`` from ``base``.
        segment: id of the shared segment (GPU: a VMM allocation; CPU: ``0`` for the driver's arena,
            ``-1`` for an address in the candidate process read with ``process_vm_readv``).
        base: byte address (GPU: offset inside the segment; CPU arena: byte offset; ``-1`` segment:
            the virtual address in the candidate process).
    """

    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    segment: int
    base: int


@dataclass(frozen=True)
class Value:
    """A node of an input or output structure.

    ``kind`` is ``tensor`` (``tensor`` set), ``tuple``/``list`` (``items``), ``dict`` (``keys`` and
    ``items``), or a Python scalar kind ``int``/``float``/``bool``/``none``/``str``/``complex``
    (``scalar``: its JSON value; complex as ``[re, im]``).
    """

    kind: str
    tensor: TensorRef | None = None
    items: tuple[Value, ...] = ()
    keys: tuple[str, ...] = ()
    scalar: Any = None


@dataclass(frozen=True)
class Segment:
    """A shared memory segment announced with a message; its file descriptor travels beside it."""

    id: int
    size: int


# ---------------------------------------------------------------------- driver -> candidate server


ServerKind = Literal["workspace", "single", "reference", "compile"]
"""What the server loads: a workspace (``model_new.py`` + extension), a single file, or the reference
``Model`` eager or under ``torch.compile`` (the baselines, timed through the same protocol)."""


@dataclass(frozen=True)
class Calibrate:
    """Before any submission code loads: answer no-op calls returning tensors of this output layout.

    The driver times these calls (their first quartile is the protocol overhead it subtracts) while
    the server is still only trusted code. On a GPU ``flags`` locates the session's release and done words
    (``transport.StreamFlags``) in the driver's segment announced in ``segments`` (its fd beside it).
    """

    outputs: Value
    device: str
    flags: TensorRef | None = None
    segments: tuple[Segment, ...] = ()


@dataclass(frozen=True)
class Load:
    """Load the program to serve (never run before ``Calibrate`` is finished)."""

    kind: ServerKind
    device: str
    init_seed: int
    state_path: str
    init_path: str
    task_code: str = ""
    solution_path: str = ""
    workspace_root: str = ""
    module_path: str = ""
    inline_manifest: str = ""
    """Single files: the prebuilt ``load_inline`` modules (``cuda_gym.build.inline``) to serve its calls."""


@dataclass(frozen=True)
class Call:
    """Run ``forward`` once on these inputs and answer with the outputs.

    On a GPU the server enqueues the call behind a wait for the release word (``seq``) and answers as soon
    as the work is enqueued: the inputs' bytes are copied in by the driver's stream only after that, just
    before the release. On the CPU the server makes the input views, says ``Armed`` and spins on the arena's
    release word (``HostArena.released``): the driver copies the inputs into the arena in between, while the
    server is stopped, and writes the word (``seq``) once its clock runs.
    ``audit`` asks for the advisory ATen audit and memory poisoning (correctness
    calls; every timed call is checked too, so knowing this gains nothing); ``noop`` (calibration only)
    runs one tiny kernel and returns the calibration outputs (so the calibrated overhead includes a launch
    and the GPU's switch to the server's context and back); ``profile`` runs the call under
    ``torch.profiler``.
    """

    seq: int
    inputs: tuple[Value, ...]
    segments: tuple[Segment, ...] = ()
    audit: bool = False
    noop: bool = False
    profile: bool = False


@dataclass(frozen=True)
class Shutdown:
    """Exit now."""


# ---------------------------------------------------------------------- candidate server -> driver


@dataclass(frozen=True)
class Hello:
    """The server is up (trusted code only so far); ``pid`` in its own PID namespace; ``filtered``: its
    seccomp filter is installed (``cuda_gym.judge.syscall_filter``; said before any submission code ran)."""

    pid: int
    device: str
    filtered: bool = False


@dataclass(frozen=True)
class Armed:
    """CPU: the call ``seq`` is decoded and its input views are made (its inputs are not there yet); the
    server spins on the arena's release word until it says ``seq``. A call that fails before it is armed is
    answered with a ``Reply`` instead."""

    seq: int


@dataclass(frozen=True)
class Loaded:
    """The answer to ``Load`` or ``Calibrate``: ``error`` empty when it worked (``stage`` says where)."""

    error: str = ""
    stage: str = ""
    violations: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Reply:
    """The answer to ``Call``: where the outputs are (on a GPU sent once the work is enqueued, before it
    ran). Untrusted: only the bytes that ``outputs`` points to are ever used. ``violations`` are advisory
    findings of in-process checks made while the call was enqueued (they can only hurt the candidate).
    """

    seq: int
    outputs: Value | None = None
    segments: tuple[Segment, ...] = ()
    error: str = ""
    violations: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Finished:
    """Sent after every ``Reply`` once the call's work is done (the server synchronized). Untrusted.

    ``error``: the work failed after it was enqueued (a CUDA fault surfaces here); ``event_ms`` the
    server's own CUDA-event time of the call (for the agent's information only); ``violations`` advisory
    findings made after the work (new Python threads); ``profile`` rows ``(name, calls, total_ms)`` when
    asked; ``marks`` the server's own monotonic clock (``time.perf_counter``) when it received the call,
    started and finished enqueuing it, and answered: diagnostics only, never used for a verdict.
    """

    seq: int
    error: str = ""
    event_ms: float = -1.0
    violations: tuple[tuple[str, str], ...] = ()
    profile: tuple[tuple[str, int, float], ...] = ()
    marks: tuple[float, ...] = ()


# ---------------------------------------------------------------------- orchestrator <-> driver


@dataclass(frozen=True)
class RunSettings:
    """How the driver runs an evaluation or a baseline timing (from ``JudgeConfig``).

    The driver draws every seed, the sample positions and the per-evaluation secrets itself.
    """

    correctness_trials: int
    warmup: int
    warmup_s: float
    timed_calls: int
    tolerances: dict[str, tuple[float, float]]
    sample_threshold_bytes: int
    spread_tol: float
    thread_allowance: int
    memory_bytes: int
    load_timeout_s: float
    call_timeout_s: float
    wall_s: float
    held_out: bool = False
    timed_window_s: float = 0.0
    """Past ``timed_calls``, time more calls until the windows add up to this (GPU; 0: never)."""
    max_timed_calls: int = 0
    """The most timed calls when ``timed_window_s`` extends a run (never fewer than ``timed_calls``)."""


@dataclass(frozen=True)
class Greet:
    """Orchestrator -> driver: who are you (answer: ``Greeting``)."""


@dataclass(frozen=True)
class Greeting:
    """The driver's hardware and software fingerprint."""

    fingerprint: dict[str, str]


@dataclass(frozen=True)
class Prepare:
    """Build the reference ``Model`` (kept while the same task is judged); write its state for a job."""

    code: str
    code_hash: str
    init_seed: int
    job_dir: str = ""


@dataclass(frozen=True)
class TaskFacts:
    """What the reference run of a task showed (sizes drive limits; FLOPs the speed-of-light floor)."""

    output_bytes: int
    integer_output: bool
    input_bytes: int
    dtype: str
    flops: int
    param_bytes: int
    call_ms: float


@dataclass(frozen=True)
class Evaluate:
    """Judge one submission: correctness calls, and for ``profile``/``full`` warm-up and timed calls."""

    code_hash: str
    job_dir: str
    kind: Literal["workspace", "single"]
    mode: Literal["verify", "profile", "full"]
    settings: RunSettings
    solution_path: str = ""
    workspace_root: str = ""
    module_path: str = ""
    inline_manifest: str = ""
    readonly: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrialFacts:
    """One checked call (a correctness call or a timed call)."""

    seed: int
    passed: bool
    max_abs_error: float
    max_rel_error: float
    message: str
    timed: bool
    held_out: bool = False


@dataclass(frozen=True)
class EvaluationReport:
    """Everything the driver observed about one submission.

    ``times_ms`` are the trusted times of the timed calls (protocol overhead subtracted); ``event_ms``
    the server's own CUDA-event times (untrusted, for information); ``violations`` pairs of rule and
    message, found by the driver or reported by the server (which can only hurt itself).
    """

    stage: str
    error: str = ""
    import_failed: bool = False
    trials: tuple[TrialFacts, ...] = ()
    times_ms: tuple[float, ...] = ()
    raw_ms: tuple[float, ...] = ()
    event_ms: tuple[float, ...] = ()
    overhead_ms: float = 0.0
    resolution_ms: float = 0.0
    violations: tuple[tuple[str, str], ...] = ()
    low_variance: str = ""
    profile: tuple[tuple[str, int, float], ...] = ()
    killed: bool = False
    sandbox: str = ""
    seconds: float = 0.0
    diagnostics: dict[str, float] = dataclasses.field(default_factory=dict)
    """Where the timed calls' time went (medians of the parts of the round trip, the driver's flush,
    new output segments): for investigating the measurement, never part of a verdict."""


@dataclass(frozen=True)
class TimeBaseline:
    """Time the reference eager (``reference``) or under ``torch.compile`` (``compile``) through the protocol."""

    code_hash: str
    kind: Literal["reference", "compile"]
    job_dir: str
    settings: RunSettings


@dataclass(frozen=True)
class BaselineReport:
    """Trusted times of a baseline (overhead subtracted), or why it could not run."""

    times_ms: tuple[float, ...] = ()
    raw_ms: tuple[float, ...] = ()
    event_ms: tuple[float, ...] = ()
    overhead_ms: float = 0.0
    resolution_ms: float = 0.0
    error: str = ""
    diagnostics: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class ProfileReference:
    """Per-kernel profile of eager PyTorch over ``calls`` calls (in the driver: trusted code)."""

    code_hash: str
    calls: int


@dataclass(frozen=True)
class ProfileReport:
    """Rows ``(name, calls, total_ms)``."""

    rows: tuple[tuple[str, int, float], ...]


@dataclass(frozen=True)
class Quit:
    """Orchestrator -> driver: exit."""


@dataclass(frozen=True)
class Done:
    """The driver's answer to ``Quit``."""


@dataclass(frozen=True)
class WorkerFailure:
    """The driver could not do what was asked (the reference program or the judge failed): a ``JudgeError``."""

    error: str
    traceback: str = ""
    fatal: bool = False


MESSAGES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        Calibrate,
        Load,
        Call,
        Shutdown,
        Hello,
        Armed,
        Loaded,
        Reply,
        Finished,
        Greet,
        Greeting,
        Prepare,
        TaskFacts,
        Evaluate,
        EvaluationReport,
        TimeBaseline,
        BaselineReport,
        ProfileReference,
        ProfileReport,
        Quit,
        Done,
        WorkerFailure,
    )
}
"""Every message type of the judge's processes, by its ``type`` name."""


# ---------------------------------------------------------------------- codec


def encode(msg: Any) -> bytes:
    """A message as JSON bytes: ``{"type": <class name>, **fields}``."""
    if type(msg).__name__ not in MESSAGES:
        raise ProtocolError(f"{type(msg).__name__} is not a protocol message")
    data = {"type": type(msg).__name__, **_to_plain(msg)}
    return json.dumps(data, separators=(",", ":"), allow_nan=True).encode()


MAX_DEPTH = 64
"""Deepest nesting of JSON containers a message may have (a task's outputs nest a few levels; a server's
packet of 20,000 ``[`` made ``json.loads`` raise ``RecursionError`` in the driver, red team 2 d1)."""


def decode(raw: bytes | str, expected: tuple[type, ...] | type | None = None) -> Any:
    """The message in ``raw``; ``ProtocolError`` unless it matches its schema (and ``expected``).

    Whatever the bytes, nothing else is raised: a candidate's server writes them, and an exception the
    driver did not expect would end an evaluation as the judge's failure instead of the candidate's."""
    try:
        return _decode(raw, expected)
    except ProtocolError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure on foreign bytes is a malformed message
        raise ProtocolError(f"a malformed message: {type(exc).__name__}: {str(exc)[:200]}") from None


def _nesting(data: Any) -> int:
    """The deepest nesting of JSON arrays and objects in parsed ``data`` (1 for a flat object), walked without
    recursion; it stops once past ``MAX_DEPTH``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            break
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _decode(raw: bytes | str, expected: tuple[type, ...] | type | None) -> Any:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"not a JSON message: {exc}") from None
    brackets = raw.count(b"[") + raw.count(b"{") if isinstance(raw, bytes) else raw.count("[") + raw.count("{")
    if brackets > MAX_DEPTH and _nesting(data) > MAX_DEPTH:  # the count first: most messages have fewer
        raise ProtocolError(f"a message may nest at most {MAX_DEPTH} levels of JSON arrays and objects")
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise ProtocolError("a message must be a JSON object with a string 'type'")
    name = data.pop("type")
    cls = MESSAGES.get(name)
    if cls is None:
        raise ProtocolError(f"unknown message type {name!r}")
    if expected is not None:
        allowed = expected if isinstance(expected, tuple) else (expected,)
        if cls not in allowed:
            raise ProtocolError(f"expected {' or '.join(c.__name__ for c in allowed)}, got {name}")
    return from_plain(cls, data, name)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _to_plain(obj: Any) -> Any:
    kind = type(obj)
    if kind in (str, int, float, bool) or obj is None:
        return obj
    if kind in (tuple, list):
        return [_to_plain(v) for v in obj]
    if kind is dict:
        return {str(k): _to_plain(v) for k, v in obj.items()}
    names = _FIELD_NAMES.get(kind)
    if names is None and dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        names = _FIELD_NAMES[kind] = tuple(f.name for f in dataclasses.fields(obj))
    if names is not None:
        return {name: _to_plain(getattr(obj, name)) for name in names}
    if isinstance(obj, (tuple, list)):
        return [_to_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): _to_plain(v) for k, v in obj.items()}
    return obj


class _Invalid(Exception):
    """A value that does not match its schema; ``path`` collects the keys and indices (innermost first)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text
        self.path: list[str] = []


Checker = Callable[[Any], Any]
_CHECKERS: dict[Any, Checker] = {}
"""One compiled checker per schema type: a message's types are walked once per process, not per message
(decoding sits inside the CPU judge's timed round trips)."""


def from_plain(cls: type, data: Any, where: str) -> Any:
    """Build dataclass ``cls`` from decoded JSON, checking every key and value type."""
    try:
        return _checker(cls)(data)
    except _Invalid as exc:
        raise ProtocolError(f"{where}{''.join(reversed(exc.path))}: {exc.text}") from None


def _checker(hint: Any) -> Checker:
    check = _CHECKERS.get(hint)
    if check is None:
        check = _CHECKERS[hint] = _compile(hint)
    return check


def _compile(hint: Any) -> Checker:
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return lambda value: value
    if origin in (Union, types.UnionType):
        return _union([_checker(a) for a in args], hint)
    if origin is Literal:
        return _literal(args)
    if hint is type(None):
        return _none
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _homogeneous(_checker(args[0]))
        return _fixed([_checker(a) for a in args])
    if origin is dict:
        return _mapping(_checker(args[1]))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _record(hint)
    if hint is float:
        return _number
    if hint is int:
        return _integer
    if hint in (str, bool):
        return _exact(hint)
    raise _Invalid(f"unsupported schema type {hint}")


def _union(options: list[Checker], hint: Any) -> Checker:
    def check(value: Any) -> Any:
        for option in options:
            try:
                return option(value)
            except _Invalid:
                continue
        raise _Invalid(f"{value!r:.80} matches none of {hint}")

    return check


def _literal(allowed: tuple[Any, ...]) -> Checker:
    def check(value: Any) -> Any:
        if value not in allowed:
            raise _Invalid(f"{value!r:.80} is not one of {allowed}")
        return value

    return check


def _none(value: Any) -> None:
    if value is not None:
        raise _Invalid("expected null")
    return None


def _items(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _Invalid(f"expected a list, got {type(value).__name__}")
    return value


def _homogeneous(item: Checker) -> Checker:
    def check(value: Any) -> tuple[Any, ...]:
        out = []
        for i, v in enumerate(_items(value)):
            try:
                out.append(item(v))
            except _Invalid as exc:
                exc.path.append(f"[{i}]")
                raise
        return tuple(out)

    return check


def _fixed(items: list[Checker]) -> Checker:
    def check(value: Any) -> tuple[Any, ...]:
        if len(_items(value)) != len(items):
            raise _Invalid(f"expected {len(items)} items, got {len(value)}")
        out = []
        for i, (item, v) in enumerate(zip(items, value)):
            try:
                out.append(item(v))
            except _Invalid as exc:
                exc.path.append(f"[{i}]")
                raise
        return tuple(out)

    return check


def _mapping(item: Checker) -> Checker:
    def check(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise _Invalid("expected an object")
        out = {}
        for k, v in value.items():
            try:
                out[str(k)] = item(v)
            except _Invalid as exc:
                exc.path.append(f"[{k}]")
                raise
        return out

    return check


def _record(cls: type) -> Checker:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    required = frozenset(
        n for n, f in fields.items() if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    checks: dict[str, Checker] = {}

    def check(value: Any) -> Any:
        if not isinstance(value, dict):
            raise _Invalid(f"expected an object for {cls.__name__}, got {type(value).__name__}")
        if not checks:  # resolved on first use: a schema may refer to classes defined after it
            checks.update({name: _checker(hint) for name, hint in get_type_hints(cls).items() if name in fields})
        unknown = [k for k in value if k not in checks]
        if unknown:
            raise _Invalid(f"unknown key(s) {sorted(unknown)} for {cls.__name__}")
        if not required.issubset(value):
            raise _Invalid(f"missing key(s) {sorted(required - set(value))} for {cls.__name__}")
        out = {}
        for k, v in value.items():
            try:
                out[k] = checks[k](v)
            except _Invalid as exc:
                exc.path.append(f".{k}")
                raise
        return cls(**out)

    return check


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Invalid(f"expected a number, got {type(value).__name__}")
    return float(value)


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(f"expected an integer, got {type(value).__name__}")
    return value


def _exact(kind: type) -> Checker:
    def check(value: Any) -> Any:
        if type(value) is not kind:
            raise _Invalid(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return check

"""The judge's settings: one dataclass shared by the Python API, ``gym.make`` kwargs and the CLI."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_gym.errors import JudgeError
from cuda_gym.vocab import check_device, indexed_device

DEFAULT_TOLERANCE = 1e-2
"""atol = rtol for every float dtype unless configured (the CUDA Agent paper's setting)."""

SAMPLE_THRESHOLD_BYTES = 64 * 2**20
"""Default of ``JudgeConfig.sample_threshold_bytes``: output tensors larger than this are compared on a
random sample of elements (see ``cuda_gym.judge.harness.sample_large``)."""

TIMING_METHOD = "trusted-stream/13"
"""Version of the timing method (GPU: the driver's CUDA events around the release and the done word,
``transport.StreamFlags``, the window behind its gate; CPU: the driver's round trip from before it
continues the server, stopped while the inputs were copied, with the armed call released by the arena's word;
``cuda_gym.judge.driver``): baseline cache entries and cached judgements measured with another method
are measured again."""

JUDGE_VERSION = "2026-12-05e"
"""Version of everything else a verdict rests on (the static rules, the driver's checks and bounds): bumped
by every change that can turn a verdict, so that judgements cached by an earlier judge (a hack it let
through) are judged again. Part of each cached judgement's key."""

PEAKS: dict[str, dict[str, float]] = {
    # Dense peaks used by the speed-of-light floor. Tensor-core peaks are used for every float dtype so
    # that the floor stays a lower bound even for candidates that legitimately use TF32/bf16 GEMMs.
    "H200": {"bandwidth_tbs": 4.8, "fp32_tflops": 67.0, "tf32_tflops": 495.0, "bf16_tflops": 990.0},
    "H100": {"bandwidth_tbs": 3.35, "fp32_tflops": 67.0, "tf32_tflops": 495.0, "bf16_tflops": 990.0},
}
"""Peak memory bandwidth (TB/s) and dense throughput (TFLOP/s) per GPU model, matched by substring
of ``torch.cuda.get_device_name()``. Unknown GPUs and the CPU skip the speed-of-light check."""


@dataclass
class JudgeConfig:
    """How the judge verifies and times a submission. Defaults are the values that work on an H200."""

    device: str = "cuda:0"
    """Where candidate and reference run: ``cuda:N`` or ``cpu``."""

    correctness_trials: int = 5
    """Correctness checks, each on fresh random inputs (a fresh 63-bit seed per trial)."""

    atol: dict[str, float] = field(default_factory=dict)
    """Absolute tolerance per float dtype name (``float32``, ``float16``, ``bfloat16``, ``float64``);
    missing dtypes use ``DEFAULT_TOLERANCE``. Integer and bool outputs are compared exactly."""

    rtol: dict[str, float] = field(default_factory=dict)
    """Relative tolerance per float dtype name; missing dtypes use ``DEFAULT_TOLERANCE``."""

    warmup: int = 5
    """Untimed warm-up calls before the timed calls (fresh inputs each)."""

    warmup_ms: float = 250.0
    """On a GPU, warm-up goes on (repeating the last warm-up call) until this much wall time has
    passed: an idle GPU's clocks ramp up under load (an H200 idles at 345 MHz), and a timing run
    that starts before they settle is slower by up to about 10% in a fresh process."""

    timed_calls: int | None = None
    """Timed calls, each on fresh inputs; ``None`` means 50 on a GPU and 10 on the CPU."""

    timed_window_s: float | None = None
    """A timing run goes on past ``timed_calls`` until its timed windows add up to this many seconds (at
    most ``max_timed_calls`` calls). ``None``: 0.3 s on a GPU when ``timed_calls`` is left at its default,
    else 0: a GPU call's window also holds the GPU's switches between the driver's context and the
    server's, which vary from call to call, so a short call needs hundreds of timed calls for its median to
    settle; the CPU's clock needs none."""

    max_timed_calls: int = 1000
    """The most timed calls of one timing run extended by ``timed_window_s``."""

    checked_timed_calls: int = 3
    """Kept for old configs (validated, otherwise unused): every timed call's output is checked now."""

    sample_threshold_bytes: int = SAMPLE_THRESHOLD_BYTES
    """Output tensors larger than this are compared on a secret random sample of about 4 million
    elements instead of whole (KernelBench level-1 outputs reach 6 GiB; whole copies fill the disk)."""

    profile_calls: int = 3
    """Calls run under ``torch.profiler`` in ``profile`` mode (after timing, never timed)."""

    spread_tol: float = 0.05
    """Scale-aware check: a float output's RMS error may be at most this share of the reference
    output's own spread (``compare.compare_outputs``); zeros or constants fail it where the elementwise
    tolerance dwarfs the outputs. 0 disables it."""

    noise_iqr: float = 0.25
    """A timing whose interquartile range exceeds this share of its median is noisy: a noisy baseline is
    measured once more and, if still noisy, not cached; a verdict resting on a noisy timing says so in
    ``JudgeResult.noise`` and is not cached. 0 disables the check."""

    call_timeout_s: float = 10.0
    """Time bound of one call on top of 100x the reference's own call time (a program's first call gets
    20 s more): a hanging kernel ends in a verdict within about a minute."""

    timeout_s: float = 120.0
    """Wall-time limit for starting the candidate server and loading the submission (import, init)."""

    timing_budget_s: float = 120.0
    """Extra wall time granted to the candidate run when it is timed (``profile``/``full``)."""

    reference_timeout_s: float = 900.0
    """Limit of one request to the reference worker (includes ``torch.compile`` of the baseline)."""

    max_speedup: float = 50.0
    """A speedup over eager above this is a ``suspect-speedup`` violation (0 disables)."""

    sol_factor: float = 0.5
    """A candidate median below this fraction of the speed-of-light floor is ``suspect-speedup``
    (0 disables). The floor is max(FLOPs / peak, (input + output bytes) / bandwidth)."""

    peaks: dict[str, dict[str, float]] | None = None
    """Override of ``PEAKS`` (same shape); an empty dict disables the speed-of-light check."""

    thread_allowance: int | None = None
    """OS threads a candidate may add (OpenMP pools); ``None``: the CPU count on ``cpu``, 2 on CUDA.
    Any new Python thread is always a ``thread`` violation."""

    memory_bytes: int | None = 32 * 2**30
    """Host memory limit of the candidate process (RLIMIT_AS on the CPU, RLIMIT_DATA on GPUs)."""

    output_limit: int = 4000
    """Characters of crash output or compile log kept in a result."""

    init_seed: int = 42
    """Seed under which both ``Model`` and ``ModelNew`` are constructed."""

    held_out_shapes: bool = False
    """Also check correctness on held-out input shapes: the task's module-level integer sizes that only
    ``get_inputs`` uses (batch, length...) are scaled to 3/4 (``cuda_gym.judge.held_out``) and two more
    checked calls run on them. Off for training (it costs two calls), on for evaluation: it catches
    kernels that hard-code the task's shapes."""

    static_rules: bool = True
    """Run the static rules (``cuda_gym.judge.rules``) as part of the verdict. ``False`` only to test the
    runtime defences alone (the adversarial suite does); the verdict then rests on what the trusted
    driver observes."""

    compile_baseline: bool = True
    """Time ``torch.compile(model)`` as the second baseline (``False``: compile timing is ``None``)."""

    use_cache: bool = True
    """Read and write reference timings in the on-disk baseline cache."""

    cache_judgements: bool = True
    """Reuse the verdict of an identical earlier submission (same task, sources, device, config, mode)."""

    cache_dir: Path | None = None
    """Root of the judge's caches; ``None`` means ``cuda_gym.paths.cache_dir()``."""

    work_dir: Path | None = None
    """Where per-evaluation job directories are made; ``None`` means the system temp directory."""

    build: Any = None
    """A ``cuda_gym.build.BuildConfig`` for workspace builds; ``None`` uses its defaults."""

    keep_jobs: bool = False
    """Keep job directories after evaluation (for debugging)."""

    warm_servers: int = 0
    """Candidate servers the reference worker keeps started ahead (sandbox entered, torch imported, device
    context made), each used for one submission and discarded: a job starts on a warm process. 0 starts
    a fresh server per evaluation; ``cuda_gym.executors.LocalGPUPool`` sets it per lane. Never part of
    a verdict."""

    def __post_init__(self) -> None:
        self.device = indexed_device(check_device(self.device))
        if self.correctness_trials < 1:
            raise JudgeError("correctness_trials must be at least 1: a verdict needs one checked output")
        for name in ("warmup", "warmup_ms", "checked_timed_calls", "profile_calls", "warm_servers"):
            if getattr(self, name) < 0:
                raise JudgeError(f"{name} must be >= 0")
        if (self.timed_window_s or 0.0) < 0 or self.max_timed_calls < 1:
            raise JudgeError("timed_window_s must be >= 0 and max_timed_calls >= 1")
        if self.timed_calls is not None and self.timed_calls < 1:
            raise JudgeError("timed_calls must be >= 1 (or None for the device default)")
        for name in ("cache_dir", "work_dir"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                setattr(self, name, Path(value).expanduser())

    @property
    def is_cuda(self) -> bool:
        """Whether the device is a GPU."""
        return self.device.startswith("cuda")

    @property
    def warmup_s(self) -> float:
        """The minimum warm-up duration in seconds (0 on the CPU, whose clocks need none here)."""
        return self.warmup_ms / 1000.0 if self.is_cuda else 0.0

    @property
    def n_timed(self) -> int:
        """Timed calls per timing run (the device default when ``timed_calls`` is ``None``)."""
        if self.timed_calls is not None:
            return self.timed_calls
        return 50 if self.is_cuda else 10

    @property
    def window_s(self) -> float:
        """Seconds of timed windows a timing run reaches past ``n_timed`` (``timed_window_s`` resolved)."""
        if self.timed_window_s is not None:
            return self.timed_window_s
        return 0.3 if self.is_cuda and self.timed_calls is None else 0.0

    def tolerance(self, dtype_name: str) -> tuple[float, float]:
        """``(atol, rtol)`` for a float dtype name such as ``float32``."""
        return (self.atol.get(dtype_name, DEFAULT_TOLERANCE), self.rtol.get(dtype_name, DEFAULT_TOLERANCE))

    def tolerances(self) -> dict[str, tuple[float, float]]:
        """Tolerances of every float dtype, as sent to the reference worker."""
        names: tuple[str, ...] = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")
        names += tuple(k for k in {**self.atol, **self.rtol} if k not in names)
        return {name: self.tolerance(name) for name in names}

    def peak_table(self) -> dict[str, dict[str, float]]:
        """The peak table in use (``peaks`` or ``PEAKS``)."""
        return PEAKS if self.peaks is None else self.peaks

    def fingerprint(self) -> str:
        """A stable JSON of the settings that change a verdict (part of the judgement cache key)."""
        skip = {"use_cache", "cache_judgements", "cache_dir", "work_dir", "keep_jobs", "build", "warm_servers"}
        data = {k: v for k, v in dataclasses.asdict(self).items() if k not in skip}
        data["build"] = repr(self.build)
        data["timing_method"] = TIMING_METHOD
        data["judge_version"] = JUDGE_VERSION
        return json.dumps(data, sort_keys=True, default=str)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | JudgeConfig | None) -> JudgeConfig:
        """A config from a dict of field values (unknown keys raise ``JudgeError`` naming the fields)."""
        if data is None:
            return cls()
        if isinstance(data, JudgeConfig):
            return data
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise JudgeError(f"unknown JudgeConfig field(s) {unknown}; valid fields: {sorted(names)}")
        return cls(**data)

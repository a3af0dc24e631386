"""Task synthesis: stack 1-5 torch operators into KernelBench-style task files, keep those that validate.

The rule-based composer draws operators from ``CATALOGUE``, a table of torch operators with shape
rules (which tensor layouts an operator accepts and what it returns), so every composed program
is well-formed by construction; the optional LLM composer asks a model behind an
OpenAI-compatible endpoint to write the fused task for the same drawn operators. Either way every
candidate goes through ``cuda_gym.tasks.validate`` and only the passing ones are written.
Everything is seeded: candidate ``i`` of seed ``s`` is the same program on every machine.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cuda_gym.errors import ConfigError, TaskError
from cuda_gym.tasks.task import Task, check_code
from cuda_gym.vocab import Size, check_size

logger = logging.getLogger(__name__)

Layout = Literal["image", "seq", "chan", "flat"]
"""Tensor layouts of the shape rules: ``image`` (N, C, H, W), ``seq`` (N, L, C), ``chan`` (N, C, L), ``flat`` (N, F)."""

ALL: tuple[Layout, ...] = ("image", "seq", "chan", "flat")


@dataclass(frozen=True)
class Shape:
    """The layout and sizes of the tensor flowing between operators."""

    layout: Layout
    dims: tuple[int, ...]

    @property
    def channels(self) -> int:
        """The feature/channel size: C of image and chan, C of seq, F of flat."""
        return self.dims[-1] if self.layout in ("seq", "flat") else self.dims[1]

    def with_channels(self, c: int) -> Shape:
        d = list(self.dims)
        d[-1 if self.layout in ("seq", "flat") else 1] = c
        return Shape(self.layout, tuple(d))

    @property
    def numel(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    def bias_shape(self) -> tuple[int, ...]:
        """The shape of a per-channel parameter that broadcasts against this tensor."""
        return {"image": (self.channels, 1, 1), "chan": (self.channels, 1)}.get(self.layout, (self.channels,))


@dataclass
class Step:
    """One operator as it appears in the program.

    ``args`` are (name, value) constructor arguments: each becomes a module-level constant, a
    parameter of ``Model.__init__`` and an entry of ``get_init_inputs``. ``init`` lines go into
    ``__init__``, ``forward`` is the expression computing the new ``x``.
    """

    op: str
    args: list[tuple[str, Any]]
    init: list[str]
    forward: str
    out: Shape


Maker = Callable[[random.Random, Shape, str], "Step | None"]


@dataclass(frozen=True)
class Op:
    """A catalogue entry: a torch operator, the layouts it accepts, and how to instantiate it."""

    name: str
    layouts: tuple[Layout, ...]
    make: Maker


def _pick(rng: random.Random, values: Sequence[int], limit: int | None = None) -> int:
    ok = [v for v in values if limit is None or v <= limit]
    return rng.choice(ok or [min(values)])


def _unary(name: str, expr: str) -> Op:
    return Op(name, ALL, lambda rng, s, p: Step(name, [], [], expr, s))


def _param(name: str, value_expr: str, expr: str, values: Sequence[float]) -> Op:
    """An elementwise op with one scalar constructor argument."""

    def make(rng: random.Random, s: Shape, p: str) -> Step:
        arg = f"{p}_{value_expr}"
        return Step(name, [(arg, rng.choice(values))], [f"self.{arg} = {arg}"], expr.format(a=f"self.{arg}"), s)

    return Op(name, ALL, make)


def _bias(rng: random.Random, s: Shape, p: str) -> Step:
    arg = f"{p}_shape"
    return Step("nn.Parameter", [(arg, s.bias_shape())], [f"self.{p}_bias = nn.Parameter(torch.randn({arg}))"],
                f"x + self.{p}_bias", s)


def _clamp(rng: random.Random, s: Shape, p: str) -> Step:
    lo = rng.choice([-1.0, -0.5, 0.0])
    return Step("torch.clamp", [(f"{p}_min", lo), (f"{p}_max", lo + rng.choice([0.5, 1.0, 2.0]))],
                [f"self.{p}_min = {p}_min", f"self.{p}_max = {p}_max"],
                f"torch.clamp(x, min=self.{p}_min, max=self.{p}_max)", s)


def _conv2d(rng: random.Random, s: Shape, p: str) -> Step:
    c_out = _pick(rng, (8, 16, 32, 64, 128), limit=max(8, 4 * s.channels))
    k = rng.choice((1, 3))
    return Step("nn.Conv2d", [(f"{p}_in", s.channels), (f"{p}_out", c_out), (f"{p}_kernel", k)],
                [f"self.{p} = nn.Conv2d({p}_in, {p}_out, {p}_kernel, padding={p}_kernel // 2)"],
                f"self.{p}(x)", s.with_channels(c_out))


def _conv_transpose2d(rng: random.Random, s: Shape, p: str) -> Step | None:
    n, c, h, w = s.dims
    if s.numel * 4 > 1 << 26:
        return None
    c_out = _pick(rng, (8, 16, 32), limit=max(8, c))
    return Step("nn.ConvTranspose2d", [(f"{p}_in", c), (f"{p}_out", c_out)],
                [f"self.{p} = nn.ConvTranspose2d({p}_in, {p}_out, 2, stride=2)"],
                f"self.{p}(x)", Shape("image", (n, c_out, 2 * h, 2 * w)))


def _norm(name: str, layer: str) -> Maker:
    def make(rng: random.Random, s: Shape, p: str) -> Step:
        return Step(name, [(f"{p}_features", s.channels)], [f"self.{p} = nn.{layer}({p}_features)"],
                    f"self.{p}(x)", s)

    return make


def _groupnorm(rng: random.Random, s: Shape, p: str) -> Step | None:
    groups = [g for g in (2, 4, 8) if s.channels % g == 0 and g < s.channels]
    if not groups:
        return None
    return Step("nn.GroupNorm", [(f"{p}_groups", rng.choice(groups)), (f"{p}_channels", s.channels)],
                [f"self.{p} = nn.GroupNorm({p}_groups, {p}_channels)"], f"self.{p}(x)", s)


def _pool(name: str, expr: str) -> Maker:
    def make(rng: random.Random, s: Shape, p: str) -> Step | None:
        if s.layout == "image":
            n, c, h, w = s.dims
            if h < 4 or w < 4:
                return None
            return Step(name, [], [], expr.format(d="2d"), Shape("image", (n, c, h // 2, w // 2)))
        n, c, length = s.dims
        if length < 4:
            return None
        return Step(name, [], [], expr.format(d="1d"), Shape("chan", (n, c, length // 2)))

    return make


def _global_mean(rng: random.Random, s: Shape, p: str) -> Step:
    if s.layout == "image":
        return Step("torch.mean", [], [], "torch.mean(x, dim=(2, 3))", Shape("flat", s.dims[:2]))
    if s.layout == "chan":
        return Step("torch.mean", [], [], "torch.mean(x, dim=2)", Shape("flat", s.dims[:2]))
    return Step("torch.mean", [], [], "torch.mean(x, dim=1)", Shape("flat", (s.dims[0], s.dims[2])))


def _flatten(rng: random.Random, s: Shape, p: str) -> Step | None:
    features = s.numel // s.dims[0]
    if features > 1 << 16:
        return None
    return Step("torch.flatten", [], [], "torch.flatten(x, 1)", Shape("flat", (s.dims[0], features)))


def _linear(rng: random.Random, s: Shape, p: str) -> Step:
    out = _pick(rng, (32, 64, 128, 256, 512, 1024, 2048), limit=max(32, 4 * s.channels))
    return Step("nn.Linear", [(f"{p}_in", s.channels), (f"{p}_out", out)],
                [f"self.{p} = nn.Linear({p}_in, {p}_out)"], f"self.{p}(x)", s.with_channels(out))


def _conv1d(rng: random.Random, s: Shape, p: str) -> Step:
    c_out = _pick(rng, (8, 16, 32, 64, 128), limit=max(8, 4 * s.channels))
    k = rng.choice((1, 3, 5))
    return Step("nn.Conv1d", [(f"{p}_in", s.channels), (f"{p}_out", c_out), (f"{p}_kernel", k)],
                [f"self.{p} = nn.Conv1d({p}_in, {p}_out, {p}_kernel, padding={p}_kernel // 2)"],
                f"self.{p}(x)", s.with_channels(c_out))


def _transpose(rng: random.Random, s: Shape, p: str) -> Step:
    n, a, b = s.dims
    return Step("torch.transpose", [], [], "x.transpose(1, 2)", Shape("chan" if s.layout == "seq" else "seq", (n, b, a)))


def _last_dim(name: str, expr: str) -> Op:
    def make(rng: random.Random, s: Shape, p: str) -> Step:
        return Step(name, [], [], expr, s)

    return Op(name, ("seq", "flat"), make)


def _logsumexp(rng: random.Random, s: Shape, p: str) -> Step:
    return Step("torch.logsumexp", [], [], "torch.logsumexp(x, dim=-1, keepdim=True)", Shape(s.layout, (*s.dims[:-1], 1)))


CATALOGUE: tuple[Op, ...] = (
    _unary("torch.relu", "torch.relu(x)"),
    _unary("F.gelu", "F.gelu(x)"),
    _unary("F.silu", "F.silu(x)"),
    _unary("torch.tanh", "torch.tanh(x)"),
    _unary("torch.sigmoid", "torch.sigmoid(x)"),
    _unary("F.softplus", "F.softplus(x)"),
    _unary("F.hardswish", "F.hardswish(x)"),
    _unary("F.mish", "F.mish(x)"),
    _unary("F.elu", "F.elu(x)"),
    _param("F.leaky_relu", "slope", "F.leaky_relu(x, {a})", (0.01, 0.1, 0.2)),
    _param("mul", "scale", "x * {a}", (0.5, 2.0, 3.0)),
    Op("nn.Parameter", ALL, _bias),
    Op("torch.clamp", ALL, _clamp),
    Op("nn.Conv2d", ("image",), _conv2d),
    Op("nn.ConvTranspose2d", ("image",), _conv_transpose2d),
    Op("nn.BatchNorm2d", ("image",), _norm("nn.BatchNorm2d", "BatchNorm2d")),
    Op("nn.InstanceNorm2d", ("image",), _norm("nn.InstanceNorm2d", "InstanceNorm2d")),
    Op("nn.GroupNorm", ("image", "chan"), _groupnorm),
    Op("F.max_pool", ("image", "chan"), _pool("F.max_pool", "F.max_pool{d}(x, 2)")),
    Op("F.avg_pool", ("image", "chan"), _pool("F.avg_pool", "F.avg_pool{d}(x, 2)")),
    Op("torch.mean", ("image", "seq", "chan"), _global_mean),
    Op("torch.flatten", ("image", "chan"), _flatten),
    Op("F.softmax", ("image",), lambda rng, s, p: Step("F.softmax", [], [], "F.softmax(x, dim=1)", s)),
    Op("nn.Conv1d", ("chan",), _conv1d),
    Op("nn.BatchNorm1d", ("chan", "flat"), _norm("nn.BatchNorm1d", "BatchNorm1d")),
    Op("torch.transpose", ("seq", "chan"), _transpose),
    Op("nn.Linear", ("seq", "flat"), _linear),
    Op("nn.LayerNorm", ("seq", "flat"), _norm("nn.LayerNorm", "LayerNorm")),
    _last_dim("F.softmax", "F.softmax(x, dim=-1)"),
    _last_dim("F.log_softmax", "F.log_softmax(x, dim=-1)"),
    _last_dim("F.normalize", "F.normalize(x, dim=-1)"),
    _last_dim("torch.cumsum", "torch.cumsum(x, dim=-1)"),
    Op("torch.logsumexp", ("seq", "flat"), _logsumexp),
)
"""Every operator the rule-based composer stacks, with the layouts it accepts."""

_INPUT_NAMES: dict[Layout, tuple[str, ...]] = {
    "image": ("batch_size", "channels", "height", "width"),
    "seq": ("batch_size", "seq_len", "features"),
    "chan": ("batch_size", "channels", "length"),
    "flat": ("batch_size", "features"),
}
_SIZES: dict[str, dict[str, tuple[int, ...]]] = {
    "small": {"batch_size": (2, 4), "channels": (4, 8), "height": (8, 16), "width": (8, 16),
              "seq_len": (8, 16), "features": (16, 32), "length": (16, 32)},
    "default": {"batch_size": (16, 32, 64, 128), "channels": (16, 32, 64), "height": (64, 128, 256),
                "width": (64, 128, 256), "seq_len": (256, 512, 1024), "features": (256, 512, 1024, 4096),
                "length": (1024, 4096, 16384)},
}
"""Input sizes drawn per size name: ``small`` runs in milliseconds on a CPU, ``default`` is GPU-sized."""


@dataclass(frozen=True)
class Candidate:
    """A composed task program before validation."""

    name: str
    code: str
    ops: tuple[str, ...]
    composer: str

    def task(self) -> Task:
        """As a ``custom`` task (the id it will have once written and loaded from its folder)."""
        return Task(f"custom/{self.name}", "custom", 1 if len(self.ops) == 1 else 2, self.name, self.code,
                    {"ops": list(self.ops), "composer": self.composer})


def _render(steps: Sequence[Step], inputs: dict[str, int], layout: Layout, seed: str) -> str:
    args = [(name, value) for step in steps for name, value in step.args]
    params = ", ".join(["self"] + [name for name, _ in args])
    init = ["        super().__init__()"] + [f"        {line}" for step in steps for line in step.init]
    forward = [f"        x = {step.forward}" for step in steps]
    names = " -> ".join(step.op for step in steps)
    constants = [f"{k} = {v!r}" for k, v in inputs.items()] + [f"{k} = {v!r}" for k, v in args]
    return "\n".join([
        "import torch",
        "import torch.nn as nn",
        "import torch.nn.functional as F",
        "",
        "",
        "class Model(nn.Module):",
        f'    """{names} (composed by cuda_gym.tasks.synthesize, {seed})."""',
        "",
        f"    def __init__({params}):",
        *init,
        "",
        "    def forward(self, x):",
        *forward,
        "        return x",
        "",
        "",
        *constants,
        "",
        "",
        "def get_inputs():",
        f"    return [torch.randn({', '.join(_INPUT_NAMES[layout])})]",
        "",
        "",
        "def get_init_inputs():",
        f"    return [{', '.join(name for name, _ in args)}]",
        "",
    ])


class RuleComposer:
    """Stacks ``min_ops``..``max_ops`` catalogue operators whose shape rules chain, from a seed.

    ``candidate(i)`` depends only on (``seed``, ``i``, ``size``, the op counts): reproducible.
    """

    name = "rules"

    def __init__(self, seed: int = 0, size: Size = "default", min_ops: int = 1, max_ops: int = 5,
                 catalogue: Sequence[Op] = CATALOGUE) -> None:
        if not 1 <= min_ops <= max_ops:
            raise ConfigError(f"need 1 <= min_ops <= max_ops, got {min_ops} and {max_ops}")
        self.seed, self.size = seed, check_size(size)
        self.min_ops, self.max_ops = min_ops, max_ops
        self.catalogue = tuple(catalogue)

    def draw(self, index: int) -> tuple[list[Step], dict[str, int], Layout]:
        """The operator steps, input sizes and input layout of candidate ``index``."""
        rng = random.Random(f"cuda_gym.synthesize:{self.seed}:{index}")
        layout: Layout = rng.choice([lay for lay in ALL if any(lay in op.layouts for op in self.catalogue)])
        inputs = {name: rng.choice(_SIZES[self.size][name]) for name in _INPUT_NAMES[layout]}
        shape = Shape(layout, tuple(inputs.values()))
        steps: list[Step] = []
        want = rng.randint(self.min_ops, self.max_ops)
        for _ in range(8 * want):
            if len(steps) == want:
                break
            last = steps[-1].op if steps else ""
            fits = [op for op in self.catalogue if shape.layout in op.layouts and op.name != last]
            if not fits:
                break
            step = rng.choice(fits).make(rng, shape, f"op{len(steps)}")
            if step is None or step.out.numel == 0:
                continue
            steps.append(step)
            shape = step.out
        return steps, inputs, layout

    def candidate(self, index: int) -> Candidate:
        """Candidate ``index`` as a program."""
        steps, inputs, layout = self.draw(index)
        ops = tuple(s.op for s in steps)
        short = "_".join(re.sub(r"^(nn|F|torch)\.", "", op).lower() for op in ops)[:60]
        code = _render(steps, inputs, layout, f"seed {self.seed}, candidate {index}")
        return Candidate(f"synth_s{self.seed}_{index:05d}_{short}", code, ops, self.name)


_CODE_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


def extract_code(text: str) -> str:
    """The Python program in a model's reply: the longest fenced code block, else the whole text."""
    blocks = _CODE_BLOCK.findall(text or "")
    return (max(blocks, key=len) if blocks else text or "").strip() + "\n"


PROMPT = """Write one PyTorch reference program in the KernelBench format that fuses these operators, \
applied one after the other in this order: {ops}.

The program must define:
- class Model(nn.Module) with __init__ taking the constructor arguments and forward(self, x) applying the operators;
- module-level size constants (batch_size, ...) and no other global state;
- get_inputs() returning a list of input tensors made with torch.randn from those constants;
- get_init_inputs() returning the list of constructor arguments.
Use sizes such that one forward call on an H200 GPU takes between 1 and 100 ms. No randomness in
forward, no data-dependent output shapes. Reply with the program only, in one ```python block."""


class LLMComposer:
    """Asks a model behind an OpenAI-compatible endpoint to write the fused task for operators the
    rule composer drew (same seed, same operator lists). Needs the ``openai`` package (agents extra)."""

    name = "llm"

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, seed: int = 0,
                 size: Size = "default", min_ops: int = 1, max_ops: int = 5, temperature: float = 0.0,
                 timeout_s: float = 120.0) -> None:
        try:
            import openai
        except ImportError:
            raise ConfigError("the LLM composer needs the openai package: pip install 'cuda-gym[agents]'") from None
        self.rules = RuleComposer(seed, size, min_ops, max_ops)
        self.model, self.temperature = model, temperature
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY") or "none",
                                    timeout=timeout_s, max_retries=2)

    def candidate(self, index: int) -> Candidate:
        """Candidate ``index``: the model's program for the operators of the rule composer's candidate."""
        ops = tuple(s.op for s in self.rules.draw(index)[0])
        reply = self.client.chat.completions.create(
            model=self.model, temperature=self.temperature, seed=self.rules.seed * 1_000_003 + index,
            messages=[{"role": "user", "content": PROMPT.format(ops=", ".join(ops))}])
        code = extract_code(reply.choices[0].message.content or "")
        short = "_".join(re.sub(r"^(nn|F|torch)\.", "", op).lower() for op in ops)[:60]
        return Candidate(f"llm_s{self.rules.seed}_{index:05d}_{short}", code, ops, self.name)


Composer = RuleComposer | LLMComposer


@dataclass
class SynthesisResult:
    """What ``synthesize`` wrote and what it rejected."""

    written: list[Path] = field(default_factory=list)
    rejected: dict[str, list[str]] = field(default_factory=dict)
    """Candidate name -> the rules it failed (``["code"]`` when it was no valid task file)."""
    candidates: int = 0


def synthesize(
    composer: Composer,
    out_dir: str | os.PathLike[str],
    count: int,
    validation: Any = None,
    *,
    max_candidates: int | None = None,
    progress: bool = False,
) -> SynthesisResult:
    """Compose candidates until ``count`` pass validation (or ``max_candidates``, default 10 x count, are
    tried); write each passing one to ``out_dir/<name>.py``.

    ``validation`` is a ``ValidationConfig`` (its defaults if ``None``). Every candidate's record goes to
    ``out_dir/validation.jsonl`` and every written task to ``out_dir/manifest.jsonl`` (name, ops,
    composer). A second call with the same arguments resumes: files already there are kept and
    counted, validated candidates are not validated again.
    """
    from cuda_gym.tasks.validate import ValidationConfig, validate_tasks

    config = validation or ValidationConfig()
    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    result = SynthesisResult()
    limit = max_candidates if max_candidates is not None else 10 * count
    existing = sorted(out.glob("*.py"))
    result.written.extend(existing)
    seen: set[str] = set()
    index = 0
    while len(result.written) < count and index < limit:
        batch: list[Candidate] = []
        want = max(config.jobs, 2 * (count - len(result.written)))
        while len(batch) < want and index < limit:
            try:
                cand = composer.candidate(index)
            except Exception as exc:  # noqa: BLE001 - an endpoint may fail in many ways
                logger.warning("candidate %d: the composer failed: %s", index, exc)
                result.rejected[f"candidate_{index}"] = ["composer"]
                index += 1
                continue
            index += 1
            result.candidates += 1
            if (out / f"{cand.name}.py").exists() or cand.code in seen:
                continue
            seen.add(cand.code)
            try:
                check_code(cand.code, cand.name)
            except TaskError:
                result.rejected[cand.name] = ["code"]
                continue
            batch.append(cand)
        if not batch:
            continue
        records = validate_tasks([c.task() for c in batch], config, report=out / "validation.jsonl", progress=progress)
        for cand, record in zip(batch, records):
            if not record.passed:
                result.rejected[cand.name] = record.failed()
                continue
            if len(result.written) >= count:
                break
            path = out / f"{cand.name}.py"
            path.write_text(cand.code, encoding="utf-8")
            with (out / "manifest.jsonl").open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"name": cand.name, "ops": list(cand.ops), "composer": cand.composer}) + "\n")
            result.written.append(path)
    return result


def candidates(composer: Composer, n: int) -> Iterator[Candidate]:
    """The first ``n`` candidates of a composer (for inspection; nothing is validated)."""
    for i in range(n):
        yield composer.candidate(i)

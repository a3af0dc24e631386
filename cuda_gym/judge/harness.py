"""Helpers shared by the judge's processes: inputs, models, the L2 flush, poisoning, profiling, facts.

The trusted driver and the candidate server both use them; nothing here imports candidate code and
nothing here measures time (the driver's own clock does, ``cuda_gym.judge.driver``).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import platform
import random
import re
import socket
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import tree_map_only

from cuda_gym.host import cpu_model
from cuda_gym.judge.config import SAMPLE_THRESHOLD_BYTES
from cuda_gym.paths import write_text_atomic

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3
M_PERTURB = -6
PERTURB_BYTE = 0x80
"""glibc fills fresh ``malloc`` memory with ``PERTURB_BYTE ^ 0xff`` = 0x7f: float32 3.4e38, fp16 NaN."""

MAX_MMAP_THRESHOLD = 32 * 1024 * 1024
"""glibc's largest mmap threshold on 64-bit: CPU allocations above it get fresh (zero) pages, unpoisoned."""



def load_task_module(code: str, name: str = "cuda_gym_task") -> types.ModuleType:
    """Execute trusted task code in a fresh module (registered in ``sys.modules`` while it runs)."""
    import sys

    module = types.ModuleType(name)
    module.__file__ = f"<task {name}>"
    sys.modules[name] = module
    exec(compile(code, module.__file__, "exec"), module.__dict__)
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise RuntimeError(f"the task code defines no {attr}")
    return module


def seed_everything(seed: int) -> None:
    """Seed torch (every device), Python's ``random`` and NumPy from one 63-bit seed."""
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass


def _to_list(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def make_inputs(get_inputs: Callable[[], Any], seed: int, device: str) -> list[Any]:
    """``get_inputs()`` under ``seed``, created directly on ``device``; stray tensors are moved there."""
    seed_everything(seed)
    with torch.device(device):
        inputs = _to_list(get_inputs())
    return [x.to(device) if isinstance(x, torch.Tensor) and x.device != torch.device(device) else x for x in inputs]


def make_init_inputs(get_init_inputs: Callable[[], Any], seed: int, device: str) -> list[Any]:
    """``get_init_inputs()`` under ``seed`` (tensors created on ``device``)."""
    seed_everything(seed)
    with torch.device(device):
        return _to_list(get_init_inputs())


def build_model(cls: type, init_inputs: Sequence[Any], seed: int, device: str) -> torch.nn.Module:
    """``cls(*init_inputs)`` constructed under ``seed`` on ``device``, moved there and in eval mode."""
    seed_everything(seed)
    with torch.device(device):
        model = cls(*init_inputs)
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    return model


def synchronize(device: str) -> None:
    """Device-wide synchronization (every stream); a no-op on the CPU."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


class L2Flusher:
    """Writes a buffer twice the size of the GPU's L2 cache so no call starts with a warm cache."""

    def __init__(self, device: str) -> None:
        self.buffer: torch.Tensor | None = None
        if device.startswith("cuda"):
            l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
            size = max(2 * l2, 64 * 1024 * 1024)
            self.buffer = torch.empty(size // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        if self.buffer is not None:
            self.buffer.fill_(0x5A5A)


class MemoryPoison:
    """Makes memory handed out by the allocators hold garbage, so ``empty`` outputs never pass.

    CUDA: empty the caching allocator, then allocate a NaN-filled (or 0x7f-filled for integer outputs)
    buffer about twice the expected output size and free it; the next allocations reuse that block.
    CPU: glibc's ``M_PERTURB`` fills every fresh ``malloc`` with 0x7f bytes (float32 3.4e38, fp16 NaN)
    and the mmap threshold is raised to its maximum (32 MiB), so allocations up to that size are
    poisoned; larger CPU allocations get fresh zero pages from the kernel and are not.
    """

    def __init__(self, device: str, output_bytes: int, integer_output: bool) -> None:
        self.device = device
        self.nbytes = max(2 * int(output_bytes), 4096)
        self.integer_output = integer_output
        self._libc: Any = None
        if not device.startswith("cuda"):
            try:
                self._libc = ctypes.CDLL(None)
            except OSError:  # pragma: no cover - non-glibc platforms
                self._libc = None

    def arm(self) -> None:
        """Poison before a call."""
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()
            if self.integer_output:
                buf = torch.full((self.nbytes,), 0x7F, dtype=torch.uint8, device=self.device)
            else:
                buf = torch.full((self.nbytes // 4,), float("nan"), dtype=torch.float32, device=self.device)
            torch.cuda.synchronize(self.device)
            del buf
        elif self._libc is not None:
            self._libc.mallopt(M_MMAP_THRESHOLD, MAX_MMAP_THRESHOLD)
            self._libc.mallopt(M_PERTURB, PERTURB_BYTE)

    def disarm(self) -> None:
        """Stop poisoning (CPU: timed calls must not pay for the memset)."""
        if self._libc is not None:
            self._libc.mallopt(M_PERTURB, 0)


def thread_counts() -> tuple[int, int]:
    """``(Python threads, OS threads of this process)``."""
    try:
        os_threads = len(os.listdir("/proc/self/task"))
    except OSError:  # pragma: no cover - non-Linux
        os_threads = threading.active_count()
    return threading.active_count(), os_threads


def warm_device(device: str) -> None:
    """Start the runtime's own threads (CUDA context, OpenMP pool) before thread counts are taken."""
    x = torch.randn(256, 256, device=device)
    (x @ x).sum().item()
    (x + 1).relu_().sum().item()
    synchronize(device)


def iter_leaves(obj: Any, path: str = "out") -> Iterator[tuple[str, Any]]:
    """Every leaf of a nested output (tuple/list/dict) with its path, in a fixed order."""
    if isinstance(obj, (tuple, list)):
        for i, v in enumerate(obj):
            yield from iter_leaves(v, f"{path}[{i}]")
    elif isinstance(obj, dict):
        for k in obj:
            yield from iter_leaves(obj[k], f"{path}[{k!r}]")
    else:
        yield path, obj


SAMPLE_ELEMENTS = 1 << 22
"""How many elements of a large tensor are compared: about 4 million, chosen by a secret seed."""
SAMPLED_KEY = "__cuda_gym_sampled_shape__"


def sample_large(out: Any, seed: int, threshold: int = SAMPLE_THRESHOLD_BYTES) -> Any:
    """Replace every tensor over ``threshold`` bytes by its shape and a random sample of its elements.

    KernelBench level-1 outputs reach 6 GiB: writing five of them to disk per evaluation fills it.
    Both sides apply this with the same secret ``seed`` (drawn by the driver and unknown to candidate
    code), so the same positions are compared. The sample stays on the tensor's device: the driver
    compares on the GPU (on the CPU, comparing 4M elements took about 0.3 s per checked call on the
    H200, which left the GPU idle between a candidate's timed calls). A wrong output in more than a
    sliver of its elements is caught with overwhelming probability; partial computation, stale memory
    and constant outputs are caught as before. Small tensors are kept whole and compared exactly.
    """
    if isinstance(out, torch.Tensor):
        if out.numel() * out.element_size() <= threshold:
            return out
        flat = out.reshape(-1)
        gen = torch.Generator(device=flat.device)
        gen.manual_seed(seed & (2**63 - 1))
        count = min(SAMPLE_ELEMENTS, flat.numel())
        idx = torch.randint(0, flat.numel(), (count,), generator=gen, device=flat.device)
        return {SAMPLED_KEY: list(out.shape), "values": flat[idx]}
    if isinstance(out, tuple) and type(out) is tuple:
        return tuple(sample_large(v, seed, threshold) for v in out)
    if isinstance(out, list) and type(out) is list:
        return [sample_large(v, seed, threshold) for v in out]
    if isinstance(out, dict) and type(out) is dict:
        return {k: sample_large(v, seed, threshold) for k, v in out.items()}
    return out


def shape_template(out: Any) -> Any:
    """``out`` with every tensor replaced by a tensor on the ``meta`` device of the same dtype, shape and
    strides (no memory): what a session's calibration needs of the reference's output."""
    return tree_map_only(
        torch.Tensor,
        lambda t: torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="meta"),
        out,
    )


def output_facts(out: Any) -> dict[str, Any]:
    """Bytes and kind of an output: drives memory poisoning and the file-size bound."""
    nbytes = 0
    integer = False
    for _, leaf in iter_leaves(out):
        if isinstance(leaf, torch.Tensor):
            nbytes += leaf.numel() * leaf.element_size()
            integer = integer or not (leaf.is_floating_point() or leaf.is_complex())
    return {"output_bytes": nbytes, "integer_output": integer}


def input_bytes(inputs: Sequence[Any]) -> int:
    """Bytes of the tensor inputs."""
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


def dtype_name(dtype: torch.dtype) -> str:
    """A dtype's name without the ``torch.`` prefix (``float32``): the key of tolerances and caches."""
    return str(dtype).replace("torch.", "")


def input_dtype(inputs: Sequence[Any]) -> str:
    """The dtype name of the first floating-point input (``none`` when there is none)."""
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return dtype_name(x.dtype)
    for x in inputs:
        if isinstance(x, torch.Tensor):
            return dtype_name(x.dtype)
    return "none"


def count_flops(model: Callable[..., Any], inputs: Sequence[Any]) -> int:
    """FLOPs of one forward counted by ``FlopCounterMode`` (matmul/conv/attention; 0 if it fails)."""
    try:
        from torch.utils.flop_counter import FlopCounterMode

        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(*inputs)
        return int(counter.get_total_flops())
    except Exception as exc:  # noqa: BLE001 - the count is advisory
        log.debug("flop count failed: %s", exc)
        return 0


def profile_table(
    model: Callable[..., Any], get_inputs: Callable[[], Any], device: str, seeds: Sequence[int], top: int = 15
) -> list[dict[str, Any]]:
    """Top kernels (CUDA) or ops (CPU) over calls under ``torch.profiler``: name, calls, total ms, share."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    inputs_list = [make_inputs(get_inputs, s, device) for s in seeds]
    synchronize(device)
    with torch.no_grad(), profile(activities=activities) as prof:
        for inputs in inputs_list:
            model(*inputs)
            synchronize(device)
    rows: list[tuple[str, int, float]] = []
    for ev in prof.key_averages():
        if cuda:
            t_us = float(getattr(ev, "self_device_time_total", 0.0) or getattr(ev, "self_cuda_time_total", 0.0))
            if str(getattr(ev, "device_type", "")).endswith("CUDA") and t_us > 0:
                rows.append((ev.key, int(ev.count), t_us / 1000.0))
            elif t_us > 0 and not ev.key.startswith("aten::"):
                rows.append((ev.key, int(ev.count), t_us / 1000.0))
        else:
            t_us = float(ev.self_cpu_time_total)
            if t_us > 0 and not ev.key.startswith("ProfilerStep"):
                rows.append((ev.key, int(ev.count), t_us / 1000.0))
    total = sum(r[2] for r in rows) or 1.0
    rows.sort(key=lambda r: -r[2])
    return [{"name": n[:200], "calls": c, "total_ms": t, "share": t / total} for n, c, t in rows[:top]]


def device_name(device: str) -> str:
    """The GPU model, or ``<cpu model> (<n> threads)`` on the CPU: a baseline-cache path component."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(device)
    return f"{cpu_model()} ({torch.get_num_threads()} threads)"


def fingerprint(device: str) -> dict[str, str]:
    """Hardware and software facts of this process's device: GPU, driver, torch, CUDA, Python, host."""
    facts = {
        "device": device,
        "device_name": device_name(device),
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "cpu": cpu_model(),
        "torch_threads": str(torch.get_num_threads()),
    }
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        facts["gpu"] = props.name
        facts["capability"] = f"{props.major}.{props.minor}"
        facts["gpu_memory_gib"] = f"{props.total_memory / 2**30:.1f}"
        try:
            facts["driver"] = driver_version(Path("/proc/driver/nvidia/version").read_text())
        except OSError:
            facts["driver"] = "unknown"
    return facts


_DRIVER_VERSION = re.compile(r"(?<![\w.])(\d+\.\d+(?:\.\d+)?)(?![\w.])")


def driver_version(text: str) -> str:
    """The NVIDIA driver version (``580.159.04``) from the text of ``/proc/driver/nvidia/version``.

    The ``NVRM version`` line reads ``... x86_64 Kernel Module  535.104.05  <date>`` for the proprietary
    module and ``... Open Kernel Module for x86_64  580.159.04  Release Build ...`` for the open one:
    the version is the first dotted number after ``Kernel Module``. ``unknown`` when there is none.
    """
    for line in text.splitlines():
        if "Kernel Module" in line:
            match = _DRIVER_VERSION.search(line.split("Kernel Module", 1)[1])
            if match:
                return match.group(1)
    return "unknown"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to ``path`` atomically (``cuda_gym.paths.write_text_atomic``); unknown types as ``str``."""
    write_text_atomic(path, json.dumps(data, default=str))

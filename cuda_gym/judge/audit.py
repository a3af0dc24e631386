"""The ATen audit: a dispatch mode that records every PyTorch op a forward runs and flags compute."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from cuda_gym.judge.result import Violation
from cuda_gym.judge.rules import TORCH_OPS_NAMESPACES

ALLOWED_ATEN = frozenset(
    """
    empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones ones_like
    new_ones full full_like new_full zero_ fill_ scalar_tensor lift_fresh lift_fresh_copy resize_ arange
    view _unsafe_view view_as reshape _reshape_alias as_strided as_strided_ permute transpose transpose_ t t_
    expand expand_as unsqueeze unsqueeze_ squeeze squeeze_ slice select alias detach detach_ unbind split
    split_with_sizes chunk narrow unflatten flatten movedim diagonal unfold view_as_real view_as_complex
    sym_size sym_stride sym_numel sym_storage_offset size stride dim is_contiguous _local_scalar_dense
    clone copy_ _copy_from _copy_from_and_resize contiguous _to_copy to is_same_size _has_compatible_shallow_copy_type
    set_requires_grad record_stream is_pinned _nested_tensor_from_mask_left_aligned
    """.split()
)
"""ATen ops (overload packet names) a candidate's forward may run: allocation and filling, views and
metadata, copies (``clone``/``copy_``: ``.contiguous()`` on a strided input copies, which is memory work
the candidate pays for in its time), and ``_to_copy`` for device moves without a dtype change."""

LOW_PRECISION = frozenset({torch.float16, torch.bfloat16})


class OpAudit(TorchDispatchMode):
    """Record every dispatcher op run inside ``with OpAudit() as audit:`` and judge it.

    Ops called from a C++ extension through the dispatcher (``at::matmul`` ...) are seen too; pybind
    functions themselves bypass the dispatcher and never appear, so a custom extension runs untouched.

    Attributes:
        counts: calls per op (``aten::mm.default`` style names).
        allowed: extra overload packet names to allow (``aten`` namespace).
    """

    def __init__(self, allowed: frozenset[str] | set[str] = frozenset()) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self.allowed = ALLOWED_ATEN | frozenset(allowed)
        self._flagged: dict[str, tuple[str, str]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = str(func.name()) if hasattr(func, "name") else str(func)
        self.counts[name] += 1
        if name not in self._flagged:
            verdict = self._judge(func, args, kwargs)
            if verdict is not None:
                self._flagged[name] = verdict
        return func(*args, **kwargs)

    def _judge(self, func: Any, args: tuple, kwargs: dict) -> tuple[str, str] | None:
        namespace = getattr(func, "namespace", "aten")
        packet = getattr(getattr(func, "overloadpacket", None), "__name__", str(func)).split(".")[-1]
        if namespace not in TORCH_OPS_NAMESPACES:
            return None
        if namespace == "aten" and packet in self.allowed:
            if packet in ("_to_copy", "to"):
                dtype = kwargs.get("dtype")
                src = args[0].dtype if args and isinstance(args[0], torch.Tensor) else None
                if dtype is not None and src is not None and dtype != src:
                    rule = "precision" if dtype in LOW_PRECISION and src == torch.float32 else "torch-compute"
                    return rule, f"a dtype conversion {src} -> {dtype}"
            return None
        return "torch-compute", "PyTorch compute"

    def violations(self) -> list[Violation]:
        """One violation per distinct forbidden op, with its call count."""
        out = []
        for name, (rule, what) in self._flagged.items():
            out.append(
                Violation(
                    rule,
                    f"ModelNew.forward ran {name} ({what}, {self.counts[name]} call(s)); only allocation, views "
                    "and your own kernels may run: replace it with a kernel.",
                )
            )
        return out

    @property
    def ops(self) -> dict[str, int]:
        """Every op seen, with its call count."""
        return dict(self.counts)

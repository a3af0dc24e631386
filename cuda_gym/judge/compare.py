"""Output comparison: exact structure, types, dtypes, shapes and devices, finite values, per-dtype tolerance."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from cuda_gym.judge.config import DEFAULT_TOLERANCE
from cuda_gym.judge.harness import dtype_name, iter_leaves

Tolerances = Mapping[str, tuple[float, float]]


@dataclass
class Comparison:
    """The outcome of comparing one candidate output with the reference output."""

    passed: bool
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    message: str = ""


_SCALARS = (bool, int, float, complex, str, type(None))


SPREAD_TOL = 0.05
"""Default of ``JudgeConfig.spread_tol``: the largest allowed error relative to the reference's own spread."""
SPREAD_MIN_ELEMENTS = 16
"""Float tensors with fewer elements skip the spread check (too few values to have a spread)."""


def compare_outputs(ref: Any, cand: Any, tolerances: Tolerances, spread_tol: float = SPREAD_TOL) -> Comparison:
    """Compare a candidate output with the reference, recursively.

    Structure must match exactly (``type(cand) is type(ref)`` for containers and leaves, the same dict
    keys, the same lengths); tensors must be plain ``torch.Tensor`` with the same dtype, shape and
    device. Float tensors pass when, wherever the reference is finite, the candidate is finite and
    ``|c - r| <= atol + rtol * |r|``; wherever the reference is NaN or +-inf the candidate must hold the
    same value (so NaN never passes for a finite reference). Integer and bool tensors must be equal.

    Scale-aware check (``spread_tol`` > 0): a float output of at least ``SPREAD_MIN_ELEMENTS`` finite
    elements must also have ``||c - r|| <= spread_tol * ||r - mean(r)||`` (root-mean-square error
    against the reference's own spread). Where the tolerance dwarfs the outputs (KernelBench L1
    ``23_Softmax``: values near 2.5e-6 against atol 1e-2), zeros and constants pass the elementwise
    test but fail this one: their error is the whole spread. An honest kernel's rounding error is a
    tiny fraction of it. A reference without spread (a constant) skips it.
    """
    worst = Comparison(True)
    problem = _structure(ref, cand, "out")
    if problem:
        return Comparison(False, math.inf, math.inf, problem)
    for (path, r), (_, c) in zip(iter_leaves(ref), iter_leaves(cand)):
        res = _compare_leaf(r, c, path, tolerances)
        if res.passed and spread_tol > 0 and isinstance(r, torch.Tensor):
            res = _spread_check(r, c, path, spread_tol, res)
        worst.max_abs_error = max(worst.max_abs_error, res.max_abs_error)
        worst.max_rel_error = max(worst.max_rel_error, res.max_rel_error)
        if not res.passed:
            res.max_abs_error, res.max_rel_error = worst.max_abs_error, worst.max_rel_error
            return res
    return worst


def _structure(ref: Any, cand: Any, path: str) -> str:
    if type(cand) is not type(ref):
        if isinstance(ref, torch.Tensor) and isinstance(cand, torch.Tensor):
            return f"{path}: expected a plain torch.Tensor, got {type(cand).__name__} (tensor subclasses are not allowed)"
        return f"{path}: expected {type(ref).__name__}, got {type(cand).__name__}"
    if isinstance(ref, (tuple, list)):
        if len(ref) != len(cand):
            return f"{path}: expected a {type(ref).__name__} of length {len(ref)}, got length {len(cand)}"
        for i, (r, c) in enumerate(zip(ref, cand)):
            msg = _structure(r, c, f"{path}[{i}]")
            if msg:
                return msg
    elif isinstance(ref, dict):
        if list(ref) != list(cand):
            return f"{path}: expected dict keys {list(ref)}, got {list(cand)}"
        for k in ref:
            msg = _structure(ref[k], cand[k], f"{path}[{k!r}]")
            if msg:
                return msg
    elif not isinstance(ref, (torch.Tensor,) + _SCALARS):
        return f"{path}: the reference returns an unsupported type {type(ref).__name__}"
    return ""


def _compare_leaf(r: Any, c: Any, path: str, tolerances: Tolerances) -> Comparison:
    if isinstance(r, torch.Tensor):
        return _compare_tensor(r, c, path, tolerances)
    if isinstance(r, float):
        return _compare_tensor(torch.tensor(r, dtype=torch.float64), torch.tensor(c, dtype=torch.float64), path, tolerances)
    if r != c:
        return Comparison(False, math.inf, math.inf, f"{path}: expected {r!r}, got {c!r}")
    return Comparison(True)


def _compare_tensor(r: torch.Tensor, c: torch.Tensor, path: str, tolerances: Tolerances) -> Comparison:
    if c.dtype != r.dtype:
        return Comparison(
            False, math.inf, math.inf, f"{path}: expected dtype {dtype_name(r.dtype)}, got {dtype_name(c.dtype)}"
        )
    if c.shape != r.shape:
        return Comparison(False, math.inf, math.inf, f"{path}: expected shape {tuple(r.shape)}, got {tuple(c.shape)}")
    if c.device != r.device:
        return Comparison(False, math.inf, math.inf, f"{path}: expected device {r.device}, got {c.device}")
    if r.numel() == 0:
        return Comparison(True)
    if not (r.is_floating_point() or r.is_complex()):
        if torch.equal(r, c):
            return Comparison(True)
        diff = (c.to(torch.int64) - r.to(torch.int64)).abs()
        n_bad = int((diff != 0).sum())
        err = float(diff.max())
        return Comparison(
            False, err, math.inf, f"{path}: {n_bad} of {r.numel()} integer elements differ (exact match required)"
        )
    atol, rtol = tolerances.get(dtype_name(r.dtype), (DEFAULT_TOLERANCE, DEFAULT_TOLERANCE))
    if r.is_complex():
        r, c = torch.view_as_real(r), torch.view_as_real(c)
    wide = torch.float64 if r.dtype == torch.float64 else torch.float32
    rw, cw = r.to(wide), c.to(wide)
    finite = torch.isfinite(rw)
    if not bool(finite.all()):
        rn, cn = rw[~finite], cw[~finite]
        same = (torch.isnan(rn) & torch.isnan(cn)) | (rn == cn)
        if not bool(same.all()):
            n_bad = int((~same).sum())
            return Comparison(False, math.inf, math.inf, f"{path}: {n_bad} elements differ where the reference is NaN or inf")
        rw, cw = rw[finite], cw[finite]
        if rw.numel() == 0:
            return Comparison(True)
    cand_finite = torch.isfinite(cw)
    if not bool(cand_finite.all()):
        n_bad = int((~cand_finite).sum())
        return Comparison(
            False, math.inf, math.inf, f"{path}: {n_bad} of {rw.numel()} elements are NaN or inf where the reference is finite"
        )
    diff = (cw - rw).abs()
    mag = rw.abs()
    max_abs = float(diff.max())
    max_rel = float((diff / (mag + atol)).max()) if atol > 0 else float((diff / mag.clamp_min(1e-30)).max())
    bad = diff > atol + rtol * mag
    if bool(bad.any()):
        n_bad = int(bad.sum())
        idx = int(torch.argmax((diff - (atol + rtol * mag)).flatten()))
        return Comparison(
            False,
            max_abs,
            max_rel,
            f"{path}: {n_bad} of {rw.numel()} elements outside atol={atol:g} rtol={rtol:g} "
            f"(max abs error {max_abs:.3g}; e.g. flat index {idx}: expected {float(rw.flatten()[idx]):.6g}, "
            f"got {float(cw.flatten()[idx]):.6g})",
        )
    return Comparison(True, max_abs, max_rel)


def _spread_check(r: torch.Tensor, c: torch.Tensor, path: str, spread_tol: float, res: Comparison) -> Comparison:
    if not r.is_floating_point() or r.numel() < SPREAD_MIN_ELEMENTS:
        return res
    wide = torch.float64 if r.dtype == torch.float64 else torch.float32
    rw, cw = r.to(wide).reshape(-1), c.to(wide).reshape(-1)
    finite = torch.isfinite(rw)
    rw, cw = rw[finite], cw[finite]
    if rw.numel() < SPREAD_MIN_ELEMENTS:
        return res
    spread = float(torch.linalg.vector_norm(rw - rw.mean()))
    if spread == 0.0:
        return res
    err = float(torch.linalg.vector_norm(cw - rw))
    if err <= spread_tol * spread:
        return res
    return Comparison(
        False,
        res.max_abs_error,
        res.max_rel_error,
        f"{path}: the error is {err / spread:.3g} of the reference output's own spread (at most {spread_tol:g} "
        "allowed): the output does not follow the reference (zeros or a constant pass the elementwise "
        "tolerance here because the outputs are tiny against it)",
    )


def constant_would_pass(refs: Sequence[Any], tolerances: Tolerances) -> str:
    """Why a constant output would pass every check against ``refs`` (one reference output per
    seed), or ``""``: all zeros, the global mean, or the per-element mean across seeds (an output that
    does not depend on the inputs). Only float tensor leaves are examined."""
    if not refs:
        return ""
    leaves = [list(iter_leaves(r)) for r in refs]
    for i, (path, first) in enumerate(leaves[0]):
        if not isinstance(first, torch.Tensor) or not first.is_floating_point() or first.numel() == 0:
            continue
        atol, rtol = tolerances.get(dtype_name(first.dtype), (DEFAULT_TOLERANCE, DEFAULT_TOLERANCE))
        values = [leaf[i][1].to(torch.float64) for leaf in leaves]
        if not all(bool(torch.isfinite(v).all()) for v in values):
            continue

        def passes(const: torch.Tensor | float, values: list[torch.Tensor] = values, atol: float = atol,
                   rtol: float = rtol) -> bool:
            return all(bool(((v - const).abs() <= atol + rtol * v.abs()).all()) for v in values)

        if passes(0.0):
            return f"{path}: an all-zero output passes the tolerance"
        mean = float(sum(float(v.mean()) for v in values) / len(values))
        if passes(mean):
            return f"{path}: a constant output ({mean:.4g}) passes the tolerance"
        if len(values) >= 2 and passes(torch.stack(values).mean(0)):
            return f"{path}: the output barely depends on the inputs (its mean across seeds passes)"
    return ""

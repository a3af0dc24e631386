"""The words settings share, each defined once: device flavour, device, task size and executor kind.

Every module that takes one of these values checks it here, so a bad value raises the same
:class:`~cuda_gym.errors.ConfigError` with the same list of valid values wherever it is given
(env settings, ``JudgeConfig``, workspaces, builds, rules, task loaders, the CLI).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from cuda_gym.errors import ConfigError

Flavour = Literal["cuda", "cpu"]
"""What the agent writes and the build compiles: CUDA kernels (``cuda``) or C++ kernels (``cpu``)."""

FLAVOURS: tuple[Flavour, ...] = get_args(Flavour)

Size = Literal["small", "default"]
"""Problem size of builtin tasks: ``small`` (fast on a CPU) or ``default`` (GPU-sized)."""

SIZES: tuple[Size, ...] = get_args(Size)

ExecutorKind = Literal["inline", "local", "ray"]
"""Where judge jobs run (``cuda_gym.executors``): in the caller's thread, a local GPU pool, a Ray cluster."""

EXECUTORS: tuple[ExecutorKind, ...] = get_args(ExecutorKind)

DEVICES_HELP = "'cpu', 'cuda' or 'cuda:N'"
"""The valid devices, as error messages and help texts name them."""

_DEVICE = re.compile(r"cpu|cuda(:\d+)?")


def _choices(values: tuple[str, ...]) -> str:
    return ", ".join(repr(v) for v in values)


def check_flavour(value: object, what: str = "flavour") -> Flavour:
    """``value`` if it is a flavour (``cuda`` or ``cpu``), else ``ConfigError`` naming ``what``."""
    if value not in FLAVOURS:
        raise ConfigError(f"{what} must be {_choices(FLAVOURS)}, got {value!r}")
    return value


def check_size(value: object, what: str = "size") -> Size:
    """``value`` if it is a task size (``small`` or ``default``), else ``ConfigError`` naming ``what``."""
    if value not in SIZES:
        raise ConfigError(f"{what} must be {_choices(SIZES)}, got {value!r}")
    return value


def check_executor(value: object, what: str = "executor") -> ExecutorKind:
    """``value`` if it is an executor kind (``inline``, ``local`` or ``ray``), else ``ConfigError`` naming ``what``."""
    if value not in EXECUTORS:
        raise ConfigError(f"{what} must be {_choices(EXECUTORS)}, got {value!r}")
    return value


def check_device(value: object, what: str = "device") -> str:
    """``value`` if it is a device (``cpu``, ``cuda`` or ``cuda:N``), else ``ConfigError`` naming ``what``."""
    if not isinstance(value, str) or not _DEVICE.fullmatch(value):
        raise ConfigError(f"{what} must be {DEVICES_HELP}, got {value!r}")
    return value


def flavour_of(device: str) -> Flavour:
    """The flavour a (checked) device implies: ``cpu`` for ``cpu``, else ``cuda``."""
    return "cpu" if check_device(device) == "cpu" else "cuda"


def indexed_device(device: str) -> str:
    """``device`` with an explicit GPU index (``cuda`` -> ``cuda:0``); ``cpu`` and ``cuda:N`` as given."""
    return "cuda:0" if check_device(device) == "cuda" else device

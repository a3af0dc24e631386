"""Command-line options made from a config dataclass: one option per field, its help the field's docstring.

Configs document each field with a docstring under it (CleanRL style). This module reads those
docstrings from the source once (``ast``), turns every field into an ``argparse`` option named
after it (``correctness_trials`` -> ``--correctness-trials``), and turns the options a user gave
back into the config's keyword arguments. A setting so has one name and one help text in the
Python API, ``gym.make`` kwargs and the CLI.
"""

from __future__ import annotations

import argparse
import ast
import collections.abc
import dataclasses
import functools
import inspect
import json
import sys
import textwrap
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

_DEST_PREFIX = "cfg__"
"""Namespace attributes of generated options start with this, so they never clash with a command's own."""


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring written under each field of dataclass ``cls`` (fields without one are left out)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, after in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _json(text: str) -> Any:
    """An option value written as JSON (``{"float32": 0.02}``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc.msg}): {text!r}") from None


_json.__name__ = "JSON"  # argparse names the type in its error message


def _parts(cls: type, field: dataclasses.Field[Any]) -> tuple[list[Any], bool]:
    """The union members of a field's annotation (evaluated where possible) and whether ``None`` is one."""
    annotation = field.type
    if isinstance(annotation, str):
        namespace = vars(sys.modules[cls.__module__])
        members: list[Any] = []
        for text in annotation.split("|"):
            text = text.strip()
            try:
                members.append(eval(text, namespace))  # noqa: S307 - our own annotations, read once
            except Exception:
                members.append(text)
    else:
        members = list(typing.get_args(annotation)) if typing.get_origin(annotation) in (typing.Union,) else [annotation]
    optional = any(m is None or m is type(None) or m == "None" for m in members)
    return [m for m in members if not (m is None or m is type(None) or m == "None")], optional


def _kind(members: list[Any]) -> dict[str, Any]:
    """``add_argument`` keywords for a field whose annotation has these (non-None) members."""
    first = members[0] if members else Any
    if first is bool:
        return {"action": argparse.BooleanOptionalAction}
    if typing.get_origin(first) is typing.Literal:
        return {"choices": list(typing.get_args(first))}
    if first in (int, float, str):
        return {"type": first}
    if first is Path:
        return {"type": Path, "metavar": "PATH"}
    if typing.get_origin(first) in (list, tuple, collections.abc.Sequence, collections.abc.Iterable):
        return {"nargs": "+", "metavar": "VALUE"}
    return {"type": _json, "metavar": "JSON"}


def _default_text(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        return repr(field.default) if isinstance(field.default, str) else str(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return json.dumps(field.default_factory())
    return "required"


def add_config_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    *,
    skip: Iterable[str] = (),
    choices: Mapping[str, Iterable[str]] | None = None,
    defaults: Mapping[str, str] | None = None,
) -> list[str]:
    """Add one ``--field-name`` option per field of dataclass ``cls`` to ``parser``; return the field names.

    Types follow the annotations: ``bool`` fields get ``--x/--no-x``, ``int``/``float``/``str``/``Path``
    fields their type, ``Literal`` fields their values as choices, sequences several values, and
    anything else (dicts, ``Any``) a JSON value. ``choices`` adds choices to string fields (e.g.
    ``{"reward": REWARDS}``); ``defaults`` replaces the default shown in the help where the command
    picks its own (``{"device": "a GPU if visible, else cpu"}``). Options the user does not give
    are left out of the namespace, so the config's own defaults apply (see ``config_kwargs``).
    """
    docs = field_docs(cls)
    names = []
    for field in dataclasses.fields(cls):
        if field.name in set(skip) or not field.init:
            continue
        members, _ = _parts(cls, field)
        kwargs = _kind(members)
        if choices and field.name in choices:
            kwargs = {"choices": list(choices[field.name])}
        if "action" not in kwargs and "choices" not in kwargs:
            kwargs.setdefault("metavar", field.name.upper())
        doc = " ".join(docs.get(field.name, "").replace("``", "").split())
        shown = (defaults or {}).get(field.name, _default_text(field))
        parser.add_argument(
            "--" + field.name.replace("_", "-"),
            dest=_DEST_PREFIX + field.name,
            default=argparse.SUPPRESS,
            help=f"{doc} (default: {shown})".replace("%", "%%"),
            **kwargs,
        )
        names.append(field.name)
    return names


def config_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields the user gave on the command line (options made by ``add_config_options``)."""
    return {key[len(_DEST_PREFIX):]: value for key, value in vars(args).items() if key.startswith(_DEST_PREFIX)}


def make_config(cls: Callable[..., Any], args: argparse.Namespace, **base: Any) -> Any:
    """``cls(**base, **given)``: the command's own values overridden by the options the user gave."""
    return cls(**{**base, **config_kwargs(args)})

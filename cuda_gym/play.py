"""The shortcuts of ``cuda-gym play`` (an episode typed by a person): parsing a line, editing a file."""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

PLAY_HELP = """\
Shortcuts (one per line; anything else is sent as a raw tool call, e.g. a JSON object):
  c            compile            v   verify          p   profile         s   submit
  r PATH       read a file        l   list the workspace files (glob **/*)
  b COMMAND    run a bash command in the workspace sandbox
  w PATH       write a file: the following lines up to a line holding only EOF
  e PATH       edit a workspace file in $EDITOR, then write it back
  h            this help          q   quit"""


@dataclass
class PlayCommand:
    """What one line of ``play`` input asks for: an action to send, help, quit, or more input."""

    action: str | None = None
    quit: bool = False
    help: bool = False
    needs_body: str | None = None
    """``w PATH``: the path whose content follows on the next lines."""
    edit: str | None = None
    """``e PATH``: the path to open in ``$EDITOR``."""


def parse_play_line(line: str) -> PlayCommand:
    """Turn one line of ``play`` input into a :class:`PlayCommand` (see :data:`PLAY_HELP`)."""
    from cuda_gym.tools import format_tool_call

    text = line.strip()
    head, _, rest = text.partition(" ")
    rest = rest.strip()
    simple = {"c": "compile", "v": "verify", "p": "profile", "s": "submit"}
    if head in simple and not rest:
        return PlayCommand(action=format_tool_call(simple[head], {}))
    if head in ("q", "quit", "exit") and not rest:
        return PlayCommand(quit=True)
    if head in ("h", "help", "?") and not rest:
        return PlayCommand(help=True)
    if head == "l" and not rest:
        return PlayCommand(action=format_tool_call("glob", {"pattern": "**/*"}))
    if head == "r" and rest:
        return PlayCommand(action=format_tool_call("read_file", {"path": rest}))
    if head == "b" and rest:
        return PlayCommand(action=format_tool_call("bash", {"command": rest}))
    if head == "w" and rest:
        return PlayCommand(needs_body=rest)
    if head == "e" and rest:
        return PlayCommand(edit=rest)
    return PlayCommand(action=line)


def write_action(path: str, content: str) -> str:
    """The ``write_file`` tool call for ``path`` and ``content``."""
    from cuda_gym.tools import format_tool_call

    return format_tool_call("write_file", {"path": path, "content": content})


def edit_in_editor(workspace_root: Path, path: str) -> str | None:
    """Open a copy of a workspace file in ``$EDITOR`` (``vi`` by default); return the new content,
    or ``None`` when the editor failed. The workspace itself is changed only by the tool call."""
    source = workspace_root / path
    initial = source.read_text(errors="replace") if source.is_file() else ""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / Path(path).name
        copy.write_text(initial)
        try:
            done = subprocess.run([*shlex.split(editor), str(copy)], check=False)
        except OSError as exc:
            logger.warning("could not start the editor %r: %s", editor, exc)
            return None
        if done.returncode != 0:
            return None
        return copy.read_text(errors="replace")

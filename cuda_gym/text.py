"""Text helpers for observations: printable ASCII and middle truncation."""

from __future__ import annotations

import string

PRINTABLE = frozenset(string.printable)
"""The character set of every observation and action space (``string.printable``)."""

ELISION = "\n... [{n} characters cut] ...\n"


def to_printable(text: str | bytes) -> str:
    """Return ``text`` as printable ASCII.

    Bytes are decoded as UTF-8 with replacement; non-ASCII characters become ``\\x..``/``\\u....``
    escapes; other control characters (except newline and tab) are dropped; ``\\r\\n`` becomes ``\\n``.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if all(c in PRINTABLE for c in text):
        return text
    text = text.encode("ascii", errors="backslashreplace").decode("ascii")
    return "".join(c for c in text if c in PRINTABLE)


def truncate_middle(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters, keeping head and tail around a marker.

    Compiler logs and tracebacks carry their news at both ends, so the middle goes first.
    """
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if len(text) <= limit:
        return text
    marker = ELISION.format(n=len(text))
    if limit <= len(marker) + 2:
        return text[:limit]
    keep = limit - len(marker)
    # The marker's count must be exact; it depends on how much is kept, which depends on its length.
    for _ in range(3):
        cut = len(text) - keep
        marker = ELISION.format(n=cut)
        keep = limit - len(marker)
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + ELISION.format(n=len(text) - head - tail) + (text[-tail:] if tail else "")


def clean_output(text: str | bytes, limit: int) -> str:
    """Printable ASCII cut to ``limit`` characters: what every tool returns to the agent."""
    return truncate_middle(to_printable(text), limit)

"""A small C/C++ lexer: line splices joined, comments and string/char literals blanked, digraphs spelled out, lines kept."""

from __future__ import annotations

import re

_TOKEN = re.compile(
    r"""
    (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
    | (?P<raw>(?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{0,16})\(.*?(?:\)(?P=delim)"|\Z))
    | (?P<string>(?:u8|[uUL])?"(?:[^"\\\n]|\\.)*(?:"|$))
    | (?P<char>(?:u8|[uUL])?'(?:[^'\\\n]|\\.)*(?:'|$))
    | (?P<number>\.?[0-9](?:[eEpP][+-]|'[0-9A-Za-z_]|[0-9A-Za-z_.])*)
    | (?P<ident>[A-Za-z_$][\w$]*)
    """,
    re.VERBOSE | re.DOTALL | re.MULTILINE,
)
"""One token of interest; what lies between tokens (punctuation, blanks) is copied as it is.

Identifiers and numbers are matched only so that a prefix (``u8"``, ``LR"``) or a digit separator
(``1'000``) is read as the compiler reads it, not as the start of a literal."""


_SPLICE = re.compile(r"\\[ \t\f\v]*\n")
_SPLICE_END = re.compile(r"\\[ \t\f\v]*$")
"""A backslash ending a line; GCC also splices when blanks stand between it and the newline (with a
warning): ``Py\\`` + two spaces + newline + ``Run_SimpleString`` is one name to it."""


def join_splices(text: str) -> str:
    """``text`` with every backslash-newline (blanks between them allowed) removed, as the compiler's phase 2 does.

    The removed newlines are put back after the end of the logical line, so that line numbers of
    later lines do not move (a token after a splice is reported on the line where its logical line
    starts). ``\\r\\n`` and a lone ``\\r`` end a line, as they do for GCC (``int x;\\r#define ...`` is a
    directive to it).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not _SPLICE.search(text):
        return text
    lines = text.split("\n")
    out: list[str] = []
    buf: list[str] = []
    for i, line in enumerate(lines):
        splice = _SPLICE_END.search(line)
        if splice and i < len(lines) - 1:
            buf.append(line[:splice.start()])
            continue
        out.append("".join(buf) + line + "\n" * len(buf))
        buf = []
    return "\n".join(out)


_DIGRAPH = re.compile(r"%:%:|%:|<%|%>|<:(?!:(?![:>]))|:>")
_DIGRAPHS = {"%:%:": "##", "%:": "#", "<%": "{", "%>": "}", "<:": "[", ":>": "]"}
"""Alternative tokens as the compiler reads them (C++ [lex.digraph]): ``%:include`` is ``#include`` and
``a %:%: b`` pastes. ``<::`` not followed by ``:`` or ``>`` is ``<`` then ``::`` ([lex.pptoken]/3.2), as in
``std::vector<::T>``. Trigraphs (``??=``) are not read: C++17 removed them and the build's fixed
``-std=c++17``/``-std=c++20`` leaves GCC and nvcc without them."""


def spell_digraphs(code: str) -> str:
    """``code`` (outside literals and comments) with every digraph replaced by its usual punctuator.

    The replacement keeps newlines, so line numbers do not move; offsets within a line may.
    """
    return _DIGRAPH.sub(lambda m: _DIGRAPHS[m.group(0)], code) if ("%" in code or "<:" in code or ":>" in code) \
        else code


def _blank(s: str) -> str:
    return re.sub(r"[^\n]", " ", s)


def strip_cpp(text: str) -> tuple[str, str]:
    """Return ``(no_comments, code_only)`` of a C/C++/CUDA source.

    Line splices are joined first (``Py\\<newline>Run_SimpleString`` is one identifier to the
    compiler, and so here; a ``//`` comment ending in a backslash swallows the next line). Then
    comments are blanked in both outputs and string/char literal contents (raw strings with any
    prefix and delimiter, ``u8``/``L``/``u``/``U`` prefixes, escapes) are blanked in ``code_only``;
    the quotes stay, so ``"..."`` still reads as a string. Digraphs outside literals and comments are
    spelled as their punctuators in both outputs (``%:define J(a, b) a %:%: b`` reads as
    ``#define J(a, b) a ## b``: see :func:`spell_digraphs`). Newlines are kept: line numbers match the
    text as the compiler numbers it.
    """
    text = join_splices(text)
    nc: list[str] = []
    code: list[str] = []
    last = 0
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup if m.lastgroup != "delim" else "raw"
        if kind in ("ident", "number"):
            continue
        gap = spell_digraphs(text[last:m.start()])
        nc.append(gap)
        code.append(gap)
        token = m.group(0)
        if kind == "comment":
            blanked = " " + _blank(token[1:])  # a comment is one space to the compiler
            nc.append(blanked)
            code.append(blanked)
        else:
            nc.append(token)
            quote = token.index('"' if kind in ("raw", "string") else "'")
            closing = 1 if token.endswith(token[quote]) and len(token) > quote + 1 else 0
            code.append(token[: quote + 1] + _blank(token[quote + 1: len(token) - closing]) + token[len(token) - closing:])
        last = m.end()
    tail = spell_digraphs(text[last:])
    nc.append(tail)
    code.append(tail)
    return "".join(nc), "".join(code)


def line_of(text: str, pos: int) -> int:
    """The 1-based line number of offset ``pos`` in ``text``."""
    return text.count("\n", 0, pos) + 1

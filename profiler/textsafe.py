"""Text from a profile, made safe for a terminal.

Frame and kernel names, file names, metric names, source lines and error messages all come from
files that anyone may have written.  :func:`term_escape` is the one function that every terminal
writer (``kprof-viewer``, ``kprof-analyze``, kprof's own messages) passes such text through: control
characters (C0 with ESC/CR/LF/TAB/NUL, DEL, C1 with CSI/OSC), bidi overrides and isolates, line and
paragraph separators, the BOM and lone surrogates are shown as visible escapes (``\\x1b``,
``\\u202e``) instead of being interpreted.  A backslash is left alone, so escaping twice changes
nothing more (the renderer may escape a cell, then the output sink the whole line).
"""
from __future__ import annotations

import re
from typing import Any

__all__ = ["term_escape", "has_unsafe", "encodable"]

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f"               # C0 (NUL, TAB, LF, CR, ESC, ...), DEL, C1 (CSI, OSC, NEL, ...)
    "\u061c\u200e\u200f"                # bidi marks
    "\u202a-\u202e\u2066-\u2069"        # bidi embeddings, overrides, isolates
    "\u2028\u2029\ufeff"                # line/paragraph separators, zero-width no-break space (BOM)
    "\ud800-\udfff]"                    # lone surrogates (no output encoding can carry them)
)
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape_one(m: "re.Match[str]") -> str:
    ch = m.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def term_escape(text: Any) -> str:
    """``text`` (any object: ``str()`` of it) with every character a terminal would interpret
    replaced by a visible escape; other text (any printable Unicode) is unchanged."""
    s = text if isinstance(text, str) else str(text)
    if _UNSAFE.search(s) is None:
        return s
    return _UNSAFE.sub(_escape_one, s)


def has_unsafe(text: str) -> bool:
    """Whether ``text`` holds a character :func:`term_escape` would escape."""
    return _UNSAFE.search(text) is not None


def encodable(text: str, encoding: str | None) -> str:
    """``text`` with the characters ``encoding`` cannot carry written as backslash escapes (an
    ASCII or Latin-1 terminal gets ``\\u2026`` instead of a UnicodeEncodeError)."""
    if not encoding:
        return text
    try:
        text.encode(encoding)
        return text
    except (UnicodeEncodeError, LookupError):
        try:
            return text.encode(encoding, "backslashreplace").decode(encoding)
        except LookupError:
            return text.encode("ascii", "backslashreplace").decode("ascii")

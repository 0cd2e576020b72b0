"""A user's text (labels, marker values, phase and field names, notes, exception names, paths) as
data in what the report writes: markdown that neither breaks a table or a line nor turns into
markup (:func:`md`), and text any strict reader takes (:func:`printable`).

:func:`md` writes each character a markdown reader would read as syntax with a backslash before
it (CommonMark's escapes, GitHub's too: ``\\|`` inside a table), so a label ``a|b`` stays one cell
and ``<!--`` is no comment; line breaks and other control characters, which would end a table row,
a heading or a list item, are written as their escapes (``\\n``, ``\\u2028``), and so is a lone
surrogate (text from the operating system that is not UTF-8), which no UTF-8 file can hold. The
report page reads the escapes back (:mod:`gnnmon.report.md_html`)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

_ESCAPED = "\\`*|<>[]&~"
"""Characters markdown may read as syntax anywhere in a line: written as ``\\`` + the character."""

_CONTROL = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_TRANSLATE = {ord(c): "\\" + c for c in _ESCAPED}
_EDGE_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
"""An underscore that can open or close emphasis: not between two letters or digits."""

PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
"""What a backslash escapes in markdown (CommonMark: ASCII punctuation)."""


def _control(match: re.Match[str]) -> str:
    c = match.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def printable(text: Any) -> str:
    """``text`` with line breaks, other control characters and lone surrogates written as their
    escapes (``\\n``, ``\\x1b``, ``\\u2028``, ``\\udce9``): one line of text any UTF-8 reader takes."""
    text = str(text)
    return _CONTROL.sub(_control, text) if _CONTROL.search(text) else text


def md(text: Any) -> str:
    """``text`` as markdown that reads back as that text (see the module doc): for a table cell,
    a heading or a list item."""
    text = str(text)
    out = text.translate(_TRANSLATE)
    if "_" in out:
        out = _EDGE_UNDERSCORE.sub(r"\\_", out)
    return printable(out)


def no_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\udce9``): what a UTF-8 file
    can hold, for text that is otherwise written as it is (HTML)."""
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)


def strict_json(obj: Any) -> str:
    """``obj`` as JSON any strict reader takes (Perfetto's, a browser's, orjson): no NaN or infinity
    (written null) and no lone surrogate (written as its escape text, ``\\udce9``), which JSON's
    ``\\u`` escapes could otherwise carry; what JSON has no type for, as its text."""
    try:
        text = json.dumps(obj, allow_nan=False, default=str)
    except ValueError:
        text = None
    if text is None or "\\ud" in text:
        text = json.dumps(_strict(obj), allow_nan=False, default=str)
    return text


def _strict(obj: Any) -> Any:
    if isinstance(obj, str):
        return no_surrogates(obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {_strict(k) if isinstance(k, str) else k: _strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strict(v) for v in obj]
    return obj

"""The run file format, ``gnnmon.jsonl`` version 3: one JSON object per line, each with a ``type``.

A file is a manifest line first (versions, devices, options, the user's config, and what holds for
every row of the run), then, in the order they arrived, rows, GC events, utilisation samples,
energy counters' points and markers, and an end line when the run ended cleanly. Every line stands
alone: a row line is the row as recorded (``jq``, ``pandas.read_json(lines=True)`` and DuckDB read
it as it is), and it carries the row's own figures only. What holds for the whole run is said once:
the manifest's ``host_memory`` (the allocator's setting, and what it means for every CPU row's
memory figures; the end line's says it as it was at the end) and ``sampled`` (how each sampled
figure is had, and when a row lacks one). A figure a row lacks is absent from its line.

Versions: 3 (2026-12) said once what version 2 repeated on every row (the allocator's note on each
CPU row, each sampled figure's ``<field>_source``, a note and a null for each sampled figure a row
lacked, "gpu figures: not a CUDA row"); 2 wrote every row whole; 1 said what repeated on rows once,
in ``same`` lines that rows named (:mod:`gnnmon.data.expand`). gnnmon reads every older version as
it was written, and refuses a newer version than it knows, naming both.
:data:`KINDS` names every kind of line; this module turns objects into lines and back. Non-finite
floats are written as ``null`` (strict JSON), tensors (where torch is loaded) as their values,
anything else JSON cannot hold as its repr; a string with a lone surrogate (a name the OS decoded
with ``surrogateescape``) as a JSON escape, read back equal.
"""

from __future__ import annotations

import json
import math
import sys
from _json import make_encoder  # json's C encoder: CPython's, as torch is
from collections.abc import Sequence
from itertools import repeat
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any

import orjson  # a C encoder and parser several times faster than json's (a dependency)

_orjson_dumps: Any = orjson.dumps
_orjson_loads: Any = orjson.loads
_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY

FORMAT = "gnnmon.jsonl"
FORMAT_VERSION = 3
"""The version this gnnmon writes (what each one changed: the module doc)."""
MANIFEST_START = b'{"type":"manifest","format":"gnnmon.jsonl"'
"""How every manifest line gnnmon writes begins: a cut-off first line is gnnmon's only if it does."""

MANIFEST, ROW, GC, SAMPLE, POINT, MARKER, END = "manifest", "row", "gc", "sample", "point", "marker", "end"
SAME = "same"
KINDS = (MANIFEST, ROW, GC, SAMPLE, POINT, MARKER, END, SAME)
"""The ``type`` of every line: the manifest (first), a row, a GC event, a utilisation sample, an
energy counter's point (``key``, ``t_ns``, ``value``, ``err_ns``, ``step``), a marker, the end
line, and (version 1 files only) a set of fields repeated on rows."""

SAMPLE_NOT_FIGURES = frozenset({"t_ns", "late_s", "read_s", "interval_s", "sampler_cpu_s", "children", "rank",
                                "cpu_time_s"})
"""A sample line's fields that are about the sample (or a running total), not the machine now."""

SAME_FIELD = "same"
"""A version 1 row line's field naming the set of repeated fields it holds too (read back onto the row)."""

MAX_TENSOR_VALUES = 1000
"""A tensor in a config or marker is stored as its values up to this many, else as its repr."""


def _default(obj: Any) -> Any:
    """What JSON cannot hold, as it is stored. torch is never imported here: a tensor or device
    can only come from a process that has it loaded already."""
    torch = sys.modules.get("torch")
    if torch is not None:
        if isinstance(obj, (torch.device, torch.dtype)):
            return str(obj)
        if isinstance(obj, torch.Tensor):
            if obj.numel() == 1:
                return obj.item()
            return obj.tolist() if obj.numel() <= MAX_TENSOR_VALUES else repr(obj)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    item = getattr(obj, "item", None)  # numpy scalars
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError, RuntimeError):
            pass
    return repr(obj)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_finite(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, float)):
        return obj
    return _finite(_default(obj))  # a tensor, a numpy scalar: its values, made finite too


_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_default, allow_nan=False)
# The C encoder made once (json.JSONEncoder.encode builds one per call): about 1 µs less per row.
_C_ENCODE: Any = make_encoder(None, _default, encode_basestring_ascii, None, ":", ",", False, False, False)


def dumps(obj: dict[str, Any]) -> str:
    """One JSON line (no newline); non-finite floats become null (strict JSON), other objects
    their str/repr."""
    try:
        return "".join(_C_ENCODE(obj, 0))
    except ValueError:  # NaN or infinity somewhere: rare, so checked only then
        return _ENCODER.encode(_finite(obj))


WHOLE_INTS = b" "
"""How a line that holds an int beyond 64 bits ends (JSON whitespace, which every reader skips):
orjson would read that int as a float, so gnnmon's reader reads such lines with ``json``."""


def encode(obj: dict[str, Any]) -> bytes:
    """One JSON line as UTF-8 bytes (no newline), as :func:`dumps` writes it: non-finite floats
    become null, tensors their values, other objects their repr. A line orjson cannot write (an
    int beyond 64 bits, a subclass it refuses) is written by json and ends in :data:`WHOLE_INTS`."""
    try:
        return _orjson_dumps(obj, default=_default, option=_ORJSON_OPTIONS)
    except TypeError:  # an int beyond 64 bits, a subclass orjson refuses: json says it as it can
        return dumps(obj).encode("utf-8") + WHOLE_INTS


_HEADS = {ROW: b'{"type":"row"'}


def typed_line(kind: str, encoded: bytes) -> bytes:
    """``{"type": kind, ...}`` from an object's encoded line, without decoding it."""
    head = _HEADS.get(kind) or b'{"type":' + dumps_str(kind).encode("ascii")
    return head + b"}" if encoded == b"{}" else head + b"," + encoded[1:]


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse(line: bytes | str) -> Any:
    """A JSON line back to Python objects. A string with a lone surrogate (text the OS decoded with
    ``surrogateescape``, written by :func:`encode` as a JSON escape) is read by json where orjson
    refuses it, as is a line marked as holding an int beyond 64 bits (:data:`WHOLE_INTS`); NaN and
    Infinity are refused by both (not JSON)."""
    if whole_ints(line):
        return json.loads(line, parse_constant=_not_json)
    try:
        return _orjson_loads(line)
    except ValueError as first:
        try:
            return json.loads(line, parse_constant=_not_json)
        except ValueError:
            raise first from None  # orjson's error says where it stopped (its pos)


_MARKED = (b"} \n", b"} ")  # how a line marked by WHOLE_INTS ends, with its newline or without


def parse_each(lines: Sequence[bytes]) -> list[Any] | None:
    """Each line's object, one orjson call a line (no copy, no scan of the text: what makes a file
    cost little more than parsing it); None where a line is marked by
    :data:`WHOLE_INTS` (read those with :func:`parse`). Raises ValueError where a line is not JSON
    to orjson (blank, corrupt, cut off, or a lone surrogate json reads): read those one at a time."""
    if any(map(bytes.endswith, lines, repeat(_MARKED))):
        return None
    return list(map(_orjson_loads, lines))


def whole_ints(text: bytes | str) -> bool:
    """Whether lines ``text`` (one, or several joined) hold one marked by :data:`WHOLE_INTS`."""
    if isinstance(text, str):
        text = text.encode("utf-8", "surrogatepass")
    return text.endswith(b"} ") or text.endswith(b"} \n") or b"} \n" in text or b"} ," in text


def dumps_str(text: str) -> str:
    """A JSON string literal."""
    return encode_basestring_ascii(text)

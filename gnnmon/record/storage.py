"""JSON Lines files: a manifest line, then one line per row / GC event / sample / marker.

Every line is written whole and flushed as it is produced, so a crash or a kill leaves every
completed line readable. :func:`read_lines` reads such a file back, tolerating a cut-off last line.
"""

from __future__ import annotations

import json
import math
import os
import threading
import warnings
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any

import torch

from gnnmon.errors import ReportFileError

try:
    from _json import make_encoder as _make_encoder

    c_make_encoder: Any = _make_encoder
except ImportError:  # pragma: no cover - CPython always has it
    c_make_encoder = None

FORMAT = "gnnmon.jsonl"
FORMAT_VERSION = 1


def _default(obj: Any) -> Any:
    if isinstance(obj, (torch.device, torch.dtype, Path)):
        return str(obj)
    if isinstance(obj, torch.Tensor) and obj.numel() == 1:
        return obj.item()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    item = getattr(obj, "item", None)  # numpy scalars
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):
            pass
    return repr(obj)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_default, allow_nan=False)
# The C encoder made once (json.JSONEncoder.encode builds one per call): about 1 µs less per row.
_C_ENCODE = (
    c_make_encoder(None, _default, encode_basestring_ascii, None, ":", ",", False, False, False)
    if c_make_encoder is not None else None
)


def dumps(obj: dict[str, Any]) -> str:
    """One JSON line (no newline); non-finite floats become null (strict JSON), other objects
    their str/repr."""
    try:
        if _C_ENCODE is not None:
            return "".join(_C_ENCODE(obj, 0))
        return _ENCODER.encode(obj)
    except ValueError:  # NaN or infinity somewhere: rare, so checked only then
        return _ENCODER.encode(_finite(obj))


def typed_line(kind: str, obj: dict[str, Any]) -> str:
    """``{"type": kind, **obj}`` as one JSON line, without copying ``obj``."""
    body = dumps(obj)
    head = _HEADS.get(kind) or '{"type":' + dumps_str(kind)
    return head + "}" if body == "{}" else head + "," + body[1:]


_HEADS = {"row": '{"type":"row"'}


def dumps_str(text: str) -> str:
    """A JSON string literal."""
    return encode_basestring_ascii(text)


class JsonlWriter:
    """Appends lines to a file with unbuffered writes (a kill leaves every line written before it
    on disk; a line cut by the kill is skipped by the reader); safe to call from several threads."""

    def __init__(self, path: str | os.PathLike[str], mode: str = "w") -> None:
        if mode not in ("w", "x", "a"):
            raise ValueError(f"mode must be 'w', 'x' or 'a', got {mode!r}")
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, mode + "b", buffering=0)
        self._lock = threading.Lock()
        self.lines = 0

    def write(self, obj: dict[str, Any]) -> None:
        """One line, one write."""
        self.write_lines([dumps(obj)])

    def write_lines(self, lines: list[str]) -> None:
        """Encoded lines (no newline) in one write (the writer thread's batches)."""
        if not lines:
            return
        data = ("\n".join(lines) + "\n").encode("utf-8")
        with self._lock:
            if self._file.closed:
                raise ValueError(f"report file {self.path} is already closed")
            view = memoryview(data)
            while view:
                view = view[self._file.write(view):]
            self.lines += len(lines)

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()


def read_lines(path: str | os.PathLike[str], strict: bool = True) -> Iterator[dict[str, Any]]:
    """Yield the objects of a gnnmon JSON Lines file, the manifest first.

    A cut-off last line (a killed writer) is skipped with a warning. A corrupt line before it raises
    :class:`ReportFileError` naming the line, unless ``strict=False`` (then it is skipped, warned).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no gnnmon report at {path}")
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        lines.pop()
    if not lines or not lines[0].strip():
        raise ReportFileError(f"{path} is empty: no gnnmon manifest line")
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        last = n == len(lines)
        try:
            obj = json.loads(raw)
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            if last and not ends_with_newline:
                warnings.warn(
                    f"{path}: last line {n} is cut off (the writer was interrupted); "
                    f"read the {n - 1} complete line(s) before it",
                    RuntimeWarning,
                    stacklevel=2,
                )
                return
            if n == 1:
                raise ReportFileError(f"{path} is not a gnnmon report: line 1 is not JSON") from exc
            if strict:
                raise ReportFileError(
                    f"{path}:{n}: corrupt line ({exc}); pass strict=False to skip corrupt lines"
                ) from exc
            warnings.warn(f"{path}:{n}: skipped a corrupt line ({exc})", RuntimeWarning, 2)
            continue
        if n == 1 and (obj.get("type") != "manifest" or obj.get("format") != FORMAT):
            raise ReportFileError(
                f"{path} is not a gnnmon report: line 1 is not a {FORMAT} manifest"
            )
        yield obj

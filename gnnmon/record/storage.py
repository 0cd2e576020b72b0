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
from collections.abc import Callable, Iterator
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

try:  # a C encoder and parser several times faster than json's (a hard dependency; json if absent)
    import orjson

    _orjson_dumps: Any = orjson.dumps
    _orjson_loads: Any = orjson.loads
    _ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
except ImportError:  # pragma: no cover - orjson is a dependency
    _orjson_dumps = _orjson_loads = None
    _ORJSON_OPTIONS = 0

FORMAT = "gnnmon.jsonl"
FORMAT_VERSION = 1
MANIFEST_START = b'{"type":"manifest","format":"gnnmon.jsonl"'
"""How every manifest line gnnmon writes begins: a cut-off first line is gnnmon's only if it does."""


MAX_TENSOR_VALUES = 1000
"""A tensor in a config or marker is stored as its values up to this many, else as its repr."""


def _default(obj: Any) -> Any:
    if isinstance(obj, (torch.device, torch.dtype, Path)):
        return str(obj)
    if isinstance(obj, torch.Tensor):
        if obj.numel() == 1:
            return obj.item()
        return obj.tolist() if obj.numel() <= MAX_TENSOR_VALUES else repr(obj)
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


def encode(obj: dict[str, Any]) -> bytes:
    """One JSON line as UTF-8 bytes (no newline), as :func:`dumps` writes it: non-finite floats
    become null, tensors their values, other objects their repr."""
    if _orjson_dumps is not None:
        try:
            return _orjson_dumps(obj, default=_default, option=_ORJSON_OPTIONS)
        except TypeError:  # an int beyond 64 bits, a subclass orjson refuses: json says it as it can
            pass
    return dumps(obj).encode("utf-8")


def typed_line(kind: str, encoded: bytes) -> bytes:
    """``{"type": kind, ...}`` from an object's encoded line, without decoding it."""
    head = _HEADS.get(kind) or b'{"type":' + dumps_str(kind).encode("ascii")
    return head + b"}" if encoded == b"{}" else head + b"," + encoded[1:]


def parse(line: bytes | str) -> Any:
    """A JSON line back to Python objects."""
    if _orjson_loads is not None:
        return _orjson_loads(line)
    return json.loads(line)


_HEADS = {"row": b'{"type":"row"'}


def dumps_str(text: str) -> str:
    """A JSON string literal."""
    return encode_basestring_ascii(text)


class JsonlWriter:
    """Appends lines to a file with unbuffered writes (a kill leaves every line written before it
    on disk; a line cut by the kill is skipped by the reader); safe to call from several threads
    and, through a reentrant lock, from a signal handler that interrupts a write in this thread.

    ``header``: the first line (the manifest). It is written to a temporary file beside ``path``
    that then takes ``path``'s place (``mode="x"``: only if none exists), so a run that cannot
    start leaves a previous file at ``path`` untouched.
    """

    def __init__(self, path: str | os.PathLike[str], mode: str = "w", header: dict[str, Any] | None = None) -> None:
        if mode not in ("w", "x", "a"):
            raise ValueError(f"mode must be 'w', 'x' or 'a', got {mode!r}")
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self.lines = 0
        if header is None or mode == "a":
            self._file = open(self.path, mode + "b", buffering=0)
            if header is not None:
                self.write(header)
            return
        first = (dumps(header) + "\n").encode("utf-8")  # a value JSON cannot hold fails here, before any file
        if mode == "x" and self.path.exists():
            raise FileExistsError(f"{self.path} exists (mode='x' refuses to overwrite it)")
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        self._file = open(temp, "xb", buffering=0)
        try:
            view = memoryview(first)
            while view:
                view = view[self._file.write(view):]
            if mode == "x":
                _link_new(temp, self.path)
            else:
                os.replace(temp, self.path)
        except BaseException:
            self._file.close()
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise
        self.lines = 1

    def write(self, obj: dict[str, Any]) -> None:
        """One line, one write."""
        self.write_lines([encode(obj)])

    def write_lines(self, lines: list[bytes]) -> None:
        """Encoded lines (no newline) in one write (the writer thread's batches)."""
        if not lines:
            return
        data = b"\n".join(lines) + b"\n"
        with self._lock:  # reentrant: a signal handler's row in this thread must not wait on itself
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

    def forget(self) -> None:
        """In a forked child: close this process's descriptor without the lock, which a thread of
        the parent (the writer, mid-write) may have held at the fork and no thread of the child
        will ever release; the parent's descriptor stays open."""
        self._lock = threading.RLock()
        self._file.close()


def _link_new(temp: Path, path: Path) -> None:
    """Give ``temp`` the name ``path`` only if no file has it (atomically where links exist)."""
    try:
        os.link(temp, path)  # fails if a file appeared meanwhile: nothing overwritten
    except FileExistsError:
        raise FileExistsError(f"{path} exists (mode='x' refuses to overwrite it)") from None
    except OSError:  # a filesystem without hard links
        if path.exists():
            raise FileExistsError(f"{path} exists (mode='x' refuses to overwrite it)") from None
        os.replace(temp, path)
        return
    os.unlink(temp)


SKIP_HINT = "load(path, strict=False) or gnnmon report --lenient"
"""How to read a file past its corrupt lines, from Python and from the shell."""


def read_lines(path: str | os.PathLike[str], strict: bool = True,
               progress: Callable[[int], Any] | None = None) -> Iterator[dict[str, Any]]:
    """Yield the objects of a gnnmon JSON Lines file, the manifest first, reading it a line at a
    time (a file of any size, in bounded memory). ``progress(n)``: called with the bytes read
    since its previous call, every few MB.

    A cut-off last line (a killed writer) is skipped with a warning. A corrupt line before it raises
    :class:`ReportFileError` naming the line, unless ``strict=False`` (then it is skipped, warned).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no gnnmon report at {path}")
    with open(path, "rb", buffering=1 << 20) as f:
        done = 0
        n = 0
        for n, raw in enumerate(f, start=1):
            if progress is not None:
                done += len(raw)
                if done >= PROGRESS_EVERY:
                    progress(done)
                    done = 0
            if n == 1 and not raw.strip():
                raise ReportFileError(f"{path} is empty: no gnnmon manifest line")
            if not raw.strip():
                continue
            complete = raw.endswith(b"\n")  # only the last line of a cut file lacks it
            try:
                obj = parse(raw)
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
            except ValueError as exc:
                if n == 1 and not raw.lstrip().startswith(MANIFEST_START):
                    raise ReportFileError(f"{path} is not a gnnmon report: line 1 is not a {FORMAT} manifest") from exc
                if not complete:
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
                        f"{path}:{n}: corrupt line ({exc}); skip corrupt lines with {SKIP_HINT}"
                    ) from exc
                warnings.warn(f"{path}:{n}: skipped a corrupt line ({exc})", RuntimeWarning, 2)
                continue
            if n == 1 and (obj.get("type") != "manifest" or obj.get("format") != FORMAT):
                raise ReportFileError(
                    f"{path} is not a gnnmon report: line 1 is not a {FORMAT} manifest"
                )
            if obj.get("type") == "row" and not (isinstance(obj.get("label"), str) and isinstance(obj.get("index"), int)):
                if strict:
                    raise ReportFileError(f"{path}:{n}: a row without its label and index; skip it with {SKIP_HINT}")
                warnings.warn(f"{path}:{n}: skipped a row without its label and index", RuntimeWarning, 2)
                continue
            yield obj
        if progress is not None and done:
            progress(done)
        if n == 0:
            raise ReportFileError(f"{path} is empty: no gnnmon manifest line")


PROGRESS_EVERY = 4 << 20
"""Bytes read between two calls of :func:`read_lines`'s ``progress``."""

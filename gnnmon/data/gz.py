"""A run file as a gzip stream (``collect("run.jsonl.gz")``): standard gzip, which ``zcat``, ``jq``,
pandas, polars and DuckDB read as it is, written so that a kill loses at most the batch being
written, and read to its last whole line however it was cut.

Writing: each batch of lines is compressed and flushed to a byte boundary (``Z_SYNC_FLUSH``: what
came before it decompresses without what comes after), so the file holds every batch written
before a kill; the run's end closes the member (its CRC and size). A write that fails (a full disk)
is cut back to the last batch that fit and the compressor goes back to where it was then, so that
no later line depends on bytes the disk never got (the batch's lines are lost, counted). Reading:
members one after another; a stream cut off (a killed writer: no end-of-member marker) gives the
lines up to its cut, and says how many compressed bytes were left after them.
"""

from __future__ import annotations

import io
import zlib
from typing import Any

MAGIC = b"\x1f\x8b"
"""How a gzip stream begins."""

LEVEL = 1
"""zlib's compression level (1 fast, 9 small): 1, a third of level 6's time on the writer thread
for a quarter more bytes (benchmarks/row_bytes.py prints bytes and writer µs a row at 1 and 6)."""

def is_gzip(head: bytes) -> bool:
    """Whether a file starting with ``head`` is a gzip stream."""
    return head[:2] == MAGIC


class Compressor:
    """Lines in, gzip bytes out, each batch flushed to a byte boundary (see the module doc)."""

    __slots__ = ("_z", "_before", "level")

    def __init__(self, level: int = LEVEL) -> None:
        self.level = level
        self._z: Any = zlib.compressobj(level, zlib.DEFLATED, 31)  # 31: a gzip header and trailer
        self._before: Any = None

    def batch(self, data: bytes) -> bytes:
        """``data`` compressed and flushed: the bytes to append (the member's header first)."""
        self._before = self._z.copy()  # where to go back to if these bytes do not reach the file
        return self._z.compress(data) + self._z.flush(zlib.Z_SYNC_FLUSH)

    def undo(self) -> None:
        """The last batch's bytes did not reach the file (cut back to before them): forget it."""
        if self._before is not None:
            self._z, self._before = self._before, None

    def finish(self) -> bytes:
        """The member's end (its CRC and size)."""
        return self._z.flush(zlib.Z_FINISH)


class Decompressed(io.RawIOBase):
    """A gzip file's lines as a raw binary stream (wrap it in :class:`io.BufferedReader`): members
    one after another; where the stream is cut off, it ends there, and :attr:`cut` says so."""

    def __init__(self, raw: Any, chunk: int = 1 << 20) -> None:
        self._raw, self._chunk = raw, chunk
        self._z = zlib.decompressobj(31)
        self._fed = 0  # bytes given to the current member's decompressor
        self._out = b""
        self._done = False
        self.cut = False
        """The stream ended inside a member (a killed writer), or was damaged: what was read is whole."""
        self.compressed = 0
        """Compressed bytes read."""

    def readable(self) -> bool:
        return True

    def _feed(self, data: bytes) -> bytes:
        out = []
        while data:
            if self._z.eof:  # the member before ended: the next one
                self._z, self._fed = zlib.decompressobj(31), 0
            out.append(self._z.decompress(data))
            self._fed += len(data)
            data = self._z.unused_data if self._z.eof else b""
        return b"".join(out)

    def readinto(self, buffer: Any) -> int:
        while not self._out and not self._done:
            data = self._raw.read(self._chunk)
            self.compressed += len(data)
            if not data:
                self._done = True
                self.cut = self._fed > 0 and not self._z.eof
                self._out = self._z.flush() if not self._z.eof else b""
                break
            try:
                self._out = self._feed(data)
            except zlib.error:
                self._done = self.cut = True  # damaged from here: what came before stands
        n = min(len(buffer), len(self._out))
        buffer[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

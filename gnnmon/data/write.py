"""Writing a run file: :class:`JsonlWriter` puts the manifest line in place whole (a run that cannot
start leaves a previous file untouched), then appends whole lines with unbuffered writes, so a
crash or a kill leaves every completed line readable; compressed, as a gzip stream flushed at each
batch (:mod:`gnnmon.data.gz`). What a line holds is :mod:`gnnmon.data.format`; reading it back is
:mod:`gnnmon.data.read`.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks (a second writer is not detected)
    fcntl = None  # type: ignore[assignment]

from gnnmon.data.format import dumps, encode
from gnnmon.data.gz import Compressor


class JsonlWriter:
    """Appends lines to a file with unbuffered writes (a kill leaves every line written before it
    on disk; a line cut by the kill is skipped by the reader); safe to call from several threads
    and, through a reentrant lock, from a signal handler that interrupts a write in this thread.

    ``header``: the first line (the manifest). It is written to a temporary file beside ``path``
    that then takes ``path``'s place (``mode="x"``: only if none exists), so a run that cannot
    start leaves a previous file at ``path`` untouched. The file it replaces keeps its permission
    bits; a read-only file, or one another live process's run is writing (this writer holds an
    advisory lock on its file while the process lives), is refused with an error saying so.
    ``compress``: a gzip stream, each batch flushed (:mod:`gnnmon.data.gz`; appending adds a member).
    """

    def __init__(self, path: str | os.PathLike[str], mode: str = "w", header: dict[str, Any] | None = None,
                 compress: bool = False) -> None:
        if mode not in ("w", "x", "a"):
            raise ValueError(f"mode must be 'w', 'x' or 'a', got {mode!r}")
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self.lines = 0
        self._end = 0  # bytes of whole lines: where a failed write is cut back to
        self._torn = False  # a failed write left part of a line that could not be cut back
        self._gz = Compressor() if compress else None
        if header is None or mode == "a":
            _refuse_if_written(self.path)
            self._file = open(self.path, mode + "b", buffering=0)
            if not _lock(self._file):
                self._file.close()
                _refuse_if_written(self.path, force=True)
            self._end = os.fstat(self._file.fileno()).st_size
            if header is not None:
                self.write(header)
            return
        first = (dumps(header) + "\n").encode("utf-8")  # a value JSON cannot hold fails here, before any file
        if self._gz is not None:
            first = self._gz.batch(first)
        if mode == "x" and self.path.exists():
            raise FileExistsError(f"{self.path} exists (mode='x' refuses to overwrite it)")
        old_mode = _replaceable(self.path)
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self._file = open(temp, "xb", buffering=0)
        except OSError as exc:  # say so of the user's path, not of the temporary file beside it
            raise type(exc)(exc.errno, f"cannot write a run file at {self.path}: {exc.strerror}") from exc
        try:
            _lock(self._file)  # held while this process writes: another process's run refuses the path
            if old_mode is not None:
                os.chmod(temp, old_mode)  # the file it replaces keeps its permissions
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
        self._end = len(first)

    def write(self, obj: dict[str, Any]) -> None:
        """One line, one write."""
        self.write_lines([encode(obj)])

    def write_lines(self, lines: list[bytes]) -> None:
        """Encoded lines (no newline) in one write (the writer thread's batches). A write that
        fails (a full disk) keeps the whole lines that fit and no part of a line: the file is cut
        back to the last whole line written before the error is raised, with the number of this
        batch's lines that are in the file as its ``lines_written`` (the rest are lost), so the
        lines written after it (once there is room again) are whole lines of their own."""
        if not lines:
            return
        data = b"\n".join(lines) + b"\n"
        with self._lock:  # reentrant: a signal handler's row in this thread must not wait on itself
            if self._file.closed:
                raise ValueError(f"report file {self.path} is already closed")
            if self._gz is not None:
                self._write_compressed(data, len(lines))
                return
            prefixed = self._torn and not self._cut_back()
            if prefixed:
                data = b"\n" + data  # the part left ends as a line of its own, skipped by the reader
            view = memoryview(data)
            try:
                while view:
                    view = view[self._file.write(view):]
            except BaseException as exc:
                written = len(data) - len(view)
                whole = data.rfind(b"\n", 0, written) + 1  # bytes of the whole lines that fit
                kept = data.count(b"\n", 0, whole) - (1 if prefixed and whole else 0)
                if written:  # part of the batch is in the file: keep its whole lines, cut the rest
                    if whole:
                        self._end += whole
                        self.lines += kept
                    self._torn = True
                    self._cut_back()
                if isinstance(exc, Exception):
                    exc.lines_written = max(kept, 0)  # type: ignore[attr-defined]
                raise
            self._end = self._file.tell()  # the file's end: whole lines up to here
            self._torn = False
            self.lines += len(lines)

    def _write_compressed(self, data: bytes, lines: int) -> None:
        """One batch as a flushed piece of the gzip stream; a write that fails is cut back to the
        batch before and the compressor goes back with it (the batch's lines are lost, whole)."""
        assert self._gz is not None
        if self._torn and not self._cut_back():  # bytes of a failed batch the file could not shed
            raise OSError(errno.EIO, f"{self.path}: a failed write's bytes could not be cut back; the "
                          "compressed stream takes no more batches")
        view = memoryview(self._gz.batch(data))
        try:
            while view:
                view = view[self._file.write(view):]
        except BaseException as exc:
            self._gz.undo()
            self._torn = True
            self._cut_back()
            if isinstance(exc, Exception):
                exc.lines_written = 0  # type: ignore[attr-defined]
            raise
        self._end = self._file.tell()
        self.lines += lines

    def _cut_back(self) -> bool:
        """Cut the file back to its last whole line; whether that worked (``_torn`` is cleared)."""
        try:
            os.ftruncate(self._file.fileno(), self._end)
            self._file.seek(self._end)
        except OSError:
            return False
        self._torn = False
        return True

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        """Close the file (a gzip stream's member ended first: its CRC and size)."""
        with self._lock:
            if not self._file.closed:
                try:
                    if self._gz is not None and not self._torn:
                        tail = memoryview(self._gz.finish())
                        while tail:
                            tail = tail[self._file.write(tail):]
                finally:
                    self._file.close()

    def forget(self) -> None:
        """In a forked child: close this process's descriptor without the lock, which a thread of
        the parent (the writer, mid-write) may have held at the fork and no thread of the child
        will ever release; the parent's descriptor stays open."""
        self._lock = threading.RLock()
        self._file.close()


def _lock(file: Any) -> bool:
    """Take this process's lock on the file it writes (advisory: other gnnmon writers ask for it;
    the kernel drops it when the process ends, however it ends). False if another process holds
    it; True where locks do not exist (nothing to ask)."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # a filesystem without locks: nothing to ask
        return True
    return True


def _refuse_if_written(path: Path, force: bool = False) -> None:
    """Refuse ``path`` if a live process's run is writing it (it holds the file's lock)."""
    if fcntl is None or not path.exists():
        return
    if not force:
        try:
            with open(path, "rb") as probe:
                try:
                    fcntl.flock(probe.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
                    return  # no writer holds it (released when the probe closes)
                except BlockingIOError:
                    pass
                except OSError:
                    return
        except OSError:
            return  # unreadable: open() says why, as it would without gnnmon
    who = ""
    try:
        with open(path, "rb") as f:
            pid = json.loads(f.readline()).get("pid")
        who = f" (pid {pid})" if isinstance(pid, int) else ""
    except (OSError, ValueError, AttributeError):
        pass
    raise FileExistsError(f"{path} is being written by another process's gnnmon run{who}: give this run a "
                          "path of its own (its rows would destroy or interleave with that run's)")


def _replaceable(path: Path) -> int | None:
    """Whether a run may put its file at ``path`` in place of the file there: refused where
    ``open(path, "w")`` would be (a read-only file) or where a live process's run writes it;
    the permission bits the new file keeps (None: no file there)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return None  # the open of the temporary file beside it says what is wrong
    if not st.st_mode & 0o222 or not os.access(path, os.W_OK):  # no write bit: read-only for root too
        raise PermissionError(errno.EACCES, f"{path} is read-only: a run does not replace a file it could not "
                              "write (make it writable, or give the run another path)")
    _refuse_if_written(path)
    return stat.S_IMODE(st.st_mode)


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

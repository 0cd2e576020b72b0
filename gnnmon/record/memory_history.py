"""PyTorch's CUDA allocation history, opt-in per run (``collect(memory_history=N)``): recorded while
the run lasts and dumped at its first out-of-memory error, beside the run's file, for
pytorch.org/memory_viz (:mod:`gnnmon.record.oom_row` puts its path in the failed row)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

_FILE_BAD = re.compile(r"[^\w.-]", re.ASCII)
"""Characters of a label kept out of a snapshot's file name (a ``/`` would name a folder)."""


class History:
    """PyTorch's CUDA allocation history for one run (``torch.cuda.memory._record_memory_history``,
    a private API: guarded; a failure leaves the run going without it), keeping the newest
    ``entries`` events (None: off), dumped at the run's first out-of-memory error. Each event keeps
    its Python stack only: C++ frames (torch's default) cost an unwind per allocation and, at the
    dump, ``addr2line`` processes that torch keeps running until the process exits."""

    def __init__(self, entries: int | None) -> None:
        self.entries = entries
        self.recording = False
        self.dumped: str | None = None

    def start(self) -> dict[str, Any] | None:
        """Start recording; what the manifest says of it (None: off). Recording starts CUDA."""
        if self.entries is None:
            return None
        entry: dict[str, Any] = {"entries": self.entries, "recording": False}
        record = getattr(torch.cuda.memory, "_record_memory_history", None)
        if not torch.cuda.is_available():
            return {**entry, "why": "no CUDA device: the history records CUDA allocations only"}
        if record is None:
            return {**entry, "why": "this torch has no torch.cuda.memory._record_memory_history"}
        try:
            record(max_entries=self.entries, stacks="python")
        except Exception as exc:  # noqa: BLE001 - a private API that changed: the run goes on without it
            return {**entry, "why": f"{type(exc).__name__}: {exc}"}
        self.recording = True
        return {**entry, "recording": True}

    def stop(self) -> None:
        """Stop recording (best effort: the run's rows come first)."""
        if self.recording:
            self.recording = False
            try:
                torch.cuda.memory._record_memory_history(enabled=None)
            except Exception:  # noqa: BLE001
                pass

    def dump(self, path: str | None, label: str, index: int) -> str | None:
        """At the run's first out-of-memory error: dump the history next to the run's file
        (``<run>.oom-<label>-<index>.pickle``, the label's characters other than letters, digits,
        ``.``, ``_`` and ``-`` written ``_``; for pytorch.org/memory_viz); its path, else None (a
        dump that failed says why in :attr:`dumped`, and never raises)."""
        if not self.recording or self.dumped is not None:
            return None
        try:
            base = Path(path) if path is not None else Path.cwd() / "gnnmon"
            target = base.with_name(f"{base.stem}.oom-{_FILE_BAD.sub('_', str(label))[:100]}-{index}.pickle")
            torch.cuda.memory._dump_snapshot(str(target))
        except Exception as exc:  # noqa: BLE001 - no snapshot: the row has the rest
            self.dumped = f"failed: {type(exc).__name__}: {exc}"
            return None
        self.dumped = str(target)
        return self.dumped

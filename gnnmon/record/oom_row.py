"""The post-mortem a call that ran out of memory leaves in its row.

When a decorated call raises an out-of-memory error (``torch.OutOfMemoryError``, MPS's and the
CPU allocator's equivalents, ``MemoryError``) its row gets, besides ``error``, the raw state: the
failed request, the device's memory at the failure (:mod:`gnnmon.devices.oom_error`; read once
per exception, while the failed call's tensors are still held by its traceback, and shared by the
rows it passes through) and with ``collect(memory_history=N)`` the path of the allocation-history
snapshot dumped at the run's first out-of-memory error; the row keeps its batch's shape and the
figures it has. Nothing is fitted on the failing step's thread: the report fits the label's memory
model when it reads the run and forecasts the failed batch (:meth:`gnnmon.Report.oom` puts it all
in words).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from gnnmon.devices.oom_error import is_oom, oom_state

_READ = "_gnnmon_oom"  # the state read for an exception, kept on it for the outer rows


def record_oom(fields: dict[str, Any], backend: Any, error: BaseException, run: Any, note: Any) -> None:
    """Fill the ``oom_*`` fields of a row whose call raised ``error``, if it is an OOM."""
    if not is_oom(error):
        return
    known = getattr(error, _READ, None)
    if known is None:
        state, why = oom_state(backend, error)
        if why is not None:
            note(why)
        snapshot = run.history.dump(run.path, fields["label"], fields["index"])
        if snapshot is not None:
            state["oom_snapshot"] = snapshot
        known = state
        try:
            setattr(error, _READ, known)
        except AttributeError:  # an exception type with __slots__
            pass
    fields.update(known)


# -- the allocation history (opt-in: collect(memory_history=N)) ----------------------------------

class History:
    """PyTorch's CUDA allocation history for one run (``torch.cuda.memory._record_memory_history``,
    a private API: guarded; a failure leaves the run going without it), keeping the newest
    ``entries`` events (None: off), dumped at the run's first out-of-memory error."""

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
            record(max_entries=self.entries)
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
        (``<run>.oom-<label>-<index>.pickle``, for pytorch.org/memory_viz); its path, else None."""
        if not self.recording or self.dumped is not None:
            return None
        base = Path(path) if path is not None else Path.cwd() / "gnnmon"
        target = base.with_name(f"{base.stem}.oom-{label}-{index}.pickle")
        try:
            torch.cuda.memory._dump_snapshot(str(target))
        except Exception as exc:  # noqa: BLE001 - no snapshot: the row has the rest
            self.dumped = f"failed: {type(exc).__name__}: {exc}"
            return None
        self.dumped = str(target)
        return self.dumped

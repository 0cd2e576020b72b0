"""The post-mortem a call that ran out of memory leaves in its row.

When a decorated call raises an out-of-memory error (``torch.OutOfMemoryError``, MPS's and the
CPU allocator's equivalents, ``MemoryError``) its row gets, besides ``error``: the failed
request, the device's memory at the failure (:mod:`gnnmon.devices.oom`; read once per exception,
while the failed call's tensors are still held by its traceback, and shared by the rows it passes
through), the forecast peak for the row's batch from the memory model of its label over the rows
the run keeps (``mem_peak_bytes`` against the batch shape, :mod:`gnnmon.report.memory_model`),
and with ``collect(memory_history=N)`` the path of the allocation-history snapshot dumped at the
run's first out-of-memory error. :meth:`gnnmon.Report.oom` puts it in words.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import torch

from gnnmon.data.table import Table
from gnnmon.devices.oom import is_oom, oom_state
from gnnmon.report.memory_model import fit

_FILE_BAD = re.compile(r"[^\w.-]", re.ASCII)
"""Characters of a label kept out of a snapshot's file name (a ``/`` would name a folder)."""

_READ = "_gnnmon_oom"  # the state read for an exception, kept on it for the outer rows


def record_oom(fields: dict[str, Any], backend: Any, error: BaseException, run: Any, note: Any) -> None:
    """Fill the ``oom_*`` fields of a row whose call raised ``error``, if it is an OOM."""
    if not is_oom(error):
        return
    known = getattr(error, _READ, None)
    if known is None:
        state: dict[str, Any] = {}
        try:
            state, why = oom_state(backend, error)
            if why is not None:
                note(why)
        except Exception as exc:  # noqa: BLE001 - the user's error comes first: the row says why
            note(f"out of memory: the device's state could not be read ({type(exc).__name__}: {exc})")
        tried = run.history.dumped is None
        snapshot = run.history.dump(run.path, fields["label"], fields["index"])
        if snapshot is not None:
            state["oom_snapshot"] = snapshot
        elif tried and run.history.dumped is not None:
            note(f"out of memory: the allocation history was not dumped ({run.history.dumped})")
        known = state
        try:
            setattr(error, _READ, known)
        except AttributeError:  # an exception type with __slots__
            pass
    fields.update(known)
    _forecast(fields, run, note)


def _forecast(fields: dict[str, Any], run: Any, note: Any) -> None:
    label = fields["label"]
    shape = {t: fields.get(t) for t in ("num_nodes", "num_edges", "num_graphs")}
    if shape["num_nodes"] is None:
        return
    try:
        with warnings.catch_warnings():  # the default run, never started, keeps its rows all the same
            warnings.simplefilter("ignore")
            rows = run.records
        model = fit(Table(r for r in rows if r.get("label") == label), label, "mem_peak_bytes",
                    device=fields.get("device"))
        given = {t: shape[t] for t in model.terms}
        prediction = model.predict(**given)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - too few rows, no model to trust: the error comes first
        note(f"out of memory: no forecast for this batch ({exc})")
        return
    fields["oom_forecast_bytes"] = round(prediction.bytes)
    fields["oom_forecast_upper_bytes"] = round(prediction.upper_bytes)


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

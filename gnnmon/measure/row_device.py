"""The device a row's measurements use: chosen by the measure stage and handed to the row.

The first measurement that needs a device chooses it (:func:`~gnnmon.devices.resolve.choose_backend`:
``device=``, else the call's arguments, else the device in use) and hands it to the row
(:meth:`~gnnmon.record.row.Row.use_device`), which keeps it as its ``device``, ``backend`` and
``device_source``; the later ones reuse it unless they name a device of their own. A row that no
measurement chose a device for gets one when it closes, for its identity fields only.
"""

from __future__ import annotations

from typing import Any

from gnnmon.devices import Backend
from gnnmon.devices.resolve import BY_NOTHING, choose_backend, started_during
from gnnmon.record.interrupts import raised_by_handler
from gnnmon.record.row import Row


def row_backend(row: Row, explicit: Any = None) -> Backend:
    """The backend a measurement of ``row`` uses: ``explicit`` (its ``device=``) if given, else the
    row's own, chosen now if it has none yet (the first chosen is the row's)."""
    if explicit is None:
        backend = row.backend
        if backend is not None:
            return backend
    backend, how = choose_backend(row.found, explicit)
    if row.backend is None:
        row.use_device(backend, how)
    return backend


def close_row(row: Row, error: BaseException | None) -> None:
    """Close ``row`` (:meth:`~gnnmon.record.row.Row.close`) with its device settled: chosen now
    where no measurement chose one (a failure to choose becomes a note: a row without memory or
    timing must not fail the call), and a row measured on the host because no accelerator was in
    use says whether the call started one."""
    if not row.closed:
        if row.backend is None:
            try:
                row_backend(row)
            except Exception as exc:
                if raised_by_handler(exc):
                    raise
                row.note(f"device not resolved: {exc}")
        elif row.fields.get("device_source") == BY_NOTHING:
            started = started_during()
            if started is not None:
                row.note(started)
    row.close(error)

"""The device a row's measurements use: chosen by the measure stage and handed to the row.

The first measurement that needs a device chooses it (:func:`~gnnmon.devices.resolve.choose_backend`:
``device=``, else the call's arguments, else the device in use) and it becomes the row's
(:func:`row_backend`: its ``backend``, and its ``device``, ``backend`` and ``device_source``
fields); the later ones reuse it unless they name a device of their own. A row that no
measurement chose a device for gets one when it closes, for its identity fields only — unless
it never started because its own ``device=`` could not be measured (``device='cuda'`` on a machine
without CUDA): nothing was measured, on that device or any other, and it keeps none (``device``
and ``backend`` None, no ``device_source``, as a row whose device could not be resolved); its
``error`` and its ``did not start`` note say which device was named and why it failed
(:class:`Unmeasured`).

A call whose arguments are on the host while an accelerator is in use (``batch =
batch.to(device)`` inside the step, PyG's usual loop) is measured on both — the accelerator's
window and events, and the host's RSS and wall time, which every row has — and settled when it
closes: on the accelerator if its allocator handed out memory during the call (a GPU step always
does), else on the host (a CPU-only function in a GPU process). Its ``device_source`` says which
(:data:`~gnnmon.devices.resolve.BY_WORK`, :data:`~gnnmon.devices.resolve.BY_HOST_WORK`). Whether
the allocator was used is read from the reads the row's memory window makes at its ends; a row
without one makes one read at each end for it.
"""

from __future__ import annotations

from typing import Any

from gnnmon.devices import Backend, backend_for
from gnnmon.devices.resolve import (
    BY_ARGUMENT,
    BY_EXPLICIT,
    BY_HOST_WORK,
    BY_NOTHING,
    BY_WORK,
    EITHER,
    choose_backend,
    host_now,
    started_during,
)
from gnnmon.errors import raised_by_handler
from gnnmon.measure.memory_fields import host_instead
from gnnmon.record.row import Row


class Placing:
    """A row measured on an accelerator until it ends, then settled on whichever did its work:
    the accelerator's ``activity`` count at the row's start (None until a measurement used the
    device) and whether a memory window's end read it last."""

    __slots__ = ("start", "read_at_end")

    def __init__(self) -> None:
        self.start: int | None = None
        self.read_at_end = False


class Unmeasured:
    """The placing of a row no measurement had chosen a device for when its own ``device=`` could
    not be measured (choosing it raised): ``said``, the note the row's bracket writes if the row
    did not start for that failure (``did not start: DeviceError: ...``). The row's close reads it:
    a row that did not start for it keeps no device; any other (a ``phase(device=...)`` that failed
    inside a row that ran) gets its device as any row no measurement chose one for. Its ``start``
    is never None: :func:`work_starts` takes no count for it, and it is never settled."""

    start = 0
    read_at_end = False

    def __init__(self, said: str) -> None:
        self.said = said


def work_starts(row: Row, fresh: bool) -> None:
    """A measurement of ``row`` starts on its device: where the row's device is settled at its
    end, the accelerator's count is taken now, from a new read or (``fresh`` False) from the read
    the measurement just made."""
    placing = row.placing
    if placing is not None and placing.start is None:
        placing.start = row.backend.activity(fresh)  # type: ignore[union-attr]


def window_read_at_end(row: Row) -> None:
    """A memory window of ``row`` has just closed: its read is the row's end read."""
    placing = row.placing
    if placing is not None:
        placing.read_at_end = True


def row_backend(row: Row, explicit: Any = None) -> Backend:
    """The backend a measurement of ``row`` uses: ``explicit`` (its ``device=``) if given, else the
    row's own, chosen now if it has none yet (the first chosen is the row's)."""
    if explicit is None:
        backend = row.backend
        if backend is not None:
            return backend
        found = row.found
        backend = host_now() if found is None else None  # the usual answer, read without inferring
        if backend is not None:
            how = BY_NOTHING
        else:
            backend, how = choose_backend(found)
    else:
        try:
            backend, how = choose_backend(row.found, explicit)
        except Exception as exc:  # the device named cannot be measured: the row's close reads why
            if row.backend is None and not raised_by_handler(exc):
                row.placing = Unmeasured(f"did not start: {type(exc).__name__}: {exc}")
            raise
    if row.backend is None:
        if how == EITHER:
            row.placing = Placing()
            how = BY_WORK.format(type=backend.name)  # until it is settled otherwise
        fields = row.fields
        fields["device"] = backend.label
        fields["backend"] = backend.name
        fields["device_source"] = how
        row.backend = backend  # last: a row with a backend has its fields (whatever interrupts this)
    return backend


def model_backend(row: Row, module: Any) -> Backend:
    """The backend a model's own figures in ``row`` (its layers, its DDP buckets) are measured on:
    the device of the model's first parameter, unless the row's device was named (``device=``);
    the row's where the model has none. A host model in a process that runs CUDA elsewhere is the
    host's, though a step with no arguments there is measured on the GPU in use."""
    backend = row_backend(row)
    device = next((p.device for p in module.parameters()), None) if module is not None else None
    if device is not None and device.type != backend.name and row.fields.get("device_source") != BY_EXPLICIT:
        return row_backend(row, device)
    return backend


def _settle(row: Row, placing: Placing | Unmeasured) -> None:
    """Where ``row``'s work ran (see the module doc): the accelerator, if its allocator's count
    moved between the row's ends; else the host, whose memory (RSS) and wall times the row then
    reports in place of the accelerator's, its event spans given back unread."""
    row.placing = None
    if placing.__class__ is Unmeasured:  # a device named in a row that ran, which failed: nothing to settle
        return
    backend = row.backend
    if placing.start is None or backend is None:  # no measurement used the device: the arguments'
        host = backend_for(row.found) if row.found is not None else None
        if host is not None:
            row.backend = host
            fields = row.fields
            fields["device"], fields["backend"], fields["device_source"] = host.label, host.name, BY_ARGUMENT
        return
    if backend.activity(not placing.read_at_end) != placing.start:  # type: ignore[attr-defined]
        return
    host = backend_for(row.found)  # type: ignore[arg-type]
    fields = row.fields
    fields["device"], fields["backend"] = host.label, host.name
    fields["device_source"] = BY_HOST_WORK.format(type=backend.name)
    row.backend = host
    spans = row.deferred()
    for span in [d for d in spans if getattr(d, "backend", None) is backend and hasattr(d, "on_host")]:
        spans.remove(span)
        span.on_host(fields)
    if fields.get("device_s_source") == "events":
        fields["device_s"] = fields["wall_s"]
        fields["device_s_source"] = "wall"
    if "mem_start_bytes" in fields:
        host_instead(fields)


def close_row(row: Row, error: BaseException | None) -> None:
    """Close ``row`` (:meth:`~gnnmon.record.row.Row.close`) with its device settled: chosen now
    where no measurement chose one (a failure to choose becomes a note: a row without memory or
    timing must not fail the call) and the row did not start because its own ``device=`` could
    not be measured (that one keeps none: :class:`Unmeasured`), and a row measured on the host
    because no accelerator was in use says whether the call started one."""
    if not row.closed:
        if row.backend is None:
            if error is None or not _unmeasured(row):
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
        placing = row.placing
        if placing is not None:
            try:
                _settle(row, placing)
            except Exception as exc:
                if raised_by_handler(exc):
                    raise
                row.note(f"device not settled (kept {row.fields['device']}): {exc}")
    row.close(error)


def _unmeasured(row: Row) -> bool:
    """Whether ``row`` did not start because its own ``device=`` could not be measured: its
    bracket's ``did not start`` note names the failure :class:`Unmeasured` kept (then it is
    settled: no device)."""
    placing = row.placing
    if placing.__class__ is not Unmeasured or placing.said not in row.fields["notes"]:
        return False
    row.placing = None
    return True

"""The post-mortem a call that ran out of memory leaves in its row.

When a decorated call raises an out-of-memory error (``torch.OutOfMemoryError``, MPS's and the
CPU allocator's equivalents, ``MemoryError``) its row gets, besides ``error``, the raw state: the
failed request (:mod:`gnnmon.devices.oom_error`), the device's memory at the failure (its
backend's ``memory_state``; read once per exception, while the failed call's tensors are still
held by its traceback, and shared by the rows it passes through) and with
``collect(memory_history=N)`` the path of the allocation-history snapshot dumped at the run's
first out-of-memory error (:mod:`gnnmon.record.memory_history`); the row keeps its batch's shape and the
figures it has. Nothing is fitted on the failing step's thread: the report fits the label's memory
model when it reads the run and forecasts the failed batch (:meth:`gnnmon.Report.oom` puts it all
in words).
"""

from __future__ import annotations

from typing import Any

from gnnmon.devices.base import Backend, MemoryState
from gnnmon.devices.oom_error import is_oom, requested_bytes

_READ = "_gnnmon_oom"  # the state read for an exception, kept on it for the outer rows


def record_oom(fields: dict[str, Any], backend: Backend | None, error: BaseException, run: Any, note: Any) -> None:
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


class OomPostMortem:
    """The probe a row whose call raised closes (:data:`gnnmon.record.probes.ON_ERROR`): the
    post-mortem above, where the error is an out-of-memory one."""

    top_level = False

    def open(self, row: Any) -> None:
        return None

    def close(self, row: Any, opened: Any, fields: dict[str, Any], error: BaseException | None) -> None:
        if error is not None:
            record_oom(fields, row.backend, error, row.run, row.note)


def choose(run: Any) -> OomPostMortem:
    """On every run."""
    return OomPostMortem()


def oom_state(backend: Backend | None, error: BaseException) -> tuple[dict[str, Any], str | None]:
    """The ``oom_*`` fields (bytes) for ``error`` raised on ``backend`` (None: the row's device is
    not known): the request its message gives, and the device's memory as the backend reads it;
    and why some could not be read (None if all were)."""
    fields: dict[str, Any] = {"oom_requested_bytes": requested_bytes(error)}
    if backend is None:
        return fields, "out of memory: the device's memory state was not read (no device resolved for the row)"
    try:
        state = backend.memory_state()
    except Exception as exc:  # noqa: BLE001 - a device in a bad state: keep what the error said
        return fields, f"out of memory: the device's memory state could not be read ({type(exc).__name__}: {exc})"
    if state is not None:
        _state_fields(fields, state)
    return fields, None


def _state_fields(fields: dict[str, Any], state: MemoryState) -> None:
    fields["oom_allocated_bytes"] = state.allocated
    if state.reserved is not None:
        fields["oom_reserved_bytes"] = state.reserved
        fields["oom_cached_free_bytes"] = state.reserved - state.allocated
    if state.fragmented is not None:
        fields["oom_fragmented_bytes"] = state.fragmented
    if state.free is not None:
        fields["oom_device_free_bytes"] = state.free
    if state.total is not None:
        fields["oom_device_total_bytes"] = state.total

"""What an out-of-memory error leaves to read: the failed request and the device's memory then.

Read only when a call has raised one (never on the step's path), from the backend the row
measured: CUDA's caching allocator (allocated, reserved, the reserved share tensors do not use,
the part of it split into blocks too small for a large request) and the driver's free and total
memory (``torch.cuda.mem_get_info``); MPS's allocator and driver; on the CPU the process's RSS and
the machine's RAM. All figures are bytes.
"""

from __future__ import annotations

import re
from typing import Any

import torch

_UNITS = {"B": 1, "KB": 1000, "KIB": 2**10, "MB": 2**20, "MIB": 2**20, "GB": 2**30, "GIB": 2**30,
          "TB": 2**40, "TIB": 2**40}
# CUDA: "Tried to allocate 2.00 GiB"; MPS: "Tried to allocate 256.00 MB on private pool" (binary
# units under decimal names); CPU: "you tried to allocate 1125899906842624 bytes".
_REQUEST = re.compile(r"tried to allocate ([0-9.]+) ?(bytes|[KMGT]i?B|B)\b", re.IGNORECASE)
_MESSAGES = ("out of memory", "can't allocate memory", "cannot allocate memory")


def is_oom(error: BaseException) -> bool:
    """Whether ``error`` says the device (or the host) ran out of memory."""
    oom_type = getattr(torch, "OutOfMemoryError", None)
    if isinstance(error, MemoryError) or (oom_type is not None and isinstance(error, oom_type)):
        return True
    if isinstance(error, RuntimeError):
        text = str(error).lower()
        return any(m in text for m in _MESSAGES)
    return False


def requested_bytes(error: BaseException) -> int | None:
    """The size of the allocation that failed, as the error's message gives it, else None."""
    found = _REQUEST.search(str(error))
    if found is None:
        return None
    unit = found.group(2).upper()
    return round(float(found.group(1)) * (1 if unit == "BYTES" else _UNITS[unit]))


def _cuda(backend: Any) -> dict[str, Any]:
    stats = backend._stats()
    if not stats:
        return {}
    allocated = stats["allocated_bytes"]["all"]["current"]
    reserved = stats["reserved_bytes"]["all"]["current"]
    out = {"oom_allocated_bytes": allocated, "oom_reserved_bytes": reserved,
           "oom_cached_free_bytes": reserved - allocated}
    split = stats.get("inactive_split_bytes", {}).get("all", {}).get("current")
    if split is not None:
        out["oom_fragmented_bytes"] = split
    free, total = torch.cuda.mem_get_info(backend.index)
    out.update(oom_device_free_bytes=free, oom_device_total_bytes=total)
    return out


def _mps(backend: Any) -> dict[str, Any]:
    allocated, driver = torch.mps.current_allocated_memory(), torch.mps.driver_allocated_memory()
    total = torch.mps.recommended_max_memory()
    return {"oom_allocated_bytes": allocated, "oom_reserved_bytes": driver,
            "oom_cached_free_bytes": driver - allocated, "oom_device_total_bytes": total,
            "oom_device_free_bytes": max(total - driver, 0)}


def _cpu(backend: Any) -> dict[str, Any]:
    import psutil  # a dependency; imported here as the failure path is the only user

    ram = psutil.virtual_memory()
    return {"oom_allocated_bytes": psutil.Process().memory_info().rss, "oom_device_total_bytes": ram.total,
            "oom_device_free_bytes": ram.available}


READERS = {"cuda": _cuda, "mps": _mps, "cpu": _cpu}
"""Backend name -> the reader of its memory state at an out-of-memory error."""


def oom_state(backend: Any, error: BaseException) -> tuple[dict[str, Any], str | None]:
    """The ``oom_*`` fields for ``error`` raised on ``backend`` (None: the row's device is not
    known), and why some could not be read (None if all were)."""
    fields: dict[str, Any] = {"oom_requested_bytes": requested_bytes(error)}
    reader = READERS.get(getattr(backend, "name", ""))
    if reader is None:
        return fields, "out of memory: the device's memory state was not read (no device resolved for the row)"
    try:
        fields.update(reader(backend))
    except Exception as exc:  # noqa: BLE001 - a device in a bad state: keep what the error said
        return fields, f"out of memory: the device's memory state could not be read ({type(exc).__name__}: {exc})"
    return fields, None

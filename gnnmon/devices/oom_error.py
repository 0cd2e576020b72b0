"""What an out-of-memory error says: whether it is one, and the size of the request that failed.

Read only when a call has raised (never on the step's path). An error is one by its type
(``torch.OutOfMemoryError``, ``MemoryError``) or by its text: the phrases each device kind declares
for its allocator's failures (:attr:`~gnnmon.devices.registry.BackendKind.oom_messages`). The
device's memory at the failure is its backend's to read (``Backend.memory_state``).
"""

from __future__ import annotations

import re

import torch

from gnnmon.devices.registry import BACKENDS

_UNITS = {"B": 1, "KB": 1000, "KIB": 2**10, "MB": 2**20, "MIB": 2**20, "GB": 2**30, "GIB": 2**30,
          "TB": 2**40, "TIB": 2**40}
# CUDA: "Tried to allocate 2.00 GiB"; MPS: "Tried to allocate 256.00 MB on private pool" (binary
# units under decimal names); CPU: "you tried to allocate 1125899906842624 bytes".
_REQUEST = re.compile(r"tried to allocate ([0-9.]+) ?(bytes|[KMGT]i?B|B)\b", re.IGNORECASE)


def is_oom(error: BaseException) -> bool:
    """Whether ``error`` says the device (or the host) ran out of memory."""
    oom_type = getattr(torch, "OutOfMemoryError", None)
    if isinstance(error, MemoryError) or (oom_type is not None and isinstance(error, oom_type)):
        return True
    if isinstance(error, RuntimeError):
        text = str(error).lower()
        return any(m in text for kind in BACKENDS.values() for m in kind.oom_messages)
    return False


def requested_bytes(error: BaseException) -> int | None:
    """The size of the allocation that failed, as the error's message gives it, else None."""
    found = _REQUEST.search(str(error))
    if found is None:
        return None
    unit = found.group(2).upper()
    return round(float(found.group(1)) * (1 if unit == "BYTES" else _UNITS[unit]))

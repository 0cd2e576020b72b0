"""A process forked after CUDA started (a DataLoader worker): what it inherited of the parent's
CUDA is set aside, never used or freed there.

CUDA cannot run in such a child: torch's calls raise there, and destroying an inherited event
aborts the child, because the event's destructor calls CUDA ("DataLoader worker exited
unexpectedly"). So in a forked child gnnmon creates, queries and frees no CUDA object. The
backends it had made (their event pools, their cached streams) and the rows whose events were
still pending are handed to :func:`set_aside`, which keeps them for the life of the process. The
child's decorated calls are measured on the host
(:func:`gnnmon.devices.resolve.choose_backend`).
"""

from __future__ import annotations

import ctypes
from typing import Any

import torch

_ASIDE: list[Any] = []
"""What forked children inherited of the parent's CUDA. Never emptied, and one reference more than
Python counts, so that not even the interpreter's shutdown frees it."""
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_ASIDE))


def set_aside(*objects: Any) -> None:
    """Keep ``objects`` alive for the life of this process (they hold CUDA objects a forked child
    must never free)."""
    _ASIDE.append(objects)


def cuda_lost() -> bool:
    """Whether this process was forked after CUDA started in its parent (torch's own flag): CUDA
    cannot be used here."""
    return bool(torch.cuda._is_in_bad_fork())

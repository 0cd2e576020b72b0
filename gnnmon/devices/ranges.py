"""Profiler ranges: every row and phase as a ``torch.profiler`` range (``record_function``) and, on
CUDA, an NVTX range, so that ``torch.profiler`` traces and Nsight Systems show gnnmon's steps and
phases beside the kernels. Off by default (each range costs a few µs on the step's path);
``gnnmon.emit_ranges()`` turns them on. Rows are named by their label (``train_step``), phases by
the row's label and the phase (``train_step.forward``).
"""

from __future__ import annotations

from typing import Any

import torch


class _Ranges:
    """What is on (read at every row and phase: one attribute each)."""

    __slots__ = ("on", "nvtx")

    def __init__(self) -> None:
        self.on = False
        self.nvtx = False


RANGES = _Ranges()


def switch_ranges(enabled: bool, nvtx: bool | None) -> tuple[bool, bool]:
    """Turn ranges on or off (``nvtx``: NVTX ranges too; None: where CUDA is available); returns
    what was set before (``gnnmon.emit_ranges``, :mod:`gnnmon.record.probe_ranges`, is the switch)."""
    if not isinstance(enabled, bool):
        raise TypeError(f"emit_ranges(enabled) takes True or False, got {enabled!r}")
    if nvtx and not torch.cuda.is_available():
        raise ValueError("emit_ranges(nvtx=True) needs CUDA: NVTX ranges are for Nsight on a GPU")
    before = (RANGES.on, RANGES.nvtx)
    RANGES.on = enabled
    RANGES.nvtx = enabled and (torch.cuda.is_available() if nvtx is None else nvtx)
    return before


def push_range(name: str) -> Any:
    """Open a range named ``name``; returns what :func:`pop_range` closes."""
    handle = torch.autograd.profiler.record_function(name)
    handle.__enter__()
    # A start/end range, not push/pop: Lightning's phases cross its Optimizer.step range (the step
    # runs the forward/backward closure), so gnnmon's ranges need not nest in the thread's stack.
    nvtx = torch.cuda.nvtx.range_start(name) if RANGES.nvtx else None
    return handle, nvtx


def pop_range(opened: Any) -> None:
    """Close a range opened by :func:`push_range`."""
    handle, nvtx = opened
    if nvtx is not None:
        torch.cuda.nvtx.range_end(nvtx)
    handle.__exit__(None, None, None)

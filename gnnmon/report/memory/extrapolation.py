"""How a memory model's error grows beyond the shapes it was fitted on, measured on its own rows.

A linear fit is close where it was fitted and drifts beyond: a step's peak often grows a little
faster than linearly (allocator rounding, workspaces that scale with the largest tensor), and the
residual spread says nothing about that. A straight line fitted to a peak with a quadratic part
``κ·s²`` (``s``: the batch's size) misses it by ``κ·q(s)``, where ``q(s) = s² − (c₀ + c₁·s)`` is
how far ``s²`` lies from its own best line over the fitted sizes: about zero inside them, growing
with the square of the distance beyond. So the rows are split by size: the fit is repeated on the
smaller part (rows up to :data:`SPLIT` of the largest size) and checked on the larger rows, as a
forecast beyond the fitted shapes would be; what it missed on them, fitted as ``κ·q`` (``q`` of
the smaller part's sizes, least squares through 0), gives ``κ``, taken at its one-sided upper
confidence bound (the bound's own ``confidence``) so that noise in a few rows does not shrink it.
A prediction beyond the full model's shapes widens its upper bound by ``κ·q(s)``, with ``q`` of
all the rows' sizes, and by no less than :data:`FLOOR` of the part of the peak that grows with the
batch per unit of distance beyond the rows (``s − 1``): a handful of calibration batches can show
no curve where larger batches still cost more than a line says (on the CPU, glibc's heap and page
faults grow with the largest blocks).

A row's size ``s`` is its largest shape value relative to that value's largest among the rows (1:
the largest batch fitted; 2: twice it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

SPLIT = 0.6
"""The smaller part: rows whose size is at most this share of the largest row's size."""
FLOOR = 0.25
"""The least widening beyond the rows, as a share of the growing part per unit of distance: the
Quick start's model calibrated on 8-64 graphs forecast the growth of a 128-graph batch 20 % low
(its rows showed no curve), and ``play/memory_forecast.py``'s forecasts were 7-18 % low at two to
eight times the fitted batch size (2-core VM, CPU, RSS made exact by ``exact_host_memory()``)."""
MIN_DISTANCE = 0.2
"""Larger rows nearer than this (relative) to the smaller part's largest say too little of a trend."""


@dataclass(frozen=True)
class Extrapolation:
    """What fitting the smaller rows and checking the larger ones showed."""

    curvature: float | None
    """``κ``, bytes at size 1 (0 or more); None: not measured (:attr:`why_not`)."""
    basis: tuple[float, float] = (0.0, 0.0)
    """``(c₀, c₁)``: the best line of ``s²`` over all the rows' sizes."""
    checked_rows: int = 0
    """Larger rows the smaller fit was checked on."""
    checked_to: float = 0.0
    """The largest size checked, relative to the smaller part's largest (1.6: 60 % beyond it)."""
    why_not: str = ""

    def widening(self, size: float, growing: float) -> float:
        """Bytes an upper bound adds at ``size`` (relative to the largest row) for a prediction
        whose growing part is ``growing`` bytes: 0 within the rows."""
        if size <= 1.0:
            return 0.0
        c0, c1 = self.basis
        curve = (self.curvature or 0.0) * max(size * size - c0 - c1 * size, 0.0)
        return max(curve, FLOOR * (size - 1.0) * max(growing, 0.0))


def sizes(x: np.ndarray, top: np.ndarray | None = None) -> np.ndarray:
    """Each row's size: its largest shape value relative to that value's largest (``top``,
    by default the rows' own)."""
    top = np.maximum(x.max(axis=0) if top is None else top, 1e-12)
    return (x / top).max(axis=1)


def _basis(s: np.ndarray) -> tuple[float, float]:
    """The least-squares line of ``s²`` over sizes ``s``: ``(c₀, c₁)``."""
    c = np.linalg.lstsq(np.column_stack([np.ones(len(s)), s]), s * s, rcond=None)[0]
    return float(c[0]), float(c[1])


def measure(x: np.ndarray, y: np.ndarray, z: float,
            solve: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Extrapolation:
    """``κ`` for rows of shape values ``x`` (the model's terms) and peaks ``y`` (bytes); ``z``:
    the normal quantile of the bound's confidence; ``solve``: the model's own fit (a design with
    the constant first → coefficients)."""
    if x.shape[1] == 0 or len(y) < 8:
        return Extrapolation(None, why_not="too few rows to fit a part and check the rest")
    s = sizes(x)
    small = s <= SPLIT * s.max()
    if small.sum() < 3 * (x.shape[1] + 1) or (~small).sum() < 3 or len(np.unique(s[small])) < 3:
        return Extrapolation(None, why_not=f"the rows do not span sizes to {1 / SPLIT:.2g}x: "
                                           "none to fit small and check large")
    design = np.column_stack([np.ones(len(y)), x])
    scale = np.maximum(np.abs(design[small]).max(axis=0), 1.0)
    beta = solve(design[small] / scale, y[small]) / scale
    reach = float(s[small].max())
    c0, c1 = _basis(s[small] / reach)
    rel = s[~small] / reach
    q = rel * rel - c0 - c1 * rel
    missed = y[~small] - design[~small] @ beta
    far = (rel >= 1.0 + MIN_DISTANCE) & (q > 0)
    if far.sum() < 2:
        return Extrapolation(None, checked_rows=int((~small).sum()), checked_to=float(rel.max()),
                             why_not="fewer than 2 larger rows lie far enough beyond the smaller ones")
    qf, mf = q[far], missed[far]
    kappa = float(qf @ mf / (qf @ qf))
    se = math.sqrt(float(np.sum((mf - kappa * qf) ** 2)) / max(len(qf) - 1, 1) / float(qf @ qf))
    # κ measured at the smaller part's scale (its largest size is 1 there): at the rows' scale a
    # quadratic part is (1 / reach)² times larger per unit of relative size
    upper = max(kappa + z * se, 0.0) / (reach * reach)
    return Extrapolation(upper, _basis(s), int(far.sum()), float(rel.max()))

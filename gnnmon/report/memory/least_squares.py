"""Least squares as a memory model needs it: shape coefficients that cannot be negative, rows
far off the fit left out, and whether a shape field varies enough to be fitted at all.

The design matrix's first column is the constant (ones, or scaled ones); every other column is a
shape field, whose coefficient (bytes per node, per edge ...) is held at 0 or more: a batch never
needs less memory for being larger.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

MIN_SPREAD = 0.05
"""A shape field varies when its 5th-95th percentile range is at least this share of its median."""
OUTLIER_K = 4.0
"""A row whose residual lies beyond this many robust spreads is an outlier."""
GROSS_ERROR_RATE = 0.10
"""The most rows a fit may read as gross errors (a collection, another process, a glitch of the
counter) rather than as rows it does not describe: routine data hold 1-10 % gross errors (Hampel,
Ronchetti, Rousseeuw and Stahel, *Robust Statistics*, 1986, §1.2c), and a residual of the model's
own spread lies beyond :data:`OUTLIER_K` of them once in 16,000 rows."""
GROSS_ERROR_CHANCE = 0.01
"""A count of rows left out that :data:`GROSS_ERROR_RATE` gives with less than this chance is more
than gross errors explain (:func:`too_many_left_out`)."""


def varies(values: np.ndarray) -> bool:
    """At least 3 distinct values, spread over :data:`MIN_SPREAD` of their median."""
    lo, mid, hi = np.percentile(values, [5, 50, 95])
    return len(np.unique(values)) >= 3 and (hi - lo) >= MIN_SPREAD * max(abs(mid), 1.0)


def too_many_left_out(rows: int) -> int:
    """The fewest of ``rows`` left out as outliers that gross errors do not explain: the least
    count that rows each a gross error with :data:`GROSS_ERROR_RATE` chance reach with under
    :data:`GROSS_ERROR_CHANCE` (binomially: 5 of 10 rows, 10 of 41, 21 of 117; a share that falls
    from half towards 10 % as the rows grow). The robust spread (a MAD) breaks down at half the
    rows left out, where the rows kept could as well be the outliers; well before that, a fit that
    leaves out this many describes a subset of its rows and misses the rest (a batch field it
    lacks, or a peak that moves with something else)."""
    p, tail = GROSS_ERROR_RATE, 1.0  # tail: P(X >= k) for X ~ Binomial(rows, p)
    for k in range(rows + 1):
        if tail < GROSS_ERROR_CHANCE:
            return k
        log_pmf = (math.lgamma(rows + 1) - math.lgamma(k + 1) - math.lgamma(rows - k + 1)
                   + k * math.log(p) + (rows - k) * math.log1p(-p))
        tail -= math.exp(log_pmf)
    return rows + 1  # too few rows for any count to be that unlikely


def lstsq(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The unconstrained least-squares coefficients."""
    return np.linalg.lstsq(x, y, rcond=None)[0]


def nonneg(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with every coefficient but the first (the constant) at 0 or more: the best of
    the unconstrained fits over each set of free terms whose coefficients come out non-negative
    (the constrained optimum lies on one of those faces; a model has a handful of terms)."""
    k = x.shape[1] - 1
    beta = lstsq(x, y)
    if k == 0 or (beta[1:] >= 0).all():
        return beta
    best, best_rss = None, math.inf
    for size in range(k, -1, -1):
        for free in itertools.combinations(range(1, k + 1), size):
            cols = [0, *free]
            b = lstsq(x[:, cols], y)
            if (b[1:] < 0).any():
                continue
            rss = float(np.sum((y - x[:, cols] @ b) ** 2))
            if rss < best_rss:
                best_rss, best = rss, np.zeros(k + 1)
                best[cols] = b
    assert best is not None  # the constant alone is always a candidate
    return best


def robust_fit(x: np.ndarray, y: np.ndarray, resolution: float = 0.0) -> tuple[np.ndarray, np.ndarray, float]:
    """:func:`nonneg` refitted without the rows beyond :data:`OUTLIER_K` robust spreads, until
    stable: (coefficients, inlier mask, robust spread of the inliers' residuals, 1.4826 × MAD).
    A row within ``resolution`` (the figure's unit, bytes) of the fit is never an outlier: the
    figure cannot tell it from the fit, and the rows it would drop are often the largest batches,
    those a forecast beyond them leans on."""
    keep = np.ones(len(y), dtype=bool)
    for _ in range(10):
        beta = nonneg(x[keep], y[keep])
        resid = y - x @ beta
        r = resid[keep]
        spread = 1.4826 * float(np.median(np.abs(r - np.median(r))))
        # a floor of 0.1 % of the typical figure: rows that agree that well are never outliers
        limit = max(OUTLIER_K * spread, 1e-3 * float(np.median(np.abs(y))), resolution, 1.0)
        new = np.abs(resid - np.median(r)) <= limit
        if new.sum() < x.shape[1] + 2 or (new == keep).all():
            break
        keep = new
    return beta, keep, spread

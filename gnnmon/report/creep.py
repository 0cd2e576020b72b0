"""The diagnosis's ``leak`` and ``creep``: end-of-call memory (the device's ``mem_end_bytes``, the
host's ``rss_end_bytes`` where it differs, the DataLoader workers' sampled ``workers_rss_bytes``)
across epochs (rows carry ``epoch`` after ``run.mark("epoch", e)``).

Each call's figure is fitted as ``const + a·num_nodes (+ b·num_edges) + rate·τ``, τ the call's
place in the run in epochs (its epoch's rank, plus its place within the epoch): the shape terms
are what the batches' shapes explain ("bigger graphs": their growth between the first and the last
epoch), ``rate`` what they do not ("a leak: N MiB per epoch"), claimed beyond
:data:`~gnnmon.report.loops.NOISE_K` standard errors and at least
:data:`~gnnmon.report.loops.MIN_SHARE` of the figure's last level. Where the batches grew in step
with time in every call (shape and τ correlated above :data:`TOGETHER`) the two cannot be told
apart, and the finding (``creep``) says so instead of naming a leak.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gnnmon.figures import MEM_END, RSS_END
from gnnmon.report.loops import MIN_SHARE, NOISE_K, Loop, evidence, finding, median
from gnnmon.report.memory_model import format_bytes

TOGETHER = 0.95
"""Shape and time correlated beyond this: a leak cannot be told from growing batches."""


def creep(loop: Loop) -> list[dict[str, Any]]:
    """End-of-call memory across epochs, split into bigger graphs and a leak (see the module doc)."""
    epochs = loop.column("epoch")
    if np.isnan(epochs).all() or np.unique(epochs[~np.isnan(epochs)]).size < 2:
        return []
    tau = _tau(epochs)
    out = []
    figures = [MEM_END.name, RSS_END.name, "workers_rss_bytes"]
    if loop.has(RSS_END.name) and np.array_equal(loop.column(RSS_END.name), loop.column(MEM_END.name), equal_nan=True):
        figures.remove(RSS_END.name)  # the CPU's device memory is the process's RSS: said once
    for figure in figures:
        if loop.has(figure):
            found = _creep_of(loop, figure, tau)
            if found is not None:
                out.append(found)
    return out


def _tau(epochs: np.ndarray) -> np.ndarray:
    """Each call's place in the run in epochs: its epoch's rank plus its place within the epoch."""
    tau = np.full(epochs.size, np.nan)
    values = np.unique(epochs[~np.isnan(epochs)])
    for k, value in enumerate(values):
        at = np.flatnonzero(epochs == value)
        tau[at] = k + np.arange(at.size) / at.size
    return tau


def _creep_of(loop: Loop, figure: str, tau: np.ndarray) -> dict[str, Any] | None:
    y = loop.column(figure)
    use = loop.steady & ~np.isnan(y) & ~np.isnan(tau)
    terms = [t for t in ("num_nodes", "num_edges") if loop.has(t)]
    shapes = [loop.column(t) for t in terms]
    for s in shapes:
        use &= ~np.isnan(s)
    if use.sum() < 10:
        return None
    kept: list[int] = []
    for i, s in enumerate(shapes):
        v = s[use]
        if np.unique(v).size >= 3 and all(abs(_corr(v, shapes[j][use])) <= TOGETHER for j in kept):
            kept.append(i)
    together = [terms[i] for i in kept if abs(_corr(shapes[i][use], tau[use])) > TOGETHER]
    x = np.column_stack([np.ones(int(use.sum())), *(shapes[i][use] for i in kept), tau[use]])
    scale = np.maximum(np.abs(x).max(axis=0), 1e-12)
    z = x / scale
    beta, *_ = np.linalg.lstsq(z, y[use], rcond=None)
    resid = y[use] - z @ beta
    dof = max(int(use.sum()) - x.shape[1], 1)
    sigma = math.sqrt(float(resid @ resid) / dof)
    inverse = np.linalg.pinv(z.T @ z)
    rate = float(beta[-1] / scale[-1])
    rate_se = sigma * math.sqrt(max(float(inverse[-1, -1]), 0.0)) / scale[-1]
    first, last = use & (tau < 1), use & (tau >= math.floor(float(np.nanmax(tau[use]))))
    span = float(np.nanmax(tau[use]) - np.nanmin(tau[use]))
    explained = sum(float(beta[n + 1] / scale[n + 1]) * (float(np.mean(shapes[i][last])) - float(np.mean(shapes[i][first])))
                    for n, i in enumerate(kept)) if first.any() and last.any() else 0.0
    level = median(y[last]) if last.any() else median(y[use])
    if not level > 0:
        return None  # nothing held (no DataLoader workers: their RSS reads 0)
    leak = rate > NOISE_K * rate_se and rate * span >= MIN_SHARE * level and not together
    grew = explained >= MIN_SHARE * level
    if not leak and not grew and not (together and rate * span >= MIN_SHARE * level):
        return None
    per = f"{format_bytes(rate)} per epoch"
    proof = [evidence(figure, level, "bytes", f"end of {loop.label}'s calls, last epoch's median"),
             evidence("growth not explained by shapes", rate, "bytes/epoch", f"fitted over {int(use.sum())} calls "
                      f"(± {format_bytes(rate_se)} standard error)")]
    if kept:
        proof.append(evidence("growth explained by shapes", explained, "bytes",
                              f"{', '.join(terms[i] for i in kept)} between the first and the last epoch"))
    if together:
        words = (f"{figure} of {loop.label} grew {format_bytes(rate * span + explained)} over {span:.1f} epochs while "
                 f"its batches ({', '.join(together)}) grew with it in every call: a leak cannot be told from bigger graphs")
        return finding("creep", loop.label, rate * span, level, words, proof,
                       "vary the batch sizes within an epoch (or run an epoch at a fixed size) to tell them apart",
                       of="memory")
    if leak:
        words = f"a leak: {figure} of {loop.label} grew {per} that the batches' shapes do not explain"
        words += f" ({format_bytes(explained)} more came with bigger graphs)" if grew else ""
        return finding("leak", loop.label, rate * span, level, words, proof,
                       "look for what outlives a step: a list or dict the loop appends tensors to (loss instead of "
                       "loss.item()), a cache keyed by batch, hooks that keep their inputs", of="memory")
    words = (f"{figure} of {loop.label} grew {format_bytes(explained)} between the first and the last epoch, "
             f"explained by bigger graphs; no leak beyond the noise ({per} ± {format_bytes(rate_se)} unexplained)")
    return finding("creep", loop.label, explained, level, words, proof,
                   "nothing leaks: larger batches need more memory (gnnmon forecast RUN --capacity ... says how large "
                   "they may grow)", of="memory")


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 3 or np.std(a) == 0 or np.std(b) == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])

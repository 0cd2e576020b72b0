"""The diagnosis's ``leak`` and ``creep``: end-of-call memory (the device's ``mem_end_bytes``, the
host's ``rss_end_bytes`` where it differs, the DataLoader workers' sampled ``workers_rss_bytes``)
across epochs (rows carry ``epoch`` after ``run.mark("epoch", e)``).

Each call's figure is fitted as ``const + a·num_nodes (+ b·num_edges) + rate·τ``, τ the call's
place in the run in epochs (its epoch's rank, plus its place within the epoch): the shape terms
are what the batches' shapes explain ("bigger graphs": their growth between the first and the last
epoch), ``rate`` what they do not. A leak is growth that goes on: the same fit over the later
half of the run (from :data:`LATE` of its span) must still rise, beyond :data:`~gnnmon.report.loops.NOISE_K`
standard errors and by at least :data:`~gnnmon.report.loops.MIN_SHARE` of the figure's last level
over the run; growth that levels off (the allocator's warm-up, a cache that fills) is not one. It
needs :data:`MIN_EPOCHS` epochs; a run with fewer whose memory grew is told so (``creep``). The
finding gives the later half's slope with its 95 % interval and the epoch the growth started
from: the earliest from which a fit to the end agrees with that slope. Where the batches grew in
step with time in every call (shape and τ correlated above :data:`TOGETHER`) the two cannot be told
apart, and the finding (``creep``) says so instead of naming a leak.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gnnmon.figures import MEM_END, RSS_END
from gnnmon.report.loops import MIN_SHARE, NOISE_K, Loop, evidence, finding, median
from gnnmon.report.memory.model import format_bytes

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


MIN_EPOCHS = 4
"""Epochs a leak needs: the later half of the run then holds two, enough to see growth go on."""

LATE = 0.5
"""Where the later half starts, as a share of the run's span in epochs."""

Z95 = 1.96
"""Standard errors each side of a 95 % interval."""


class _Fit:
    """``const + shapes + rate·τ`` by least squares over the calls ``use``: ``rate`` (bytes per
    epoch) and its standard error, and each shape term's coefficient (bytes per unit)."""

    def __init__(self, y: np.ndarray, shapes: list[np.ndarray], tau: np.ndarray, use: np.ndarray) -> None:
        x = np.column_stack([np.ones(int(use.sum())), *(s[use] for s in shapes), tau[use]])
        scale = np.maximum(np.abs(x).max(axis=0), 1e-12)
        z = x / scale
        beta, *_ = np.linalg.lstsq(z, y[use], rcond=None)
        resid = y[use] - z @ beta
        dof = max(int(use.sum()) - x.shape[1], 1)
        sigma = math.sqrt(float(resid @ resid) / dof)
        inverse = np.linalg.pinv(z.T @ z)
        self.rate = float(beta[-1] / scale[-1])
        self.rate_se = sigma * math.sqrt(max(float(inverse[-1, -1]), 0.0)) / scale[-1]
        self.shape = [float(beta[n + 1] / scale[n + 1]) for n in range(len(shapes))]

    def rising(self, span: float, level: float) -> bool:
        """Whether the rate is above the noise and would grow the figure by a share of ``level`` over ``span``."""
        return self.rate > NOISE_K * self.rate_se and self.rate * span >= MIN_SHARE * level


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
    used = [shapes[i] for i in kept]
    whole = _Fit(y, used, tau, use)
    t0, t1 = float(np.nanmin(tau[use])), float(np.nanmax(tau[use]))
    span = t1 - t0
    first, last = use & (tau < 1), use & (tau >= math.floor(t1))
    explained = sum(whole.shape[n] * (float(np.mean(shapes[i][last])) - float(np.mean(shapes[i][first])))
                    for n, i in enumerate(kept)) if first.any() and last.any() else 0.0
    level = median(y[last]) if last.any() else median(y[use])
    if not level > 0:
        return None  # nothing held (no DataLoader workers: their RSS reads 0)
    epochs = int(np.unique(np.floor(tau[use])).size)
    late = use & (tau >= t0 + LATE * span)
    late_fit = _Fit(y, used, tau, late) if late.sum() >= 10 and epochs >= MIN_EPOCHS else None
    leak = late_fit is not None and late_fit.rising(span, level) and not together
    too_few = epochs < MIN_EPOCHS and whole.rising(span, level) and not together
    grew = explained >= MIN_SHARE * level
    if not (leak or too_few or grew or (together and whole.rate * span >= MIN_SHARE * level)):
        return None
    proof = [evidence(figure, level, "bytes", f"end of {loop.label}'s calls, last epoch's median")]
    if kept:
        proof.append(evidence("growth explained by shapes", explained, "bytes",
                              f"{', '.join(terms[i] for i in kept)} between the first and the last epoch"))
    if together:
        proof.append(_rate_evidence(whole, int(use.sum()), "the whole run"))
        words = (f"{figure} of {loop.label} grew {format_bytes(whole.rate * span + explained)} over {span:.1f} epochs "
                 f"while its batches ({', '.join(together)}) grew with it in every call: a leak cannot be told from "
                 "bigger graphs")
        return finding("creep", loop.label, whole.rate * span, level, words, proof,
                       "vary the batch sizes within an epoch (or run an epoch at a fixed size) to tell them apart",
                       of="memory")
    if leak and late_fit is not None:
        since = _started(y, used, tau, use, late_fit, t0, t1)
        values = np.unique(loop.column("epoch")[use])
        label = values[min(int(since), values.size - 1)]
        rate, half = late_fit.rate, Z95 * late_fit.rate_se
        proof.insert(0, _rate_evidence(late_fit, int(late.sum()), "the later half of the run"))
        words = (f"a leak: {figure} of {loop.label} grew {format_bytes(rate)} per epoch (95 % interval "
                 f"{format_bytes(rate - half)} to {format_bytes(rate + half)}) from epoch {_epoch(label)} to the last, "
                 "that the batches' shapes do not explain")
        words += f" ({format_bytes(explained)} more came with bigger graphs)" if grew else ""
        return finding("leak", loop.label, rate * (t1 - since), level, words, proof,
                       "look for what outlives a step: a list or dict the loop appends tensors to (loss instead of "
                       "loss.item()), a cache keyed by batch, hooks that keep their inputs", of="memory",
                       since_epoch=_epoch(label), rate_interval=(rate - half, rate + half))
    if too_few:
        proof.append(_rate_evidence(whole, int(use.sum()), "the whole run"))
        words = (f"{figure} of {loop.label} grew {format_bytes(whole.rate)} per epoch over {epochs} epoch(s), more "
                 f"than its batches' shapes explain: too few epochs to tell a leak from growth that levels off "
                 f"(the allocator's warm-up, a cache that fills)")
        return finding("creep", loop.label, whole.rate * span, level, words, proof,
                       f"run {MIN_EPOCHS} epochs or more (with run.mark('epoch', e)): a leak goes on growing in "
                       "the later ones", of="memory")
    words = (f"{figure} of {loop.label} grew {format_bytes(explained)} between the first and the last epoch, "
             "explained by bigger graphs; no leak beyond the noise")
    return finding("creep", loop.label, explained, level, words, proof,
                   "nothing leaks: larger batches need more memory (gnnmon forecast RUN --capacity ... says how large "
                   "they may grow)", of="memory")


def _rate_evidence(fit: _Fit, calls: int, where: str) -> dict[str, Any]:
    return evidence("growth not explained by shapes", fit.rate, "bytes/epoch",
                    f"fitted over {calls} calls of {where} (± {format_bytes(fit.rate_se)} standard error)")


def _started(y: np.ndarray, shapes: list[np.ndarray], tau: np.ndarray, use: np.ndarray, late: _Fit,
             t0: float, t1: float) -> float:
    """The epoch (rank) the growth started from: the earliest whose fit to the end agrees with the
    later half's slope (within its 95 % interval, widened by the earlier fit's own)."""
    for k in range(int(math.floor(t0)), int(math.floor(t1)) + 1):
        part = use & (tau >= k)
        if part.sum() < 10:
            break
        fit = _Fit(y, shapes, tau, part)
        if abs(fit.rate - late.rate) <= Z95 * math.hypot(late.rate_se, fit.rate_se):
            return float(k)
    return t0 + LATE * (t1 - t0)


def _epoch(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 3 or np.std(a) == 0 or np.std(b) == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])

"""The diagnosis's ``leak`` and ``creep``: end-of-call memory (the device's ``mem_end_bytes``, the
host's ``rss_end_bytes`` where it differs, the DataLoader workers' sampled ``workers_rss_bytes``)
across epochs (rows carry ``epoch`` after ``run.mark("epoch", e)``).

Memory within an epoch is not a series of independent readings: it ramps and falls back (a
sawtooth), workers are forked anew, a buffer is allocated once. So the unit is the **epoch**:

1. **Shapes out.** Each call's figure is fitted as the epoch's own level + ``a·num_nodes (+
   b·num_edges)`` of its batch + ``a'·num_nodes (+ b'·num_edges)`` of the previous call's batch (an
   output the caller holds until the call returns: ``keep = train_step(b)``), the coefficients from
   the variation of the shapes *within* epochs (epochs as fixed effects; batches drawn anew tell the
   two apart): what the batches' shapes explain ("bigger graphs": their growth between the first
   and the last epoch) is taken out of every call. Where the shapes barely vary within an epoch but
   grow across them (correlated beyond :data:`TOGETHER`), growth cannot be told from bigger graphs,
   and the finding (``creep``) says so.
2. **A level per epoch**: the 10 %-trimmed mean of its calls after the first
   :data:`~gnnmon.report.loops.WARMUP` of the run, shapes out, read at the epoch's centre (a ramp
   within epochs, fitted with the shapes, moves an epoch whose first calls are left out back to
   it); its noise from the calls' own (the robust spread of neighbouring calls' differences / √2 /
   √calls: a ramp is not noise) or, where wider, the spread of the levels' own steps (a sampled
   figure's calls are alike between samples), with the host's resolution for the host's RSS.
3. **Where growth starts**: levels before epoch ``k`` held flat, a straight line from ``k`` on;
   the earliest ``k`` whose misfit is within the levels' noise of the best one.
4. **A leak is a trend that goes on**, over the levels from its start: Mann-Kendall's test (Kendall's
   tau between epoch and level, one-sided, p < :data:`P_TREND`; scipy). Its rate is Theil-Sen's
   slope over those levels with Sen's 95 % interval (scipy), each side widened by what the shapes'
   coefficients and a level's resolution could tilt it. Where the growth curves (a quadratic term
   significantly below 0, Student's t), its last epochs decide (:func:`after_curve`): still above 0,
   a leak at that recent rate, slowing; bounded under what would go unsaid, levelled off. It needs
   :data:`MIN_EPOCHS` epochs; fewer that grew are told so.
5. **No leak found**: :func:`hidden` says the largest rate that could hide in the levels' noise, and
   the largest that would go unsaid (growing the figure by under :data:`~gnnmon.report.loops.MIN_SHARE`
   of its first epoch's level over the run); leaks that large are said 19 times in 20. DataLoader
   workers whose memory was not sampled are said not looked at.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gnnmon.figures import MEM_END, RSS_END
from gnnmon.report.diagnosis.input_finding import loader_workers
from gnnmon.report.loops import MIN_SHARE, NOISE_K, Loop, evidence, finding
from gnnmon.report.memory.model import format_bytes
from gnnmon.report.stats import median, spread
from gnnmon.report.stats import scipy_stats as stats

TOGETHER = 0.95
"""Shapes whose between-epoch share of their variance exceeds this² grew with time, not within
epochs: a leak cannot be told from growing batches."""

MIN_EPOCHS = 4
"""Epochs a leak needs (Mann-Kendall's test can first say p < 0.05 at four)."""

P_TREND = 0.05
"""The one-sided p-value under which the levels' trend is taken as real."""

P_LEVELS_OFF = 0.01
"""The one-sided p-value under which growth is taken to level off (strict: a straight leak is
taken for one that levels off in 1 % of runs)."""

CONFIDENCE = 0.95
"""The confidence of the leak's rate interval, and of finding a leak at the hidden bound."""


TRIM = 0.1
"""Each epoch's level is its calls' mean with this share of them cut from each end (a spike
in a few calls does not move it)."""

TRIMMED_SE = 1.03
"""The standard error of a 10 %-trimmed mean, in units of the calls' spread over √calls (normal
data: its efficiency is 0.94)."""


class Levels:
    """One figure of a loop, per epoch with the shapes taken out (see the module doc)."""

    def __init__(self, loop: Loop, figure: str, resolution: float) -> None:
        y = loop.column(figure)
        epochs = loop.column("epoch")
        use = ~np.isnan(y) & ~np.isnan(epochs)
        terms = [t for t in ("num_nodes", "num_edges") if loop.has(t)]
        # the loop's previous call's shapes: what an output the caller holds until the next call keeps
        before = [np.concatenate([[math.nan], loop.column(t)[:-1]]) for t in terms]
        for t in terms:
            use &= ~np.isnan(loop.column(t))
        use &= np.isin(epochs, epochs[use & loop.steady])  # an epoch of warm-up calls alone has no level
        self.figure, self.resolution = figure, resolution
        self.epochs = np.unique(epochs[use])
        which = np.searchsorted(self.epochs, epochs[use])
        # each call's place in its epoch (0 to 1), and the place the epoch's level is read at: its centre
        sizes = np.bincount(which, minlength=self.epochs.size)
        rank = np.zeros(which.size)
        for e in range(self.epochs.size):
            rank[which == e] = np.arange(sizes[e])
        place = rank / sizes[which]
        centre = (sizes[which] - 1) / (2 * sizes[which])
        steady = loop.steady[use]
        y, which, place, centre = y[use][steady], which[steady], place[steady], centre[steady]
        shapes = [loop.column(t)[use][steady] for t in terms]
        previous = [_filled(b[use][steady], s, which, self.epochs.size) for b, s in zip(before, shapes, strict=True)]
        fit = _within_fit(y, shapes, previous, place, which, terms, self.epochs.size)
        self.terms, self.coefficients, self.held, self.together, ramp, cov = fit
        by_shapes = sum((c * shapes[terms.index(t)] + h * previous[terms.index(t)]
                         for c, h, t in zip(self.coefficients, self.held, self.terms, strict=True)), np.zeros(y.size))
        adjusted = y - ramp * (place - centre) - by_shapes
        self.levels = np.array([stats.trim_mean(adjusted[which == e], TRIM) if np.any(which == e) else math.nan
                                for e in range(self.epochs.size)])
        self.first = median(np.sort(y[which == 0])) if y.size else math.nan
        self.last = median(np.sort(y[which == self.epochs.size - 1])) if y.size else math.nan
        noise = []
        for e in range(self.epochs.size):
            calls = adjusted[which == e]
            if calls.size >= 3:  # neighbours' differences: a ramp within the epoch is not noise
                noise.append(TRIMMED_SE * spread(np.diff(calls)) / math.sqrt(2) / math.sqrt(calls.size))
        steps = np.diff(self.levels)  # a line's steps are alike: their spread is the levels' noise × √2
        between = 1.4826 * median(np.sort(np.abs(steps - median(np.sort(steps))))) / math.sqrt(2) \
            if steps.size >= 3 else 0.0
        self.own = math.hypot(median(np.array(noise)) if noise else 0.0, resolution / 2)
        self.noise = math.hypot(max(median(np.array(noise)) if noise else 0.0, between), resolution / 2)
        first, last = which == 0, which == self.epochs.size - 1
        self.explained = (float(np.mean(by_shapes[last]) - np.mean(by_shapes[first]))
                          if first.any() and last.any() else 0.0)
        self.calls = int(y.size)
        # what the coefficients' error could tilt the levels by (bytes per epoch): their covariance
        # along the epoch means' growth, per epoch, of the shapes they multiply
        order = np.arange(self.epochs.size, dtype=float)
        calls = np.bincount(which, minlength=self.epochs.size)
        with np.errstate(invalid="ignore", divide="ignore"):  # an epoch with no call: NaN
            columns = [shapes[terms.index(t)] for t in self.terms] + [previous[terms.index(t)] for t in self.terms]
            means = [np.bincount(which, weights=v, minlength=self.epochs.size) / np.where(calls, calls, np.nan)
                     for v in columns]
        known = ~np.isnan(self.levels)
        grows = (np.array([np.polyfit(order[known], m[known], 1)[0] for m in means]) if means and known.sum() >= 2
                 else np.zeros(0))
        self.tilt = math.sqrt(max(float(grows @ cov @ grows), 0.0)) if grows.size else 0.0

    def start(self) -> int:
        """The epoch (rank) growth starts from: levels before it flat, a line from it on; the
        earliest whose misfit is within the levels' noise of the best."""
        n = self.levels.size
        misfit = [_split_misfit(self.levels, k) for k in range(max(n - 2, 1))]
        best = min(misfit)
        allowed = best + NOISE_K ** 2 * self.noise ** 2
        return next(k for k, m in enumerate(misfit) if m <= allowed)


def _filled(previous: np.ndarray, shapes: np.ndarray, which: np.ndarray, epochs: int) -> np.ndarray:
    """The previous call's shapes, where unknown (the loop's first call, one that recorded none) its
    epoch's mean shape: a call with nothing to tell of the held output neither tilts its coefficient nor
    its epoch's level."""
    means = np.bincount(which, weights=shapes, minlength=epochs) / np.maximum(np.bincount(which, minlength=epochs), 1)
    return np.where(np.isnan(previous), means[which], previous)


def _within_fit(y: np.ndarray, shapes: list[np.ndarray], previous: list[np.ndarray], place: np.ndarray,
                which: np.ndarray, terms: list[str], epochs: int
                ) -> tuple[list[str], list[float], list[float], list[str], float, np.ndarray]:
    """From the variation within epochs (each epoch's mean taken out): the shapes' coefficients (bytes
    per node or edge of the call's batch, and of the previous call's: an output the caller holds until
    the next call ends with it, which within-epoch variation tells apart as batches are drawn anew),
    the terms kept, those that vary too little within epochs to be told from time, the ramp (bytes
    from an epoch's start to its end that the place in the epoch explains) and the covariance of the
    kept terms' coefficients, the call's then the previous call's (bytes², from the residuals within
    epochs; zeros where they leave no degree of freedom)."""
    def within(v: np.ndarray) -> np.ndarray:
        means = np.bincount(which, weights=v, minlength=epochs) / np.maximum(np.bincount(which, minlength=epochs), 1)
        return v - means[which]

    kept, together = [], []
    for t, s in zip(terms, shapes, strict=True):
        if np.unique(s).size < 3 or not np.var(s) > 0:
            continue
        if np.var(within(s)) < (1 - TOGETHER ** 2) * np.var(s):
            together.append(t)
        else:
            kept.append(t)
    columns = ([within(shapes[terms.index(t)]) for t in kept] + [within(previous[terms.index(t)]) for t in kept]
               + [within(place)])
    x = np.column_stack(columns)
    n = len(kept)
    if not np.any(x):
        return kept, [0.0] * n, [0.0] * n, together, 0.0, np.zeros((2 * n, 2 * n))
    beta, *_ = np.linalg.lstsq(x, within(y), rcond=None)
    resid = within(y) - x @ beta
    dof = y.size - epochs - x.shape[1]
    cov = (float(resid @ resid) / dof * np.linalg.pinv(x.T @ x)[:2 * n, :2 * n] if dof > 0
           else np.zeros((2 * n, 2 * n)))
    return kept, [float(b) for b in beta[:n]], [float(b) for b in beta[n:2 * n]], together, float(beta[-1]), cov


def _split_misfit(levels: np.ndarray, k: int) -> float:
    """Squared misfit of levels flat before ``k`` and on a straight line from ``k``."""
    before, after = levels[:k], levels[k:]
    out = float(np.sum((before - before.mean()) ** 2)) if before.size else 0.0
    if after.size >= 2:
        x = np.arange(after.size, dtype=float)
        fit = np.polyfit(x, after, 1)
        out += float(np.sum((after - np.polyval(fit, x)) ** 2))
    return out


def levelling_off(levels: np.ndarray, noise: float = 0.0) -> bool:
    """Whether growth over ``levels`` levels off: a quadratic term significantly below 0, its error
    from the levels' scatter about the curve or their own ``noise``, whichever is wider (levels on
    a line to a few KiB must not make a drift well within their noise significant)."""
    n = levels.size
    if n < 4:
        return False
    x = np.arange(n, dtype=float) - (n - 1) / 2
    design = np.column_stack([np.ones(n), x, x ** 2])
    beta, *_ = np.linalg.lstsq(design, levels, rcond=None)
    resid = levels - design @ beta
    dof = n - 3
    sigma2 = max(float(resid @ resid) / dof, noise ** 2)
    se = math.sqrt(max(sigma2 * float(np.linalg.inv(design.T @ design)[2, 2]), 0.0))
    if se == 0:
        return bool(beta[2] < 0)
    return bool(stats.t.cdf(beta[2] / se, dof) < P_LEVELS_OFF)


def recent(lv: Levels, growing: np.ndarray) -> tuple[int, float, float, float]:
    """Growth over the last epochs of ``growing`` (levels, bytes), where it curves: ``(m, slope, low,
    high)``, Theil-Sen's slope over the last ``m`` levels (half of them, at least 3; bytes per epoch)
    and its interval (:func:`rate`), each side widened too by what the calls' own noise could tilt a
    line through so few levels (z standard errors, in quadrature with the coefficients' tilt). The
    calls' noise, not the levels' steps' spread: a curve's steps are not alike."""
    m = max(3, math.ceil(growing.size / 2))
    x = np.arange(m, dtype=float)
    noise = lv.own / math.sqrt(float(np.sum((x - x.mean()) ** 2)))
    return (m, *rate(growing[-m:], lv.resolution, math.hypot(lv.tilt, noise)))


def after_curve(lv: Levels, growing: np.ndarray) -> str:
    """What growth over ``growing`` that trends and curves (:func:`levelling_off`) did last, from its
    last epochs' rate (:func:`recent`): ``"slowing"``, a leak still, where that rate's interval is above
    0 and the rate over the epochs grown is worth saying (:data:`~gnnmon.report.loops.MIN_SHARE` of the
    first epoch's level); ``"levelled"`` where its interval is under what the leak check leaves unsaid
    (:func:`hidden`); else ``"unclear"``: neither told from 0 nor bounded under that."""
    _, slope, low, high = recent(lv, growing)
    if low > 0 and slope * (growing.size - 1) >= MIN_SHARE * float(lv.first):
        return "slowing"
    bounds = hidden(lv)
    return "levelled" if bounds is not None and high < bounds[1] else "unclear"


def trend_p(levels: np.ndarray) -> float:
    """Mann-Kendall's one-sided p-value that the levels rise (Kendall's tau against the epoch)."""
    if levels.size < 3 or np.ptp(levels) == 0:
        return 1.0
    return float(stats.kendalltau(np.arange(levels.size), levels, alternative="greater").pvalue)


def rate(levels: np.ndarray, resolution: float, tilt: float = 0.0) -> tuple[float, float, float]:
    """Theil-Sen's slope over the levels (bytes per epoch) and Sen's interval at
    :data:`CONFIDENCE`, each side widened by what the shapes' fitted coefficients could tilt it
    (``tilt``: its standard error, bytes per epoch, added in quadrature) and by what a level's
    resolution could tilt it."""
    slope, _, low, high = stats.theilslopes(levels, np.arange(levels.size, dtype=float), alpha=CONFIDENCE)
    z = float(stats.norm.ppf((1 + CONFIDENCE) / 2)) * tilt
    step = resolution / max(levels.size - 1, 1)
    return (float(slope), float(slope - math.hypot(slope - low, z)) - step,
            float(slope + math.hypot(high - slope, z)) + step)


def hidden(levels: Levels) -> tuple[float, float] | None:
    """The largest leaks (bytes per epoch) that could go unsaid: ``(noise, unsaid)``. ``noise``: what
    the levels' noise could hide, the rate the slope's t test over the epochs finds 19 times in 20
    — (t at 95 % + z at 95 %) standard errors of the slope, from the levels' noise or their scatter
    about a line, whichever is wider, with the shapes' coefficients' tilt in quadrature, plus the
    tilt the resolution allows. ``unsaid``: the larger of
    that and the least rate worth saying (:data:`~gnnmon.report.loops.MIN_SHARE` of the first epoch's
    level over the run's epochs) plus z at 95 % standard errors: a leak this large is said 19 times
    in 20."""
    n = levels.levels.size
    if n < 3:
        return None
    x = np.arange(n, dtype=float)
    fit = np.polyfit(x, levels.levels, 1)
    scatter = math.sqrt(float(np.sum((levels.levels - np.polyval(fit, x)) ** 2)) / (n - 2))
    se = math.hypot(max(scatter, levels.noise) / math.sqrt(float(np.sum((x - x.mean()) ** 2))), levels.tilt)
    z = stats.norm.ppf(CONFIDENCE)
    noise = float((stats.t.ppf(CONFIDENCE, n - 2) + z) * se + levels.resolution / (n - 1))
    worth = MIN_SHARE * float(levels.first) / (n - 1)
    return noise, max(noise, float(worth + z * se))


RETAINED = (" (host RSS with gnnmon.exact_host_memory() off: the rate includes freed memory the allocator, glibc, "
            "kept for reuse)")
"""What a leak on the host's RSS adds to its words where the run kept glibc's default (freed memory kept)."""

RETAINED_NEXT = ("; gnnmon.exact_host_memory() before the run returns large frees to the OS, so that the rate is "
                 "what outlives the steps (docs/memory.md)")
"""What such a leak adds to its next step: how to measure the leak alone."""


def creep(loop: Loop, resolution: float = 0.0, retained: bool = False) -> list[dict[str, Any]]:
    """End-of-call memory across epochs: a leak, bigger graphs, or growth too short to tell (see the
    module doc). ``resolution``: what the host's RSS cannot resolve (bytes), for its figures.
    ``retained``: the run kept freed host memory (:func:`~gnnmon.report.diagnosis.memory_findings.host_retained`):
    a leak on the host's RSS says its rate holds the allocator's retention, and how to measure it alone."""
    epochs = loop.column("epoch")
    if np.isnan(epochs).all() or np.unique(epochs[~np.isnan(epochs)]).size < 2:
        return []
    out = []
    for figure in figures(loop):
        host = _host(loop, figure)
        found = _creep_of(Levels(loop, figure, resolution if host else 0.0), loop.label, retained and host)
        if found is not None:
            out.append(found)
    return out


def figures(loop: Loop) -> list[str]:
    """The end-of-call figures a loop records (the CPU's device memory is its RSS: said once)."""
    out = [MEM_END.name, RSS_END.name, "workers_rss_bytes"]
    if loop.has(RSS_END.name) and np.array_equal(loop.column(RSS_END.name), loop.column(MEM_END.name), equal_nan=True):
        out.remove(RSS_END.name)
    return [f for f in out if loop.has(f)]


def _host(loop: Loop, figure: str) -> bool:
    """Whether ``figure`` is the host's RSS (its own, or a CPU step's device memory)."""
    if figure == RSS_END.name:
        return True
    devices = ({str(d).split(":")[0] for d in loop.part.objects("device") if d is not None}  # None: a call measured
               if "device" in loop.part.cols else set())  # nowhere (it did not start)
    return figure == MEM_END.name and devices == {"cpu"}


def looked_for(loop: Loop, resolution: float = 0.0) -> list[dict[str, Any]]:
    """What the leak check found nothing in: ``{"label", "figure", "epochs",
    "hidden_bytes_per_epoch", "unsaid_bytes_per_epoch", "levelled_off_bytes"}`` for every figure
    over :data:`MIN_EPOCHS` epochs or more that :func:`creep` says nothing of: the largest leak its
    noise could hide, the largest that would go unsaid (see :func:`hidden`; where growth curved and
    its last epochs' rate is not bounded under that, that rate's upper bound: :func:`after_curve`), and
    where it rose then levelled off (:func:`after_curve`), by how much (else None). Where the loop's
    DataLoader had workers whose memory was not sampled (no ``workers_rss_bytes``), also ``{"check":
    "workers", "label", "workers"}``: their memory was not looked at, so a leak there goes unsaid."""
    out: list[dict[str, Any]] = []
    if np.isnan(loop.column("epoch")).all():
        return out
    workers = loader_workers(loop)
    if workers and not loop.has("workers_rss_bytes"):
        out.append({"check": "workers", "label": loop.label, "workers": workers})
    said = {e["figure"] for f in creep(loop, resolution) for e in f["evidence"]}
    for figure in figures(loop):
        levels = Levels(loop, figure, resolution if _host(loop, figure) else 0.0)
        if figure in said or levels.levels.size < MIN_EPOCHS or not median(np.sort(levels.levels)) > 0:
            continue
        bounds = hidden(levels)
        rose = float(levels.levels[-1] - levels.levels[0])
        curves = trend_p(levels.levels) < P_TREND and levelling_off(levels.levels, levels.noise)
        stopped = curves and after_curve(levels, levels.levels) == "levelled"
        unsaid = bounds[1] if bounds else None
        if curves and not stopped and unsaid is not None:  # growth that slowed, not bounded under it
            unsaid = max(unsaid, recent(levels, levels.levels)[3])
        out.append({"label": loop.label, "figure": figure, "epochs": int(levels.levels.size),
                    "hidden_bytes_per_epoch": bounds[0] if bounds else None,
                    "unsaid_bytes_per_epoch": unsaid, "levelled_off_bytes": rose if stopped else None})
    return out


def unmarked(loop: Loop) -> dict[str, Any] | None:
    """A loop whose calls record end-of-call memory but mark no epochs, so the leak check (which
    reads epoch levels: memory within an epoch ramps and falls back) did not run: ``{"label",
    "figures", "calls"}``; None where epochs are marked, or there is no memory or too few calls."""
    if not np.isnan(loop.column("epoch")).all():
        return None
    found = figures(loop)
    calls = int(loop.steady.sum())
    if not found or calls < MIN_EPOCHS:
        return None
    return {"label": loop.label, "figures": found, "calls": calls}


def _creep_of(lv: Levels, label: str, retained: bool = False) -> dict[str, Any] | None:
    n = lv.levels.size
    level = float(lv.last)
    if not level > 0:
        return None  # nothing held (no DataLoader workers: their RSS reads 0)
    proof = [evidence(lv.figure, level, "bytes", f"end of {label}'s calls, last epoch's median")]
    grew_by_shapes = lv.explained >= MIN_SHARE * level
    if lv.terms:
        proof.append(evidence("growth explained by shapes", lv.explained, "bytes",
                              f"{', '.join(lv.terms)} between the first and the last epoch (coefficients fitted within "
                              "epochs)"))
    rise = float(lv.levels[-1] - lv.levels[0])
    if lv.together and rise >= MIN_SHARE * level:  # growth the fitted shapes leave, with batches that grew too
        words = (f"{lv.figure} of {label} grew {format_bytes(rise)} over {n} epochs while its batches "
                 f"({', '.join(lv.together)}) grew with it, barely varying within an epoch: a leak cannot be told "
                 "from bigger graphs")
        return finding("creep", label, rise, level, words, proof,
                       "vary the batch sizes within an epoch (or run an epoch at a fixed size) to tell them apart",
                       of="memory")
    k = lv.start() if n >= MIN_EPOCHS else 0
    growing = lv.levels[k:]
    if n >= MIN_EPOCHS and growing.size >= 3 and trend_p(growing) < P_TREND:
        since = _epoch(lv.epochs[k])
        where = f"{growing.size} epochs, {lv.calls} calls; Mann-Kendall p = {trend_p(growing):.2g}"
        if not levelling_off(growing, lv.noise):
            slope, low, high = rate(growing, lv.resolution, lv.tilt)
            said = f"Theil-Sen over the levels of epochs {since} to the last ({where})"
            words = (f"a leak: {lv.figure} of {label} grew {format_bytes(slope)} per epoch (95 % interval "
                     f"{format_bytes(low)} to {format_bytes(high)}) from epoch {since} to the last, that the batches' "
                     "shapes do not explain")
            extra: dict[str, Any] = {}
        elif after_curve(lv, growing) == "slowing":  # it curves, but still grows: a leak at its recent rate
            m, slope, low, high = recent(lv, growing)
            early = rate(growing[:m], lv.resolution, lv.tilt)[0]
            late = _epoch(lv.epochs[k + growing.size - m])
            said = (f"Theil-Sen over the levels of the last {m} epochs, {late} to the last, slowing from "
                    f"{format_bytes(early)} per epoch over epochs {since} to {_epoch(lv.epochs[k + m - 1])} ({where})")
            words = (f"a leak, slowing: {lv.figure} of {label} grew {format_bytes(slope)} per epoch over epochs {late} "
                     f"to the last (95 % interval {format_bytes(low)} to {format_bytes(high)}), down from "
                     f"{format_bytes(early)} per epoch over epochs {since} to {_epoch(lv.epochs[k + m - 1])}, that the "
                     "batches' shapes do not explain")
            extra = {"slowing_from": early}
        else:
            slope = low = high = 0.0
            said = words = ""
            extra = {}
        at_stake = slope * (growing.size - 1)  # the rate said, over the epochs it grew
        if low > 0 and at_stake >= MIN_SHARE * float(lv.first):
            proof.insert(0, evidence("growth not explained by shapes", slope, "bytes/epoch", said))
            words += f" ({format_bytes(lv.explained)} more came with bigger graphs)" if grew_by_shapes else ""
            words += RETAINED if retained else ""
            return finding("leak", label, at_stake, level, words, proof,
                           "look for what outlives a step: a list or dict the loop appends tensors to (loss instead "
                           "of loss.item()), a cache keyed by batch, hooks that keep their inputs"
                           + (RETAINED_NEXT if retained else ""), of="memory", since_epoch=since,
                           rate_interval=(low, high), **extra)
    if n < MIN_EPOCHS and rise >= MIN_SHARE * level and rise > NOISE_K * math.sqrt(2) * lv.noise:
        proof.append(evidence("growth not explained by shapes", rise / max(n - 1, 1), "bytes/epoch",
                              f"the last epoch's level less the first's, over {n - 1} epoch(s)"))
        words = (f"{lv.figure} of {label} grew {format_bytes(rise / max(n - 1, 1))} per epoch over {n} epoch(s), more "
                 "than its batches' shapes explain: too few epochs to tell a leak from growth that levels off (the "
                 "allocator's warm-up, a cache that fills)")
        return finding("creep", label, rise, level, words, proof,
                       f"run {MIN_EPOCHS} epochs or more (with run.mark('epoch', e)): a leak goes on growing in "
                       "the later ones", of="memory")
    if not grew_by_shapes:
        return None
    words = (f"{lv.figure} of {label} grew {format_bytes(lv.explained)} between the first and the last epoch, "
             "explained by bigger graphs; no leak beyond the noise")
    return finding("creep", label, lv.explained, level, words, proof,
                   "nothing leaks: larger batches need more memory (gnnmon forecast RUN --capacity ... says how large "
                   "they may grow)", of="memory")


def _epoch(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)

"""What a fake NVML counter's planted truth (:class:`tests.fake_nvml.FakeNvml`'s power, ``t0``, start
values and update period) says of gnnmon's energy points: where each truly was and how far gnnmon
placed it from there (ns), and what that allows a stepped counter's period (ms) and a row's energy
(J). Bounds from the plant, never from a point's ``err_ns``: that is the figure under test."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gnnmon.data.format import POINT
from gnnmon.data.read import read_lines

if TYPE_CHECKING:
    from tests.fake_nvml import FakeNvml

COUNTER_RES_J = 1e-3
"""NVML's energy counter counts whole millijoules: a point's value places its read within
1 mJ / watts of the instant the plant gave it (6.7 µs at 150 W); ``time.time()``'s float adds a µs."""


def planted_phases(nv: FakeNvml, nvml_index: int) -> list[tuple[float, float]]:
    """The fake's planted power on GPU ``nvml_index`` as ``[(from time.time(), watts), ...]``, each
    held until the next (the last for good): its ramp, or its schedule laid out from ``t0`` (a phase
    of ``None`` seconds lasting until the cue, once set)."""
    if nv.schedule is None:
        return [(nv.t0, nv.ramp_w[nvml_index])]
    phases, start = [], nv.t0
    for seconds, watts in nv.schedule:
        phases.append((start, watts))
        if seconds is None and nv.cue_at() is None:
            break  # the cue not set: this phase lasts
        start = nv.cue_at() if seconds is None else start + seconds
    return phases


def planted_watts(phases: list[tuple[float, float]], a: float, b: float) -> list[float]:
    """The planted powers met between the instants ``a`` and ``b`` (time.time())."""
    ends = [s for s, _ in phases[1:]] + [float("inf")]
    return [w for (s, w), e in zip(phases, ends, strict=True) if s <= b and e > a]


def misplacing(lines, key: str, nv: FakeNvml, nvml_index: int) -> tuple[list[dict], list[float], list[float]]:
    """The counter's points (as the file ``lines`` keeps them: its path, or its lines as read), in
    time order, with where each truly was and how far gnnmon placed it from there (ns), from the
    plant, not from gnnmon's figures: a point's value is the fake's start value plus the planted
    energy up to its read (or up to the step it shows), in whole mJ, so the instant the planted
    energy reached it says when it was."""
    if isinstance(lines, (str, os.PathLike)):
        lines = read_lines(lines)
    mine = sorted((p for p in lines if p.get("type") == POINT and p["key"] == key), key=lambda p: p["t_ns"])
    start_mj = nv.added_mj[nvml_index]
    true_ns = []
    for p in mine:
        target_j = (p["value"] - start_mj) / 1e3
        lo, hi = nv.t0, nv.t0 + 1.0
        while nv.joules(nvml_index, nv.t0, hi) < target_j:
            lo, hi = hi, nv.t0 + 2 * (hi - nv.t0)
        for _ in range(64):  # to well under a µs
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if nv.joules(nvml_index, nv.t0, mid) < target_j else (lo, mid)
        true_ns.append(hi * 1e9)
    return mine, true_ns, [abs(p["t_ns"] - t) for p, t in zip(mine, true_ns, strict=True)]


def period_slack_ms(off_ns: list[float], watts: float) -> list[float]:
    """How far the period a stepped counter's points say may be from the planted one, for each
    newest 10 points in turn (``off_ns``: the points' misplacings, :func:`misplacing`; ``watts``:
    the lowest power planted). The period is the median spacing of the newest 10 points
    (``Counters.period_s``). Each spacing is misplaced by at most its two points' misplacings and
    the counter's whole mJ at that power; the planted spacing is one period, so the k-th smallest
    of n spacings is within the larger of the misplacings' k-th and (n-1-k)-th smallest of it: for
    gnnmon's median, k = n // 2, that is their k-th."""
    res_ns = COUNTER_RES_J / watts * 1e9 + 1_000
    spacing_ns = [a + b + 2 * res_ns for a, b in zip(off_ns, off_ns[1:], strict=False)]
    windows = [sorted(spacing_ns[max(0, j - 9):j]) for j in range(1, len(spacing_ns) + 1)]
    return [w[len(w) // 2] / 1e6 for w in windows]


def placing_slack_j(path, key: str, nv: FakeNvml, nvml_index: int, *ends_ns: int) -> float:
    """What placing the counter's points (as the file ``path`` keeps them) allows a row's energy at
    the fake ``nv``'s planted power on GPU ``nvml_index``, from the plant, not from gnnmon's
    figures: where each point truly was (:func:`misplacing`) against where gnnmon placed it. Each of
    the row's ends, interpolated between the points either side of it, may move by the larger of
    their misplacings, at the largest power planted between them (their true and placed instants
    alike). Where a phase of the plan changes between the two points' true instants (a step the
    reads missed), the line between them strays from the plant by what the counter cannot say (its
    resolution: a step's energy at most), and the misplacing may count twice over.
    (A point's own ``err_ns`` is not used here: it is the figure under test, held to the plant on a
    simulated clock in ``tests/timeline/test_energy.py``.)"""
    mine, true_ns, off = misplacing(path, key, nv, nvml_index)
    phases = planted_phases(nv, nvml_index)
    slack_j = 0.0
    for t in ends_ns:
        near = ([i for i, p in enumerate(mine) if p["t_ns"] <= t][-1:]
                + [i for i, p in enumerate(mine) if p["t_ns"] > t][:1])
        if not near:
            continue
        lo = min(min(mine[i]["t_ns"], true_ns[i]) for i in near) / 1e9
        hi = max(max(mine[i]["t_ns"], true_ns[i]) for i in near) / 1e9
        watts = planted_watts(phases, lo, hi)
        res_ns = COUNTER_RES_J / min(watts) * 1e9 + 1_000
        off_ns = max(off[i] for i in near)
        slack_j += max(watts) * (off_ns + res_ns) / 1e9
        if len(near) == 2:
            a, b = (true_ns[i] / 1e9 for i in near)
            e_a, e_b = (nv.joules(nvml_index, nv.t0, x) for x in (a, b))
            stray = [abs(e_a + (e_b - e_a) * (s - a) / (b - a) - nv.joules(nvml_index, nv.t0, s))
                     for s, _ in phases if a + res_ns / 1e9 < s < b - res_ns / 1e9]
            if stray:
                slack_j += max(stray) + max(watts) * 2 * off_ns / 1e9
    return slack_j

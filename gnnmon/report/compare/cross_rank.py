"""Across the ranks of a distributed job: which rank held each step up, by how much, and why.

Rows are matched across ranks by ``(label, index)`` (the n-th call of a label on every rank), top-
level rows only. Times are put on rank 0's clock with each rank's measured offset (manifest
``ranks[*].clock_offset_ns``; 0 where none was measured). Under DDP a slow rank does not show as a
long row of its own: every rank waits for it in the next all-reduce, so the ranks' rows end
together and look alike. What tells them apart is *where* the time went, in the order it was
spent: a rank that arrived late (its row started later after its previous row of the label ended:
a previous row that ended late was that step's delay, judged there, not this one's), or, within
the row, the first phase in which one rank took longer than the others (the others then wait in a
later phase, e.g. backward).
So, per step, in that order — arrival, the phases before ``backward``, when each rank's gradient
buckets were ready (``ddp_ready_s`` of ``gnnmon.watch_buckets``: a rank whose backward computed
longer is late here even though every rank's backward ends together), the other phases, then the
whole row — the first of these whose spread across ranks exceeds ``min_delay_s``, ``min_share`` of
the step and the run's own noise names the slowest rank; the others waited that long each. A rank
that arrived earlier than the latest by half that spread or more is not named: its extra time is
its wait. A label's first step is not judged by its arrival: the ranks enter their loops at
different times (set-up, not a step).

The run's own noise: with at least :data:`CALIBRATE_MIN` matched steps of a label, each rank's
usual lag in each measure (the median over the steps) is taken out first, and a spread must pass
the median spread plus four robust deviations. A rank that lags by about the same time at every
step is a straggler named once (``constant``), not a slow rank at each step.

Causes, for the slowest rank: ``gc`` where its GC pauses (in the row, or in its rows since its
previous step) cover at least half the delay; ``larger batch`` where its batch had more nodes or
edges (``record_graph``) than the others' by more than 10 %; ``data loading`` where the delay was
in a ``data`` phase or row, or before the row started with a ``data`` row in between or a wait
for its batch (``data_wait_s`` of ``gnnmon.watch_loader``) of half the delay; then, where the
rows carry the thread's scheduler counters (``collect(sched=)``, on in a distributed job),
``preempted`` (on a run queue: a busy machine), ``waiting`` (CPU rows: the CPU given up) or
``collective`` (a wait every rank made, ended late on this one), as :func:`_off_cpu` weighs them:
the steps held up by the first and last are listed apart, not as spikes; ``compute`` where it was
in the buckets (the rank's own backward took longer: on a CPU row with counters, its thread
computed at least half the delay more than usual); else ``unexplained``. Each names the rank:
``gc (rank 0)``.
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

PHASE = "phase_"
BUCKETS = "ddp_ready_s"
"""When a rank's last gradient bucket was ready, from its row's start (``gnnmon.watch_buckets``)."""
OUTSIDE = {"preempted": "preempted", "collective": "collective"}
"""Steps held up by what is not the job's own work, listed apart from the spikes (the report's key:
the cause it names): a rank the OS took off the CPU, a rank whose collective ended late."""
Window = tuple[float, float, float, float, "float | None"]
"""A rank's thread over some time: ``(wall s, CPU s, preempted, waits, run-queue s or None)``."""
CALIBRATE_MIN = 8
"""Matched steps of a label needed to learn its ranks' usual lags and its noise; with fewer, a
spread above ``min_delay_s`` and ``min_share`` of the step names a rank."""


def _offsets(manifest: Mapping[str, Any] | None) -> dict[int, int]:
    ranks = (manifest or {}).get("ranks") or []
    return {int(r.get("rank", i)): int(r.get("clock_offset_ns") or 0) for i, r in enumerate(ranks)}


def _time_s(row: Mapping[str, Any]) -> float | None:
    v = row.get("device_s", row.get("wall_s"))
    return float(v) if isinstance(v, (int, float)) else None


def cross_rank(records: list[dict[str, Any]], manifest: Mapping[str, Any] | None = None, *,
               min_delay_s: float = 0.005, min_share: float = 0.1, straggler_share: float = 0.2,
               ) -> dict[str, Any]:
    """The cross-rank report of a job's rows (see the module doc): ``steps`` (one per matched
    step: label, index, ranks, spread_s, slowest_rank, delay_s, waited_s, via, cause),
    ``spikes`` (steps whose delay was at least ``min_share`` of the step, with their cause),
    ``preempted`` (steps held up by a rank the OS descheduled: not the job's, not spikes),
    ``collective`` (steps whose collective ended late on one rank, no wait of its own: not spikes),
    ``stragglers`` (ranks slowest in at least ``straggler_share`` of the steps, and 3), and
    ``per_rank`` (steps, total and median time per label). ``{}`` when the rows carry no rank."""
    ranked = [r for r in records if "rank" in r and r.get("parent") is None]
    if not ranked or len({r["rank"] for r in ranked}) < 2:
        return {}
    offsets = _offsets(manifest)
    by_step: dict[tuple[str, int], dict[int, dict[str, Any]]] = defaultdict(dict)
    by_rank: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in ranked:
        by_step[(r["label"], int(r["index"]))][int(r["rank"])] = r
        by_rank[int(r["rank"])].append(r)
    histories = {}
    for rank, rows_of_rank in by_rank.items():
        rows_of_rank.sort(key=lambda r: int(r.get("t_start_ns") or 0))
        histories[rank] = _History(rows_of_rank)

    def start(rank: int, row: Mapping[str, Any]) -> float:
        return (int(row.get("t_start_ns") or 0) - offsets.get(rank, 0)) / 1e9

    def end(rank: int, row: Mapping[str, Any]) -> float:
        return (int(row.get("t_end_ns") or 0) - offsets.get(rank, 0)) / 1e9

    candidates: list[Candidate] = []  # (label, index, rows, times, measures, pauses, arrived) per matched step
    for (label, index), rows in by_step.items():
        if len(rows) < 2 or any(_time_s(r) is None for r in rows.values()):
            continue
        times = {k: float(_time_s(r) or 0.0) for k, r in rows.items()}
        starts = {k: start(k, r) for k, r in rows.items()}
        arrived = {k: s - min(starts.values()) for k, s in starts.items()}
        previous = {k: histories[k].previous(r) for k, r in rows.items()}
        ended = {k: end(k, p) for k, p in previous.items() if p is not None and p.get("t_end_ns")}
        late = _late(arrived, ended) if len(ended) == len(rows) else arrived
        pauses = {k: histories[k].gc_since(r) for k, r in rows.items()}
        candidates.append((label, index, rows, times, _measures(rows, late, times), pauses, arrived))
    baselines, noise = _calibrate(candidates)
    first: dict[str, int] = {}
    for label, index, *_ in candidates:
        first[label] = min(index, first.get(label, index))

    steps = []
    for label, index, matched, times, measures, pauses, arrived in candidates:
        total = max(times.values())
        slowest, delay, via = None, 0.0, None
        # A GC pause is recorded, not inferred: the rank that paused longest, by enough, held the
        # step up wherever in the step (or before it) the pause fell.
        gc_rank = max(pauses, key=lambda k: pauses[k])
        gc_excess = pauses[gc_rank] - min(pauses.values())
        if gc_excess >= min_delay_s and gc_excess >= min_share * total:
            slowest, delay, via = gc_rank, gc_excess, "gc"
        else:
            for name, values in measures:
                if name == "arrival" and index == first[label]:
                    continue  # the ranks enter the loop at different times: set-up, not a step
                base = baselines.get((label, name), {})
                values = {k: v - base.get(k, 0.0) for k, v in values.items()}
                spread = max(values.values()) - min(values.values())
                if spread < max(min_delay_s, noise.get((label, name), 0.0)) or spread < min_share * total:
                    continue
                longest = max(values, key=lambda k: values[k])
                if name != "arrival" and max(arrived.values()) - arrived[longest] >= 0.5 * spread:
                    continue  # it arrived that much earlier: the extra time is its wait for a late rank
                slowest, delay, via = longest, spread, name
                break
        entry: dict[str, Any] = {
            "label": label, "index": index, "ranks": sorted(matched), "time_s": total,
            "spread_s": max(times.values()) - min(times.values()), "slowest_rank": slowest,
            "delay_s": delay, "waited_s": delay * (len(matched) - 1) if slowest is not None else 0.0,
            "via": via, "cause": None,
        }
        if slowest is not None:
            entry["cause"] = _cause(slowest, matched, via or "", delay, histories)
        steps.append(entry)
    steps.sort(key=lambda s: (min(start(k, by_step[(s["label"], s["index"])][k]) for k in s["ranks"])))
    outside = {kind: [dict(s) for s in steps if s["cause"] and s["cause"].startswith(cause)]
               for kind, cause in OUTSIDE.items()}
    spikes = [dict(s) for s in steps if s["slowest_rank"] is not None
              and not s["cause"].startswith(tuple(OUTSIDE.values()))]
    counts: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for s in spikes:
        counts[s["slowest_rank"]].append(s)
    stragglers = _constant_stragglers(candidates, baselines, min_delay_s, min_share)
    for rank, held in sorted(counts.items()):
        if len(held) >= 3 and len(held) >= straggler_share * len(steps):
            causes = [s["cause"].split(" (")[0] for s in held]
            stragglers.append({"rank": rank, "steps": len(held), "of": len(steps),
                               "delay_s": sum(s["delay_s"] for s in held),
                               "cause": max(dict.fromkeys(causes), key=causes.count)})
    per_rank = {}
    for rank, rows_of_rank in sorted(by_rank.items()):
        labels: dict[str, list[float]] = defaultdict(list)
        for r in rows_of_rank:
            t = _time_s(r)
            if t is not None:
                labels[r["label"]].append(t)
        per_rank[rank] = {label: {"count": len(v), "total_s": sum(v), "median_s": statistics.median(v)}
                          for label, v in labels.items()}
    return {"steps": steps, "spikes": spikes, **outside, "stragglers": stragglers,
            "per_rank": per_rank, "clock_offsets_ns": offsets}


def _late(arrived: dict[int, float], ended: dict[int, float]) -> dict[int, float]:
    """How much later than the others each rank started (``arrived``), less how much later than
    the others it ended its previous row of the label (from ``ended``, its end times): that was
    the previous step's delay."""
    first = min(ended.values())
    late = {k: max(0.0, a - (ended[k] - first)) for k, a in arrived.items()}
    low = min(late.values())
    return {k: v - low for k, v in late.items()}


def _measures(rows: Mapping[int, Mapping[str, Any]], late: dict[int, float],
              times: dict[int, float]) -> list[tuple[str, dict[int, float]]]:
    """Where a step's time went, per rank, in the order it was spent: arrival (``late``: how much
    later than the others the rank started), the phases before ``backward``, when the gradient
    buckets were ready (``ddp_ready_s``), the other phases, the whole row."""
    first = next(iter(rows.values()))
    measures = [("arrival", late)]
    shared = [f for f in first if f.startswith(PHASE) and f.endswith("_s")
              and all(isinstance(r.get(f), (int, float)) for r in rows.values())]
    phases = [(f[len(PHASE):-2], {k: float(r[f]) for k, r in rows.items()}) for f in shared]
    cut = next((i for i, (name, _) in enumerate(phases) if name == "backward"), len(phases))
    measures += phases[:cut]
    if all(isinstance(r.get(BUCKETS), (int, float)) for r in rows.values()):
        measures.append(("buckets", {k: float(r[BUCKETS]) for k, r in rows.items()}))
    measures += phases[cut:]
    measures.append(("row", times))
    return measures


Candidate = tuple[str, int, Mapping[int, Mapping[str, Any]], dict[int, float], list[tuple[str, dict[int, float]]],
                  dict[int, float], dict[int, float]]
"""One matched step: label, index, its rows by rank, their times, where the time went
(:func:`_measures`), each rank's GC pauses since its previous step, and how much later than the
first each rank started (rank 0's clock)."""


def _calibrate(candidates: list[Candidate]) -> tuple[dict[tuple[str, str], dict[int, float]],
                                                     dict[tuple[str, str], float]]:
    """Per (label, measure): each rank's usual lag behind the fastest (the median over the steps:
    a constant difference, taken out before steps are judged) and the noise of what is left (the
    median spread plus 4 robust deviations), from at least :data:`CALIBRATE_MIN` steps."""
    values: dict[tuple[str, str], list[dict[int, float]]] = defaultdict(list)
    for label, _, _, _, measures, _, _ in candidates:
        for name, per_rank in measures:
            values[(label, name)].append(per_rank)
    baselines, noise = {}, {}
    for key, steps in values.items():
        if len(steps) < CALIBRATE_MIN:
            continue
        lags: dict[int, list[float]] = defaultdict(list)
        for per_rank in steps:
            low = min(per_rank.values())
            for k, v in per_rank.items():
                lags[k].append(v - low)
        base = baselines[key] = {k: statistics.median(v) for k, v in lags.items()}
        spreads = []
        for per_rank in steps:
            left = [v - base.get(k, 0.0) for k, v in per_rank.items()]
            spreads.append(max(left) - min(left))
        middle = statistics.median(spreads)
        mad = statistics.median(abs(x - middle) for x in spreads)
        noise[key] = middle + 4 * 1.4826 * mad
    return baselines, noise


def _constant_stragglers(candidates: list[Candidate], baselines: dict[tuple[str, str], dict[int, float]],
                         min_delay_s: float, min_share: float) -> list[dict[str, Any]]:
    """A rank that lags by about the same time at every step of a label: named once, by the first
    measure (in the order time is spent) where its usual lag is at least ``min_delay_s`` and
    ``min_share`` of the median step."""
    out: list[dict[str, Any]] = []
    labels: dict[str, list[float]] = defaultdict(list)
    order: dict[str, list[str]] = {}
    for label, _, _, times, measures, _, _ in candidates:
        labels[label].append(max(times.values()))
        order.setdefault(label, [name for name, _ in measures])
    for label, totals in labels.items():
        typical = statistics.median(totals)
        for name in order[label]:
            base = baselines.get((label, name))
            if not base:
                continue
            rank = max(base, key=lambda k: base[k])
            lag = base[rank]
            if lag >= min_delay_s and lag >= min_share * typical:
                cause = {"arrival": "late arrival", "buckets": "compute", "row": "compute"}.get(name, f"slower {name}")
                out.append({"rank": rank, "steps": len(totals), "of": len(totals), "delay_s": lag * len(totals),
                            "per_step_s": lag, "label": label, "via": name, "constant": True,
                            "cause": f"{cause} (rank {rank}, every step)"})
                break
    return out


class _History:
    """One rank's top-level rows in start order, indexed for "what ran since its previous step"."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.starts = [int(r.get("t_start_ns") or 0) for r in rows]
        self.by_key = {(r["label"], int(r["index"])): r for r in rows}
        self._usual: dict[tuple[str, str], Window | None] = {}

    def previous(self, row: Mapping[str, Any]) -> dict[str, Any] | None:
        """This rank's previous row of ``row``'s label (None for its first)."""
        return self.by_key.get((row["label"], int(row["index"]) - 1))

    def between(self, row: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The rows since this rank's previous row of ``row``'s label, up to ``row``."""
        previous = self.previous(row)
        since = int(previous.get("t_end_ns") or 0) if previous else 0
        start = int(row.get("t_start_ns") or 0)
        return self.rows[bisect.bisect_left(self.starts, since):bisect.bisect_left(self.starts, start)]

    def gc_since(self, row: Mapping[str, Any]) -> float:
        """Seconds of GC pauses in ``row`` and in this rank's rows since its previous step."""
        return float(row.get("gc_pause_s") or 0.0) + sum(float(r.get("gc_pause_s") or 0.0)
                                                         for r in self.between(row))

    def usual_sched(self, label: str, via: str) -> Window | None:
        """The medians of :func:`_window` over this rank's rows of ``label`` (None with fewer than
        :data:`CALIBRATE_MIN`; the run-queue time None unless every one of them has it)."""
        key = (label, via)
        if key not in self._usual:
            windows = [w for r in self.rows if r["label"] == label and (w := _window(r, via)) is not None]
            usual = None
            if len(windows) >= CALIBRATE_MIN:
                med = statistics.median
                queued = [w[4] for w in windows if w[4] is not None]
                usual = (med(w[0] for w in windows), med(w[1] for w in windows), med(w[2] for w in windows),
                         med(w[3] for w in windows), med(queued) if len(queued) == len(windows) else None)
            self._usual[key] = usual
        return self._usual[key]


def _window(row: Mapping[str, Any], via: str) -> Window | None:
    """A rank's thread over the time a delay seen ``via`` fell in (``thread_*`` fields of
    ``collect(sched=)``): ``(wall s, CPU s, preempted, waits, run-queue s or None)``. Late buckets: the row up to its
    last bucket ready; a late arrival: the time since the thread's previous row; the whole row:
    its part after its last bucket was ready (the all-reduce, the optimizer; all of it without
    buckets); a phase: the row."""
    if via == "arrival":
        return _sched_part(row, "before_s", "before_thread_")
    if via == "buckets" and (ready := _sched_part(row, "ddp_ready_s", "ddp_ready_thread_")) is not None:
        return ready
    if via == "row":
        return _tail(row)
    return _sched_part(row, "wall_s", "thread_")


def _sched_part(row: Mapping[str, Any], wall: str, prefix: str) -> Window | None:
    """``(wall s, CPU s, preempted, waits, run-queue s)`` from a row's ``wall`` field and its
    ``<prefix>cpu_s``, ``<prefix>preempted``, ``<prefix>waits`` and ``<prefix>queued_s`` (None
    where the row has none: a kernel without schedstat); None where it has none of the others."""
    values = (row.get(wall), row.get(f"{prefix}cpu_s"), row.get(f"{prefix}preempted"), row.get(f"{prefix}waits"))
    if not all(isinstance(v, (int, float)) for v in values):
        return None
    queued = row.get(f"{prefix}queued_s")
    return (float(values[0]), float(values[1]), float(values[2]), float(values[3]),  # type: ignore[arg-type]
            float(queued) if isinstance(queued, (int, float)) else None)


def _tail(row: Mapping[str, Any]) -> Window | None:
    """The row after its last gradient bucket was ready (the all-reduce, the optimizer), or all of
    it where it has no bucket figures."""
    whole = _sched_part(row, "wall_s", "thread_")
    ready = _sched_part(row, "ddp_ready_s", "ddp_ready_thread_")
    if whole is None or ready is None:
        return whole
    queued = None if whole[4] is None or ready[4] is None else whole[4] - ready[4]
    return whole[0] - ready[0], whole[1] - ready[1], whole[2] - ready[2], whole[3] - ready[3], queued


def _cause(rank: int, rows: Mapping[int, Mapping[str, Any]], via: str, delay: float,
           histories: Mapping[int, _History]) -> str:
    """Why ``rank`` held the step up (see the module doc)."""
    row, history = rows[rank], histories[rank]
    if via == "gc" or history.gc_since(row) >= 0.5 * delay:
        return f"gc (rank {rank})"
    if via == "arrival" and (any(r["label"] == "data" or r.get("phase_data_s") for r in history.between(row))
                             or float(row.get("data_wait_s") or 0.0) >= 0.5 * delay):
        return f"data loading (rank {rank})"
    for key in ("num_nodes", "num_edges"):
        mine = row.get(key)
        others = [float(r[key]) for k, r in rows.items() if k != rank and isinstance(r.get(key), (int, float))]
        if isinstance(mine, (int, float)) and len(others) == len(rows) - 1 and mine > 1.1 * max(others):
            return f"larger batch (rank {rank})"
    if via == "data" or row["label"] == "data":
        return f"data loading (rank {rank})"
    off_cpu = _off_cpu(rank, rows, via, delay, histories)
    if off_cpu is not None:
        return f"{off_cpu} (rank {rank})"
    if via == "buckets" and not _computed_less(rows[rank], via, delay, histories[rank]):
        return f"compute (rank {rank})"
    return f"unexplained (rank {rank})"


def _computed_less(row: Mapping[str, Any], via: str, delay: float, history: _History) -> bool:
    """Whether a CPU row's thread computed less than half the delay more than usual over the
    window the delay fell in: its own work did not take longer, so "compute" would be a guess (a
    thread partly queued, partly given up, each under half the delay)."""
    window, usual = _window(row, via), history.usual_sched(row["label"], via)
    return (row.get("backend") == "cpu" and window is not None and usual is not None
            and window[1] - usual[1] < 0.5 * delay)


def _off_cpu(rank: int, rows: Mapping[int, Mapping[str, Any]], via: str, delay: float,
             histories: Mapping[int, _History]) -> str | None:
    """Where ``rank``'s thread spent the delay, from its scheduler counters over the time the delay
    fell in (:func:`_window`), where it computed less than half the delay more than usual and was
    off the CPU for at least half the delay more than usual: ``preempted`` where it spent more of
    that extra time on a run queue (ready to run, no core: a busy machine, not the job) than given
    up; ``waiting`` (CPU rows only: on a GPU the host thread waits for the device) where it gave the
    CPU up for longer (a sleep, I/O, a lock). Rows without the run-queue time (a kernel without
    schedstat) count switches instead: ``preempted`` where the OS took the CPU from it more often
    than usual while it gave the CPU up no more often than usual (or never, off the CPU for half
    the delay), else ``waiting``. A ``waiting`` is ``collective`` where that wait was one every
    rank made, only longer here: every other rank also gave the CPU up there more often than usual
    at this step, no less often than this one (a collective in the window: DDP's bucket rebuild in
    its second step, a barrier; judged only over a window that ends before the step's all-reduce,
    where the others wait for this rank: up to the buckets, or before the row), or, after its
    buckets were ready (on time: the delay was not found before them), it gave the CPU up no more
    often than usual (its usual wait, the all-reduce's). Its communication thread ran late, or a
    slow link: not a wait of the job's own. None where the rows carry no counters or they say
    neither."""
    row = rows[rank]
    window, usual = _window(row, via), histories[rank].usual_sched(row["label"], via)
    if window is None or usual is None:
        return None
    verdict = _verdict(window, usual, delay, row.get("backend") == "cpu")
    if verdict != "waiting":
        return verdict
    extra = window[3] - usual[3]
    if via == "row" and isinstance(row.get(BUCKETS), (int, float)) and extra <= 0:
        return "collective"  # after its buckets, no wait but the usual one (the all-reduce's) ran long
    if via not in ("buckets", "arrival"):
        return verdict  # the others' window is their whole row: its waits include the one for this rank
    others = [(_window(r, via), histories[k].usual_sched(r["label"], via)) for k, r in rows.items() if k != rank]
    if all(w is not None and u is not None and w[3] - u[3] >= max(extra, 1) for w, u in others):
        return "collective"
    return verdict


def _verdict(window: Window, usual: Window, delay: float, on_cpu: bool) -> str | None:
    """:func:`_off_cpu` over one window, against its usual values. With the run-queue time, time is
    weighed: of the time off the CPU more than usual (half the delay at least), the larger part
    names the cause: on a run queue, ``preempted``; given up, ``waiting``. Without it, switches are
    counted (the rules of :func:`_off_cpu`)."""
    wall, cpu, preempted, waits, queued = window
    if cpu - usual[1] >= 0.5 * delay:
        return None
    if queued is not None and usual[4] is not None:
        off_extra = (wall - cpu) - (usual[0] - usual[1])
        if off_extra < 0.5 * delay:
            return None
        queued_extra = queued - usual[4]
        if queued_extra >= off_extra - queued_extra:
            return "preempted"
        return "waiting" if on_cpu else None
    if waits == 0:
        return "preempted" if preempted >= 1 and wall - cpu >= 0.5 * delay else None
    off_extra = (wall - cpu) - (usual[0] - usual[1])
    if off_extra < 0.5 * delay:
        return None
    if waits <= usual[3] and preempted >= usual[2] + 1:
        return "preempted"  # no more waits than usual (the all-reduce's), and taken off the CPU
    return "waiting" if on_cpu else None

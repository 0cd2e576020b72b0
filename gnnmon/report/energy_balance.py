"""The energy balance of a run: per energy counter, what its top-level rows got, the gaps between
them and the time before and after them, against the counter's own delta over the run (they add
up, by construction: one interpolated curve); a distributed job's, per rank."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gnnmon.data.points import Counters, counter_device, joules_per_unit
from gnnmon.data.result import RunResult


def energy_balance(rows: Iterable[Mapping[str, Any]], counters: Counters) -> dict[str, dict[str, Any]]:
    """Per energy counter (``gpu<i>_energy_mj`` in J, ``rapl_<kind>_j``): what the top-level rows
    on it got (``rows_j``), the time between them (``gaps_j``), before the first and after the
    last (``outside_j``), and the counter's own delta from its first point to its last
    (``counter_j``): ``rows_j + gaps_j + outside_j == counter_j`` up to rounding, by construction
    (one interpolated curve). A GPU's counter counts the rows on that GPU; the host's, every row."""
    out: dict[str, dict[str, Any]] = {}
    top = sorted(((r["t_start_ns"], r["t_end_ns"], r.get("device")) for r in rows if r.get("parent") is None
                  and r.get("t_start_ns") is not None and r.get("t_end_ns") is not None), key=lambda r: r[0])
    for key in counters.keys():
        scale = joules_per_unit(key)
        device = counter_device(key)
        mine = top if device is None else [r for r in top if r[2] == device]
        times = counters.times[key]
        first, last = times[0], times[-1]
        rows_j = gaps_j = 0.0
        counted = 0
        first_start: int | None = None
        previous_end: int | None = None
        for start, end, _ in mine:
            d = counters.delta(key, start, end)
            if d is None:
                continue
            rows_j += d * scale
            counted += 1
            if previous_end is None:
                first_start = start
            elif start > previous_end:
                gaps_j += (counters.delta(key, previous_end, start) or 0.0) * scale
            previous_end = end if previous_end is None else max(previous_end, end)
        outside_j = 0.0
        if first_start is not None and previous_end is not None:
            outside_j = ((counters.delta(key, first, first_start) or 0.0)
                         + (counters.delta(key, previous_end, last) or 0.0)) * scale
        out[key] = {"rows": counted, "rows_j": rows_j, "gaps_j": gaps_j, "outside_j": outside_j,
                    "counter_j": (counters.values[key][-1] - counters.values[key][0]) * scale,
                    "span_s": (last - first) / 1e9, "period_s": counters.period_s(key)}
    return out


def result_balance(result: RunResult) -> dict[str, dict[str, Any]]:
    """:func:`energy_balance` of a run's rows against its own counters; for a distributed job, of
    each rank's rows against that rank's counters, keyed ``rank<N>:<counter>``. {} without
    counters."""
    if not result.ranks:
        counters = result.counters
        return energy_balance(result.table.rows(), counters) if counters.keys() else {}
    by_rank: dict[int, list[dict[str, Any]]] = {rank: [] for rank in result.ranks}
    for row in result.table.rows():
        if row.get("parent") is None and row.get("rank") in by_rank:
            by_rank[row["rank"]].append(row)
    out: dict[str, dict[str, Any]] = {}
    for rank, part in result.ranks.items():
        counters = part.counters
        if counters.keys():
            out.update((f"rank{rank}:{key}", b) for key, b in energy_balance(by_rank[rank], counters).items())
    return out

"""Energy accounting over a run: totals per source with their share, per label, per epoch, per
rank and per graph, in joules and kWh (:func:`energy_summary`), and per energy counter the balance
of the rows and the gaps between them against the counter's own delta (:func:`energy_balance`).
Only top-level rows (``parent`` None) are added up, since an enclosing row's window already
contains its children's; time outside any row is not counted in the totals."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gnnmon.data.points import Counters, counter_device, joules_per_unit
from gnnmon.data.result import RunResult
from gnnmon.fields import J_PER_KWH, is_number
from gnnmon.figures import ENERGY_FIELDS


def _add(acc: dict[str, Any], row: Mapping[str, Any]) -> None:
    acc["rows"] += 1
    for k in ENERGY_FIELDS + ("co2_kg",):
        if is_number(row.get(k)):
            acc[k] = acc.get(k, 0.0) + row[k]
    if is_number(row.get("num_graphs")):
        per_label = acc.setdefault("_graphs", {})
        per_label[row["label"]] = per_label.get(row["label"], 0) + row["num_graphs"]


def _finish(acc: dict[str, Any]) -> dict[str, Any]:
    # Several labels (a data-loading row and a step row) may see the same batches: count once.
    per_label = acc.pop("_graphs", None)
    if per_label:
        acc["graphs"] = max(per_label.values())
    total = sum(acc.get(k, 0.0) for k in ENERGY_FIELDS)
    acc["energy_j"] = total
    acc["energy_kwh"] = total / J_PER_KWH
    if acc.get("graphs"):
        acc["j_per_graph"] = total / acc["graphs"]
    return acc


def energy_summary(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"total", "share", "sources", "by_label", "by_epoch"}``, and ``by_rank`` for a distributed
    job's rows — {} if no row has energy fields."""
    total: dict[str, Any] = {"rows": 0}
    by_label: dict[str, dict[str, Any]] = {}
    by_epoch: dict[Any, dict[str, Any]] = {}
    by_rank: dict[Any, dict[str, Any]] = {}
    sources: dict[str, set[str]] = {}
    for r in records:  # one pass, nothing kept: rows may stream from a table or a file
        if r.get("parent") is not None or not any(k in r for k in ENERGY_FIELDS):
            continue
        _add(total, r)
        _add(by_label.setdefault(r["label"], {"rows": 0}), r)
        if "epoch" in r:
            _add(by_epoch.setdefault(r["epoch"], {"rows": 0}), r)
        if "rank" in r:
            _add(by_rank.setdefault(r["rank"], {"rows": 0}), r)
        for k in ENERGY_FIELDS + ("co2_kg",):
            if r.get(f"{k}_source"):
                sources.setdefault(k, set()).add(r[f"{k}_source"])
    if not total["rows"]:
        return {}
    _finish(total)
    share = {k: (total.get(k, 0.0) / total["energy_j"] if total["energy_j"] else None) for k in ENERGY_FIELDS}
    out = {
        "total": total,
        "share": share,
        "sources": {k: sorted(v) for k, v in sources.items()},
        "by_label": {k: _finish(v) for k, v in by_label.items()},
        "by_epoch": {k: _finish(v) for k, v in by_epoch.items()},
    }
    if by_rank:
        out["by_rank"] = {k: _finish(by_rank[k]) for k in sorted(by_rank)}
    return out


def energy_balance(rows: Iterable[Mapping[str, Any]], counters: Counters) -> dict[str, dict[str, Any]]:
    """Per energy counter (``gpu<i>_energy_mj`` in J, ``rapl_<kind>_j``): what the top-level rows
    on it got (``rows_j``), the time between them (``gaps_j``), before the first and after the
    last (``outside_j``), and the counter's own delta from its first point to its last
    (``counter_j``): ``rows_j + gaps_j + outside_j == counter_j`` up to rounding, by construction
    (one interpolated curve). A GPU's counter counts the rows on that GPU; the host's, every row."""
    out: dict[str, dict[str, Any]] = {}
    top = sorted(((r["t_start_ns"], r["t_end_ns"], r.get("device")) for r in rows if r.get("parent") is None),
                 key=lambda r: r[0])
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

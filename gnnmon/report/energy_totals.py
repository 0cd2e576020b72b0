"""Energy accounting over a run's rows: totals per source with their share, per label, per epoch,
per rank and per graph, in joules and kWh. Only top-level rows (``parent`` None) are added up,
since an enclosing row's window already contains its children's; time outside any row is not
counted (:mod:`gnnmon.report.energy_balance` accounts for it against each counter)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

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

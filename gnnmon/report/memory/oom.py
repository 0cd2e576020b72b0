"""The out-of-memory post-mortem in words: which call ran out, at what batch, with the device's
memory at the failure, the forecast for that batch and the largest batch that fit.

Reads the ``oom_*`` fields a failed call's row holds (:mod:`gnnmon.record.oom_row`: the raw state
the failing step left) and the rows of its label that succeeded; the forecast is the label's memory
model of the absolute peak over all of them, fitted here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnmon.data.table import Part, Table
from gnnmon.figures import MEM_PEAK
from gnnmon.report.memory.model import fit, format_bytes

SHAPE = ("num_nodes", "num_edges", "num_graphs", "batch_size")
NOUN = {"num_nodes": "node", "num_edges": "edge", "num_graphs": "graph", "batch_size": "seed node"}
STATE = ("requested", "allocated", "reserved", "cached_free", "fragmented", "device_total", "device_free")


def _failed_ooms(part: Part) -> list[dict[str, Any]]:
    if "oom_requested_bytes" not in part.cols:
        return []
    errors = part.objects("error")
    return [row for i in range(part.n) if errors[i] is not None
            for row in (part.row(i),) if "oom_requested_bytes" in row]


def _medians(part: Part, ok: np.ndarray) -> dict[str, float]:
    out = {}
    for name in SHAPE:
        if name in part.cols:
            values = part.numbers(name)[ok]
            values = values[~np.isnan(values)]
            if len(values):
                out[name] = float(np.median(values))
    return out


def _vs(shape: dict[str, Any], medians: dict[str, float]) -> dict[str, float]:
    """Each shape field against its label's median (2.0: twice the median)."""
    return {k: shape[k] / m for k, m in medians.items() if shape.get(k) is not None and m > 0}


def _largest_fit(part: Part, ok: np.ndarray, medians: dict[str, float]) -> dict[str, Any] | None:
    """The successful row with the most edges (else nodes): the largest batch that fit."""
    for name in ("num_edges", "num_nodes"):
        if name in part.cols:
            values = np.where(ok, part.numbers(name), np.nan)
            if not np.isnan(values).all():
                row = part.row(int(np.nanargmax(values)))
                return {"key": f"{row['label']}#{row['index']}", **{k: row.get(k) for k in SHAPE},
                        MEM_PEAK.name: row.get(MEM_PEAK.name), "vs_median": _vs(row, medians)}
    return None


def _forecast(table: Table, row: dict[str, Any], models: dict[tuple[str, Any], Any], cpus: int | None,
              usable: int | None) -> tuple[float | None, float | None, str | None]:
    """(forecast, upper bound, why none) for the failed row's batch; ``models`` keeps each
    (label, device)'s model, or why it has none, for the other failed rows."""
    key = (row["label"], row.get("device"))
    if key not in models:
        try:
            models[key] = fit(table, row["label"], MEM_PEAK.name, device=row.get("device"), cpus=cpus,
                              usable=usable)
        except ValueError as exc:
            models[key] = exc
    why = models[key]
    if not isinstance(why, ValueError):
        try:
            p = why.predict(**{t: row.get(t) for t in why.terms})
            return p.bytes, p.upper_bytes, None
        except ValueError as exc:  # untrusted, or the row lacks a term
            why = exc
    return None, None, str(why)


def oom_report(table: Table, cpus: int | None = None, usable: int | None = None) -> list[dict[str, Any]]:
    """One entry per call that ran out of memory, in the order of the table's labels: its key,
    shape and shape against its label's median, the device's memory at the failure (bytes), the
    forecast for its batch, the largest batch that fit, the snapshot's path, and ``words``;
    ``cpus`` and ``usable``: the recording machine's (a host model's resolution)."""
    out = []
    models: dict[tuple[str, Any], Any] = {}
    for part in table.parts.values():
        failed = _failed_ooms(part)
        if not failed:
            continue
        ok = np.array([e is None for e in part.objects("error")], dtype=bool)
        medians = _medians(part, ok)
        largest = _largest_fit(part, ok, medians)
        for row in failed:
            forecast, upper, why = _forecast(table, row, models, cpus, usable)
            entry: dict[str, Any] = {
                "label": row["label"], "index": row["index"], "key": f"{row['label']}#{row['index']}",
                "error": row["error"], "device": row.get("device"),
                "shape": {k: row.get(k) for k in SHAPE if row.get(k) is not None},
                "vs_median": _vs(row, medians),
                **{f"{s}_bytes": row.get(f"oom_{s}_bytes") for s in STATE},
                "forecast_bytes": forecast, "forecast_upper_bytes": upper, "no_forecast": why,
                "largest_fit": largest, "snapshot": row.get("oom_snapshot")}
            entry["words"] = words(entry)
            out.append(entry)
    return out


def _shape_words(shape: dict[str, Any], vs: dict[str, float]) -> str:
    parts = [f"{shape[k]:,} {NOUN[k]}{'s' if shape[k] != 1 else ''}" for k in SHAPE if shape.get(k) is not None]
    key = "num_edges" if "num_edges" in vs else "num_nodes" if "num_nodes" in vs else None
    ratio = f", {vs[key]:.1f}x the median {key[4:]}" if key is not None else ""
    return f"a batch of {' and '.join(parts)}{ratio}" if parts else "a batch of unknown shape"


def words(e: dict[str, Any]) -> str:
    """What happened, in one paragraph."""
    b = format_bytes
    text = f"{e['key']} ran out of memory ({e['error']}) at {_shape_words(e['shape'], e['vs_median'])}"
    state = []
    if e["requested_bytes"] is not None:
        state.append(f"it asked for {b(e['requested_bytes'])}")
    host = str(e.get("device") or "").split(":")[0] == "cpu"
    owner = "the machine's" if host else "the device's"
    if e["allocated_bytes"] is not None:  # the host has no tensor count: its figure is the process's RSS
        state.append(f"the process held {b(e['allocated_bytes'])} (its RSS)" if host
                     else f"{b(e['allocated_bytes'])} was held by tensors")
    if e["cached_free_bytes"] is not None:
        split = f", {b(e['fragmented_bytes'])} of it in split blocks" if e["fragmented_bytes"] else ""
        state.append(f"{b(e['cached_free_bytes'])} was free in the allocator's cache{split}")
    total = e["device_total_bytes"]
    if total is not None and e["device_free_bytes"] is not None:
        state.append(f"{b(e['device_free_bytes'])} was free of the machine's {b(total)} of RAM" if host
                     else f"{b(e['device_free_bytes'])} was free of {owner} {b(total)}")
    text += ("; " + ", ".join(state) if state else "") + "."
    forecast = e["forecast_bytes"]
    if forecast is None:
        text += f" No forecast ({e['no_forecast']})." if e["no_forecast"] else ""
    elif total is not None and forecast > total:
        text += f" Its forecast peak, {b(forecast)}, is more than {owner} {b(total)}: the batch is too large."
    elif total is not None:
        text += (f" Its forecast peak, {b(forecast)} (upper bound {b(e['forecast_upper_bytes'])}), fits the "
                 f"device's {b(total)}: the batch alone does not explain it (memory held from earlier calls, "
                 f"fragmentation, another process?).")
    else:
        text += f" Its forecast peak: {b(forecast)}."
    fit_ = e["largest_fit"]
    if fit_ is not None:
        peak = f", peak {b(fit_[MEM_PEAK.name])}" if fit_.get(MEM_PEAK.name) is not None else ""
        text += f" The largest batch that fit: {fit_['key']}, {_shape_words(fit_, fit_['vs_median'])}{peak}."
    if e["snapshot"]:
        text += f" Allocation history: {e['snapshot']} (open it at pytorch.org/memory_viz)."
    return text

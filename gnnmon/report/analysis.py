"""Step analysis: why a step was slow, where its time went, and what GC cost.

Plain functions over rows (dicts); :class:`gnnmon.report.Report` calls them.

A row's *time* is ``device_s`` if measured, else ``wall_s``, else its window (``t_end_ns`` −
``t_start_ns``). Spikes are rows whose time exceeds, per label, ``max(median + k·1.4826·MAD,
min_ratio·median)`` (defaults k = 5, min_ratio = 1.5) over the rows after warm-up. Each spike gets one cause, checked in order:

* ``recompile`` — ``torch.compile`` compiled something during it (``@track_compile`` rows:
  ``compile_frames`` > 0; the detail says how many were recompilations and how long it took);
* ``warm-up`` — one of the first ``warmup`` calls of its label, or a row of the first epoch
  (rows carry ``epoch`` after ``run.mark("epoch", n)``) when that epoch is clearly slower for the
  label than the later ones (its median over theirs by 20 % and 3 spreads: a first pass filling
  caches, e.g. PyG's ``InMemoryDataset`` separating each graph once);
* ``gc`` — collections inside it paused it for at least ``gc_share`` of its excess over the median;
* ``shape`` — its batch (nodes, edges or seed nodes) is more than ``shape_tol`` away from the
  label's median (a partial last batch, an unusually large subgraph, a recompile for a new shape);
* ``unexplained``.

A label with too few rows to judge (``min_rows``) still reports a call that compiled and took
over ``min_ratio`` times the others' median, as ``recompile``.

Dips are the other side: rows far *below* their label's median (``min(median − k·1.4826·MAD,
median / min_ratio)``), with cause ``shape`` (a partial last batch: expected, not a problem) or
``unexplained`` (a skipped step?). The seed PNA study found both: GC spikes at small batches, and
periodic short steps at batch size 4096 that were partial batches at epoch ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gnnmon.report.stats import describe, mad, median, percentile

SHAPE_FIELDS = ("num_nodes", "num_edges", "batch_size")


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def row_time(row: Mapping[str, Any]) -> float | None:
    """Seconds: ``device_s``, else ``wall_s``, else the row's window."""
    for key in ("device_s", "wall_s"):
        if _num(row.get(key)):
            return float(row[key])
    if _num(row.get("t_end_ns")) and _num(row.get("t_start_ns")):
        return (row["t_end_ns"] - row["t_start_ns"]) / 1e9
    return None


def timed_rows(rows: Iterable[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], float]]:
    """The rows that have a time (see :func:`row_time`), each with it."""
    out = []
    for r in rows:
        t = row_time(r)
        if t is not None:
            out.append((r, t))
    return out


def by_label(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for row in records:
        out.setdefault(row["label"], []).append(row)
    return out


def _shape_medians(rows: list[Mapping[str, Any]]) -> dict[str, float]:
    meds = {}
    for f in SHAPE_FIELDS:
        vals = [r[f] for r in rows if _num(r.get(f))]
        if vals:
            meds[f] = median(vals)
    return meds


def _labels_timed(
    records: Iterable[Mapping[str, Any]], warmup: int, min_rows: int
) -> Iterable[tuple[str, list[tuple[Mapping[str, Any], float]], float, float, dict[str, float]]]:
    """Per label: timed rows, median and scaled MAD of the steady rows, median shapes."""
    for label, rows in by_label(records).items():
        timed = timed_rows(rows)
        steady = [(r, t) for r, t in timed if r.get("index", 0) >= warmup]
        if len(steady) < min_rows:
            continue
        base = [t for _, t in steady]
        yield label, timed, median(base), 1.4826 * mad(base), _shape_medians([r for r, _ in steady])


def _odd_shape(row: Mapping[str, Any], shapes: dict[str, float], tol: float) -> str:
    odd = [(f, row[f], m) for f, m in shapes.items()
           if _num(row.get(f)) and m > 0 and abs(row[f] / m - 1) > tol]
    return ", ".join(f"{f} {v:g} vs usual {m:g}" for f, v, m in odd)


def spikes(
    records: Iterable[Mapping[str, Any]],
    *,
    k: float = 5.0,
    min_ratio: float = 1.5,
    warmup: int = 2,
    gc_share: float = 0.5,
    shape_tol: float = 0.25,
    min_rows: int = 5,
) -> list[dict[str, Any]]:
    """Slow rows with a cause each (see the module doc). Labels with fewer than ``min_rows``
    timed rows after warm-up are not judged, except for calls that compiled."""
    found: list[dict[str, Any]] = _compiles_in_small_labels(records, warmup, min_rows, min_ratio)
    for label, timed, med, spread, shapes in _labels_timed(records, warmup, min_rows):
        threshold = max(med + k * spread, min_ratio * med)
        slow_epoch = _slow_first_epoch(timed, spread)
        for row, t in timed:
            if t <= threshold:
                continue
            excess = t - med
            pause = float(row["gc_pause_s"]) if _num(row.get("gc_pause_s")) else 0.0
            cause, detail = "unexplained", ""
            odd_shape = _odd_shape(row, shapes, shape_tol)
            frames = int(row["compile_frames"]) if _num(row.get("compile_frames")) else 0
            if frames > 0:
                cause = "recompile"
                detail = (f"{frames} frame(s) compiled ({row.get('compile_recompiles')} recompiled), "
                          f"{float(row.get('compile_s') or 0.0) * 1e3:.0f} ms compiling, "
                          f"{row.get('compile_graph_breaks')} graph break(s)")
            elif row.get("index", 0) < warmup:
                cause, detail = "warm-up", f"call {row.get('index')} of {label}"
            elif slow_epoch is not None and row.get("epoch") == slow_epoch[0] and pause < gc_share * excess:
                cause = "warm-up"
                detail = (f"epoch {slow_epoch[0]} is slow for {label} (median "
                          f"{slow_epoch[1] * 1e3:.2f} ms vs {med * 1e3:.2f} ms)")
            elif pause > 0 and pause >= gc_share * excess:
                gen = row.get("gc_max_generation")
                cause = "gc"
                detail = (f"{row.get('gc_collections')} collection(s), up to gen {gen}, "
                          f"paused {pause * 1e3:.1f} ms")
            elif odd_shape:
                cause, detail = "shape", odd_shape
            found.append({
                "label": label,
                "index": row.get("index"),
                "time_s": t,
                "median_s": med,
                "threshold_s": threshold,
                "excess_s": excess,
                "gc_pause_s": pause,
                "cause": cause,
                "detail": detail,
            })
    found.sort(key=lambda s: (s["label"], s["index"] if s["index"] is not None else -1))
    return found


def _compiles_in_small_labels(records: Iterable[Mapping[str, Any]], warmup: int, min_rows: int,
                              min_ratio: float) -> list[dict[str, Any]]:
    """In a label with too few rows to judge, a call that compiled (``compile_frames`` > 0) and
    took over ``min_ratio`` times the median of the calls that did not is still a ``recompile``
    spike: a compiled model's first call of 13 s must not vanish because the label has 6 rows."""
    out = []
    for label, rows in by_label(records).items():
        timed = timed_rows(rows)
        if len([r for r, _ in timed if r.get("index", 0) >= warmup]) >= min_rows:
            continue  # judged in full by spikes()
        plain = [t for r, t in timed if not (_num(r.get("compile_frames")) and r["compile_frames"] > 0)]
        if not plain:
            continue
        med = median(plain)
        for row, t in timed:
            frames = int(row["compile_frames"]) if _num(row.get("compile_frames")) else 0
            if frames > 0 and t > min_ratio * med:
                out.append({"label": label, "index": row.get("index"), "time_s": t, "median_s": med,
                            "threshold_s": min_ratio * med, "excess_s": t - med,
                            "gc_pause_s": float(row.get("gc_pause_s") or 0.0), "cause": "recompile",
                            "detail": f"{frames} frame(s) compiled, {float(row.get('compile_s') or 0.0) * 1e3:.0f} "
                                      f"ms compiling ({len(timed)} rows: too few to judge the others)"})
    return out


def _slow_first_epoch(
    timed: list[tuple[Mapping[str, Any], float]], spread: float
) -> tuple[Any, float] | None:
    """(first epoch, its median time) if rows carry epochs and the first epoch is clearly slower
    than the later ones — its median above theirs by more than 20 % and 3 spreads — else None.

    The bar is the later epochs' own level, not the spike threshold: it decides why a spike in the
    first epoch was slow, not whether it was, so a rerun whose first epoch is a little faster does
    not turn every first-epoch spike from ``warm-up`` into ``unexplained``."""
    epochs = [r["epoch"] for r, _ in timed if _num(r.get("epoch"))]
    if len(set(epochs)) < 2:
        return None
    first = min(epochs)
    times = [t for r, t in timed if r.get("epoch") == first]
    later = [t for r, t in timed if _num(r.get("epoch")) and r["epoch"] != first]
    m, base = median(times), median(later)
    return (first, m) if m > max(1.2 * base, base + 3 * spread) else None


def dips(
    records: Iterable[Mapping[str, Any]],
    *,
    k: float = 5.0,
    min_ratio: float = 1.5,
    warmup: int = 2,
    shape_tol: float = 0.25,
    min_rows: int = 5,
) -> list[dict[str, Any]]:
    """Rows far faster than their label's median, with cause ``shape`` or ``unexplained``."""
    found: list[dict[str, Any]] = []
    for label, timed, med, spread, shapes in _labels_timed(records, warmup, min_rows):
        threshold = min(med - k * spread, med / min_ratio)
        for row, t in timed:
            if t >= threshold or row.get("index", 0) < warmup:
                continue
            odd_shape = _odd_shape(row, shapes, shape_tol)
            found.append({
                "label": label,
                "index": row.get("index"),
                "time_s": t,
                "median_s": med,
                "threshold_s": threshold,
                "excess_s": t - med,
                "cause": "shape" if odd_shape else "unexplained",
                "detail": odd_shape,
            })
    return found


def step_analysis(records: Iterable[Mapping[str, Any]], *, warmup: int = 2) -> dict[str, dict[str, Any]]:
    """Per label: time per node and per edge, each phase's share of the time and the residual
    no phase covered, GC's cost, and p50/p90/p99 raw versus with GC pauses removed. Rows before
    ``warmup`` are left out (all rows are used if that would leave none)."""
    out: dict[str, dict[str, Any]] = {}
    for label, rows in by_label(records).items():
        timed = timed_rows(rows)
        steady = [(r, t) for r, t in timed if r.get("index", 0) >= warmup] or timed
        if not steady:
            continue
        total = sum(t for _, t in steady)
        info: dict[str, Any] = {"rows": len(steady), "time_s": describe([t for _, t in steady])}
        per_node = [t / r["num_nodes"] for r, t in steady if _num(r.get("num_nodes")) and r["num_nodes"] > 0]
        per_edge = [t / r["num_edges"] for r, t in steady if _num(r.get("num_edges")) and r["num_edges"] > 0]
        info["per_node_s"] = median(per_node) if per_node else None
        info["per_edge_s"] = median(per_edge) if per_edge else None
        phases = sorted({k for r, _ in steady for k in r if k.startswith("phase_") and k.endswith("_s")})
        if phases and total > 0:
            share = {p[6:-2]: sum(r.get(p) or 0.0 for r, _ in steady) / total for p in phases}
            share["residual"] = 1.0 - sum(share.values())
            info["phase_share"] = share
        pauses = [float(r.get("gc_pause_s") or 0.0) for r, _ in steady]
        info["gc_rows"] = sum(1 for p in pauses if p > 0)
        info["gc_pause_total_s"] = sum(pauses)
        info["gc_share"] = sum(pauses) / total if total > 0 else None
        raw = sorted(t for _, t in steady)
        clean = sorted(max(0.0, t - p) for (_, t), p in zip(steady, pauses, strict=True))
        info["raw"] = {q: percentile(raw, n) for q, n in (("p50", 50), ("p90", 90), ("p99", 99))}
        info["clean"] = {q: percentile(clean, n) for q, n in (("p50", 50), ("p90", 90), ("p99", 99))}
        out[label] = info
    return out


def gc_summary(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Collections per generation and reason, total and longest pause (seconds)."""
    events = list(events)
    per_gen = {g: [e["duration_s"] for e in events if e.get("generation") == g] for g in (0, 1, 2)}
    reasons: dict[str, int] = {}
    for e in events:
        reasons[e.get("reason", "?")] = reasons.get(e.get("reason", "?"), 0) + 1
    return {
        "collections": len(events),
        "by_generation": {g: {"count": len(v), "pause_s": sum(v), "max_s": max(v, default=0.0)}
                          for g, v in per_gen.items()},
        "by_reason": reasons,
        "pause_total_s": sum(e["duration_s"] for e in events),
        "in_rows": sum(1 for e in events if e.get("row")),
    }

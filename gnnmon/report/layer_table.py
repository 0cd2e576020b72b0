"""Per-layer figures of a run (``gnnmon.watch_layers``) as a table per label, with advice where
the data shows it.

For each label and layer: the median of each ``layer_<name>_<figure>`` over the watched rows that
succeeded (the first watched row left out when there are others: it pays one-off costs such as
kernel selection and the allocator's first growth), the layer's share of the layers' time, and in
words:

* **edge-bound**: the layer's messages (edges × features) are at least half of its forward peak
  (or, where no peak was measured, at least twice its output): the memory grows with edges, so
  PyG's ``decomposed_layers``, a fused ``message_and_aggregate`` path (a ``SparseTensor``
  adjacency), a smaller fanout or fewer heads cut it;
* **the time**: a layer with at least half of the layers' forward and backward time;
* **activations**: a layer whose saved tensors are at least a quarter of the step's peak above its
  start, where the step's memory was measured: checkpointing it trades that memory for a second
  forward.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnmon.data.table import Part, Table
from gnnmon.figures import LAYER_FIGURES, MEM_PEAK_DELTA, layer_field
from gnnmon.report.memory.model import format_bytes

EDGE_BOUND = 0.5
"""Messages at least this share of the layer's forward peak: edge-bound."""
TIME_SHARE = 0.5
"""A layer with at least this share of the layers' time is named."""
SAVED_SHARE = 0.25
"""Saved tensors at least this share of the step's peak: worth checkpointing."""


def layer_names(part: Part) -> list[str]:
    """The layers a label's rows have figures for, in the order their fields first appear."""
    names: dict[str, None] = {}
    for field in part.cols:
        parsed = layer_field(field)
        if parsed is not None:
            names.setdefault(parsed[0], None)
    return list(names)


def _median(part: Part, field: str, rows: np.ndarray) -> float | None:
    if field not in part.cols:
        return None
    values = part.numbers(field)[rows]
    values = values[~np.isnan(values)]
    return float(np.median(values)) if len(values) else None


def _watched(part: Part, names: list[str]) -> np.ndarray:
    """Indices of the rows that were watched and succeeded, the first left out where others are."""
    seen = np.zeros(part.n, dtype=bool)
    for name in names:
        field = f"layer_{name}_forward_s"
        if field in part.cols:
            seen |= ~np.isnan(part.numbers(field))
    failed = np.array([e is not None for e in part.objects("error")], dtype=bool)
    rows = np.flatnonzero(seen & ~failed)
    return rows[1:] if len(rows) > 1 else rows


def _advice(entry: dict[str, Any], total_s: float, step_peak: float | None) -> list[str]:
    out = []
    name = entry["layer"]
    message, peak, output = entry["message_bytes"], entry["peak_delta_bytes"], entry["output_bytes"]
    if message:
        if peak and message >= EDGE_BOUND * peak:
            why = f"its messages ({format_bytes(message)}) are {message / peak:.0%} of its forward peak " \
                  f"({format_bytes(peak)})"
        elif not peak and output and message >= 2 * output:
            why = f"its messages ({format_bytes(message)}) are {message / output:.1f}x its output"
        else:
            why = ""
        if why:
            entry["edge_bound"] = True
            ratio = f", {message / output:.1f}x its output" if output and peak else ""
            out.append(f"{name} is edge-bound: {why}{ratio}; its memory grows with the edges. PyG's "
                       "decomposed_layers, a fused message_and_aggregate (SparseTensor adjacency), a smaller "
                       "fanout or fewer heads cut it")
    spent = (entry["forward_s"] or 0.0) + (entry["backward_s"] or 0.0)
    if total_s > 0 and spent >= TIME_SHARE * total_s and entry["time_share"] is not None:
        out.append(f"{name} takes {entry['time_share']:.0%} of the layers' time "
                   f"({spent * 1e3:.3g} ms of {total_s * 1e3:.3g} ms forward and backward)")
    saved = entry["saved_bytes"]
    if saved and step_peak and saved >= SAVED_SHARE * step_peak:
        out.append(f"{name} saves {format_bytes(saved)} for backward, {saved / step_peak:.0%} of the step's peak "
                   f"({format_bytes(step_peak)}): checkpointing it (torch.utils.checkpoint) trades that memory "
                   "for a second forward")
    return out


def layer_table(table: Table, label: str | None = None) -> list[dict[str, Any]]:
    """One entry per (label, layer) with the median figures (seconds, bytes), ``rows`` (watched
    rows used), ``time_share`` (of the label's layers' forward + backward time), ``edge_bound``
    and ``advice`` (sentences); labels in order, layers in the order their fields appear."""
    out: list[dict[str, Any]] = []
    for name, part in table.parts.items():
        if label is not None and name != label:
            continue
        layers = layer_names(part)
        if not layers:
            continue
        rows = _watched(part, layers)
        entries = []
        for layer in layers:
            entry: dict[str, Any] = {"label": name, "layer": layer, "rows": int(len(rows))}
            for figure in LAYER_FIGURES:
                entry[figure] = _median(part, f"layer_{layer}_{figure}", rows)
            entry["edge_bound"] = False
            entries.append(entry)
        spent = [(e["forward_s"] or 0.0) + (e["backward_s"] or 0.0) for e in entries]
        total = sum(spent)
        step_peak = _median(part, MEM_PEAK_DELTA.name, rows)
        for entry, s in zip(entries, spent, strict=True):
            entry["time_share"] = s / total if total > 0 else None
            entry["advice"] = _advice(entry, total, step_peak)
        out += entries
    return out

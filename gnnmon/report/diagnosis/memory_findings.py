"""The diagnosis's findings about memory.

* ``out of memory`` — calls that ran out (``report.oom()``), each in words;
* ``memory`` — a device's highest peak (``mem_peak_bytes``) against its capacity (the manifest's
  ``ram_total_bytes`` / ``cuda_memory_total_bytes``, else what an out-of-memory row or MPS's
  recommended maximum says), said from :data:`HIGH` of it, or where a trusted memory model
  forecasts the largest batch seen at an upper bound of :data:`FORECAST_HIGH` of it or more;

Growth across epochs (a leak, or bigger graphs) is :mod:`gnnmon.report.diagnosis.creep`'s;
:func:`host_retained` tells it whether the run's host RSS held the allocator's retention.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from gnnmon.data.table import Table
from gnnmon.figures import MEM_PEAK
from gnnmon.report.loops import evidence, finding
from gnnmon.report.memory.model import format_bytes

HIGH = 0.8
"""A peak at this share of the device's capacity or more is said."""

FORECAST_HIGH = 0.9
"""A forecast upper bound at this share of the capacity or more is said."""

ModelOf = Callable[[str, str], Any]
"""``(label, figure) -> MemoryModel`` (the report's ``memory_model``); may raise ValueError."""


def host_retained(manifest: Mapping[str, Any] | None) -> bool:
    """Whether the run started with glibc keeping freed memory for reuse (the manifest's ``host_memory``
    says ``mmap_threshold`` None: :func:`gnnmon.exact_host_memory` not called), so that the host's RSS
    holds what the allocator kept besides what outlived the steps; False where the manifest does
    not say (no claim on a run that recorded no setting)."""
    entry = (manifest or {}).get("host_memory")
    return isinstance(entry, Mapping) and "mmap_threshold" in entry and entry["mmap_threshold"] is None


def out_of_memory(ooms: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The calls that ran out of memory, the first in words."""
    if not ooms:
        return None
    first = ooms[0]
    return finding("out of memory", first.get("label"), 1.0, 1.0,
                   f"{len(ooms)} call(s) ran out of memory; the first: {first['words']}",
                   [evidence("error", float(len(ooms)), "calls", "the calls' out-of-memory errors (report.oom())")],
                   "a smaller batch (gnnmon forecast RUN --capacity ... gives the largest that fits), activation "
                   "checkpointing or lower precision", of="memory")


def capacities(manifest: Mapping[str, Any], table: Table) -> dict[str, tuple[float, str]]:
    """Each device's memory and where it was read: the manifest first, else the rows."""
    out: dict[str, tuple[float, str]] = {}
    devices = (manifest or {}).get("devices") or {}
    if devices.get("ram_total_bytes"):
        out["cpu"] = (float(devices["ram_total_bytes"]), "the manifest's ram_total_bytes (psutil)")
    for i, total in enumerate(devices.get("cuda_memory_total_bytes") or ()):
        out[f"cuda:{i}"] = (float(total), "the manifest's cuda_memory_total_bytes (torch)")
    for part in table.parts.values():
        for field, how in (("oom_device_total_bytes", "an out-of-memory row's oom_device_total_bytes"),
                           ("mem_recommended_max_bytes", "MPS's recommended maximum (mem_recommended_max_bytes)")):
            if field in part.cols:
                values, where = part.numbers(field), part.objects("device")
                for v, d in zip(values.tolist(), where, strict=True):
                    if not math.isnan(v) and d is not None and str(d) not in out:
                        out[str(d)] = (float(v), how)
    return out


def device_memory(table: Table, manifest: Mapping[str, Any], model_of: ModelOf) -> list[dict[str, Any]]:
    """Each device's highest peak against its capacity, with the forecast of the largest batch."""
    caps = capacities(manifest, table)
    peaks: dict[str, tuple[float, str]] = {}  # device -> (peak, label)
    for label, part in table.parts.items():
        if MEM_PEAK.name not in part.cols:
            continue
        values, where = part.numbers(MEM_PEAK.name), part.objects("device")
        ok = part.nulls("error")
        for v, d in zip(np.where(ok, values, np.nan).tolist(), where, strict=True):
            if not math.isnan(v) and d is not None and v > peaks.get(str(d), (-1.0, ""))[0]:
                peaks[str(d)] = (v, label)
    out = []
    for device, (peak, label) in peaks.items():
        key = device if device in caps else device.split(":")[0] if device.split(":")[0] in caps else None
        if key is None:
            continue
        capacity, how = caps[key]
        upper, words_model = _worst_batch(table, label, model_of)
        if peak < HIGH * capacity and (upper is None or upper < FORECAST_HIGH * capacity):
            continue
        proof = [evidence(MEM_PEAK.name, peak, "bytes", f"the highest of {label}'s calls on {device}"),
                 evidence("capacity", capacity, "bytes", how)]
        words = f"{label}'s peak on {device} reached {format_bytes(peak)} of {format_bytes(capacity)}"
        if upper is not None:
            proof.append(evidence("forecast upper bound", upper, "bytes", words_model))
            words += f"; the memory model forecasts its largest batch at up to {format_bytes(upper)}"
        out.append(finding("memory", label, max(peak, upper or 0.0), capacity, words, proof,
                           "gnnmon forecast RUN --capacity ... for the largest batch that fits; "
                           "activation checkpointing, lower precision or smaller batches to make room",
                           of="memory"))
    return out


def _worst_batch(table: Table, label: str, model_of: ModelOf) -> tuple[float | None, str]:
    """The trusted model's upper bound for the label's largest batch (by nodes), and the model."""
    part = table.parts[label]
    if "num_nodes" not in part.cols:
        return None, ""
    try:
        model = model_of(label, MEM_PEAK.name)
    except ValueError:
        return None, ""
    if not model.trusted:
        return None, ""
    nodes = part.numbers("num_nodes")
    if np.all(np.isnan(nodes)):
        return None, ""
    row = part.row(int(np.nanargmax(nodes)))
    if any(not isinstance(row.get(t), (int, float)) for t in model.terms):
        return None, ""
    return float(model.predict(**{t: row[t] for t in model.terms}).upper_bytes), \
        f"the memory model's upper bound for {label}'s largest batch ({row['num_nodes']:,} nodes): {model.summary()}"

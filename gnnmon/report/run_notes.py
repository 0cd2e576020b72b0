"""What a run says once about all its rows (format version 3: the manifest's ``host_memory`` and
``sampled``, the end line's ``host_memory``; a live run's window, where it holds fewer rows than the
run made), in words, for the rows it holds: said once in the
report, never per label or per row. A file of an older version said these things on each row (its
rows' ``notes``, which the report shows with their label's table); its manifest has neither entry,
so nothing is said twice."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gnnmon.data.table import Table
from gnnmon.fields import HOST_BACKEND

CUDA = "cuda"


def run_notes(manifest: Mapping[str, Any] | None, end: Mapping[str, Any] | None, table: Table) -> list[str]:
    """The run's notes on ``table``'s rows: the allocator's note where CPU rows hold memory figures,
    and for each sampled figure the rows that lack it (no sample on one side of them) and, where
    some rows are on no CUDA device, the figures only a CUDA row gets."""
    manifest, end = manifest or {}, end or {}
    return _window(manifest, end, table) + _host_memory(manifest, end, table) + _sampled(manifest.get("sampled"), table)


def _window(manifest: Mapping[str, Any], end: Mapping[str, Any], table: Table) -> list[str]:
    """Where a live run's ``table`` holds fewer rows than the run made (its end's ``rows``; its
    ``max_records``, the newest rows it keeps in memory, is said by a live run's result alone), how
    many, and where the others are."""
    made, kept = end.get("rows"), end.get("max_records")
    if type(made) is not int or type(kept) is not int or made <= len(table):
        return []
    where = manifest.get("file")
    whole = (f"the file holds every row: gnnmon.Report.load({where!r})" if isinstance(where, str)
             else "collect(max_records=None) keeps every row")
    return [f"this report reads the newest {len(table):,} of the run's {made:,} rows, those kept in memory "
            f"(max_records {kept:,}): the {made - len(table):,} before them, its first calls among them, are in no "
            f"figure here; {whole}"]


def _count(table: Table, keep: Any) -> int:
    """The rows for which ``keep(part)`` (a bool array a label's part) is True, over every label."""
    return sum(int(np.count_nonzero(keep(part))) for part in table.parts.values())


def _joined(part: Any) -> np.ndarray:
    """The rows the timeline was joined to (they have ``util_samples``)."""
    out: np.ndarray = ~part.nulls("util_samples")
    return out


def _on(part: Any, backend: str) -> np.ndarray:
    """The rows on ``backend`` (a bool array)."""
    return np.fromiter((b == backend for b in part.objects("backend")), dtype=bool, count=part.n)


def _on_cuda(part: Any) -> np.ndarray:
    return _on(part, CUDA)


def _host_memory(manifest: Mapping[str, Any], end: Mapping[str, Any], table: Table) -> list[str]:
    """The allocator's note, where the run said it (its setting kept freed memory: the manifest's
    ``host_memory``, or the end's for a run with no manifest) and a CPU row holds a memory peak."""
    start, last = manifest.get("host_memory"), end.get("host_memory")
    said = next((e["note"] for e in (start, last) if isinstance(e, Mapping) and isinstance(e.get("note"), str)), None)
    if said is None:
        return []
    on_cpu = _count(table, lambda part: _on(part, HOST_BACKEND) & ~part.nulls("mem_peak_bytes"))
    if not on_cpu:
        return []
    threshold = last.get("mmap_threshold") if isinstance(last, Mapping) else None
    if isinstance(start, Mapping) and start.get("mmap_threshold") is None and type(threshold) is int:
        return [f"{said}; gnnmon.exact_host_memory() was called during this run (mmap threshold {threshold:,} bytes "
                "at its end): the CPU rows after the call return large frees"]
    return [said]


def _sampled(sampled: Any, table: Table) -> list[str]:
    """For each sampled figure, the rows the join reached (``util_samples``) that lack it, and the
    figures a row on no CUDA device never gets."""
    if not isinstance(sampled, Mapping) or not isinstance(sampled.get("sources"), Mapping):
        return []
    keys: Mapping[str, Any] = sampled["keys"] if isinstance(sampled.get("keys"), Mapping) else {}
    cuda_only = [str(n) for n in sampled.get("cuda_only") or () if isinstance(n, str)]
    notes: list[str] = []
    for name in map(str, sampled["sources"]):
        if name in cuda_only:
            rows = _count(table, lambda part: _joined(part) & _on_cuda(part))
            lacking = _count(table, lambda part, n=name: _joined(part) & _on_cuda(part) & part.nulls(n))
        else:
            rows = _count(table, _joined)
            lacking = _count(table, lambda part, n=name: _joined(part) & part.nulls(n))
        if lacking:
            key = str(keys.get(name, name)).replace("{i}", "<i>")
            notes.append(f"{name}: absent on {lacking:,} of {rows:,} rows: no {key} sample on each side of them")
    elsewhere = _count(table, lambda part: _joined(part) & ~_on_cuda(part))
    if cuda_only and elsewhere:
        notes.append(f"{', '.join(cuda_only)}: a CUDA row's only (its GPU's samples); the {elsewhere:,} rows on "
                     "other devices have none")
    return notes

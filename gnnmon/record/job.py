"""A distributed job as one run: the per-rank runs merged (``gnnmon.load`` of a job's files), or
gathered to one rank over the process group at the end (:func:`gather`), for a job whose ranks
share no filesystem."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gnnmon.record.run import Run


def merge_ranks(runs: list[Run]) -> Run:
    """One run of the ranks' runs: rows, GC events, samples and markers each carry ``rank`` (from
    the run's manifest, else its position); the manifest is the lowest rank's, with ``ranks``
    listing each rank's ``distributed`` entry, file and whether it ended cleanly."""
    ranked = []
    for i, run in enumerate(runs):
        dist = (run.manifest or {}).get("distributed") or {}
        ranked.append((int(dist.get("rank", i)), run))
    ranked.sort(key=lambda t: t[0])

    def tagged(items: Any, rank: int) -> list[dict[str, Any]]:
        return [{**item, "rank": rank} for item in items]

    first = ranked[0][1]
    manifest = dict(first.manifest or {})
    manifest["ranks"] = [{**((run.manifest or {}).get("distributed") or {"rank": rank}),
                          "file": str(run.path) if run.path else None, "complete": run.complete}
                         for rank, run in ranked]
    return Run.from_file(first.path or Path("job"), manifest=manifest,
                         rows=[r for rank, run in ranked for r in tagged(run.records, rank)],
                         gc_events=[e for rank, run in ranked for e in tagged(run.gc_events, rank)],
                         samples=[e for rank, run in ranked for e in tagged(run.samples, rank)],
                         markers=[e for rank, run in ranked for e in tagged(run.markers, rank)],
                         complete=all(run.complete for _, run in ranked))


def gather(run: Run, dst: int = 0) -> Run | None:
    """The job's runs gathered to rank ``dst`` over the default process group and merged (see
    :func:`merge_ranks`): the merged run on ``dst``, None on the other ranks. A collective: call it
    on every rank, after ``collect`` has ended; it returns on every rank once ``dst`` has
    everything. Only top-level rows travel (what the cross-rank
    report reads), with the GC events and markers; outside a process group: ``run`` alone."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
        return run
    mine = {"manifest": run.manifest, "path": str(run.path) if run.path else None,
            "complete": bool(run.complete),
            "rows": [r for r in run.records if r.get("parent") is None],
            "gc_events": list(run.gc_events), "markers": list(run.markers)}
    parts: list[Any] | None = [None] * dist.get_world_size() if dist.get_rank() == dst else None
    dist.gather_object(mine, parts, dst=dst)
    # A sending rank may return before ``dst`` has read what it sent; one that then destroys the
    # process group and exits pulls the connection from under ``dst`` (gloo aborts it:
    # "terminate called without an active exception"). Everyone leaves together.
    dist.barrier()
    if parts is None:
        return None
    return merge_ranks([Run.from_file(p["path"] or f"rank{i}", manifest=p["manifest"], rows=p["rows"],
                                      gc_events=p["gc_events"], samples=(), markers=p["markers"],
                                      complete=p["complete"]) for i, p in enumerate(parts)])

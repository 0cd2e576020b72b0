"""A distributed job gathered to one rank over the process group at the end (:func:`gather`), for a
job whose ranks share no filesystem (``gnnmon.load`` reads a job's files)."""

from __future__ import annotations

import sys
from typing import Any

from gnnmon.data.result import RunResult
from gnnmon.record.run import Run


def gather(run: Run, dst: int = 0) -> RunResult | None:
    """The job's runs gathered to rank ``dst`` over the default process group and merged (see
    :meth:`RunResult.merge`): the merged result on ``dst``, None on the other ranks. A collective: call it
    on every rank, after ``collect`` has ended; it returns on every rank once ``dst`` has
    everything. Only top-level rows travel (what the cross-rank
    report reads), with the GC events and markers, from the rows each rank keeps in memory (the
    newest 10,000 of a run with a file unless ``collect(max_records=None)``); outside a process
    group: ``run``'s result alone."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
        return run.result()
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
    return RunResult.merge([RunResult(p["rows"], manifest=p["manifest"], gc_events=p["gc_events"],
                                      markers=p["markers"], path=p["path"] or f"rank{i}", complete=p["complete"])
                            for i, p in enumerate(parts)])

"""Planted run files: rows written as a run's JSON Lines file with the times, shapes and peaks a
test chooses (a fake clock: nothing depends on the machine's speed)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

MiB = 2**20

PHASES = {"forward": 0.2e-3, "backward": 0.3e-3}
"""Seconds per 1,000 nodes and edges of each planted phase."""

OPTIMIZER_S = 1e-3
"""The optimizer phase: a constant per step, whatever the batch."""

MEMORY = {"const": 100 * MiB, "num_nodes": 2048, "num_edges": 512}
"""The planted peak: bytes, bytes per node, bytes per edge."""


def steps(n: int = 200, *, seed: int = 0, scale: float = 1.0, slower: dict[str, float] | None = None,
          noise: float = 0.03, rank: int | None = None, label: str = "train_step") -> list[dict[str, Any]]:
    """``n`` planted calls: nodes uniform in 800-1,200 times ``scale``, 3-5 edges per node; each phase's
    time its planted cost (times ``slower[phase]``) with ``noise`` (a relative normal spread); the
    step's time their sum; the peak :data:`MEMORY` exactly."""
    rng = random.Random(seed)
    rows, t = [], 1_000_000_000
    for i in range(n):
        nodes = round(rng.uniform(800, 1200) * scale)
        edges = round(nodes * rng.uniform(3, 5))
        size = (nodes + edges) / 1e3
        phases = {p: cost * size for p, cost in PHASES.items()} | {"optimizer": OPTIMIZER_S}
        phases = {p: v * (slower or {}).get(p, 1.0) * max(rng.gauss(1.0, noise), 0.5) for p, v in phases.items()}
        wall = sum(phases.values())
        peak = MEMORY["const"] + MEMORY["num_nodes"] * nodes + MEMORY["num_edges"] * edges
        row = {"type": "row", "label": label, "index": i, "parent": None, "t_start_ns": t,
               "t_end_ns": t + int(wall * 1e9), "device": "cpu", "backend": "cpu", "error": None, "notes": [],
               "wall_s": wall, "device_s": wall, "num_nodes": nodes, "num_edges": edges, "num_graphs": 1,
               "mem_peak_bytes": peak, "mem_end_bytes": MEMORY["const"], "gc_pause_s": 0.0, "gc_collections": 0,
               **{f"phase_{p}_s": v for p, v in phases.items()}}
        if rank is not None:
            row["rank"] = rank
        rows.append(row)
        t += int(wall * 1e9) + 100_000
    return rows


def write_run(path: Path, rows: list[dict[str, Any]]) -> Path:
    """``rows`` as a run's file (a manifest first, the end line last)."""
    manifest = {"type": "manifest", "format": "gnnmon.jsonl", "format_version": 1, "gnnmon": "0.1.0",
                "host": "planted", "start_ns": rows[0]["t_start_ns"] if rows else 0, "file": str(path)}
    lines = [manifest, *rows, {"type": "end", "rows": len(rows), "end_ns": rows[-1]["t_end_ns"] if rows else 0,
                               "ended": "stop", "sampler": {}}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path

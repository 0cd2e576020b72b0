"""``gnnmon forecast RUN`` words its notes from the run: where the model is refused, its next step
reads the manifest (no "exact host memory first" where it was in force) and the findings (a leak);
where it forecasts, what ``gnnmon.forecast(loader, ...)`` would do instead follows what the batches
hold (whole graphs or a sampler's seeds)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from gnnmon.cli import NO_MODEL, main
from tests.forecast.test_refusal_steps import rows as scattered_rows

MiB = 2**20


def write(path: Path, rows: list[dict[str, Any]], manifest: dict[str, Any]) -> Path:
    lines = [{"type": "manifest", "format": "gnnmon.jsonl", "format_version": 1, "gnnmon": "0.1.0", "pid": -1,
              "start_ns": rows[0]["t_start_ns"], **manifest}, *({"type": "row", **r} for r in rows),
             {"type": "end", "rows": len(rows), "end_ns": rows[-1]["t_end_ns"], "ended": "stop", "sampler": {}}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_a_refusal_on_a_run_with_exact_host_memory_in_force_does_not_advise_it(tmp_path, capsys):
    path = write(tmp_path / "scattered.jsonl", scattered_rows(0.0),
                 {"devices": {"cpu_count": 2, "cpu_usable": 2}, "host_memory": {"mmap_threshold": 65536}})
    assert main(["forecast", str(path), "--label", "s"]) == NO_MODEL
    out = capsys.readouterr().out
    assert "next: gnnmon.exact_host_memory() was in force (the run's manifest host_memory)" in out, out
    assert "first thing" not in out, out


def test_a_refusal_names_the_leak_the_report_finds(tmp_path, capsys):
    path = write(tmp_path / "leak.jsonl", scattered_rows(8 * MiB), {"devices": {"cpu_count": 2, "cpu_usable": 2}})
    assert main(["forecast", str(path), "--label", "s"]) == NO_MODEL
    out = capsys.readouterr().out
    assert "a leak: mem_end_bytes of s grew 8 MiB per epoch" in out, out  # the planted 8 MiB an epoch


def batches(items: str) -> list[dict[str, Any]]:
    """80 planted batches whose peak is exactly linear in nodes, edges and graphs: whole graphs (4-64
    of them, no seed count) or a sampler's seeds (one graph, ``batch_size`` seeds)."""
    rng, out = random.Random(3), []
    for i in range(80):
        count = rng.randint(4, 64)
        n = count * rng.randint(20, 40)
        e = n * rng.randint(3, 6)
        graphs = count if items == "graph" else 1
        out.append({"type": "row", "label": "step", "index": i, "error": None, "device": "cpu", "backend": "cpu",
                    "num_nodes": n, "num_edges": e, "num_graphs": graphs,
                    **({} if items == "graph" else {"batch_size": count}),
                    "t_start_ns": 10**9 + i * 10**7, "t_end_ns": 10**9 + i * 10**7 + 5 * 10**6, "wall_s": 0.005,
                    "mem_start_bytes": 100 * MiB, "mem_end_bytes": 100 * MiB,
                    "mem_peak_bytes": 100 * MiB + 20_000 * n + 4_000 * e + (100_000 * graphs)})
    return out


def test_what_the_loader_would_do_instead_follows_what_the_batches_hold(tmp_path, capsys):
    said = {}
    for items in ("graph", "seed"):
        path = write(tmp_path / f"{items}.jsonl", batches(items), {"devices": {"cpu_count": 2, "cpu_usable": 2}})
        assert main(["forecast", str(path), "--capacity", "2GiB"]) == 0
        said[items] = capsys.readouterr().out
    assert "NeighborLoader" not in said["graph"] and "sums the dataset's costliest graphs" in said["graph"], said
    assert "samples a NeighborLoader's batches at each size instead" in said["seed"], said["seed"]

"""The timeline's sampler on this machine: its cadence while the training process is busy or paused
(a process of its own against the thread it replaced), its own CPU cost, and how well it splits a
planted energy profile across rows.

    python benchmarks/sampler_cost.py [--quick] [--out docs/results/sampler-cpu.md]

NVML is the tests' fake (``tests/fake_nvml.py``) where no GPU exists: its energy counter steps every
100 ms, as an H100's does, and each read of it can be made to take 3.5 ms, as one does there
(``--read-ms``). Figures from the fake say what the sampler costs and how it places steps, not
what a GPU draws.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from tests.fake_nvml import FakeNvml


def _in(samples: list[dict[str, Any]], a: int, b: int) -> list[int]:
    return [s["t_ns"] for s in samples if a <= s["t_ns"] <= b]


def cadence(mode: str, load: str, interval: float, seconds: float) -> dict[str, Any]:
    """Samples taken while the training process runs ``load``: a pure-Python busy loop, or a pause
    (``gc.collect()`` over millions of containers, the GIL held throughout)."""
    gc.disable()  # built without the collections its growth would set off (seconds, on a busy machine)
    try:
        heap = [[i] for i in range(3_000_000)] if load == "gc pause" else None
    finally:
        gc.enable()
    with gnnmon.collect(sample=interval, sampler=mode) as run:
        time.sleep(2 * interval)
        a = time.time_ns()
        if heap is not None:
            while time.time_ns() - a < seconds * 1e9:
                gc.collect()
        else:
            x = 0
            while time.time_ns() - a < seconds * 1e9:
                x += 1
        b = time.time_ns()
        time.sleep(2 * interval)
    del heap
    times = _in(run.samples, a - int(interval * 1e9), b + int(interval * 1e9))
    gaps = [(y - x) / 1e9 for x, y in zip(times, times[1:], strict=False)]
    return {"mode": run.manifest["options"]["sampler"]["mode"], "load": load, "interval_s": interval,
            "load_s": (b - a) / 1e9, "samples_in_load": len(_in(run.samples, a, b)),
            "expected": int((b - a) / 1e9 / interval), "max_gap_s": max(gaps) if gaps else None}


def own_cost(interval: float, energy: bool, read_ms: float, seconds: float, tmp: Path) -> dict[str, Any]:
    """The sampler process's own CPU time per second of a run that sleeps, and NVML reads per second."""
    mp = pytest.MonkeyPatch()
    try:
        FakeNvml(n=1, ramp_w=300.0, period=0.1, read_delay=read_ms / 1e3).install(mp, tmp / f"nvml-{interval}-{energy}")
        with gnnmon.collect(sample=interval, energy=energy) as run:
            time.sleep(seconds)
    finally:
        mp.undo()
    stats = run.sampler_stats
    first, last = run.samples[0], run.samples[-1]  # from the first sample on: start-up left out
    wall = (last["t_ns"] - first["t_ns"]) / 1e9
    counter = (stats.get("counters") or {}).get("gpu0_energy_mj") or {}
    return {"interval_s": interval, "energy": energy, "read_ms": read_ms, "wall_s": wall,
            "cpu_pct_of_a_core": 100 * (last["sampler_cpu_s"] - first["sampler_cpu_s"]) / wall,
            "startup_cpu_s": first["sampler_cpu_s"], "samples": stats["samples"],
            "energy_reads_per_s": stats.get("nvml_energy_reads", 0) / wall,
            "period_s": counter.get("period_s")}


DURATIONS = [0.05, 0.3, 0.12, 0.5, 0.07, 0.2, 0.25, 0.06, 0.15, 0.3]


def attribution(interval: float, read_ms: float, tmp: Path) -> dict[str, Any]:
    """Rows of 50-500 ms across a planted 300 W -> 100 W profile, counter stepping every 100 ms."""
    from tests.fakes import FakeCuda

    mp = pytest.MonkeyPatch()
    try:
        gnnmon.devices.clear_backends()
        FakeCuda(n=1).install(mp)
        from gnnmon.timeline.carbon import codecarbon_model

        codecarbon_model()  # imported once, so that the run starts in ~0.1 s
        lead = 1.0
        nv = FakeNvml(n=1, period=0.1, schedule=[(lead, 200.0), (1.0, 300.0), (1.0, 100.0)],
                      read_delay=read_ms / 1e3).install(mp, tmp / f"nvml-attr-{interval}-{read_ms}")
        with gnnmon.collect(sample=interval, energy=True) as run:
            time.sleep(max(0.0, nv.t0 + lead - time.time()))
            for d in DURATIONS:
                with gnnmon.timed(device="cuda:0", label="row"):
                    time.sleep(d)
        rows = run.records
    finally:
        mp.undo()
        gnnmon.devices.clear_backends()
    errors = [100 * (r["energy_gpu_j"] / nv.joules(0, r["t_start_ns"] / 1e9, r["t_end_ns"] / 1e9) - 1)
              for r in rows]
    balance = run.report().energy()["balance"]["gpu0_energy_mj"]
    added = balance["rows_j"] + balance["gaps_j"] + balance["outside_j"]
    return {"interval_s": interval, "read_ms": read_ms, "rows": len(rows),
            "max_abs_error_pct": max(abs(e) for e in errors),
            "median_abs_error_pct": statistics.median(abs(e) for e in errors),
            "balance_error_pct": 100 * (added / balance["counter_j"] - 1)}


def markdown(r: dict[str, Any], meta: dict[str, Any]) -> str:
    out = [f"Command: `{meta['command']}` · {meta['machine']} · {meta['when']}", "",
           "### Cadence while the training process is busy or paused", "",
           "| sampler | training process | interval | load s | samples during it | expected | "
           "longest gap between samples |", "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for c in r["cadence"]:
        gap = "–" if c["max_gap_s"] is None else f"{c['max_gap_s'] * 1e3:.0f} ms"
        out.append(f"| {c['mode']} | {c['load']} | {c['interval_s'] * 1e3:g} ms | {c['load_s']:.2f} | "
                   f"{c['samples_in_load']} | {c['expected']} | {gap} |")
    out += ["", "### The sampler process's own cost (the training process sleeps; from the first sample to "
            "the last, start-up apart)", "",
            "| interval | energy counter followed | fake read of the counter | CPU, % of one core | "
            "start-up CPU s | counter reads / s | step found |", "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for c in r["cost"]:
        step = "–" if c["period_s"] is None else f"{c['period_s'] * 1e3:.1f} ms"
        out.append(f"| {c['interval_s'] * 1e3:g} ms | {'yes' if c['energy'] else 'no'} | {c['read_ms']:g} ms | "
                   f"{c['cpu_pct_of_a_core']:.2f} % | {c['startup_cpu_s']:.3f} | {c['energy_reads_per_s']:.0f} | "
                   f"{step} |")
    out += ["", "### Energy per row against a planted profile (300 W for 1 s, then 100 W; counter "
            "steps every 100 ms)", "",
            "| sample interval | fake read | rows (50-500 ms) | worst row error | median row error | "
            "rows + gaps + outside vs counter delta |", "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for a in r["attribution"]:
        out.append(f"| {a['interval_s'] * 1e3:g} ms | {a['read_ms']:g} ms | {a['rows']} | "
                   f"{a['max_abs_error_pct']:.2f} % | {a['median_abs_error_pct']:.2f} % | "
                   f"{a['balance_error_pct']:+.4f} % |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: loads of 0.5 s, the sampler's own "
                        "cost over 0.5 s, one energy split (0.1 s, --read-ms)")
    parser.add_argument("--read-ms", type=float, default=3.5, help="how long a fake counter read takes")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown here (and .json beside)")
    args = parser.parse_args(argv)
    seconds = 0.5 if args.quick else 2.0
    results: dict[str, Any] = {"cadence": [], "cost": [], "attribution": []}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        for mode in ("process", "thread"):
            for load in ("busy loop", "gc pause"):
                print(f"cadence: {mode}, {load} ...", flush=True)
                results["cadence"].append(cadence(mode, load, 0.1, seconds))
        for interval in (0.1, 0.5):
            for energy in (False, True):
                print(f"own cost: {interval} s, energy={energy} ...", flush=True)
                results["cost"].append(own_cost(interval, energy, args.read_ms, 0.5 if args.quick else 5.0, tmp))
        splits = ((0.5, 0.0), (0.5, args.read_ms), (0.1, args.read_ms))
        for interval, read_ms in splits[-1:] if args.quick else splits:
            print(f"attribution: {interval} s, read {read_ms} ms ...", flush=True)
            results["attribution"].append(attribution(interval, read_ms, tmp))
    meta = {"command": "python benchmarks/sampler_cost.py" + (" --quick" if args.quick else ""),
            "machine": f"{platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
                       "NVML: the tests' fake",
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    text = markdown(results, meta)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps({"meta": meta, **results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

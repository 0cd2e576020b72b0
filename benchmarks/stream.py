"""The record as a stream, measured: what a decorated call costs on the step's path and with its
row encoded and written, and what reporting a long run's file costs against reading it.

Run: ``.venv/bin/python benchmarks/stream.py`` (about 4 minutes on 2 CPU cores; ``--quick``: a
few seconds, what the test runs; ``--report-only --rounds 7``: the report of a 300,000-row file
alone, issue 66's figure, about 2 minutes). ``--rows-10m`` adds a 10,000,000-row file (made by repeating a
real run's rows; about 8 GB on disk, 10 more minutes). ``GNNMON_BENCH_PACKAGE=/folder/holding/gnnmon``
measures another gnnmon (an earlier commit) the same way, for before/after.

* Step path: bare and decorated calls of an identity function alternate; the figure is the
  median of (decorated - bare) over the pairs, inside ``collect(path)`` (the writer thread runs
  beside them). "With writing": a loop of decorated calls inside ``collect(path)`` until
  ``stop()`` has written every row, minus a loop of bare calls, per call.
* Report: each in a fresh process, as a user runs it (from the interpreter's start, imports
  included), time and peak RSS above the interpreter's own: a ``json.loads`` of every line of the
  file (the floor: reading it), then ``gnnmon.Report(gnnmon.load(path)).markdown()``; three rounds (one
  with ``--quick``), one after the other, and the median of the rounds' ratios. Targets (issue 66):
  the ratio at most 1.5x, at most 256 MiB of RSS above the pass's, and torch never imported.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = os.environ.get("GNNMON_BENCH_PACKAGE") or str(ROOT)

STEP = r"""
import json, sys, time, statistics, tempfile, os
sys.path.insert(0, sys.argv[1])
import torch, gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device, phase

def identity(x):
    return x

@cuda_timed
@gc_controlled
def timing_gc(x):
    return x

@monitor_memory_device
@cuda_timed
@gc_controlled
def full(x):
    return x

@monitor_memory_device
@cuda_timed
@gc_controlled
def full_phase(x):
    with phase("forward"):
        pass
    return x

def reference():
    # Fixed pure-Python work of the kind a decorated call does (a dict filled and read, a few
    # calls): its time says how fast the machine runs Python today.
    fields = {}
    for i in range(20):
        fields[i] = i * 2
    return sum(fields.values()) + len(str(fields))

x = torch.ones(8)
n, rounds, warm = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
pc = time.perf_counter_ns
out = {}
refs = []
for _ in range(rounds):
    t0 = pc()
    for _ in range(n):
        reference()
    refs.append((pc() - t0) / n / 1e3)
with tempfile.TemporaryDirectory() as d:
    for name, fn in (("timing + GC", timing_gc), ("full stack", full), ("full stack + one phase", full_phase)):
        for _ in range(warm):
            fn(x)
        paired, written = [], []
        for r in range(rounds):
            diffs = []
            with gnnmon.collect(os.path.join(d, f"p{r}.jsonl")):
                for _ in range(n):
                    t0 = pc(); identity(x); t1 = pc(); fn(x); t2 = pc()
                    diffs.append((t2 - t1) - (t1 - t0))
            paired.append(statistics.median(diffs) / 1e3)
            t0 = pc()
            for _ in range(n):
                identity(x)
            bare = pc() - t0
            t0 = pc()
            with gnnmon.collect(os.path.join(d, f"w{r}.jsonl")):
                for _ in range(n):
                    fn(x)
            written.append(((pc() - t0) - bare) / n / 1e3)
        out[name] = {"step_path_us": statistics.median(paired), "with_writing_us": statistics.median(written)}
out["reference_us"] = statistics.median(refs)
print(json.dumps(out))
"""

MAKE = r"""
import sys
sys.path.insert(0, sys.argv[1])
import torch, gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device, phase

@monitor_memory_device
@cuda_timed
@gc_controlled
def step(x):
    with phase("forward"):
        pass
    return x

x = torch.ones(8)
for path in sys.argv[3:]:  # one run a file
    with gnnmon.collect(path) as run:
        for i in range(int(sys.argv[2])):
            if i % 1000 == 0:
                run.mark("block", i // 1000)
            step(x)
print("{}")
"""

READ = r"""
import json, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # the interpreter alone
sys.path.insert(0, sys.argv[1])
kind, path = sys.argv[2], sys.argv[3]
if kind == "json":
    n = 0
    for one in sys.argv[3:]:  # one file, or both of a comparison
        with open(one, "rb") as f:
            for line in f:
                json.loads(line)
                n += 1
    what = f"{n} lines"
elif kind == "compare":  # gnnmon compare BASE NEW as the command runs it, imports included
    import gnnmon
    text = gnnmon.Report(gnnmon.load(path)).compare(gnnmon.Report(gnnmon.load(sys.argv[4]))).markdown()
    what = f"{len(text)} characters of markdown"
else:  # as a user runs it: gnnmon's imports count
    import gnnmon
    text = gnnmon.Report(gnnmon.load(path)).markdown()
    what = f"{len(text)} characters of markdown"
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "cpu_s": cpu, "peak_mib": (peak - base) / 1024, "what": what,
                  "torch": "torch" in sys.modules}))
"""

ROUNDS = 3
"""Report rounds: each a ``json.loads`` pass and gnnmon's report, each in a fresh process, one
after the other (the machine's speed drifts: the ratio is taken within a round). ``--quick``: one."""


def _run(code: str, *args: str, timeout: float = 3600) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def step_costs(quick: bool) -> dict[str, Any]:
    """Pairs a round, rounds, and warm-up calls a variant: 20,000, 5 and 2,000 (``quick``: 500, 1, 500)."""
    return _run(STEP, PACKAGE, "500" if quick else "20000", "1" if quick else "5", "500" if quick else "2000")


def report_costs(path: Path, rounds: int = ROUNDS) -> dict[str, Any]:
    """Each side's median over ``rounds`` interleaved rounds, and the median of the rounds'
    ratios (gnnmon's seconds over json's)."""
    floor, ours, ratios = [], [], []
    for _ in range(rounds):
        floor.append(_run(READ, PACKAGE, "json", str(path)))
        ours.append(_run(READ, PACKAGE, "gnnmon", str(path)))
        ratios.append(ours[-1]["seconds"] / floor[-1]["seconds"])

    def median(runs: list[dict[str, Any]]) -> dict[str, Any]:
        return {**runs[0], **{k: statistics.median(r[k] for r in runs) for k in ("seconds", "cpu_s", "peak_mib")},
                "torch": any(r["torch"] for r in runs)}

    return {"json.loads of every line": median(floor), "gnnmon.Report(gnnmon.load(path)).markdown()": median(ours),
            "ratio": statistics.median(ratios), "ratios": ratios, "rounds": rounds}


def compare_costs(base: Path, new: Path, rounds: int = ROUNDS) -> dict[str, Any]:
    """``gnnmon compare`` of two files against a ``json.loads`` pass over both, as
    :func:`report_costs` does for one file."""
    floor, ours, ratios = [], [], []
    for _ in range(rounds):
        floor.append(_run(READ, PACKAGE, "json", str(base), str(new)))
        ours.append(_run(READ, PACKAGE, "compare", str(base), str(new)))
        ratios.append(ours[-1]["seconds"] / floor[-1]["seconds"])
    return {"json.loads of every line of both": floor[len(floor) // 2] | {"seconds": statistics.median(
                r["seconds"] for r in floor)},
            "compare of the two": ours[0] | {"seconds": statistics.median(r["seconds"] for r in ours),
                                             "peak_mib": statistics.median(r["peak_mib"] for r in ours)},
            "ratio": statistics.median(ratios), "rounds": rounds}


def repeat_file(source: Path, target: Path, rows: int) -> None:
    """A file of ``rows`` rows: ``source``'s manifest, then its rows again and again, each with the
    next index and times moved on (what a run that long writes, as far as the report can tell)."""
    lines = source.read_bytes().splitlines()
    manifest, body = lines[0], [json.loads(x) for x in lines[1:]]
    rows_in = [r for r in body if r.get("type") == "row"]
    span = rows_in[-1]["t_end_ns"] - rows_in[0]["t_start_ns"] + 1000
    written = 0
    with open(target, "wb") as out:
        out.write(manifest + b"\n")
        k = 0
        while written < rows:
            shift = k * span
            chunk = []
            for obj in body:
                if obj.get("type") == "row":
                    if written >= rows:
                        break
                    row = dict(obj, index=written, t_start_ns=obj["t_start_ns"] + shift,
                               t_end_ns=obj["t_end_ns"] + shift)
                    written += 1
                    chunk.append(json.dumps(row, separators=(",", ":")).encode())
                elif obj.get("type") == "marker":
                    chunk.append(json.dumps(dict(obj, t_ns=obj["t_ns"] + shift), separators=(",", ":")).encode())
            out.write(b"\n".join(chunk) + b"\n")
            k += 1


def markdown(results: dict[str, Any], meta: dict[str, Any]) -> str:
    head = f"Command: `{meta['command']}` · {meta['machine']} · {meta['when']} · gnnmon from {meta['package']}"
    return "\n".join([head, ""] + tables(results)) + "\n"


def tables(results: dict[str, Any]) -> list[str]:
    """The step path's and the report's tables of :func:`measure`'s results."""
    out: list[str] = []
    ref = results["reference_us"]
    if results["step"]:
        out += ["| decorated identity call | on the step's path µs (median of paired differences) | "
                "with its row encoded and written µs | step's path in reference calls |",
                "| --- | ---: | ---: | ---: |"]
        for name, r in results["step"].items():
            out.append(f"| {name} | {r['step_path_us']:.1f} | {r['with_writing_us']:.1f} | "
                       f"{r['step_path_us'] / ref:.1f} |")
        out += ["", f"The machine's speed today: one reference call (fixed pure-Python work, `reference()` in "
                f"the script) took {ref:.2f} µs. The last column divides by it, so days can be compared."]
    for size, rep in results["report"].items():
        costs = rep["costs"]
        out += ["", f"Report of a {size} file, each side in a fresh process from the interpreter's start (gnnmon's "
                    f"imports included), median of {costs['rounds']} interleaved rounds:", "",
                "| what | seconds | CPU seconds | peak RSS above the interpreter MiB |", "| --- | ---: | ---: | ---: |"]
        for what in ("json.loads of every line", "gnnmon.Report(gnnmon.load(path)).markdown()"):
            r = costs[what]
            out.append(f"| {what} | {r['seconds']:.2f} | {r['cpu_s']:.2f} | {r['peak_mib']:.0f} |")
        ours, floor = costs["gnnmon.Report(gnnmon.load(path)).markdown()"], costs["json.loads of every line"]
        out.append(f"| ratio (median of the rounds'; target 1.5x) | {costs['ratio']:.2f}x | "
                   f"{ours['cpu_s'] / floor['cpu_s']:.2f}x | "
                   f"+{ours['peak_mib'] - floor['peak_mib']:.0f} (target 256) |")
        out += ["", f"Each round's ratio: {', '.join(f'{r:.2f}x' for r in costs['ratios'])}; torch imported by "
                    f"the report: {'yes' if ours['torch'] else 'no'}."]
    for size, costs in results.get("compare", {}).items():
        out += ["", f"`gnnmon compare` of two {size} files (target: 2x a json.loads pass over both), median of "
                    f"{costs['rounds']} interleaved rounds:", "",
                "| what | seconds | peak RSS above the interpreter MiB |",
                "| --- | ---: | ---: |"]
        for what in ("json.loads of every line of both", "compare of the two"):
            out.append(f"| {what} | {costs[what]['seconds']:.2f} | {costs[what]['peak_mib']:.0f} |")
        out.append(f"| ratio (median of the rounds') | {costs['ratio']:.2f}x | |")
    return out


def _has_compare() -> bool:
    """Whether the gnnmon measured (``GNNMON_BENCH_PACKAGE``, an earlier commit) has ``Report.compare``."""
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); from gnnmon.report import Report; "
             "sys.exit(0 if hasattr(Report, 'compare') else 3)")
    return subprocess.run([sys.executable, "-c", probe, PACKAGE], capture_output=True).returncode == 0


def measure(quick: bool, rows: int = 300_000, rows_10m: bool = False, compare_only: bool = False,
            report_only: bool = False, rounds: int | None = None) -> dict[str, Any]:
    """The step path's paired costs and the report's time and memory against a ``json.loads`` pass
    over a run file of ``rows`` rows (2,000 when ``quick``), and ``gnnmon compare`` of two such files
    against a pass over both (``compare_only``: that alone; ``report_only``: the report alone).
    ``rounds``: interleaved rounds of each (default :data:`ROUNDS`, one when ``quick``)."""
    rows = 2000 if quick else rows
    rounds = rounds or (1 if quick else ROUNDS)
    results: dict[str, Any] = {"report": {}, "compare": {}, "step": {}, "reference_us": 0.0}
    if not compare_only and not report_only:
        print("step path: paired calls ...", flush=True)
        results["step"] = step_costs(quick)
        results["reference_us"] = results["step"].pop("reference_us")
    with tempfile.TemporaryDirectory() as tmp:
        path, again = Path(tmp) / "run.jsonl", Path(tmp) / "again.jsonl"
        compare = _has_compare() and not report_only
        print(f"report: {'two' if compare else 'a'} {rows:,}-row run{'s' if compare else ''} ...", flush=True)
        # always written by this checkout: the same files, one run each, in one process
        _run(MAKE, str(ROOT), str(rows), str(path), *([str(again)] if compare else []))
        size = f"{rows:,}-row ({path.stat().st_size / 2**20:.0f} MiB)"
        if not compare_only:
            results["report"][size] = {"costs": report_costs(path, rounds)}
        if compare:
            print("compare: the two runs ...", flush=True)
            results["compare"][size] = compare_costs(path, again, rounds)
        elif not report_only:
            print("compare: skipped (the measured gnnmon has no Report.compare)", flush=True)
        if rows_10m:
            big = Path(tmp) / "run10m.jsonl"
            print("report: a 10,000,000-row run ...", flush=True)
            repeat_file(path, big, 10_000_000)
            size = f"10,000,000-row ({big.stat().st_size / 2**30:.1f} GiB)"
            results["report"][size] = {"costs": report_costs(big, rounds)}
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: 500 pairs, 2,000-row files, one round "
                        "(what the test runs)")
    parser.add_argument("--rows", type=int, default=300_000, help="rows of the run file the report reads")
    parser.add_argument("--rows-10m", action="store_true", help="also a 10,000,000-row file (8 GB, slow)")
    parser.add_argument("--compare-only", action="store_true", help="only gnnmon compare of two files against "
                        "json.loads over both")
    parser.add_argument("--report-only", action="store_true", help="only the report of a file against json.loads "
                        "over its lines (issue 66's figure)")
    parser.add_argument("--rounds", type=int, default=None, help=f"interleaved rounds (default {ROUNDS}; 1 with "
                        "--quick)")
    parser.add_argument("--out", default="runs/stream.md", help="the markdown file to write (and its .json)")
    args = parser.parse_args(argv)
    results = measure(args.quick, args.rows, args.rows_10m, args.compare_only, args.report_only, args.rounds)
    meta = {"command": "python benchmarks/stream.py" + (" --quick" if args.quick else "")
                       + (" --rows-10m" if args.rows_10m else "") + (" --compare-only" if args.compare_only else "")
                       + (" --report-only" if args.report_only else "")
                       + (f" --rounds {args.rounds}" if args.rounds else ""),
            "machine": f"{platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "package": PACKAGE,
            "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    text = markdown(results, meta)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, **results}, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The GPU acceptance run: everything gnnmon claims about CUDA, checked on a real GPU in one command.

    make gpu-check                                  # on a CUDA machine with torch and PyG installed
    python benchmarks/gpu_acceptance.py --out DIR   # the same, its results file in DIR
    python benchmarks/gpu_acceptance.py --dry-run   # the steps, their time limits and claims
    python benchmarks/gpu_acceptance.py --fake      # what can run on the CPU, against the tests' fakes

Each step is a process of its own with a time limit (the run stops at 8 minutes of wall time, so
that it fits a GPU machine lent for 15 minutes with its start; a step gets what is left when that
is less). A step that fails or runs out of time is
recorded and the run goes on. The rest of the test suite runs in the background, in parallel
workers (a quarter of the cores), beside the steps that do not time anything (it starts after the
benchmark). The results — per step: passed,
failed, timed out or not run; the claim it checks; its figures — go to
``DIR/gpu-<device>-<date>.md`` and ``.json`` (``DIR``: ``docs/results`` by default, ``runs``
with ``--fake``), and a summary is printed last. Exit status 0 when no step failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.gpu_checks import CLAIMS  # noqa: E402 - after the path that finds it

BUDGET_S = 480
"""The whole run's wall time, seconds (8 minutes)."""

SUITE_WORKERS = str(max(2, (os.cpu_count() or 8) // 4))
"""pytest-xdist workers of the background suite: a quarter of the cores, the rest left to the studies."""


@dataclass(frozen=True)
class Step:
    """One step: ``argv`` with ``{py}`` (this interpreter) and ``{work}`` (the step's folder)
    filled in; ``check``: a :mod:`benchmarks.gpu_checks` check that writes its figures;
    ``fake``: it runs under ``--fake`` too; ``background``: it runs beside the later steps."""

    name: str
    limit_s: int
    claim: str
    argv: tuple[str, ...]
    fake: bool = False
    background: bool = False
    check: bool = False


def _check(name: str, limit_s: int, fake: bool = True) -> Step:
    return Step(name, limit_s, CLAIMS[name], ("{py}", "benchmarks/gpu_checks.py", name, "--out", "{work}"),
                fake=fake, check=True)


PYTEST = ("{py}", "-m", "pytest", "-q", "-p", "no:cacheprovider")

STEPS: tuple[Step, ...] = (
    # a cold machine: torch, PyG and NVML loaded from disk the first time (>15 s on 2026-11-26, 10 s on 2026-11-28)
    _check("environment", 30),
    _check("install", 25),
    Step("cuda tests", 60, "the tests marked cuda pass on the GPU, none skipped (exact memory, event times, "
         "per-layer times and peaks, bucket device time, the out-of-memory row)", PYTEST + ("-m", "cuda")),
    _check("benchmark", 110),  # benchmarks/run.py --device cuda --check: loops of 20 steps x 4 rounds
    Step("suite", 420, "the rest of the suite (not cuda, not slow) passes on the GPU machine",
         PYTEST + ("-m", "not cuda and not slow", "-n", SUITE_WORKERS, "--dist", "worksteal"), background=True),
    _check("energy", 20),  # 10 rows of 0.3 s: 6 s on an H200
    _check("compile", 40, fake=False),  # CUDA graphs: nothing to check against the fakes
    Step("flickr", 70, "the Flickr GCN memory study's precision and DataLoader-workers sweeps run on CUDA (10 "
         "measured steps a configuration; forked workers beside CUDA)",
         ("{py}", "play/flickr_memory.py", "--device", "cuda", "--steps", "10", "--sweep", "precision",
          "--sweep", "workers", "--out", "{work}")),
    Step("cora", 25, "the Cora walk-through runs on CUDA (5 epochs; baseline, sampled, sampled+amp)",
         ("{py}", "play/cora_optimisations.py", "--device", "cuda", "--epochs", "5",
          "--configs", "baseline", "sampled", "sampled+amp", "--out", "{work}")),
    Step("pna", 40, "the PNA study preset runs on CUDA (64 layers; 1,000 graphs, batches 128 and 512, 1 epoch)",
         ("{py}", "play/pna_steps.py", "--preset", "study", "--device", "cuda", "--graphs", "1000",
          "--batch-sizes", "128", "512", "--worker-sweep", "--epochs", "1", "--out", "{work}")),
    Step("batching", 60, "the batching study runs on CUDA (1,000 molecules, 30 steps, eager)",
         ("{py}", "play/batching.py", "--device", "cuda", "--graphs", "1000", "--steps", "30",
          "--modes", "eager", "--out", "{work}")),
)


@dataclass
class Outcome:
    """What one step did: ``status`` pass, fail, timeout or not run."""

    name: str
    claim: str
    status: str
    seconds: float = 0.0
    limit_s: float = 0.0
    figures: dict[str, Any] = field(default_factory=dict)
    tail: str = ""


def _argv(step: Step, work: Path, fake: bool) -> list[str]:
    argv = [a.replace("{py}", sys.executable).replace("{work}", str(work)) for a in step.argv]
    return argv + (["--fake"] if fake and step.check else [])


def _start(step: Step, work: Path, fake: bool) -> tuple[subprocess.Popen, Any]:
    work.mkdir(parents=True, exist_ok=True)
    log = open(work / "log.txt", "w")  # closed by _finish
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(_argv(step, work, fake), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    return proc, log


def _finish(step: Step, proc: subprocess.Popen, log: Any, work: Path, t0: float, limit: float) -> Outcome:
    try:
        rc = proc.wait(timeout=max(0.0, limit - (time.monotonic() - t0)))
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        rc, timed_out = proc.wait(), True
    log.close()
    text = (work / "log.txt").read_text(errors="replace")
    out = Outcome(step.name, step.claim, "timeout" if timed_out else "pass" if rc == 0 else "fail",
                  time.monotonic() - t0, limit, tail=text[-1500:])
    report = work / f"{step.name}.json"
    if step.check and report.exists():
        data = json.loads(report.read_text())
        out.claim, out.figures = data["claim"], data["figures"]
        if data["notes"]:
            out.figures["notes"] = data["notes"]
        if data["passed"] is None and not timed_out:
            out.status = "not run"
    elif step.argv[:3] == PYTEST[:3]:
        summary = [line for line in text.splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
        out.figures["pytest"] = summary[-1].strip("= ") if summary else None
        if out.status == "pass" and "cuda" in step.argv and "skipped" in (out.figures["pytest"] or ""):
            out.status = "fail"  # a cuda test skipped on a GPU machine did not run
    return out


def run(steps: tuple[Step, ...], work: Path, fake: bool, budget: float = BUDGET_S) -> list[Outcome]:
    """Run ``steps`` in order, the background ones beside the rest; every step within ``budget``."""
    t_run = time.monotonic()
    outcomes: dict[str, Outcome] = {}
    background: list[tuple[Step, subprocess.Popen, Any, Path, float, float]] = []
    for step in steps:
        left = budget - (time.monotonic() - t_run)
        # under 1 s left: too little to start a process and see it end
        why = "needs a GPU" if fake and not step.fake else "out of time" if left < 1 else None
        if why is not None:
            outcomes[step.name] = Outcome(step.name, step.claim, "not run", limit_s=step.limit_s, figures={"why": why})
            continue
        limit = min(step.limit_s, left)
        print(f"gpu-check: {step.name} (limit {limit:.0f} s) ...", flush=True)
        folder = work / step.name.replace(" ", "-")
        t0 = time.monotonic()
        proc, log = _start(step, folder, fake)
        if step.background:
            background.append((step, proc, log, folder, t0, limit))
            continue
        outcome = _finish(step, proc, log, folder, t0, limit)
        outcomes[step.name] = outcome
        print(f"gpu-check: {step.name}: {outcome.status} in {outcome.seconds:.0f} s", flush=True)
    for step, proc, log, folder, t0, limit in background:
        outcomes[step.name] = _finish(step, proc, log, folder, t0, min(limit, budget - (t0 - t_run)))
    return [outcomes[s.name] for s in steps]


def device_slug(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``h100``: the model, for the results file's name."""
    model = re.search(r"\b([A-Za-z]{1,3}\d{2,4}[A-Za-z]?)\b", name)
    return (model.group(1) if model else re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu").lower()


def _short(figures: dict[str, Any], width: int = 160) -> str:
    text = "; ".join(f"{k}: {_fmt(v)}" for k, v in figures.items() if k not in ("pip_tail", "tables"))
    return text if len(text) <= width else text[: width - 1] + "…"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items()) + "}"
    return str(v)


def markdown(meta: dict[str, Any], outcomes: list[Outcome]) -> str:
    out = [f"# GPU acceptance run: {meta['device']}", "",
           f"Command: `{meta['command']}` · {meta['machine']} · {meta['when']} · total {meta['total_s']:.0f} s"
           + (" · **FAKE device: figures test the code path, not a GPU**" if meta["fake"] else ""), "",
           "| step | result | s (limit) | claim | figures |", "| --- | --- | ---: | --- | --- |"]
    for o in outcomes:
        out.append(f"| {o.name} | {o.status} | {o.seconds:.0f} ({o.limit_s:.0f}) | {o.claim} | "
                   f"{_short(o.figures).replace('|', '/')} |")
    failed = [o for o in outcomes if o.status in ("fail", "timeout")]
    for o in failed:
        out += ["", f"## {o.name}: {o.status}", "", "```", o.tail.rstrip()[-1200:], "```"]
    return "\n".join(out) + "\n"


def summary(outcomes: list[Outcome], total_s: float, path: Path) -> str:
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    said = ", ".join(f"{n} {status}" for status, n in counts.items())
    bad = [f"{o.name} ({o.status})" for o in outcomes if o.status in ("fail", "timeout")]
    return f"gpu-check: {said} in {total_s:.0f} s" + (f"; not passed: {', '.join(bad)}" if bad else "") + f" -> {path}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="list the steps, their limits and claims; run nothing")
    parser.add_argument("--fake", action="store_true", help="only what runs on the CPU, against the tests' fakes")
    parser.add_argument("--out", help="folder for the results file (docs/results; runs with --fake)")
    parser.add_argument("--only", nargs="*", help="these steps alone (names as --dry-run lists them)")
    parser.add_argument("--budget", type=float, default=BUDGET_S,
                        help=f"the whole run's wall time, seconds (default {BUDGET_S}): steps past it are not run")
    args = parser.parse_args(argv)
    steps = STEPS if not args.only else tuple(s for s in STEPS if s.name in args.only)
    unknown = set(args.only or ()) - {s.name for s in STEPS}
    if unknown:
        parser.error(f"unknown step(s) {', '.join(sorted(unknown))}; the steps are {', '.join(s.name for s in STEPS)}")
    if args.budget <= 0:
        parser.error(f"--budget must be a positive number of seconds, not {args.budget:g}")
    if args.dry_run:
        total = sum(s.limit_s for s in steps if not s.background)
        for s in steps:
            where = "beside the later steps" if s.background else "alone"
            print(f"{s.name:12s} {s.limit_s:4d} s  {where:22s} {'fake too' if s.fake else 'GPU only':9s} "
                  f"{s.claim}")
        print(f"total limit of the steps run in turn: {total} s (the run stops at {args.budget:g} s)")
        return 0
    if args.fake:  # the steps load torch; this process only names its version
        from importlib.metadata import version

        torch_version = version("torch")
    else:
        import torch

        if not torch.cuda.is_available():
            print("gpu-check: no CUDA device here; --fake runs what can run on the CPU", file=sys.stderr)
            return 2
        torch_version = torch.__version__
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        outcomes = run(steps, Path(tmp), args.fake, args.budget)
    name = "fake CUDA (tests/fakes.py)" if args.fake else torch.cuda.get_device_name(0)
    when = time.gmtime()
    meta = {"command": "python benchmarks/gpu_acceptance.py" + (" --fake" if args.fake else ""),
            "device": name, "fake": args.fake,
            "machine": f"{platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
                       f"torch {torch_version}",
            "when": time.strftime("%Y-%m-%d %H:%M UTC", when), "total_s": time.monotonic() - t0}
    folder = Path(args.out or ("runs" if args.fake else ROOT / "docs" / "results"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"gpu-{'fake' if args.fake else device_slug(name)}-{time.strftime('%Y-%m-%d', when)}.md"
    path.write_text(markdown(meta, outcomes))
    path.with_suffix(".json").write_text(json.dumps(
        {"meta": meta, "steps": [vars(o) for o in outcomes]}, indent=1, default=str))
    print(summary(outcomes, meta["total_s"], path))
    return 1 if any(o.status in ("fail", "timeout") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())

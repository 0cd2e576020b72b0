"""The GPU acceptance run's own checks, one per invocation, each a claim with the figures that test it.

    python benchmarks/gpu_checks.py NAME --out DIR [--fake]

NAME is one of :data:`CHECKS`. Each writes ``DIR/NAME.json`` (``claim``, ``passed``, ``figures``,
``notes``) and exits 0 when the claim holds (or the check cannot run here: ``passed`` null), 1
when it does not. ``--fake`` runs it against the
tests' fake ``torch.cuda`` (two devices) and fake NVML (a counter ramping at a planted 300 W,
stepping every 0.1 s, as an H100's does) at the smallest sizes: the figures then test the code
path and the planted truth, not a GPU. :mod:`benchmarks.gpu_acceptance` runs them in turn.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PLANTED_W = 300.0
"""The fake NVML's power, watts, in ``--fake`` runs."""

_PLANT: list[Any] = [None]
"""The fake NVML ``--fake`` installed (its planted power, start, steps: the truth the energy check
is judged by there); None on a GPU."""


def _install_fakes(tmp: Path) -> Any:
    """The tests' fake CUDA and NVML in this process (and NVML's in the sampler process)."""
    import pytest

    from tests.fake_nvml import FakeNvml
    from tests.fakes import FakeCuda

    patch = pytest.MonkeyPatch()
    FakeCuda(n=2).install(patch)
    _PLANT[0] = FakeNvml(n=2, ramp_w=PLANTED_W, period=0.1).install(patch, tmp / "nvml")
    return patch


CLAIMS = {
    "environment": "a CUDA device is visible to torch, and torch, PyG and NVML load",
    "install": "gnnmon installs from the working tree without touching torch, and imports from the install",
    "benchmark": "the full stack with phases costs at most 5 % of a realistic GCN step (H100: 1.028x on "
                 "2026-11-22 at 40 steps × 7 rounds; 1.16x on 2026-11-26 at 20 × 4)",
    "energy": "on a busy GPU the sampler keeps up with NVML's counter (its step period found), gnnmon's counter "
              "window matches NVML's delta read directly within the counter's own steps (its gain between "
              "gnnmon's points around each end) and the rows inside it hold no more; finer placing, and the "
              "rows' energy against the power, need a known power: judged only under --fake",
    "compile": "a torch.compile(mode='reduce-overhead') GCN step under the full stack and @track_compile: every "
               "row without error, the compilation in the first rows, none after, device time in every row",
}
"""What each check shows on a GPU."""

FAKE_CLAIMS = {
    "benchmark": "the GPU benchmark runs every variant (fake device: ratios mean nothing)",
    "energy": f"the rows' energy is the planted {PLANTED_W:g} W over their time (within 3 %), gnnmon's counter "
              "window matches NVML's delta read directly (within 5 %), each plus what placing allows on the "
              "plant (its points' true misplacing, the counter's mJ), the sampler finds the planted 0.1 s "
              "step, and the GPU's bounds hold",
}
"""What a check shows instead under ``--fake``, where that differs."""

Outcome = tuple["bool | None", dict[str, Any]]
"""(whether the claim held — None: not run here —, the figures that test it)."""


def environment(out: Path, fake: bool) -> Outcome:
    import torch

    import gnnmon

    figures: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                               "torch_cuda": torch.version.cuda, "gnnmon": str(Path(gnnmon.__file__).parent),
                               "cpus": os.cpu_count()}
    try:
        import torch_geometric

        figures["torch_geometric"] = torch_geometric.__version__
    except ImportError:
        figures["torch_geometric"] = None
    available = torch.cuda.is_available()
    figures["cuda_devices"] = ([] if not available else [f"fake CUDA {i}" for i in range(torch.cuda.device_count())]
                               if fake else [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
    try:
        import pynvml

        pynvml.nvmlInit()
        figures["nvml_driver"] = str(pynvml.nvmlSystemGetDriverVersion())
    except Exception as exc:  # noqa: BLE001 - say what is missing
        figures["nvml_driver"] = f"no NVML: {type(exc).__name__}: {exc}"
    return available and bool(figures["cuda_devices"]), figures


def install(out: Path, fake: bool) -> Outcome:
    """pip installs the working tree into a folder of its own (no dependencies, no index, the
    environment's own build backend), and a fresh interpreter imports gnnmon from there."""
    import shutil
    import subprocess

    import torch

    site, tree = out / "site", out / "tree"  # built from a copy: setuptools writes build/ beside the sources
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(ROOT / "gnnmon", tree / "gnnmon", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                          "--no-build-isolation", "--target", str(site), str(tree)],
                         capture_output=True, text=True, timeout=120)
    figures: dict[str, Any] = {"pip_exit": pip.returncode, "pip_tail": (pip.stdout + pip.stderr)[-800:],
                               "torch_before": f"{torch.__version__} {torch.__file__}"}
    probe = subprocess.run([sys.executable, "-I", "-c",
                            "import sys; sys.path.insert(0, sys.argv[1]); import gnnmon, torch; "
                            "print(gnnmon.__file__); print(torch.__version__, torch.__file__)", str(site)],
                           capture_output=True, text=True, timeout=120, cwd=str(out))
    lines = probe.stdout.splitlines()
    figures["gnnmon_imported_from"] = lines[0] if lines else probe.stderr[-400:]
    figures["torch_after"] = lines[1] if len(lines) > 1 else None
    ok = (pip.returncode == 0 and probe.returncode == 0 and lines[0].startswith(str(site))
          and figures["torch_after"] == figures["torch_before"] and not any(site.glob("torch*")))
    return ok, figures


def benchmark(out: Path, fake: bool) -> Outcome:
    from benchmarks.run import main_cuda

    md = out / "benchmarks-cuda.md"
    main_cuda("quick" if fake else "check", md, fake=fake)
    data = json.loads(md.with_suffix(".json").read_text())
    rows = {(r["loop"], r["variant"]): r for r in data["overhead"]}
    full = rows[("GCN step", "gnnmon full stack, phases inside")]
    tiny = {v: r for (loop, v), r in rows.items() if loop == "tiny step (x + 1)"}
    figures = {
        "gcn_step_bare_us": full["bare_step_us"],
        "gcn_full_stack_ratio": full["ratio"],
        "gcn_full_stack_cost_us": full["per_step_us"],
        "tiny_step_cost_us": {v: r["per_step_us"] for v, r in tiny.items()},
        "issue_65": issue_65(full["ratio"], tiny, fake),
        "call_costs_us": {c["call"]: c["us"] for c in data.get("calls", [])},
        "tables": md.name,
    }
    if fake:  # the numbers mean nothing on the fake: every variant ran
        return all(r["ratio"] > 0 for r in data["overhead"]
                   if not str(r.get("note", "")).startswith("not run")), figures
    return full["ratio"] <= 1.05, figures


ISSUE_65_LIMITS = {"gcn_full_stack_ratio": 1.015, "tiny_full_stack_us": 40.0, "tiny_memory_us": 20.0}
"""Issue 65's GPU limits: the GCN step with three phases under the full stack (ratio to bare), and
the tiny step's full stack and ``@monitor_memory_device`` alone (µs a call above bare)."""


def issue_65(gcn_ratio: float | None, tiny: dict[str, dict[str, Any]], fake: bool) -> dict[str, Any]:
    """Each of issue 65's GPU figures beside its limit, and whether it is met (None on the fake:
    a figure held there is no GPU's)."""
    read = {"gcn_full_stack_ratio": gcn_ratio, "tiny_full_stack_us": tiny.get("full stack", {}).get("per_step_us"),
            "tiny_memory_us": tiny.get("@monitor_memory_device", {}).get("per_step_us")}
    return {name: {"read": value, "limit": ISSUE_65_LIMITS[name],
                   "met": None if fake or value is None else value <= ISSUE_65_LIMITS[name]}
            for name, value in read.items()}


def counter_steps_j(points: list[dict[str, Any]], ends_ns: tuple[int, ...]) -> float:
    """What NVML's counter alone says of gnnmon's value at each instant of ``ends_ns`` (J): the
    counter's gain between gnnmon's points on either side of it (placed at or before, after), as
    :meth:`gnnmon.data.points.Counters.value_at` takes them. gnnmon's value there is between those
    two points' values (it interpolates between them); so is the counter's own value at any
    instant between the two points' reads, whatever the power did meanwhile. Only a point placed
    on the wrong side of a step the end is at (misplaced by about a step or more), a window taken
    from the wrong points or a wrong counter puts gnnmon's window further from a direct delta
    taken there than these gains summed (so long as the direct reads place their own steps within
    a step of the truth: their brackets, a few ms). Inf where an end has no point on one side."""
    times = [p["t_ns"] for p in points]
    gained = 0.0
    for t in ends_ns:
        i = bisect.bisect_right(times, t)  # points[i - 1] at or before t, points[i] after it
        if i == 0 or i == len(points):
            return math.inf
        gained += (points[i]["value"] - points[i - 1]["value"]) / 1e3
    return gained


ENERGY_NOT_JUDGED_ON_A_GPU = (
    "placing finer than a counter step: the power inside a step is unknown, and the only instants known "
    "apart from gnnmon's are the direct reads' own; the rows' energy against a power (none is known); "
    "placing_pct and rows_placing_s, gnnmon's estimate of its own error (its points' err_ns), printed, never "
    "a bound: the figure under test. --fake judges all three against a planted power")
"""What the energy check cannot judge on a GPU, where the true power is not known (in its figures)."""


def energy(out: Path, fake: bool) -> Outcome:
    """The matmul loop's rows under ``collect(sample=0.1, energy=True)`` (:func:`benchmarks.gpu.energy_split`),
    judged by bounds that follow from what is known independently of gnnmon's own figures, never
    from placing_pct or rows_placing_s (its points' ``err_ns``: the figure under test).

    Everywhere (a GPU, and the fake): the counter's step period found and the sampler's figures
    kept; gnnmon's window within the counter's gain between its points around each end of the
    directly read window (:func:`counter_steps_j`); the rows, which lie inside that window, holding
    no more than the direct delta plus those gains. Under ``--fake`` also, from the plant (the fake
    NVML's planted power and start, its step period, its whole-mJ counter: tests/energy_truth.py):
    the window within 5 % of the direct delta plus what its points' true misplacing allows at its
    ends and what the direct reads' own placing is truly off; the rows within 3 % of the planted
    energy over their own instants plus what the points' true misplacing allows at their ends,
    each never more than half off; the period within what placing its newest points allows of
    the planted one."""
    import torch

    from benchmarks import gpu
    from gnnmon.data.format import POINT, ROW
    from gnnmon.data.points import Counters

    gpu._FAKE[0] = fake  # tensors stay on the CPU under the fake
    rows, row_s = (3, 0.1) if fake else (10, 0.3)
    # what the split read back of its file (its folder is then removed), and the window it asked
    # gnnmon for: its direct reads' instants (epoch ns) and gnnmon's answer (mJ)
    kept: list[dict[str, Any]] = []
    windows: list[tuple[int, int, float | None]] = []
    read_lines, delta = gpu.read_lines, Counters.delta

    def keep(path: Any) -> list[dict[str, Any]]:
        lines = list(read_lines(path))
        kept.extend(lines)
        return lines

    def asked(self: Counters, key: str, a_ns: int, b_ns: int) -> float | None:
        d = delta(self, key, a_ns, b_ns)
        if sys._getframe(1).f_globals.get("__name__") == gpu.__name__:
            windows.append((a_ns, b_ns, d))
        return d

    gpu.read_lines, Counters.delta = keep, asked
    try:
        split = gpu.energy_split(torch.device("cuda:0"), rows, row_s)
    finally:
        gpu.read_lines, Counters.delta = read_lines, delta
    if "skipped" in split:
        return False, split
    key = "gpu0_energy_mj"
    points = sorted((p for p in kept if p.get("type") == POINT and p["key"] == key), key=lambda p: p["t_ns"])
    records = [r for r in kept if r.get("type") == ROW]
    (t_a, t_b, window_mj), = windows
    direct, window_j = split["direct_j"], split["gnnmon_window_j"]
    judged: dict[str, Any] = {}
    # the counter's own steps: exact bounds (whole mJ on both sides); 1 µJ for the floats' sums
    steps_j = counter_steps_j(points, (t_a, t_b))
    split["window_steps_j"] = steps_j
    judged["period found, sampler kept its figures"] = split["period_s"] is not None and split["sampler"] is not None
    judged["window within the counter's steps"] = (window_mj is not None and window_mj / 1e3 == window_j
                                                   and abs(window_j - direct) <= steps_j + 1e-6)
    judged["rows no more than the window"] = split["rows_j"] <= direct + steps_j + 1e-6
    if not fake:
        split["not_judged"] = ENERGY_NOT_JUDGED_ON_A_GPU
    else:
        judged.update(_energy_on_the_plant(split, kept, records, key, t_a, t_b))
    split["judged"] = judged
    return all(judged.values()), split


def _energy_on_the_plant(split: dict[str, Any], kept: list[dict[str, Any]], records: list[dict[str, Any]],
                         key: str, t_a: int, t_b: int) -> dict[str, bool]:
    """The energy check's bounds from the fake NVML's plant (adds its figures to ``split``)."""
    from gnnmon.devices.cuda import cuda_uuids
    from tests.energy_truth import misplacing, period_slack_ms, placing_slack_j, planted_phases

    nv = _PLANT[0]
    nvml = nv.nvmlDeviceGetHandleByUUID(cuda_uuids()[0][0])[1]  # the fake's NVML order is CUDA's reversed
    direct = split["direct_j"]
    # the window: the points around its ends truly misplaced (placing_slack_j: each end at the
    # planted power, the counter's mJ), and the direct reads' steps truly apart from the instants
    # the split placed them at (exactly: the planted energy between those instants against the
    # counter's delta); never more than half the delta
    reads_off_j = abs(nv.joules(nvml, t_a / 1e9, t_b / 1e9) - direct)
    window_allowed_j = min(0.05 * direct + placing_slack_j(kept, key, nv, nvml, t_a, t_b) + reads_off_j, direct / 2)
    # the rows: the planted energy over their own instants, within 3 % and what the points around
    # each end truly misplaced allow; never more than half the plant
    planted_j = sum(nv.joules(nvml, r["t_start_ns"] / 1e9, r["t_end_ns"] / 1e9) for r in records)
    ends = [t for r in records for t in (r["t_start_ns"], r["t_end_ns"])]
    rows_allowed_j = min(0.03 * planted_j + placing_slack_j(kept, key, nv, nvml, *ends), planted_j / 2)
    # the period: the median spacing of the newest 10 points, within what their true misplacing
    # (and the counter's mJ at the lowest planted power) allows of the planted step
    _, _, off = misplacing(kept, key, nv, nvml)
    period_allowed_s = period_slack_ms(off, min(w for _, w in planted_phases(nv, nvml)))[-1] / 1e3 if off else 0.0
    split.update(planted_j=planted_j, rows_allowed_j=rows_allowed_j, window_allowed_j=window_allowed_j,
                 reads_off_j=reads_off_j, planted_period_s=nv.period, period_allowed_s=period_allowed_s,
                 worst_misplacing_ms=max(off, default=0.0) / 1e6)
    window_j = split["gnnmon_window_j"]
    return {
        "rows as the file keeps them": len(records) == split["rows"],
        "window on the plant": window_j is not None and abs(window_j - direct) <= window_allowed_j,
        "rows on the plant": len(records) > 0 and abs(split["rows_j"] - planted_j) <= rows_allowed_j,
        "period on the plant": (split["period_s"] is not None
                                and abs(split["period_s"] - nv.period) <= period_allowed_s),
    }


def compile_step(out: Path, fake: bool) -> Outcome:
    if fake:
        return None, {"skipped": "needs a real GPU (CUDA graphs)"}
    import torch
    import torch.nn.functional as F

    import gnnmon
    from play.models import GCN
    from play.synthetic import FLICKR, planted_partition

    spec = FLICKR.scaled(0.05)
    data = planted_partition(spec).to("cuda")
    model = GCN(spec.num_features, 128, spec.num_classes).to("cuda")
    compiled = torch.compile(model, mode="reduce-overhead")
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    @gnnmon.track_compile
    @gnnmon.monitor_memory_device
    @gnnmon.cuda_timed
    @gnnmon.gc_controlled
    def step(data: Any) -> float:
        torch.compiler.cudagraph_mark_step_begin()
        with gnnmon.phase("forward"):
            loss = F.cross_entropy(compiled(data.x, data.edge_index), data.y)
        with gnnmon.phase("backward"):
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss.detach())

    t0 = time.perf_counter()
    with gnnmon.collect(out / "compile.jsonl") as run:
        for _ in range(30):
            step(data)
    rows = run.records
    later = rows[5:]
    figures = {
        "rows": len(rows), "errors": [r["error"] for r in rows if r.get("error")],
        "first_compile_s": sum(r.get("compile_s") or 0.0 for r in rows[:5]),
        "later_compile_s": sum(r.get("compile_s") or 0.0 for r in later),
        "later_device_ms_median": sorted(r["device_s"] for r in later)[len(later) // 2] * 1e3,
        "later_wall_ms_median": sorted(r["wall_s"] for r in later)[len(later) // 2] * 1e3,
        "seconds": time.perf_counter() - t0,
    }
    ok = (len(rows) == 30 and not figures["errors"] and figures["first_compile_s"] > 0
          and figures["later_compile_s"] == 0 and all((r.get("device_s") or 0) > 0 for r in later))
    return ok, figures


CHECKS: dict[str, Callable[[Path, bool], Outcome]] = {
    "environment": environment, "install": install, "benchmark": benchmark, "energy": energy, "compile": compile_step,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", choices=sorted(CHECKS))
    parser.add_argument("--out", required=True, help="folder for NAME.json and what the check writes")
    parser.add_argument("--fake", action="store_true", help="against the tests' fake CUDA and NVML")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    patch = _install_fakes(out) if args.fake else None
    notes = ""
    claim = (FAKE_CLAIMS if args.fake else {}).get(args.name, CLAIMS[args.name])
    passed: bool | None
    try:
        passed, figures = CHECKS[args.name](out, args.fake)
    except Exception as exc:  # noqa: BLE001 - a check that breaks fails, and says how
        passed, figures = False, {}
        notes = f"{type(exc).__name__}: {exc}"
    finally:
        if patch is not None:
            patch.undo()
    (out / f"{args.name}.json").write_text(json.dumps(
        {"name": args.name, "claim": claim, "passed": passed, "figures": figures, "notes": notes, "fake": args.fake},
        indent=1, default=str))
    verdict = "not run" if passed is None else "pass" if passed else "FAIL"
    print(f"{args.name}: {verdict} — {claim}"
          + (f" ({notes or figures.get('skipped')})" if passed is None or notes else ""))
    return 1 if passed is False else 0


if __name__ == "__main__":
    sys.exit(main())

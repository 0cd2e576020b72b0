"""The largest batch size that fits: gnnmon's model-guided probes against halving and doubling.

The same GraphSAGE step as ``play/memory_forecast.py``'s ``sage`` study (64-128-128-10,
``NeighborLoader([10, 5])`` on the synthetic 100,000-node graph) runs on the CPU (``--device cuda``:
the GPU, its allocator's peak) under a simulated
capacity: a wrapper runs the ``@monitor_memory_device`` step, reads its measured peak (the absolute
one, ``mem_peak_bytes``: the process's RSS made exact by ``gnnmon.exact_host_memory()``) from the
row it just wrote, and when that peak is over the capacity raises
``RuntimeError("DefaultCPUAllocator: can't allocate memory: ...")``, the text Lightning's and
accelerate's out-of-memory detectors recognise. The capacity is the peak of a warm-up step at the
loader's batch size (512 seed nodes) plus ``--headroom`` (default 200 MiB), so every method meets
the same limit above the same process. Each method runs in a fresh process of its own (``--fork``:
in a process forked from one that imported torch, PyG, Lightning and accelerate once, the test's
shortcut):

* ``gnnmon``: ``gnnmon.calibrate(step, loader, capacity=..., fraction=...)`` (its calibration steps
  at 1/4-2x the batch size, its denser twins, then its probes and re-checks; a probe counts as
  under the target by the host's RSS resolution), at fraction 0.9 (its default) and 1.0 (no
  margin, as the others);
* ``lightning-power`` / ``lightning-binsearch``: ``Tuner.scale_batch_size`` on a LightningModule
  whose ``training_step`` runs the same step (manual optimisation), its defaults (``init_val`` 2,
  ``steps_per_trial`` 3, ``max_trials`` 25, ``max_val`` 8192; binsearch takes a 5 % margin off);
* ``accelerate-128`` / ``accelerate-8192``: ``find_executable_batch_size`` around a function that
  runs 3 steps at its batch size, from its default ``starting_batch_size`` of 128 and from 8,192
  (Lightning's ``max_val``): it only shrinks (by 0.9) from where it starts;
* ``exhaustive``: the true limits the others are measured against, at the target (0.9 x capacity)
  and at the capacity: bisection over 1-8,192 seeds to the last seed, each size judged by the
  heaviest of 3 batches drawn at it (what gnnmon's probe runs); its answers are the largest sizes
  that fit.

Trial steps: every call of the step the method made (an out-of-memory one included). Then a check
run of 5 batches at the size found, on a loader built for it after a garbage collection (a dropped
``NeighborLoader`` sits in a reference cycle and holds its copy of the graph's edges, 16 bytes an
edge, until one), gives its measured peak, against the target (0.9 x capacity) and the capacity.
For gnnmon, the budget ``gnnmon.forecast(loader, calibration, capacity).budget(fraction)`` gives
from the calibration's model is checked the same way: the search's bracket and the budget's
bounds are in the second table.

Run: ``python play/batch_size_search.py`` (about 10 minutes on 2 busy CPU cores), ``--tiny`` (the
test: a tenth of the graph). Writes ``runs/batch_size_search.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon.integrations.pyg_sampler import neighbor_loader
from gnnmon.report.memory.model import format_bytes
from play.memory_forecast import sage_graph, sage_step, train
from play.models import SAGE

METHODS = ("exhaustive", "gnnmon-0.9", "gnnmon-1.0", "lightning-power", "lightning-binsearch", "accelerate-128",
           "accelerate-8192")
FRACTION = 0.9
"""The target the table measures every method against: this share of the capacity."""
CHECK_STEPS = 5


class Capacity:
    """A simulated device of ``capacity`` bytes around a decorated step: a call whose measured peak
    (its gnnmon row's ``mem_peak_bytes``) is over it raises the device allocator's out-of-memory error."""

    def __init__(self, capacity: float, device: torch.device) -> None:
        self.capacity = capacity
        self.device = device
        self.calls: list[dict[str, Any]] = []

    def __call__(self, step: Callable[[Any], Any], batch: Any) -> None:
        step(batch)
        row = gnnmon.active_run().records[-1]
        peak = float(row["mem_peak_bytes"])
        seeds = getattr(batch, "batch_size", None)
        self.calls.append({"seeds": seeds, "num_nodes": row.get("num_nodes"), "peak_bytes": peak,
                           "oom": peak > self.capacity})
        if peak > self.capacity:
            said = (f"(simulated: the step peaked at {format_bytes(peak)} over a capacity of "
                    f"{format_bytes(self.capacity)})")
            if self.device.type == "cuda":  # the text each finder recognises for the device
                raise RuntimeError(f"CUDA out of memory. Tried to allocate {int(peak - self.capacity)} bytes {said}")
            raise RuntimeError(f"DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                               f"{int(peak - self.capacity)} bytes {said}")


def true_limit(fits: Callable[[int], bool], high: int) -> int:
    """The largest size in [0, high] that fits, by bisection to the last item (fits is taken as monotone)."""
    lo, hi = 0, high + 1  # lo fits (0: trivially), hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def run_method(method: str, tiny: bool, headroom: float, device_name: str = "cpu") -> dict[str, Any]:
    """One method in this process (see the module's docstring)."""
    import lightning.pytorch as pl  # imported by every method, so each process holds the same
    from accelerate.utils import find_executable_batch_size
    from lightning.pytorch.tuner import Tuner

    device = torch.device(device_name)
    if device.type == "cpu":
        gnnmon.exact_host_memory()
    torch.manual_seed(0)
    data = sage_graph(tiny)
    net = SAGE(data.num_features, 128, int(data.y.max()) + 1).to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
    base = 128 if tiny else 512

    def loader(batch_size: int) -> Any:
        return neighbor_loader(data, [10, 5], batch_size=batch_size, input_nodes=data.train_mask, shuffle=True)

    step = sage_step(net, optimizer, device)
    with gnnmon.collect() as run:
        train(step, [loader(base)], 2)
    capacity = max(r["mem_peak_bytes"] for r in run.records) + headroom
    gc.collect()  # the warm-up's loader, dropped, holds its copy of the graph's edges until collected
    sim = Capacity(capacity, device)
    out: dict[str, Any] = {"method": method, "capacity_bytes": capacity, "target_bytes": FRACTION * capacity}
    started = time.perf_counter()
    with gnnmon.collect():
        if method == "exhaustive":
            gen = torch.Generator().manual_seed(1)
            ordinary = loader(base)
            items = len(ordinary.dataset)  # a NodeLoader is called with positions among its seed nodes

            def heaviest_peak(size: int) -> float:
                drawn = [ordinary(torch.randperm(items, generator=gen)[:size]) for _ in range(3)]
                batch = max(drawn, key=lambda b: int(b.num_nodes) + int(b.num_edges))
                del drawn
                try:
                    sim(step, batch)
                except RuntimeError:
                    pass  # over the capacity: its peak is in sim.calls
                return float(sim.calls[-1]["peak_bytes"])

            high = min(8192, items)
            out["limits"] = {"target": true_limit(lambda k: heaviest_peak(k) <= FRACTION * capacity, high),
                             "capacity": true_limit(lambda k: heaviest_peak(k) <= capacity, high)}
            found = out["limits"]["target"]
        elif method.startswith("gnnmon"):
            fraction = float(method.split("-")[1])
            calibrating = loader(base)
            cal = gnnmon.calibrate(lambda b: sim(step, b), calibrating, capacity=capacity, fraction=fraction)
            assert cal.search is not None
            budget = gnnmon.forecast(calibrating, cal, capacity, progress=False).budget(fraction)
            out["budget"], out["budget_high"] = budget.batch_size, budget.batch_size_high
            calibrating = None  # the training loader is built at the size found; this one is collected below
            found = cal.search.batch_size
            out["probe_steps"] = len(cal.search.probes)
            out["recheck_steps"] = sum(bool(p.get("recheck")) for p in cal.search.probes)
            out["twin_steps"] = len(cal.twins)
            out["off_by"] = cal.search.off_by
            out["over"] = cal.search.over
            out["margin_bytes"] = cal.search.margin_bytes
            out["summary"] = cal.summary()
        elif method.startswith("lightning"):

            class Module(pl.LightningModule):
                def __init__(self) -> None:
                    super().__init__()
                    self.net = net
                    self.batch_size = 2
                    self.automatic_optimization = False

                def configure_optimizers(self) -> Any:
                    return torch.optim.Adam(self.net.parameters(), lr=0.01)

                def train_dataloader(self) -> Any:
                    return loader(self.batch_size)

                def training_step(self, batch: Any, index: int) -> None:
                    sim(sage_step(self.net, self.optimizers(), device, self.manual_backward), batch)

            with tempfile.TemporaryDirectory() as root:
                trainer = pl.Trainer(accelerator=device.type, devices=1, max_epochs=1, logger=False,
                                     enable_checkpointing=False, enable_progress_bar=False,
                                     enable_model_summary=False, use_distributed_sampler=False,
                                     default_root_dir=root)
                found = Tuner(trainer).scale_batch_size(Module(), mode=method.split("-")[1]) or 0
        else:
            start = int(method.split("-")[1])
            tries: list[int] = []

            @find_executable_batch_size(starting_batch_size=start)
            def trial(batch_size: int) -> int:
                tries.append(batch_size)
                train(lambda b: sim(step, b), [loader(batch_size)], 3)
                return batch_size

            found = trial()
            out["tried"] = tries
    out["seconds"] = time.perf_counter() - started
    out["trial_steps"] = len(sim.calls)
    out["oom_steps"] = sum(c["oom"] for c in sim.calls)
    out["batch_size"] = found
    out["calls"] = sim.calls
    for key, size in (("check_peak_bytes", found), ("budget_check_peak_bytes", out.get("budget", 0))):
        if size:
            gc.collect()  # a dropped NeighborLoader sits in a reference cycle, its copy of the graph's edges held
            with gnnmon.collect() as run:
                train(step, [loader(size)], CHECK_STEPS)
            out[key] = max(r["mem_peak_bytes"] for r in run.records if r["label"] == "train_step")
    return out


def run_forked(method: str, tiny: bool, headroom: float, device_name: str = "cpu") -> dict[str, Any]:
    """:func:`run_method` in a child forked from this process (which has imported what every method
    imports, and runs nothing itself): each method starts from the same process, one import for all."""
    import os
    import traceback

    import lightning.pytorch  # imported once, here, for every forked method
    import lightning.pytorch.tuner  # noqa: F401
    from accelerate.utils import find_executable_batch_size  # noqa: F401

    gc.freeze()  # the imports' objects stay out of the children's collections (Python's advice for fork)
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: the method's figures down the pipe, then out without the parent's clean-up
        os.close(read)
        code = 1
        try:
            with os.fdopen(write, "w") as pipe:
                pipe.write(json.dumps(run_method(method, tiny, headroom, device_name)))
            code = 0
        except BaseException:  # noqa: BLE001 - reported, then the exit status says it failed
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code:
        raise RuntimeError(f"the forked {method} run failed (exit {code})")
    return dict(json.loads(text))


NAMES = {"exhaustive": "exhaustive bisection (the true limit at 0.9 x capacity)",
         "gnnmon-0.9": "gnnmon.calibrate(capacity=, fraction=0.9)",
         "gnnmon-1.0": "gnnmon.calibrate(capacity=, fraction=1.0)",
         "lightning-power": "Lightning Tuner.scale_batch_size(mode='power')",
         "lightning-binsearch": "Lightning Tuner.scale_batch_size(mode='binsearch')",
         "accelerate-128": "accelerate find_executable_batch_size(starting_batch_size=128)",
         "accelerate-8192": "accelerate find_executable_batch_size(starting_batch_size=8192)"}


def _rechecks(n: int) -> str:
    return "a re-check" if n == 1 else "re-checks"


def markdown(results: list[dict[str, Any]], command: str, device: str = "cpu") -> str:
    lines = ["# The largest batch size that fits: probes against halving and doubling", "",
             f"`{command}` on {device}; the capacity is simulated (a step whose measured peak is over it "
             "raises the device allocator's out-of-memory error); the target is 90 % of it. Trial steps: the "
             f"step's calls during the search (out-of-memory ones included); check: the highest peak of "
             f"{CHECK_STEPS} batches at the size found.", "",
             "| method | trial steps | of which out of memory | batch size found | vs the true limit | check peak | "
             "vs target | vs capacity | wall time |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    limits = next((r["limits"] for r in results if "limits" in r), None)
    for r in results:
        steps = f"{r['trial_steps']}"
        if "probe_steps" in r:
            again = r.get("recheck_steps", 0)
            steps += (f" ({r['trial_steps'] - r['probe_steps'] - r['twin_steps']} calibration + {r['twin_steps']} "
                      f"twins + {r['probe_steps']} probes{f', {again} of them {_rechecks(again)}' if again else ''})")
        peak = r.get("check_peak_bytes")
        aims = "target" if r["method"] in ("exhaustive", "gnnmon-0.9") else "capacity"
        truth = limits[aims] if limits else None
        versus = f"{100 * (r['batch_size'] / truth - 1):+.1f} % of {truth:,}" if truth else "-"
        lines.append(f"| {NAMES[r['method']]} | {steps} | {r['oom_steps']} | {r['batch_size']:,} | {versus} | "
                     + (f"{format_bytes(peak)} | {100 * (peak / r['target_bytes'] - 1):+.1f} % | "
                        f"{100 * (peak / r['capacity_bytes'] - 1):+.1f} %" if peak else "- | - | -")
                     + f" | {r['seconds']:.0f} s |")
    gnn = [r for r in results if "budget" in r]
    if gnn:
        lines += ["", "| method | search: answer, bracket | budget: batch_size, bounds | search's check | "
                      "budget's check | target |", "| --- | --- | --- | ---: | ---: | ---: |"]
        for r in gnn:
            top = f"{r['over'] - 1:,}" if r.get("over") else "every item"
            checks = [format_bytes(r[k]) if r.get(k) else "-" for k in ("check_peak_bytes", "budget_check_peak_bytes")]
            lines.append(f"| {NAMES[r['method']]} | {r['batch_size']:,}, limit {r['batch_size']:,}-{top} | "
                         f"{r['budget']:,}, limit {r['budget']:,}-{r['budget_high']:,} | {checks[0]} | {checks[1]} | "
                         f"{format_bytes(r['target_bytes'] if r['method'] != 'gnnmon-1.0' else r['capacity_bytes'])} |")
    caps = sorted({format_bytes(r["capacity_bytes"]) for r in results})
    lines += ["", f"Capacity (warm-up peak + headroom, per process): {', '.join(caps)}."]
    if limits:
        lines.append(f"True limits (exhaustive bisection, heaviest of 3 batches per size): {limits['target']:,} seeds "
                     f"at 0.9 x capacity (gnnmon at 0.9 is measured against it), {limits['capacity']:,} at the "
                     "capacity (the others).")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a tenth of the graph (the test)")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (the capacity simulated on its allocator's peak)")
    parser.add_argument("--headroom", type=float, help="MiB above the warm-up step's peak (default 200; 30 tiny)")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--fork", action="store_true",
                        help="one fresh process imports everything once and forks a child per method")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="runs")
    args = parser.parse_args(argv)
    headroom = (args.headroom if args.headroom is not None else 30 if args.tiny else 200) * 2**20
    if args.child:  # the methods, comma-separated (several only with --fork): a JSON list on the last line
        run = run_forked if args.fork else run_method
        print(json.dumps([run(m, args.tiny, headroom, args.device) for m in args.child.split(",")]))
        return 0
    methods = args.methods.split(",")
    results: list[dict[str, Any]] = []
    for group in [methods] if args.fork else [[m] for m in methods]:
        cmd = [sys.executable, __file__, "--child", ",".join(group), "--headroom", str(headroom / 2**20),
               "--device", args.device]
        cmd += ["--tiny"] if args.tiny else []
        done = subprocess.run(cmd + (["--fork"] if args.fork else []), capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{', '.join(group)} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        results += json.loads(done.stdout.strip().splitlines()[-1])
        for r in results[-len(group):]:
            print(f"{r['method']}: batch size {r['batch_size']}, {r['trial_steps']} trial steps", file=sys.stderr)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python play/batch_size_search.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(results, command.strip(), args.device)
    (out / "batch_size_search.md").write_text(text)
    (out / "batch_size_search.json").write_text(json.dumps(results, indent=1, default=str))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""gnnmon on a CUDA device, side by side with a bare loop, a hand-written floor and the peers.

Run through ``benchmarks/run.py --device cuda``. Three parts:

* **call costs**: the median cost of each call a monitor can make on the step's path (allocator
  statistics, events, streams, host memory counters, NVML), and of gnnmon's own windows;
* **realistic loop**: a two-layer GCN (hidden 256) on the Flickr stand-in, NeighborLoader fanouts
  [10, 5], batch 1024 (about 37,000 nodes a batch), the batches sampled once and moved to the
  device beforehand; every variant timed over a pass of steps ended by a device synchronize,
  right after a bare pass, in shuffled order, over several rounds (the figure is the median of
  the ratios to the adjacent bare pass). The same loop with ``loss.item()`` every step (a sync
  per step: no CPU/GPU overlap left to hide the monitor's work) is measured too;
* **tiny loop**: one small kernel launch per call, which exposes the per-call cost.

The same code runs against the fake ``torch.cuda`` of the tests (``fake=True``: tensors stay on
the CPU, the monitors are pointed at ``cuda:0``), so that this path is exercised by CI where no GPU
exists; numbers from that mode mean nothing and are labelled so.
"""

from __future__ import annotations

import contextlib
import gc
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device, phase
from gnnmon.data.format import POINT
from gnnmon.data.read import read_lines
from gnnmon.devices.cuda import cuda_uuids

if TYPE_CHECKING:  # PyG is imported by the realistic loop alone: the energy check runs without it
    from play.models import GCN


def _median_us(fn: Callable[[], Any], calls: int, repeats: int = 5) -> float:
    """Median over ``repeats`` of the mean cost of ``fn`` over ``calls`` calls, in µs."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter_ns() - t0) / calls / 1e3)
    return statistics.median(out)


# -- call costs ---------------------------------------------------------------------------------

def _clear_backends() -> None:
    try:
        from gnnmon.devices import clear_backends
    except ImportError:  # gnnmon before the package was regrouped (--before)
        from gnnmon.backends import clear_backends  # type: ignore[no-redef]
    clear_backends()


def call_costs(device: torch.device, calls: int) -> list[dict[str, Any]]:
    """What each call a monitor can make costs here (µs, median)."""
    from gnnmon.devices import backend_for
    from gnnmon.devices.rss import RssCounter

    index = device.index or 0
    x = torch.ones(1024, device="cpu" if _is_fake() else device)
    torch.cuda.synchronize(index)
    rows: list[dict[str, Any]] = []

    def add(name: str, fn: Callable[[], Any], n: int = calls, note: str = "") -> None:
        try:
            rows.append({"call": name, "us": _median_us(fn, n), "note": note})
        except Exception as exc:  # noqa: BLE001 - a call this torch lacks: say so, go on
            rows.append({"call": name, "us": None, "note": f"not available: {type(exc).__name__}: {exc}"})

    add("torch.cuda.memory_stats(i) (flat dict, built in Python)", lambda: torch.cuda.memory_stats(index), calls // 4)
    add("torch.cuda.memory_allocated(i)", lambda: torch.cuda.memory_allocated(index), calls // 4)
    add("torch.cuda.memory_stats_as_nested_dict(i)", lambda: torch.cuda.memory_stats_as_nested_dict(index))
    add("torch._C._cuda_memoryStats(i) (what gnnmon reads, twice a row)",
        lambda: torch._C._cuda_memoryStats(index))
    add("torch._C._accelerator_getDeviceStats(i)", lambda: torch._C._accelerator_getDeviceStats(index))
    add("torch.cuda.reset_peak_memory_stats(i)", lambda: torch.cuda.reset_peak_memory_stats(index))
    add("torch.cuda.Event(enable_timing=True)", lambda: torch.cuda.Event(enable_timing=True))
    ev = torch.cuda.Event(enable_timing=True)
    add("event.record() (builds a Stream object per call)", lambda: ev.record())
    backend = backend_for(device)
    stream = backend.current_stream()
    add("event.record(cached stream)", lambda: ev.record(stream))
    add("torch._C._cuda_getCurrentStream(i)", lambda: torch._C._cuda_getCurrentStream(index))
    add("gnnmon: pooled event recorded on the current stream",
        lambda: backend.release_event(backend.record_event()))
    add("event.query()", lambda: ev.query())
    torch.cuda.synchronize(index)
    add("torch.cuda.synchronize() on an idle device", lambda: torch.cuda.synchronize(index), calls // 4)
    add("gnnmon: CUDA memory window (open + close)",
        lambda: backend.close_window(backend.open_window(0.005)), calls // 2)
    counter = RssCounter()
    add("host RSS + high-water mark (statm + getrusage)", counter.read)
    add("host high-water mark reset (clear_refs write)", counter.reset, calls // 4)
    from gnnmon.devices.host import HOST

    add("gnnmon: host memory window (open + close)", lambda: HOST.close(HOST.open(False, 0.005)), calls // 2)
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        add("nvmlDeviceGetTotalEnergyConsumption", lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle), 20)
        add("nvmlDeviceGetPowerUsage", lambda: pynvml.nvmlDeviceGetPowerUsage(handle), 200)
        add("nvmlDeviceGetUtilizationRates", lambda: pynvml.nvmlDeviceGetUtilizationRates(handle), 200)
        add("nvmlDeviceGetMemoryInfo", lambda: pynvml.nvmlDeviceGetMemoryInfo(handle), 200)
        pynvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - no NVML here
        rows.append({"call": "NVML", "us": None, "note": f"not measured: {exc}"})

    def empty(x: torch.Tensor) -> torch.Tensor:
        return x

    stacked = monitor_memory_device(device=device)(cuda_timed(device=device)(gc_controlled(empty)))
    timed_gc = cuda_timed(device=device)(gc_controlled(empty))
    with gnnmon.collect(max_records=100) as run:
        add("gnnmon: full stack on an empty function (no phase)", lambda: stacked(x), calls // 2)
        add("gnnmon: timing + GC on an empty function", lambda: timed_gc(x), calls // 2)
        run.flush()
    return rows


# -- the realistic loop -------------------------------------------------------------------------

class Realistic:
    """The GCN train step and its fixed batches, on ``device`` (or on the CPU under the fake)."""

    def __init__(self, device: torch.device, scale: float, batches: int, hidden: int = 256) -> None:
        from gnnmon.integrations.pyg_sampler import neighbor_loader
        from play.models import GCN
        from play.synthetic import FLICKR, planted_partition

        spec = FLICKR if scale == 1.0 else FLICKR.scaled(scale)
        data = planted_partition(spec)
        loader = neighbor_loader(data, [10, 5], batch_size=1024 if scale == 1.0 else 64,
                             input_nodes=data.train_mask, shuffle=True)
        self.sampler = loader.sampler_name
        it = iter(loader)
        self.place = torch.device("cpu") if _is_fake() else device
        self.batches = [next(it).to(self.place) for _ in range(batches)]
        self.nodes = statistics.mean(b.num_nodes for b in self.batches)
        self.edges = statistics.mean(b.num_edges for b in self.batches)
        torch.manual_seed(0)
        self.model = GCN(spec.num_features, hidden, spec.num_classes).to(self.place)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=0.01)

    def args(self, i: int) -> tuple[Any, ...]:
        return self.model, self.batches[i % len(self.batches)], self.opt


def plain_step(model: GCN, batch: Any, opt: torch.optim.Optimizer) -> torch.Tensor:
    out = model(batch.x, batch.edge_index)
    loss = F.cross_entropy(out[: batch.batch_size], batch.y[: batch.batch_size])
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def phased_step(model: GCN, batch: Any, opt: torch.optim.Optimizer) -> torch.Tensor:
    with phase("forward"):
        out = model(batch.x, batch.edge_index)
        loss = F.cross_entropy(out[: batch.batch_size], batch.y[: batch.batch_size])
    with phase("backward"):
        loss.backward()
    with phase("optimizer"):
        opt.step()
        opt.zero_grad(set_to_none=True)
    return loss.detach()


class Floor:
    """The same figures written by hand, as cheaply as we know how: events from a pool recorded
    on a cached stream at the step's and each phase's ends, the nested allocator statistics read
    before and after (peak reset first), GC off inside. No file, no row objects."""

    def __init__(self, device: torch.device) -> None:
        self.index = device.index or 0
        self.pool: list[Any] = []
        self.kept: list[tuple[Any, ...]] = []
        self.stream = torch.cuda.current_stream(self.index)
        self.stats = torch._C._cuda_memoryStats

    def _ev(self) -> Any:
        ev = self.pool.pop() if self.pool else torch.cuda.Event(enable_timing=True)
        ev.record(self.stream)
        return ev

    def step(self, model: GCN, batch: Any, opt: torch.optim.Optimizer) -> torch.Tensor:
        gc.disable()
        try:
            torch.cuda.reset_peak_memory_stats(self.index)
            s0 = self.stats(self.index)["allocated_bytes"]["all"]["current"]
            e = [self._ev()]
            out = model(batch.x, batch.edge_index)
            loss = F.cross_entropy(out[: batch.batch_size], batch.y[: batch.batch_size])
            e.append(self._ev())
            e.append(self._ev())
            loss.backward()
            e.append(self._ev())
            e.append(self._ev())
            opt.step()
            opt.zero_grad(set_to_none=True)
            e.append(self._ev())
            s1 = self.stats(self.index)["allocated_bytes"]["all"]
            self.kept.append((s0, s1["current"], s1["peak"], e))
            return loss.detach()
        finally:
            gc.enable()

    def resolve(self) -> None:
        for _, _, _, events in self.kept:
            for a, b in zip(events[::2], events[1::2], strict=True):
                a.elapsed_time(b)
            self.pool.extend(events)
        self.kept.clear()


def _profileit_step() -> Callable[..., Any]:
    from torch_geometric.profile import profileit

    @profileit("cuda")
    def step(model: GCN, opt: torch.optim.Optimizer, x: torch.Tensor, edge_index: torch.Tensor,
             y: torch.Tensor, batch_size: int) -> float:
        out = model(x, edge_index)
        loss = F.cross_entropy(out[:batch_size], y[:batch_size])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss)

    return lambda model, batch, opt: step(model, opt, batch.x, batch.edge_index, batch.y, batch.batch_size)


def realistic_variants(device: torch.device, tmp: Path, item: bool) -> dict[str, tuple[Callable, Any, Any]]:
    """name -> (step, context factory around a pass or None, after-pass hook or None)."""
    dev = device

    def run_in(**options: Any) -> Callable[[], Any]:
        return lambda: gnnmon.collect(tmp / "gpu.jsonl", max_records=200, **options)

    def with_item(fn: Callable) -> Callable:
        if not item:
            return fn

        def step(*a: Any) -> Any:
            loss = fn(*a)
            loss.item()  # a sync per step, as many loops do to log the loss
            return loss

        return step

    floor = Floor(dev)
    full = monitor_memory_device(device=dev)(cuda_timed(device=dev)(gc_controlled(phased_step)))
    variants: dict[str, tuple[Callable, Any, Any]] = {
        "bare": (with_item(plain_step), None, None),
        "bare (again: the noise floor)": (with_item(plain_step), None, None),
        "hand-written floor (pooled events, raw counters, GC off)": (with_item(floor.step), None, floor.resolve),
        "gnnmon full stack, phases inside": (with_item(full), run_in(), None),
    }
    if not item:
        variants.update({
            "@monitor_memory_device alone": (monitor_memory_device(device=dev)(plain_step), run_in(), None),
            "@cuda_timed alone (events)": (cuda_timed(device=dev)(plain_step), run_in(), None),
            "@gc_controlled alone": (gc_controlled(plain_step), run_in(), None),
            "gnnmon full stack + collect(path, sample=0.5, energy=True)": (
                full, run_in(sample=0.5, energy=True), None),
            "gnnmon full stack + collect(path, sample=0.1, energy=True)": (
                full, run_in(sample=0.1, energy=True), None),
            "gnnmon full stack, sync='sync'": (
                monitor_memory_device(device=dev)(cuda_timed(device=dev, sync="sync")(gc_controlled(phased_step))),
                run_in(), None),
            "torch_geometric.profile.profileit": (_profileit_step(), None, None),
        })
    return variants


SLOW = ("torch_geometric.profile.profileit",)
"""Variants that cost many times a step: timed over fewer steps (the ratio is per step)."""


def run_interleaved(name: str, variants: dict[str, tuple[Callable, Any, Any]], make_args: Callable[[int], tuple],
                    steps: int, rounds: int, sync: Callable[[], None], slow_steps: int,
                    settle: bool = True) -> list[dict[str, Any]]:
    """Each round runs every variant once, in shuffled order, each right after a bare pass of as
    many steps; a pass ends with a device synchronize (and, with ``settle``, starts after a
    ``gc.collect()``). Median over rounds of the ratio."""
    names = list(variants)
    n_steps = {n: (slow_steps if n in SLOW else steps) for n in names}
    ratio: dict[str, list[float]] = {n: [] for n in names}
    per_step: dict[str, list[float]] = {n: [] for n in names}
    bare_s: list[float] = []
    notes: dict[str, str] = {}

    def one_pass(n: str, count: int) -> float:
        fn, ctx, after = variants[n]
        if settle:
            gc.collect()
        sync()
        with ctx() if ctx else contextlib.nullcontext():
            t0 = time.perf_counter()
            for i in range(count):
                fn(*make_args(i))
            sync()
            t = (time.perf_counter() - t0) / count
        if after is not None:
            after()
        return t

    for n in names:  # warm-up: first calls, allocator growth, event pools
        try:
            one_pass(n, min(3, n_steps[n]))
        except Exception as exc:  # noqa: BLE001 - a peer that cannot run here is reported, not fatal
            notes[n] = f"not run: {type(exc).__name__}: {exc}"
    for _ in range(rounds):
        order = [n for n in names if n != "bare" and n not in notes]
        random.shuffle(order)
        for n in order:
            b = one_pass("bare", n_steps[n])
            t = one_pass(n, n_steps[n])
            ratio[n].append(t / b)
            per_step[n].append((t - b) * 1e6)
            bare_s.append(b)
    out = []
    for n in names:
        if n == "bare":
            out.append({"loop": name, "variant": n, "ratio": 1.0, "per_step_us": 0.0,
                        "bare_step_us": statistics.median(bare_s) * 1e6 if bare_s else None, "note": ""})
        elif n in notes:
            out.append({"loop": name, "variant": n, "ratio": None, "per_step_us": None, "bare_step_us": None,
                        "note": notes[n]})
        else:
            out.append({"loop": name, "variant": n, "ratio": statistics.median(ratio[n]),
                        "per_step_us": statistics.median(per_step[n]),
                        "bare_step_us": statistics.median(bare_s) * 1e6, "note": ""})
    return out


# -- the tiny launch-bound loop -------------------------------------------------------------------

def tiny_variants(device: torch.device, tmp: Path) -> dict[str, tuple[Callable, Any, Any]]:
    def add_one(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    def run_in(**options: Any) -> Callable[[], Any]:
        return lambda: gnnmon.collect(tmp / "tiny.jsonl", max_records=200, **options)

    dev = device
    return {
        "bare": (add_one, None, None),
        "bare (again: the noise floor)": (add_one, None, None),
        "@cuda_timed (events)": (cuda_timed(device=dev)(add_one), run_in(), None),
        "@monitor_memory_device": (monitor_memory_device(device=dev)(add_one), run_in(), None),
        "timing + GC": (cuda_timed(device=dev)(gc_controlled(add_one)), run_in(), None),
        "full stack": (monitor_memory_device(device=dev)(cuda_timed(device=dev)(gc_controlled(add_one))),
                       run_in(), None),
        "full stack, rows in memory (no file)": (
            monitor_memory_device(device=dev)(cuda_timed(device=dev)(gc_controlled(add_one))),
            lambda: gnnmon.collect(max_records=200), None),
    }


# -- accuracy on the device -----------------------------------------------------------------------

def accuracy(device: torch.device) -> dict[str, Any]:
    """Planted allocations and planted GPU sleeps, read back through gnnmon. The truth for a sleep
    is its own pair of raw events (``torch.cuda._sleep`` counts clock cycles, and the clock moves
    with load); the nominal length comes from a calibration after a warm-up."""
    MiB = 2**20
    index = device.index or 0
    mem = []
    for size in (2, 16, 256, 1024):
        with gnnmon.collect() as run:
            with gnnmon.memory_scope(device=device) as f:
                t = torch.empty(size * MiB, dtype=torch.uint8, device=device)
                t.fill_(1)
                del t
        mem.append({"planted_mib": size, "read_mib": f["mem_peak_delta_bytes"] / MiB, "rows": len(run.records)})
    torch.cuda.synchronize(index)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rate = 1e9
    for cycles in (300_000_000, 50_000_000):  # the first warms the clock up
        a.record()
        torch.cuda._sleep(cycles)
        b.record()
        b.synchronize()
        rate = cycles / (a.elapsed_time(b) / 1e3)
    times = []
    for nominal in (0.001, 0.01, 0.1):
        truths: list[tuple[Any, Any]] = []

        @cuda_timed(device=device)
        def sleep(s: float = nominal, out: list = truths) -> None:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            torch.cuda._sleep(int(s * rate))
            e1.record()
            out.append((e0, e1))

        with gnnmon.collect() as run:
            for _ in range(6):
                sleep()
        errors = []
        for row, (e0, e1) in zip(run.records[1:], truths[1:], strict=True):
            e1.synchronize()
            truth = e0.elapsed_time(e1) / 1e3
            errors.append((row["device_s"] - truth) / truth)
        got = statistics.median(r["device_s"] for r in run.records[1:])
        times.append({"planted_s": nominal, "device_s": got, "error_pct": 100 * statistics.median(errors),
                      "worst_error_pct": 100 * max(errors, key=abs)})
    return {"memory": mem, "time": times}


def bracket_err_ns(points: list[dict[str, Any]], t_ns: int) -> int:
    """The larger placing error (ns) of the two points on either side of ``t_ns``."""
    before = [p for p in points if p["t_ns"] <= t_ns]
    after = [p for p in points if p["t_ns"] > t_ns]
    near = [max(before, key=lambda p: p["t_ns"])] if before else []
    near += [min(after, key=lambda p: p["t_ns"])] if after else []
    return max((p["err_ns"] for p in near), default=0)


def energy_split(device: torch.device, rows: int, row_s: float) -> dict[str, Any]:
    """A matmul loop split into rows of ``row_s`` seconds (a synchronize closes each), with
    ``collect(sample=0.1, energy=True)``: the rows' energy against NVML's counter read directly
    here, right at a step before the first row and at the first step after the last. Reported:
    the rows' sum, the gaps between them, gnnmon's own figure for the directly read window, and
    the direct delta."""
    try:
        import pynvml

        pynvml.nvmlInit()
        uuids = cuda_uuids()[0] or []
        index = device.index or 0
        handle = (pynvml.nvmlDeviceGetHandleByUUID(uuids[index]) if uuids
                  else pynvml.nvmlDeviceGetHandleByIndex(index))
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception as exc:  # noqa: BLE001 - no NVML, no counter: say so
        return {"skipped": f"no NVML energy counter: {type(exc).__name__}: {exc}"}

    def at_step() -> tuple[float, int, int]:
        """The counter's value at its next step (J), when that step was (epoch ns: midway between
        the start of the last read that showed the old value and the end of the one that showed
        the new), and how far either way it may have been (ns): a busy machine widens that."""
        v0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        before = time.time_ns()
        while True:
            t0 = time.time_ns()
            v = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
            t1 = time.time_ns()
            if v != v0:
                return v / 1e3, (before + t1) // 2, (t1 - before) // 2
            before = t0

    place = torch.device("cpu") if _is_fake() else device
    n = 256 if _is_fake() else 4096
    a, b = torch.randn(n, n, device=place), torch.randn(n, n, device=place) / n**0.5
    key = f"gpu{device.index or 0}_energy_mj"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "split.jsonl"
        with gnnmon.collect(path, sample=0.1, energy=True) as run:
            e_a, t_a, err_a = at_step()
            for _ in range(rows):
                with gnnmon.timed(device=device, label="matmul"):
                    t = time.perf_counter()
                    while time.perf_counter() - t < row_s:
                        for _ in range(8):
                            a = (a @ b).clamp_(-1.0, 1.0)
                        torch.cuda.synchronize(device)
            e_b, t_b, err_b = at_step()
        # the points as the file keeps them: each with its placing error (err_ns)
        points = [p for p in read_lines(path) if p.get("type") == POINT and p["key"] == key]
    pynvml.nvmlShutdown()
    records = run.records
    report = run.report().energy()
    balance = report.get("balance", {}).get(key, {})
    window = run.counters.delta(key, t_a, t_b)
    direct = e_b - e_a
    # how far the window may be off from its ends' placing alone, at the window's mean power: the
    # direct reads' brackets, and at each end the larger err_ns of gnnmon's two points around it
    # (the end is interpolated between them: at steady power it moves by at most the larger of their
    # misplacings, whichever of them is nearer: the nearer one's err_ns alone may fall short)
    near = [bracket_err_ns(points, t) for t in (t_a, t_b)]
    placing_s = (err_a + err_b + sum(near)) / 1e9
    watts = direct / ((t_b - t_a) / 1e9) if t_b > t_a else 0.0
    rows_j = sum(r["energy_gpu_j"] for r in records if isinstance(r.get("energy_gpu_j"), float))
    rows_s = sum((r["t_end_ns"] - r["t_start_ns"]) / 1e9 for r in records)
    # how far the rows' sum may be off from placing alone: each row's ends fall between two of the
    # counter's steps, each placed within its point's err_ns (a busy machine widens them)
    rows_placing_s = sum(bracket_err_ns(points, r[end]) for r in records for end in ("t_start_ns", "t_end_ns")) / 1e9
    return {"rows": len(records), "row_s": row_s, "rows_s": rows_s, "rows_j": rows_j,
            "gaps_j": balance.get("gaps_j"),
            "period_s": balance.get("period_s"), "direct_j": direct,
            "gnnmon_window_j": None if window is None else window / 1e3,
            "window_error_pct": None if window is None or not direct else 100 * (window / 1e3 / direct - 1),
            "placing_s": placing_s,
            "placing_pct": 100 * watts * placing_s / direct if direct else None,
            "rows_placing_s": rows_placing_s,
            "rows_share_of_direct_pct": 100 * rows_j / direct if direct else None,
            "sources": sorted({str(r.get("energy_gpu_j_source")) for r in records}),
            "sampler": run.sampler_stats.get("counters", {}).get(key)}


# -- all of it ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sizes:
    """How much of each part runs: calls per call-cost figure; the realistic loop's stand-in scale,
    batches, steps a pass, rounds and warm-up steps; the tiny loop's calls a pass and rounds; the
    energy split's rows and seconds a row; the kill part's trials; whether each pass of the loops
    starts after a ``gc.collect()`` (a quarter of a second with PyG loaded, on a 2-core machine:
    at the quick size, most of its time)."""

    calls: int
    scale: float
    batches: int
    steps: int
    rounds: int
    warmup: int
    tiny_calls: int
    tiny_rounds: int
    energy_rows: int
    energy_row_s: float
    kill_trials: int
    settle: bool = True


SIZES = {
    "quick": Sizes(20, 0.01, 2, 2, 1, 1, 20, 1, 3, 0.1, 1, settle=False),  # every part once: the tests, on the fake
    "check": Sizes(500, 1.0, 20, 20, 4, 4, 1000, 4, 10, 0.3, 3),  # the GPU acceptance run (make gpu-check)
    "full": Sizes(2000, 1.0, 40, 40, 7, 8, 2000, 7, 20, 0.3, 10),  # about 170 s on an H100
}

_FAKE = [False]


def _is_fake() -> bool:
    return _FAKE[0]


def run_gpu(tmp: Path, sizes: Sizes, device: str = "cuda:0", fake: bool = False,
            before: bool = False) -> dict[str, Any]:
    """Every part at ``sizes``; ``fake``: against the tests' fake ``torch.cuda`` (tensors stay on
    the CPU; no accuracy part); ``before``: only the loops (public API only)."""
    dev = torch.device(device)
    _clear_backends()
    _FAKE[0] = fake
    index = dev.index or 0
    z = sizes
    results: dict[str, Any] = {"fake": fake, "device_name": "fake CUDA (tests/fakes.py)" if fake
                               else torch.cuda.get_device_name(index)}
    results["gnnmon"] = str(Path(gnnmon.__file__).parent)
    if not before:
        print("gpu: call costs ...", flush=True)
        results["calls"] = call_costs(dev, z.calls)

    def sync() -> None:
        torch.cuda.synchronize(index)

    print("gpu: realistic GCN loop ...", flush=True)
    loop = Realistic(dev, z.scale, z.batches)
    results["loop"] = {"sampler": loop.sampler, "nodes": loop.nodes, "edges": loop.edges,
                       "batches": len(loop.batches)}
    results["overhead"] = run_interleaved(
        "GCN step", realistic_variants(dev, tmp, item=False), loop.args, z.steps, z.rounds, sync, z.warmup, z.settle)
    results["overhead"] += run_interleaved(
        "GCN step + loss.item()", realistic_variants(dev, tmp, item=True), loop.args, z.steps, z.rounds, sync, 2,
        z.settle)
    print("gpu: tiny loop ...", flush=True)
    x = torch.ones(1024, device="cpu" if fake else dev)
    results["overhead"] += run_interleaved(
        "tiny step (x + 1)", tiny_variants(dev, tmp), lambda i: (x,), z.tiny_calls, z.tiny_rounds, sync, 50, z.settle)
    if not fake and not before:
        print("gpu: accuracy ...", flush=True)
        results["accuracy"] = accuracy(dev)
    if not before:
        print(f"gpu: energy of {z.energy_row_s:g} s rows against the NVML counter ...", flush=True)
        results["energy_split"] = energy_split(dev, z.energy_rows, z.energy_row_s)
    _clear_backends()
    return results


def markdown(r: dict[str, Any]) -> list[str]:
    out = [f"## On {r['device_name']}" + (" — FAKE device: numbers mean nothing" if r["fake"] else ""), "",
           f"gnnmon measured: `{r['gnnmon']}`", ""]
    loop = r["loop"]
    out += [f"Realistic loop: GCN (hidden 256) on the Flickr stand-in, {loop['batches']} batches of "
            f"{loop['nodes']:,.0f} nodes and {loop['edges']:,.0f} edges on average (sampler: "
            f"{loop['sampler']}).", ""]
    out += ["### Overhead (median over rounds of the ratio to an adjacent bare pass; a pass ends "
            "with a device synchronize)", "",
            "| loop | variant | ratio to bare | cost per step µs | bare step µs | note |",
            "| --- | --- | ---: | ---: | ---: | --- |"]
    for o in r["overhead"]:
        ratio = "–" if o["ratio"] is None else f"{o['ratio']:.3f}x"
        cost = "–" if o["per_step_us"] is None else f"{o['per_step_us']:,.1f}"
        bare = "–" if o["bare_step_us"] is None else f"{o['bare_step_us']:,.1f}"
        out.append(f"| {o['loop']} | {o['variant']} | {ratio} | {cost} | {bare} | {o['note']} |")
    out += ["", "### What each call costs here (µs, median)", "", "| call | µs | note |", "| --- | ---: | --- |"]
    for c in r.get("calls", []):
        us = "–" if c["us"] is None else f"{c['us']:,.2f}"
        out.append(f"| {c['call']} | {us} | {c['note']} |")
    if "accuracy" in r:
        acc = r["accuracy"]
        out += ["", "### Accuracy on the device", "", "| planted allocation MiB | read MiB |", "| ---: | ---: |"]
        out += [f"| {m['planted_mib']} | {m['read_mib']:.3f} |" for m in acc["memory"]]
        out += ["", "| planted GPU sleep (nominal) | device_s read (median) | error vs the sleep's own "
                "events (median) | worst of 5 |", "| ---: | ---: | ---: | ---: |"]
        out += [f"| {t['planted_s'] * 1e3:g} ms | {t['device_s'] * 1e3:.4f} ms | {t['error_pct']:+.3f} % | "
                f"{t['worst_error_pct']:+.3f} % |" for t in acc["time"]]
    split = r.get("energy_split")
    if split:
        out += ["", "### Energy of a matmul loop split into rows, against NVML's counter", ""]
        if "skipped" in split:
            out.append(f"Not run: {split['skipped']}.")
        else:
            def j(v: float | None) -> str:
                return "–" if v is None else f"{v:,.2f}"

            def pct(v: float | None, sign: str = "+") -> str:
                return "–" if v is None else f"{v:{sign}.2f} %"

            step = "–" if split["period_s"] is None else f"{split['period_s'] * 1e3:.1f} ms"
            out += [f"{split['rows']} rows of {split['row_s']:g} s, `collect(sample=0.1, energy=True)`; "
                    f"sources: {', '.join(split['sources'])}; counter step {step}.", "",
                    "| rows J | gaps J | gnnmon over the directly read window J | direct counter delta J | "
                    "window error | rows' share of the direct delta |",
                    "| ---: | ---: | ---: | ---: | ---: | ---: |",
                    f"| {j(split['rows_j'])} | {j(split['gaps_j'])} | {j(split['gnnmon_window_j'])} | "
                    f"{j(split['direct_j'])} | {pct(split['window_error_pct'])} | "
                    f"{pct(split['rows_share_of_direct_pct'], '')} |"]
    out.append("")
    return out

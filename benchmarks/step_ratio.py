"""What gnnmon adds to a short CPU training step, as a ratio, and what a row costs there.

Run: ``.venv/bin/python benchmarks/step_ratio.py`` (about a minute on 2 CPU cores; ``--quick``:
seconds; ``--parts``: also a cold ``@cuda_timed`` row with each of its parts stubbed out). The step
is a two-layer GCN's forward, backward and Adam update on a fixed 1,000-node graph (PyG's
``GCNConv``): 1.5-1.7 ms on this project's VM, issue 65's "~1.4 ms torch step". Inside
``collect(path)`` (rows streamed to a file), bare and instrumented calls alternate, each pair in one
order or the other at random; the figure is ``1 + median(instrumented - bare) / median(bare)`` over
the pairs, so that the machine's drift between pairs cancels. The decorators are written as users
write them (no device argument): the full stack ``@monitor_memory_device @cuda_timed
@gc_controlled`` with three phases, and ``@cuda_timed @gc_controlled`` ("timing + GC"). Issue 65's
limits: 1.02x and 1.01x.

"Row, cold" is the same decorators around an empty function, called right after each bare step: a
row's own µs when the step has just filled the caches with its tensors, as in training. It is
several times what a loop of decorated no-ops measures ("row, warm": ``benchmarks/house_costs.py``,
``stream.py``), and "added" exceeds it by what the row's code and data evict from the step's: on a
real step gnnmon costs what it touches, not only what it runs.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device, phase

LIMITS = {"full stack + 3 phases": 1.02, "timing + GC": 1.01}


def make_step() -> tuple[Callable[[], None], dict[str, Callable[[], None]]]:
    """The bare step and its two instrumented twins."""
    from torch_geometric.nn import GCNConv

    torch.manual_seed(0)
    nodes, edges = 1000, 5000
    x = torch.randn(nodes, 32)
    edge_index = torch.randint(0, nodes, (2, edges))
    y = torch.randint(0, 4, (nodes,))
    conv1, conv2 = GCNConv(32, 32, cached=True), GCNConv(32, 4, cached=True)
    params = list(conv1.parameters()) + list(conv2.parameters())
    opt = torch.optim.Adam(params, lr=0.01)

    def body(three_phases: bool) -> None:
        if three_phases:
            with phase("forward"):
                loss = torch.nn.functional.cross_entropy(conv2(conv1(x, edge_index).relu(), edge_index), y)
            with phase("backward"):
                opt.zero_grad()
                loss.backward()
            with phase("optimizer"):
                opt.step()
            return
        loss = torch.nn.functional.cross_entropy(conv2(conv1(x, edge_index).relu(), edge_index), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    def bare() -> None:
        body(False)

    @monitor_memory_device
    @cuda_timed
    @gc_controlled
    def full() -> None:
        body(True)

    @cuda_timed
    @gc_controlled
    def timing_gc() -> None:
        body(False)

    return bare, {"full stack + 3 phases": full, "timing + GC": timing_gc}


def empty_forms() -> dict[str, Callable[[], None]]:
    """The same decorators around an empty function (their row alone)."""

    @monitor_memory_device
    @cuda_timed
    @gc_controlled
    def full() -> None:
        with phase("forward"):
            pass
        with phase("backward"):
            pass
        with phase("optimizer"):
            pass

    @cuda_timed
    @gc_controlled
    def timing_gc() -> None:
        pass

    return {"full stack + 3 phases": full, "timing + GC": timing_gc}


def cold_and_warm(bare: Callable[[], Any], empty: Callable[[], Any], calls: int) -> tuple[float, float]:
    """(median seconds of ``empty()`` right after ``bare()``, median seconds of ``empty()`` in a loop)."""
    pc = time.perf_counter_ns
    cold, warm = [], []
    for _ in range(calls):
        bare()
        t0 = pc(); empty(); t1 = pc()  # noqa: E702
        cold.append(t1 - t0)
    for _ in range(calls):
        t0 = pc(); empty(); t1 = pc()  # noqa: E702
        warm.append(t1 - t0)
    return statistics.median(cold) / 1e9, statistics.median(warm) / 1e9


def paired(bare: Callable[[], Any], instrumented: Callable[[], Any], pairs: int) -> tuple[float, float]:
    """(median bare seconds, median instrumented - bare seconds) over ``pairs`` alternating pairs."""
    pc = time.perf_counter_ns
    rng = random.Random(0)
    bares, diffs = [], []
    for _ in range(pairs):
        if rng.random() < 0.5:
            t0 = pc(); bare(); t1 = pc(); instrumented(); t2 = pc()  # noqa: E702
            b, i = t1 - t0, t2 - t1
        else:
            t0 = pc(); instrumented(); t1 = pc(); bare(); t2 = pc()  # noqa: E702
            i, b = t1 - t0, t2 - t1
        bares.append(b)
        diffs.append(i - b)
    return statistics.median(bares) / 1e9, statistics.median(diffs) / 1e9


def parts(bare: Callable[[], Any], calls: int) -> list[tuple[str, float]]:
    """A cold ``@cuda_timed`` row's µs (right after each bare step, inside ``collect()``), whole and
    with one part of it stubbed out at a time: the difference is what that part costs cold. The
    stubs are this benchmark's alone (a row without them lacks figures)."""
    import contextlib

    from gnnmon.devices import backend_for
    from gnnmon.measure import bracket, row_device
    from gnnmon.record import row

    @cuda_timed
    def empty() -> None:
        pass

    host = backend_for(torch.device("cpu"))

    @contextlib.contextmanager
    def stubbed(owner: Any, name: str, value: Any) -> Iterator[None]:
        old = getattr(owner, name)
        setattr(owner, name, value)
        try:
            yield
        finally:
            setattr(owner, name, old)

    def measure(row: Callable[[], Any] = empty) -> float:
        for _ in range(20):
            row()
        return cold_and_warm(bare, row, calls)[0] * 1e6

    out = []
    with tempfile.TemporaryDirectory() as tmp, gnnmon.collect(Path(tmp) / "parts.jsonl"):
        out.append(("whole row", measure()))
        with stubbed(row_device, "choose_backend", lambda found, explicit=None: (host, "cpu: no accelerator in use")):
            out.append(("device chosen as it opens", measure()))
        with stubbed(row_device, "started_during", lambda: None):
            out.append(("device asked again as it closes", measure()))
        with stubbed(row, "process_time", lambda: 0.0):
            out.append(("the CPU clock (cpu_s)", measure()))
        with stubbed(bracket, "hold", lambda up=1: False):
            out.append(("the held sections", measure()))
        out.append(("whole row, again", measure()))
    out.append(("a flat prototype, for scale", measure(flat_prototype(lambda: None))))
    return out


def flat_prototype(func: Callable[..., Any]) -> Callable[..., Any]:
    """A row's figures without its guarantees, for scale: the clocks, the CPU time and the GC counts
    read around the call, a context variable set, one tuple appended (no parent, probe, device,
    interrupt or fault handling)."""
    import contextvars
    import functools
    import gc

    current: contextvars.ContextVar = contextvars.ContextVar("prototype", default=None)
    rows: list[tuple[Any, ...]] = []
    count = [0]
    label = getattr(func, "__name__", "step")

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        parent = current.get()
        token = current.set(label)
        index = count[0] = count[0] + 1
        start, cpu, gcs = time.time_ns(), time.process_time(), gc.get_count()
        t0 = time.perf_counter_ns()
        try:
            return func(*args, **kwargs)
        finally:
            wall = time.perf_counter_ns() - t0
            current.reset(token)
            rows.append((label, index, parent, start, wall, time.process_time() - cpu, gcs))
            del rows[:-1000]

    return wrapper


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few pairs (what the test runs)")
    parser.add_argument("--pairs", type=int, default=None, help="pairs a form (default 4,000; --quick 20)")
    parser.add_argument("--parts", action="store_true",
                        help="also a cold @cuda_timed row with each of its parts stubbed out in turn")
    args = parser.parse_args(argv)
    pairs = args.pairs or (20 if args.quick else 4000)
    torch.set_num_threads(1)  # one core: the step's time does not depend on what else runs beside it
    bare, forms = make_step()
    empties = empty_forms()
    print(f"# python benchmarks/step_ratio.py{' --quick' if args.quick else ''}: {platform.node()}, "
          f"Python {platform.python_version()}, torch {torch.__version__}, one torch thread, {pairs} pairs a form")
    print("| form | bare step (ms) | added (µs) | ratio | limit | row, cold (µs) | row, warm (µs) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in forms.items():
            with gnnmon.collect(Path(tmp) / f"{name.split()[0]}.jsonl"):
                for _ in range(min(pairs, 50)):  # warm-up
                    bare()
                    fn()
                    empties[name]()
                b, d = paired(bare, fn, pairs)
                cold, warm = cold_and_warm(bare, empties[name], max(pairs // 4, 10))
            print(f"| {name} | {b * 1e3:.3f} | {d * 1e6:.1f} | {1 + d / b:.4f}x | {LIMITS[name]}x "
                  f"| {cold * 1e6:.1f} | {warm * 1e6:.1f} |")
    if args.parts:
        found = parts(bare, max(pairs // 6, 10))
        whole = statistics.mean(us for name, us in found if name.startswith("whole"))
        print("\n| a cold `@cuda_timed` row, stubbed out | µs | less than the whole row |")
        print("| --- | ---: | ---: |")
        for name, us in found:
            less = "" if name.startswith(("whole", "a flat")) else f"{whole - us:.1f}"
            print(f"| {name} | {us:.1f} | {less} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

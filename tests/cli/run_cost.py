"""The Python a step costs in gnnmon's own code under ``gnnmon run``, against the same loop
decorated as the README teaches (``@monitor_memory_device @cuda_timed``, three ``phase`` blocks,
``watch_loader``): bytecode instructions a step on the step's thread, counted as
``benchmarks/row_opcodes.py`` counts them (not timed: the same on a busy machine and an idle one,
for one Python version). The step is a tiny one (a 4 -> 1 linear layer, a batch of 4 from a
DataLoader), so that the count is gnnmon's alone.

On Python 3.12+ the engine sees backward through ``sys.monitoring``, whose callbacks the
interpreter runs with tracing off: a tracer never sees them. They are counted all the same: while
counting, the engine's events are off and a trampoline in this file (not gnnmon's code: not
counted) calls the same two callbacks around each ``torch.autograd.backward`` call, as the
interpreter would. The same loop with the wrapper that Python 3.11 uses is counted beside it
(``gnnmon run, wrapper``).

Run: ``.venv/bin/python -m tests.cli.run_cost`` (seconds), in an interpreter of its own: what
else a process has imported moves the count (with ``torch_geometric`` imported, a row's scan of its
arguments asks for PyG's types: about 11 more a step, both forms alike). Issue 68 asks that the first be no more
than the decorated one; ``tests/cli/test_run_cost.py`` holds it."""

from __future__ import annotations

import contextvars
import json
import platform
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

import gnnmon
from benchmarks.row_opcodes import counted as count
from gnnmon.measure import auto_steps
from gnnmon.measure.auto_steps import AutoSteps

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(4 * 1000, 4))


def plain(batches: Iterator[Any], n: int) -> int:
    for _ in range(n):
        (x,) = next(batches)
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
    return n


@gnnmon.monitor_memory_device
@gnnmon.cuda_timed
def train_step(x: torch.Tensor) -> None:
    optimizer.zero_grad()
    with gnnmon.phase("forward"):
        loss = model(x).sum()
    with gnnmon.phase("backward"):
        loss.backward()
    with gnnmon.phase("optimizer"):
        optimizer.step()


def decorated(batches: Iterator[Any], n: int) -> int:
    for _ in range(n):
        (x,) = next(batches)
        train_step(x)
    return n


def _counted_run(engine: AutoSteps, steps: Callable[[], int]) -> float:
    """``count(steps)`` with the engine's sys.monitoring callbacks counted (Python 3.12+): its
    events off meanwhile, a trampoline calls the callbacks as the interpreter does."""
    code = engine._bwd_code
    if code is None:  # the wrapper: gnnmon's own function, which the tracer sees
        return count(steps)
    monitoring = sys.monitoring
    events = monitoring.events
    original = torch.autograd.backward

    def backward(*args: Any, **kwargs: Any) -> Any:
        engine._backward_started(code, 0)
        value = original(*args, **kwargs)
        engine._backward_returned(code, 0, value)
        return value

    monitoring.set_local_events(engine._bwd_tool, code, 0)
    torch.autograd.backward = backward
    try:
        return count(steps)
    finally:
        torch.autograd.backward = original
        monitoring.set_local_events(engine._bwd_tool, code, events.PY_START | events.PY_RETURN)


def _run(folder: Path, name: str, warm: int, counted: int) -> float:
    with gnnmon.collect(folder / f"{name}.jsonl", flush_interval=3600) as run:
        engine = AutoSteps(run).start()
        try:
            batches = iter(DataLoader(data, batch_size=4))
            plain(batches, warm)
            return _counted_run(engine, lambda: plain(batches, counted))
        finally:
            engine.stop()


def counts(folder: Path, warm: int = 50, counted: int = 200) -> dict[str, float]:
    """Each form's instructions a step, inside ``collect`` after ``warm`` steps, in a context of
    its own (no row, phase or scope left current by earlier code, as a test run may leave one)."""
    return contextvars.Context().run(_counts, folder, warm, counted)


def _counts(folder: Path, warm: int, counted: int) -> dict[str, float]:
    found = {"gnnmon run": _run(folder, "run", warm, counted)}
    if auto_steps.MONITORING:
        auto_steps.MONITORING = False
        try:
            found["gnnmon run, wrapper"] = _run(folder, "wrapper", warm, counted)
        finally:
            auto_steps.MONITORING = True
    with gnnmon.collect(folder / "decorated.jsonl", flush_interval=3600):
        batches = iter(gnnmon.watch_loader(DataLoader(data, batch_size=4)))
        decorated(batches, warm)
        found["decorated"] = count(lambda: decorated(batches, counted))
    return found


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        found = counts(Path(tmp))
    if "--json" in sys.argv[1:]:  # for tests/cli/test_run_cost.py
        print(json.dumps(found))
        return
    print(f"Python {platform.python_version()}, gnnmon {gnnmon.__version__}: instructions a step in gnnmon's code")
    for name, n in found.items():
        print(f"  {name:20s} {n:8.0f}")


if __name__ == "__main__":
    main()

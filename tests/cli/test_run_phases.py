"""``gnnmon run``'s phases (forward, backward, optimizer) against planted truth: a model whose forward
sleeps a known time, an autograd function whose backward sleeps a known time, an optimizer whose
step sleeps a known time. Each phase is at least its sleep, and a row's wall at least the sum of
its phases (the phases lie inside the row and do not overlap: a forward phase that held the
backward would count its sleep twice). Then the guards: nothing in a forked child, a fault counted
and never raised, a phase inside another marked as the decorated ``phase()`` marks it."""

from __future__ import annotations

import os
import pickle
import time

import pytest
import torch

import gnnmon
from gnnmon.measure import auto_steps
from gnnmon.measure.auto_steps import AutoSteps
from tests.cli.running import gnnmon_run, rows_of

FWD, BWD, OPT = 0.03, 0.02, 0.01
"""Seconds each planted part sleeps (written into the scripts below)."""

PARTS = f"""
    import sys, time
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    FWD, BWD, OPT = {FWD}, {BWD}, {OPT}


    class SlowBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            time.sleep(BWD)                                    # planted: backward >= BWD
            return grad


    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 1)

        def forward(self, x):
            time.sleep(FWD)                                    # planted: forward >= FWD
            return SlowBackward.apply(self.lin(x))


    class SlowSGD(torch.optim.SGD):
        def step(self, closure=None):
            time.sleep(OPT)                                    # planted: optimizer >= OPT
            return super().step(closure)


    model = Model()
    opt = SlowSGD(model.parameters(), lr=0.01)
    x, y = torch.randn(20, 8), torch.randn(20, 1)
"""

WITH_LOADER = PARTS + """
    for xb, yb in DataLoader(TensorDataset(x, y), batch_size=4):   # planted: 5 updates
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(xb), yb).backward()
        opt.step()
    with torch.no_grad():
        for xb, _ in DataLoader(TensorDataset(x, y), batch_size=10):  # planted: 2 eval batches
            model(xb)
"""

FULL_BATCH = PARTS + """
    for _ in range(5):                                         # planted: 5 updates, no loader
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    with torch.no_grad():
        model(x)                                               # planted: 1 eval forward
"""


@pytest.mark.parametrize(("script", "evals"), [(WITH_LOADER, 2), (FULL_BATCH, 1)], ids=["loader", "full-batch"])
def test_each_phase_holds_its_planted_sleep_and_the_row_holds_its_phases(tmp_path, script, evals):
    done = gnnmon_run(tmp_path, "-o", "p.jsonl", "train.py", script=script)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(tmp_path / "p.jsonl")
    steps = [r for r in rows if r["label"] == "step"]
    assert [r["label"] for r in rows] == ["step"] * 5 + ["eval"] * evals  # no row of a phase's own
    for r in steps:  # the first row under the global forward hook, the rest under the root's own
        assert r["phase_forward_s"] >= FWD and r["phase_backward_s"] >= BWD and r["phase_optimizer_s"] >= OPT
        assert r["wall_s"] >= r["phase_forward_s"] + r["phase_backward_s"] + r["phase_optimizer_s"]
        assert "phase_forward_in" not in r and "phase_backward_in" not in r
    for r in rows[5:]:  # an eval pass: its forward, nothing else
        assert r["phase_forward_s"] >= FWD and r["wall_s"] >= r["phase_forward_s"]
        assert "phase_backward_s" not in r and "phase_optimizer_s" not in r
    assert "faults" not in gnnmon.load(tmp_path / "p.jsonl").end["steps"]


def test_a_closure_optimizer_s_forward_and_backward_are_marked_inside_its_update(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "c.jsonl", "train.py", script=PARTS + """
    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    for _ in range(3):                                         # planted: 3 updates, each one closure call
        opt.step(closure)
""")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(tmp_path / "c.jsonl")
    assert [(r["label"], r["updates"], r["backward_calls"]) for r in rows] == [("step", 1, 1)] * 3
    for r in rows:
        assert r["phase_forward_in"] == r["phase_backward_in"] == "optimizer"  # counted once, in the update
        assert r["phase_optimizer_s"] >= OPT + FWD + BWD  # the closure runs inside step
        assert r["phase_forward_s"] >= FWD and r["phase_backward_s"] >= BWD
        assert r["wall_s"] >= r["phase_optimizer_s"]


def _steps(model: torch.nn.Module, opt: torch.optim.Optimizer, n: int) -> None:
    for _ in range(n):
        model(torch.randn(4, 2)).sum().backward()
        opt.step()


def _three_updates_each_phase_a_fault() -> None:
    """Planted: 3 updates, each with a forward, a backward and an update phase, whose phases all
    fail: every update is still a row, each phase's failure one counted fault, no phase field."""
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gnnmon.collect() as run:
        engine = AutoSteps(run).start()
        _steps(model, opt, 3)
        summary = engine.stop()
    assert summary["updates"] == 3 and [r["label"] for r in run.records] == ["step"] * 3
    assert summary["faults"] == 3 * 3
    assert not any(k.startswith("phase_") for r in run.records for k in r)


def test_a_forked_child_s_hooks_do_nothing():
    """The engine as a child forked mid-run inherits it: the child's forwards, backwards and
    updates change nothing of its copy (no row opened, no phase, no count)."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gnnmon.collect() as run:
        engine = AutoSteps(run).start()
        try:
            _steps(model, opt, 2)  # planted: 2 updates in this process
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: 3 updates of its own, then what its copy of the engine saw
                try:
                    _steps(model, opt, 3)
                    seen = (engine.updates_total, engine.backwards_total, engine.open is None, engine._inner,
                            dict(engine._started), engine.depth_fwd, engine.depth_opt, engine.faults)
                    os.write(write, pickle.dumps(seen))
                finally:
                    os._exit(0)
            os.close(write)
            with os.fdopen(read, "rb") as pipe:
                got = pipe.read()
            os.waitpid(pid, 0)
            _steps(model, opt, 1)  # planted: 1 more here
        finally:
            summary = engine.stop()
    assert got, "the child said nothing"
    assert pickle.loads(got) == (2, 2, True, None, {}, 0, 0, 0)
    assert summary["updates"] == 3 and len(run.records) == 3


@pytest.mark.parametrize("failing", ["__enter__", "__exit__"])
def test_a_phase_that_fails_is_a_counted_fault_and_the_script_goes_on(monkeypatch, failing):
    class Broken:
        def __init__(self, name: str) -> None:
            self.name = name

        def __enter__(self) -> None:
            if failing == "__enter__":
                raise RuntimeError("planted")

        def __exit__(self, *exc: object) -> None:
            if failing == "__exit__":
                raise RuntimeError("planted")

    monkeypatch.setattr(auto_steps, "HOST_CLOCK", frozenset())  # the device's path: phase() objects
    monkeypatch.setattr(auto_steps, "phase", Broken)
    _three_updates_each_phase_a_fault()  # each phase's failure, counted once


def test_a_device_row_s_phases_are_gnnmon_phases_with_the_same_fields(monkeypatch):
    """On a device's row the engine opens ``gnnmon.phase`` (timed as the device's); here the CPU's
    row is made to take that path: the same fields, nested the same way, each phase holding its
    planted sleep."""
    monkeypatch.setattr(auto_steps, "HOST_CLOCK", frozenset())
    entered: list[str] = []

    class Counted(gnnmon.phase):
        def __enter__(self):
            entered.append(self.name)
            return super().__enter__()

    monkeypatch.setattr(auto_steps, "phase", Counted)
    slow = 0.01

    class Slow(torch.nn.Linear):
        def forward(self, x):
            time.sleep(slow)  # planted: forward >= slow
            return super().forward(x)

    model = Slow(2, 1)
    opt = torch.optim.LBFGS(model.parameters(), max_iter=1)

    def closure():
        opt.zero_grad()
        loss = model(torch.randn(4, 2)).sum()
        loss.backward()
        return loss

    with gnnmon.collect() as run:
        engine = AutoSteps(run).start()
        for _ in range(2):  # planted: 2 updates, each running its closure inside step
            opt.step(closure)
        summary = engine.stop()
    assert summary["updates"] == 2 and "faults" not in summary
    assert entered == ["optimizer", "forward", "backward"] * 2
    for r in run.records:
        assert r["phase_forward_s"] >= slow and r["phase_optimizer_s"] >= r["phase_forward_s"]
        assert r["phase_forward_in"] == r["phase_backward_in"] == "optimizer"


def test_a_host_clock_that_fails_is_a_counted_fault_and_the_script_goes_on(monkeypatch):
    def broken() -> int:
        raise RuntimeError("planted")

    monkeypatch.setattr(auto_steps, "perf_counter_ns", broken)
    _three_updates_each_phase_a_fault()  # each phase's start, counted once (its end finds it not started)

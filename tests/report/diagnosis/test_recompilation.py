"""Shapes that change under torch.compile lead the diagnosis as recompilation (the ``eager``
backend: Dynamo's guards and recompilations without a C++ compiler's minutes)."""

from __future__ import annotations

import time

import pytest
import torch

import gnnmon
from gnnmon import cuda_timed, track_compile

pytest.importorskip("torch._dynamo")

SHAPES = 6
"""New batch sizes after the first: each one recompiles (dynamic=False)."""


@pytest.mark.slow
def test_shapes_that_change_under_compile_lead_as_recompilation():
    torch._dynamo.reset()
    # Dynamo's first compile in a process pays its one-time set-up (a few hundred ms, more under
    # load), which no later compile does: paid here, on other code (a Linear's forward would be the
    # same code, whose first compile in the run would then count as a recompilation), the run's
    # first compile costs what each recompilation does, whichever test this process ran before
    torch.compile(lambda x: (x * 2).sum(), backend="eager", dynamic=False)(torch.ones(2, 4))
    compiled = torch.compile(torch.nn.Linear(16, 16), backend="eager", dynamic=False)

    @track_compile(label="step")
    @cuda_timed
    def step(n):
        compiled(torch.ones(n, 16)).sum()
        time.sleep(0.005)

    with gnnmon.collect() as run, gnnmon.gc_paused():
        for k in range(5 * (SHAPES + 1)):
            step(8 * (1 + k // 5))  # a new shape every 5 calls
    rows = run.records
    found = run.report().diagnosis()
    first = found[0]
    again = [r for r in rows if r["compile_recompiles"]]
    print(f"recompilation: {len(again)} calls, {first['at_stake']:.3f} s at stake, share {first['share']:.2f}; "
          f"then: {[(f['kind'], round(f['share'], 2)) for f in found[1:]]}")
    assert first["kind"] == "recompilation" and first["label"] == "step", first
    assert len(again) == SHAPES and f"{SHAPES} call(s) of step recompiled" in first["words"]
    assert first["at_stake"] == pytest.approx(sum(r["compile_s"] for r in again))
    assert "dynamic=True" in first["next"]

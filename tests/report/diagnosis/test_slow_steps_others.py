"""The slow steps' phase is read against the other *steady* calls: neither the run's warm-up calls
nor the slow calls themselves count among the calls their excess is measured from.

Planted: a step of phase ``forward`` and 2 ms of ``backward``; the run's first ``WARMUP`` calls run
forward for 30 ms (caches filling), 16 steady calls for 1 ms or 2 ms (8 each: median 1.5 ms), and
4 slow calls (every fifth steady call) for 25 ms. The slow calls' forward grew 23.5 ms from 1.5 ms;
counted among the others (22 values: 8 of 1 ms, 8 of 2 ms, 6 of 25 ms or more) its median would read
2 ms."""

from __future__ import annotations

import pytest

from gnnmon.data.table import Table
from gnnmon.report.diagnosis import time_findings as tf
from gnnmon.report.loops import WARMUP, Loop

BACKWARD, WARM, SLOW = 0.002, 0.030, 0.025


def planted() -> tuple[Loop, list[dict], list[int]]:
    rows, slow = [], []
    for i in range(WARMUP + 20):
        k = i - WARMUP
        if k < 0:
            forward = WARM
        elif k % 5 == 4:
            forward = SLOW
            slow.append(i)
        else:
            forward = 0.001 if (k - k // 5) % 2 == 0 else 0.002
        rows.append({"label": "step", "index": i, "wall_s": forward + BACKWARD, "phase_forward_s": forward,
                     "phase_backward_s": BACKWARD, "backend": "cpu"})
    spikes = [{"label": "step", "index": i, "cause": "unexplained", "excess_s": SLOW - 0.0015, "computed": True,
               "detail": ""} for i in slow]
    return Loop("step", Table(rows).parts["step"]), spikes, slow


def test_the_slow_steps_phase_is_read_against_the_other_steady_calls():
    loop, spikes, slow = planted()
    assert len(slow) == 4
    others = [r for r in range(WARMUP, WARMUP + 20) if r not in slow]
    assert sorted(float(loop.column("phase_forward_s")[i]) for i in others) == [0.001] * 8 + [0.002] * 8
    found = tf.slow_steps(loop, spikes, 1.0)
    assert found is not None
    assert found["words"].endswith("; phase forward took 23.5 ms more of it (median 25.0 ms against 1.5 ms)"), \
        found["words"]
    assert found["evidence"][-1] == {"figure": "phase_forward_s", "value": pytest.approx(SLOW, rel=1e-12),
                                     "unit": "s", "where": "median of those 4 call(s); 1.5 ms in the others"}

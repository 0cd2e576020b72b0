"""Whether a slow step computed or waited is a field of its spike (``computed``), not its words.

* ``report.spikes()`` sets it on unexplained spikes from planted rows of 125 ms and 375 ms spikes:
  370 ms of CPU time (True), 10 ms (False), exactly half, 187.5 ms (True: waiting is under half),
  187.5 ms less 1 µs (False); a process's sampled utilisation of 80 % (True) or 20 % (False);
  neither recorded (None); a collection's spike (cause gc) None. The details keep their words.
* ``slow_steps`` reads the field alone: spikes planted with each value and words that say the
  opposite (or nothing) are counted by the field."""

from __future__ import annotations

import pytest

from gnnmon.data.table import Table
from gnnmon.report.analysis import spikes
from gnnmon.report.diagnosis import time_findings as tf
from gnnmon.report.loops import Loop

LEVEL, SLOW = 0.125, 0.375
"""A steady call's and a slow call's seconds."""

NOT_RECORDED = "no GC pause, compile, batch shape or warm-up; sample= or energy= records whether it waited or computed"


def nested(i: int, wall: float, **fields) -> dict:
    """A row timed inside a step (the diagnosis's loop does not judge it, so a wait stays unexplained)."""
    return {"label": "metrics", "index": i, "parent": f"step#{i}", "wall_s": wall, "backend": "cpu", **fields}


@pytest.mark.parametrize(("fields", "computed", "detail"), [
    ({"cpu_s": 0.37}, True, "computing: 370.0 ms of CPU time in 375.0 ms"),
    ({"cpu_s": 0.01}, False, "waiting, not computing: 10.0 ms of CPU time in 375.0 ms"),
    ({"cpu_s": 0.1875}, True, "computing: 187.5 ms of CPU time in 375.0 ms"),
    ({"cpu_s": 0.1875 - 1e-6}, False, "waiting, not computing: 187.5 ms of CPU time in 375.0 ms"),
    ({"cpu_util_pct": 80.0}, True, "computing: the process used 80 % of a core while it ran"),
    ({"cpu_util_pct": 20.0}, False, "waiting, not computing: the process used 20 % of a core while it ran"),
    ({}, None, NOT_RECORDED),
])
def test_an_unexplained_spike_carries_whether_it_computed(fields, computed, detail):
    steady = {"cpu_s": LEVEL - 1e-3} if "cpu_s" in fields else {"cpu_util_pct": 99.0} if fields else {}
    rows = [nested(i, LEVEL, **steady) for i in range(30)]
    rows[10] = nested(10, SLOW, **fields)
    [spike] = spikes(rows)
    assert (spike["index"], spike["cause"], spike["computed"], spike["detail"]) == (10, "unexplained", computed,
                                                                                    detail)


def test_a_spike_of_another_cause_carries_none():
    rows = [nested(i, LEVEL, cpu_s=LEVEL) for i in range(30)]
    rows[10] = nested(10, SLOW, cpu_s=0.1, gc_pause_s=0.2, gc_collections=1, gc_max_generation=2)
    [spike] = spikes(rows)
    assert (spike["cause"], spike["computed"]) == ("gc", None)


def spike(computed: bool | None, detail: str) -> dict:
    """An unexplained spike of step, 250 ms over its level."""
    return {"label": "step", "index": 0, "cause": "unexplained", "excess_s": 0.25, "computed": computed,
            "detail": detail}


def said(planted: list[dict]) -> dict:
    """The slow steps finding over 20 steady calls of 125 ms, the load not sampled, in a 5 s run."""
    loop = Loop("step", Table([{"label": "step", "index": i, "wall_s": LEVEL} for i in range(20)]).parts["step"])
    finding = tf.slow_steps(loop, planted, 5.0)
    assert finding is not None
    return finding


WORK_NEXT = ("find the work the slow calls did more: torch.profiler over a slow call (its CPU trace), the batch it "
             "got, a branch its data takes; " + tf.SAMPLE_NEXT)
COMPUTED = ("; each computed rather than waited (its process's CPU time 50 % of its time or more)")


def test_slow_steps_read_computed_not_the_words():
    """Two spikes (500 ms over the level) whose words say nothing, or the opposite of their field."""
    head = "2 call(s) of step were slow with no recorded cause, 500.0 ms over its level"
    computing = said([spike(True, ""), spike(True, "waiting, not computing: 10.0 ms of CPU time in 375.0 ms")])
    assert (computing["words"], computing["next"]) == (head + COMPUTED, WORK_NEXT)
    waiting = said([spike(False, ""), spike(True, "computing: 370.0 ms of CPU time in 375.0 ms")])
    assert (waiting["words"], waiting["next"]) == (head + "; in 1 of them the process waited rather than computed",
                                                   tf.SAMPLE_NEXT)
    unknown = said([spike(None, "computing: 370.0 ms of CPU time in 375.0 ms"), spike(True, "computing")])
    assert (unknown["words"], unknown["next"]) == (head, tf.SAMPLE_NEXT)

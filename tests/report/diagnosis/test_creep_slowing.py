"""Growth that trends and curves (``gnnmon/report/diagnosis/creep.py``: :func:`creep.after_curve`): a
leak whose rate falls but stays above 0 is a leak at its recent rate, said as slowing; growth whose
last epochs' rate is bounded under what the check leaves unsaid levelled off. Levels planted with
every step chosen (``test_creep_levels.plant``), so each rate is known before the code reads it."""

from __future__ import annotations

import numpy as np
import pytest

import gnnmon
from gnnmon.report.diagnosis import creep
from gnnmon.report.diagnosis.findings_markdown import looked_for_text
from tests.report.diagnosis.test_creep_levels import loop_of, plant, said

MiB = 2**20


def decaying(epochs: int = 10) -> list[float]:
    """500 MiB, then 20, 19, 18 ... MiB more each epoch (a leak that slows and goes on)."""
    return [500 * MiB + sum((20 - j) * MiB for j in range(e)) for e in range(epochs)]


def test_a_leak_that_slows_and_goes_on_is_said_at_its_recent_rate():
    """The decaying leak, each call wobbling ±1 MiB: its curve is beyond the levels' noise, yet its last
    five epochs still grow 15, 14, 13, 12 MiB: a leak, slowing, its rate over those epochs with an
    interval above 0 that holds the planted one (their mean step, 13.5 MiB), down from the earlier
    epochs' (19 to 16 MiB a step). On main: no leak, "it rose 144 MiB, then levelled off"."""
    planted = decaying()
    rows = plant(planted, wobble=MiB, device="cuda:0")
    lv = creep.Levels(loop_of(rows), "mem_end_bytes", 0.0)
    assert creep.levelling_off(lv.levels, lv.noise)  # it curves: main took that for levelled off
    (leak,) = said(rows)
    assert leak["kind"] == "leak" and leak["since_epoch"] == 1  # epochs 0 and 1 are as alike a line as a split
    low, high = leak["rate_interval"]
    assert 0 < low <= (planted[-1] - planted[-5]) / 4 <= high
    assert leak["words"].startswith("a leak, slowing: mem_end_bytes of step grew ")
    assert "per epoch over epochs 5 to the last (95 % interval" in leak["words"]
    assert f"down from {leak['slowing_from'] / MiB:.3g} MiB per epoch over epochs 1 to 5" in leak["words"]
    # the early rate is over epochs 1 to 5 (steps 19 to 16 MiB), the late over the last five's
    assert 16 * MiB <= leak["slowing_from"] <= 19 * MiB and 12 * MiB <= leak["evidence"][0]["value"] <= 15 * MiB
    assert creep.looked_for(loop_of(rows), 0.0) == []


def test_growth_that_stops_levelled_off():
    """16 MiB an epoch for five epochs, then flat for five, each call wobbling ±1 MiB: no leak; the last
    five epochs' rate is bounded under what would go unsaid, so it rose the planted 64 MiB (to the
    levels' noise), then levelled off, said so (as main did: the control)."""
    planted = [500 * MiB + 16 * MiB * min(e, 4) for e in range(10)]
    rows = plant(planted, wobble=MiB, device="cuda:0")
    assert not said(rows)
    loop = loop_of(rows)
    lv = creep.Levels(loop, "mem_end_bytes", 0.0)
    assert creep.after_curve(lv, lv.levels) == "levelled"
    (out,) = creep.looked_for(loop, 0.0)
    assert out["levelled_off_bytes"] == pytest.approx(64 * MiB, abs=2 * np.sqrt(2) * lv.noise)
    assert "then levelled off" in looked_for_text(out)
    _, _, _, high = creep.recent(lv, lv.levels)
    assert high < out["unsaid_bytes_per_epoch"]


def test_growth_that_slows_to_a_rate_not_bounded_is_neither():
    """One call an epoch: 500, 560, 600, 625, 640, 650, then 646, 660, 650, 664 MiB. It trends and curves,
    but its last five levels' rate (Theil-Sen 2.75 MiB per epoch, the pairs' slopes -10 to 14 MiB) is
    neither above 0 nor under the 10.8 MiB the check would leave unsaid: it is not said to level off
    (on main: "it rose 164 MiB, then levelled off"), and the bound said is that rate's upper end."""
    rows = plant([x * MiB for x in (500, 560, 600, 625, 640, 650, 646, 660, 650, 664)], device="cuda:0", calls=1)
    loop = loop_of(rows)
    lv = creep.Levels(loop, "mem_end_bytes", 0.0)
    assert creep.trend_p(lv.levels) < creep.P_TREND and creep.levelling_off(lv.levels, lv.noise)
    m, slope, low, high = creep.recent(lv, lv.levels)
    assert m == 5 and slope == pytest.approx(2.75 * MiB) and low < 0 < high
    assert high > creep.hidden(lv)[1] and creep.after_curve(lv, lv.levels) == "unclear"
    assert not said(rows)
    (out,) = creep.looked_for(loop, 0.0)
    assert out["levelled_off_bytes"] is None and out["unsaid_bytes_per_epoch"] == pytest.approx(high)
    assert "levelled off" not in looked_for_text(out)


def test_said_words_read_in_the_report():
    rows = plant(decaying(), wobble=MiB, device="cuda:0")
    assert "a leak, slowing" in gnnmon.Report(rows).markdown()

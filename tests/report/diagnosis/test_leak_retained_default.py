"""The leak finding claims the allocator's retention only when told the run kept it: ``creep.creep``
called without ``retained`` (as the forecast's ``growth_findings`` and ``looked_for`` call it) says a
host-RSS leak's rate and next step plainly. Planted: 30 MiB more each epoch from 500 MiB, 6 epochs of
40 calls on the CPU (the host's RSS, at a 2-CPU host's resolution)."""

from __future__ import annotations

import pytest

from gnnmon.report.diagnosis import creep
from gnnmon.report.memory.model import format_bytes
from tests.report.diagnosis.test_creep_levels import HOST, LEAK_NEXT, MiB, loop_of, plant

RATE = 30 * MiB


def test_a_host_leak_claims_no_retention_unless_told():
    (found,) = creep.creep(loop_of(plant([500 * MiB + RATE * e for e in range(6)], device="cpu")), HOST)
    assert found["kind"] == "leak" and found["evidence"][0]["value"] == pytest.approx(RATE)
    # Sen's interval of levels on an exact line is the slope itself, widened by the resolution over 5 epochs
    assert found["words"] == ("a leak: mem_end_bytes of step grew 30 MiB per epoch (95 % interval "
                              f"{format_bytes(RATE - HOST / 5)} to {format_bytes(RATE + HOST / 5)}) from epoch 0 to "
                              "the last, that the batches' shapes do not explain")
    assert found["next"] == LEAK_NEXT

"""The row's bracket (gnnmon/measure/bracket.py): every form — a decorated call, a scope, a phase
outside any row — closes its row the same way when a Ctrl-C comes while it opens (the user's code
never runs, the row says it did not start), and a row's close ends a phase whose exit never came."""

from __future__ import annotations

import pytest

import gnnmon
from gnnmon.measure.timing import PhaseClock, TimingMeasurement
from gnnmon.record import state
from gnnmon.record.interrupts import HELD


def _ctrl_c_during(cls: type, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C that comes while ``cls`` enters (gnnmon's handler notes it: the section is held)."""
    enter = cls.__enter__

    def noted(measure):
        HELD.pending = True
        return enter(measure)

    monkeypatch.setattr(cls, "__enter__", noted)


def _decorated(ran: list) -> None:
    @gnnmon.cuda_timed(device="cpu")
    def step():
        ran.append("step")

    step()


def _scope(ran: list) -> None:
    with gnnmon.timed(label="scope"):
        ran.append("scope")


def _phase(ran: list) -> None:
    with gnnmon.phase("alone", device="cpu"):
        ran.append("alone")


@pytest.mark.parametrize(("form", "cls", "label"), [
    (_decorated, TimingMeasurement, "step"), (_scope, TimingMeasurement, "scope"), (_phase, PhaseClock, "alone")])
def test_a_ctrl_c_while_a_row_opens_closes_it_before_the_users_code_saying_it_did_not_start(
        form, cls, label, monkeypatch):
    ran: list = []
    with gnnmon.collect() as run:
        _ctrl_c_during(cls, monkeypatch)
        with pytest.raises(KeyboardInterrupt):
            form(ran)
        monkeypatch.undo()
        form(ran)  # the next one runs whole
    assert ran == [label]  # once: the first never ran
    first, second = run.records
    assert first["label"] == second["label"] == label
    assert first["error"] == "KeyboardInterrupt" and second["error"] is None
    assert [n for n in first["notes"] if n.startswith("did not start")] == ["did not start: KeyboardInterrupt: "]
    assert not any(n.startswith("did not start") for n in second["notes"])
    assert state.CURRENT_ROW.get() is None and state.OPEN_PHASE.get() is None and HELD.depth == 0


def test_a_phase_whose_exit_never_comes_is_ended_by_its_row():
    import time

    left_open = gnnmon.phase("forward", device="cpu")

    @gnnmon.cuda_timed(device="cpu")
    def step():
        left_open.__enter__()
        time.sleep(0.020)
        # returns without the phase's exit (a generator abandoned mid-phase, a missing __exit__)

    with gnnmon.collect() as run:
        step()
        assert state.OPEN_PHASE.get() is None  # not left current after its row
        left_open.__exit__(None, None, None)  # late: nothing more is recorded
        step2 = gnnmon.cuda_timed(device="cpu")(lambda: None)
        step2()
    row, nxt = run.records
    assert 0.020 <= row["phase_forward_s"] <= row["wall_s"]
    assert "phase_forward_s" not in nxt

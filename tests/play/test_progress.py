"""play/progress.py: the study scripts' progress bar, quiet off a terminal and drawn on one."""

from __future__ import annotations

import sys


def test_sweep_progress_is_quiet_off_a_terminal_and_drawn_on_one(capsys, monkeypatch):
    import io as io_

    import play.progress
    from play.progress import progress

    monkeypatch.setattr(play.progress, "DELAY_S", 0.0)
    assert list(progress(range(5), "sweep")) == [0, 1, 2, 3, 4]  # pytest's stderr is not a terminal
    assert capsys.readouterr().err == ""

    class Terminal(io_.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert list(progress(range(3), "sweep x")) == [0, 1, 2]
    assert "sweep x:" in terminal.getvalue() and "0/3" in terminal.getvalue()  # drawn, then cleared (leave=False)

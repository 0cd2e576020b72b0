"""``gnnmon run``'s live line on a real terminal (a pty): silent while a tqdm bar is live, drawn
once the bar has closed, and a line the script writes in two pieces with a tick between them left
whole. The script's sleeps plant the ticks: each stretch lasts longer than the line's interval."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gnnmon.cli.live import INTERVAL
from tests.cli.running import ROOT

pty = pytest.importorskip("pty")
fcntl = pytest.importorskip("fcntl")
termios = pytest.importorskip("termios")

LIVE = "gnnmon ▸"


def on_a_terminal(tmp_path: Path, script: str, *args: str, timeout: float = 120) -> tuple[int, str]:
    """``python -m gnnmon run ARGS train.py`` with its stdout and stderr on one pty; what the
    terminal received (its ``\\r\\n`` as ``\\n``) and the exit status."""
    (tmp_path / "train.py").write_text(textwrap.dedent(script))
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "TERM": "xterm",
           "COLUMNS": "200", "LINES": "40"}
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))  # a size: a bar's width
    try:
        proc = subprocess.Popen([sys.executable, "-m", "gnnmon", "run", *args, "train.py"], cwd=tmp_path, env=env,
                                stdin=follower, stdout=follower, stderr=follower, close_fds=True)
    finally:
        os.close(follower)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not chunk:
                break
            out += chunk
        status = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    return status, out.decode("utf-8", "replace").replace("\r\n", "\n")


def test_the_live_line_is_silent_while_a_tqdm_bar_is_live_and_drawn_after_it(tmp_path):
    stretch = 3 * INTERVAL  # each stretch holds ticks
    status, out = on_a_terminal(tmp_path, f"""
        import sys, time
        import torch
        from tqdm import tqdm

        model = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step():
            model(torch.randn(4, 2)).sum().backward()
            opt.step()

        print("BAR STARTS", file=sys.stderr, flush=True)
        for _ in tqdm(range(6), file=sys.stderr):               # planted: a live bar for {stretch} s of steps
            time.sleep({stretch} / 6)
            step()
        print("BAR DONE", file=sys.stderr, flush=True)
        for _ in range(6):                                      # then {stretch} s of steps with no bar
            time.sleep({stretch} / 6)
            step()
        print("END", file=sys.stderr, flush=True)
    """)
    assert status == 0, out[-3000:]
    # the bar's life: from its first draw to its last (a tick between the script's print and the
    # bar's creation, or between its close and the next print, draws the line rightly)
    during = out[out.index("  0%|"):out.rindex("6/6")]
    assert "100%" in during and LIVE not in during  # the bar drew; the line did not
    assert LIVE in out[out.index("BAR DONE"):out.index("END")]  # the same run draws once the bar is gone


def test_a_line_written_in_pieces_with_a_tick_between_is_left_whole(tmp_path):
    pause = 2 * INTERVAL  # a tick falls between the two pieces
    status, out = on_a_terminal(tmp_path, f"""
        import sys, time
        import torch

        model = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(3):
            model(torch.randn(4, 2)).sum().backward()
            opt.step()
            time.sleep({pause})                                 # ticks: the line drawn between prints
            print(f"FIRST-{{i}}", end="", flush=True)           # planted: half a line, then a pause
            time.sleep({pause})
            print(f" SECOND-{{i}}", flush=True)
            print(f"ERR-{{i}}", file=sys.stderr, flush=True)
    """)
    assert status == 0, out[-3000:]
    assert out.count(LIVE) >= 3  # the line was drawn between the prints (a positive control)
    for i in range(3):
        assert f"FIRST-{i} SECOND-{i}\n" in out  # nothing drawn inside the script's unfinished line
        at = out.index(f"FIRST-{i}")
        assert out[at - 1] == "\n" or out[:at].endswith("\r\033[K")  # on a line of its own: the live line erased first
        at = out.index(f"ERR-{i}\n")
        assert out[at - 1] == "\n" or out[:at].endswith("\r\033[K")
    assert out.rstrip("\n").splitlines()[-1].startswith("gnnmon: read it: gnnmon report")  # no line left over

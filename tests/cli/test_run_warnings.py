"""Warnings under the command line: a script's own (and its libraries') print under ``gnnmon run``
exactly as ``python script.py`` prints them (category, file:line, source line); only those gnnmon's
code issues read as gnnmon's, one line ``gnnmon: warning: ...``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import torch

from gnnmon.cli.common import one_line_warnings
from tests.cli.running import ROOT, gnnmon_run

SCRIPT = """\
import warnings
import torch
import noisy

warnings.warn("planted", UserWarning)
model = torch.nn.Linear(2, 1)
print(float(model(torch.ones(1, 2))))
"""
"""Planted: the script's own warning at line 5, and torch's from C at line 7 (a tensor with a grad
made a float); it does not import gnnmon, so ``gnnmon run`` finds its steps."""

NOISY = """\
import gnnmon

gnnmon.collect().result()
"""
"""A module the script imports: gnnmon warns that its run was never started (stacklevel: this file's line 3)."""


def blocks(stderr: str) -> list[str]:
    """Python's printed warnings: each its ``file:line: Category: message`` line(s) to the indented
    source line Python prints under it."""
    out, current = [], ""
    for line in stderr.splitlines(keepends=True):
        current += line
        if line.startswith("  "):
            out.append(current)
            current = ""
    return out


def test_a_scripts_warnings_print_as_python_prints_them_and_gnnmons_own_as_gnnmons(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "noisy.py").write_text(NOISY)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    plain = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           env=env)
    assert plain.returncode == 0, plain.stderr[-3000:]
    script = str(tmp_path / "train.py")
    own = [b for b in blocks(plain.stderr) if b.startswith(f"{script}:")]
    assert own[0] == f'{script}:5: UserWarning: planted\n  warnings.warn("planted", UserWarning)\n'
    assert own[1].startswith(f"{script}:7: UserWarning: Converting a tensor with requires_grad=True")
    assert own[1].endswith("  print(float(model(torch.ones(1, 2))))\n") and len(own) == 2
    assert f"{tmp_path / 'noisy.py'}:3: UserWarning: this gnnmon run was never started" in plain.stderr

    done = gnnmon_run(tmp_path, "-o", "run.jsonl", "train.py")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "gnnmon: recording train.py" in done.stderr  # its steps found, not a script that records itself
    for block in own:
        assert block in done.stderr
    assert "gnnmon: warning: this gnnmon run was never started" in done.stderr
    assert "noisy.py:3" not in done.stderr and "gnnmon: warning: planted" not in done.stderr


GNNMON_CODE = """\
import warnings

def warns():
    warnings.warn("gnnmon's own", RuntimeWarning)

def calls_c(tensor):
    return float(tensor)
"""
"""Planted as a module of gnnmon's: a function that warns, and one whose C call warns (torch's)."""


def test_a_warning_is_gnnmons_when_gnnmons_code_calls_warn_not_when_a_c_call_of_its_frame_warns(capsys):
    space = {"__name__": "gnnmon.planted"}
    exec(compile(textwrap.dedent(GNNMON_CODE), "planted.py", "exec"), space)
    python_format = warnings.formatwarning
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda m, c, f, n, file=None, line=None: sys.stderr.write(
            warnings.formatwarning(m, c, f, n, line))  # as pytest or logging put their own in between
        warnings.formatwarning = one_line_warnings(python_format)
        try:
            space["warns"]()
            space["calls_c"](torch.ones((), requires_grad=True))
            warnings.warn("the test's", UserWarning, stacklevel=1)
        finally:
            warnings.formatwarning = python_format
    err = capsys.readouterr().err
    assert err.startswith("gnnmon: warning: gnnmon's own\nplanted.py:7: UserWarning: Converting a tensor")
    assert f"{__file__}:" in err and "UserWarning: the test's" in err and err.count("gnnmon: warning") == 1

"""Importing gnnmon changes no global state (DESIGN principle 8)."""

from __future__ import annotations

import subprocess
import sys

PROBE = r"""
import gc, logging, os, sys, threading, warnings
import torch
before = (gc.isenabled(), gc.get_threshold(), logging.getLogger().handlers[:], torch.get_default_dtype(),
          dict(os.environ), threading.active_count(), gc.get_freeze_count(), warnings.filters[:])
import gnnmon
after = (gc.isenabled(), gc.get_threshold(), logging.getLogger().handlers[:], torch.get_default_dtype(),
         dict(os.environ), threading.active_count(), gc.get_freeze_count(), warnings.filters[:])
assert before == after, (before, after)
assert "torch_geometric" not in sys.modules, "gnnmon must not import PyG"
assert not gc.callbacks, gc.callbacks
print("ok")
"""


def test_import_changes_no_global_state():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"

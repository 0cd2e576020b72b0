"""The Python a row runs, counted: gnnmon's bytecode instructions a call on the step's thread, for
each form as users write it (no device argument) inside ``collect(path)``, after warm-up
(``benchmarks/row_opcodes.py``, which prints the same counts). Counted, not timed: the same on a
busy machine and an idle one, so a row that grows fails CI on any machine.

The budgets are issue 65's targets where they are met; where not yet, what the code reached, so a
row that grows still fails, each said beside it (docs/performance.md, "A row's bracket, in
Python"). Instructions differ between Python versions: the budgets are Python 3.11's.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from benchmarks.row_opcodes import FORMS, PHASE
from tests.scripts import ROOT, run_script

TARGET = {  # issue 65, "Done when"
    "full stack + 3 phases": 1200,
    "@cuda_timed": 350,
    "@monitor_memory_device": 400,
    "@gc_controlled": 250,
    PHASE: 150,
    "timed scope": 450,
}

BUDGET = {  # what the code reached, above the target still (2026-12-07 at 188a072, Python 3.11.7): the aim is TARGET
    "full stack + 3 phases": 2105,
    "@cuda_timed": 855,
    "@monitor_memory_device": 1200,
    "@gc_controlled": 895,
    "@cuda_timed + 1 phase": 1040,
    PHASE: 190,
    "timed scope": 990,
}


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the budgets count Python 3.11's bytecode instructions")
def test_each_form_of_a_row_runs_within_its_budget_of_instructions():
    """Counted in an interpreter of its own, started by a shell as ``python benchmarks/row_opcodes.py``
    is by hand: one exec-ed straight from this test's process inherits that process's high-water
    mark as getrusage's floor, and the host memory counter then reads ``/proc/self/status`` for each
    reading under it (gnnmon/devices/rss.py): a count that moved with what earlier tests in the
    worker had held (1,367 for the memory form in a CI worker against 1,321 from a shell)."""
    command = f"{shlex.quote(sys.executable)} -m benchmarks.row_opcodes --json; exit $?"
    done = subprocess.run(["/bin/sh", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert all(n > 0 for n in found.values()), f"the tracer saw nothing: {found}"
    over = {form: round(found[form]) for form, most in BUDGET.items() if found[form] > most}
    assert not over, f"instructions a call over the budget {BUDGET} (issue 65's targets: {TARGET}): {over}"


def test_no_form_of_a_row_leaves_a_reference_cycle_for_the_collector(tmp_path):
    """A row's objects (the row, its measurements, its bracket, the frame a decorated call keeps as
    its owner) are freed by reference counting as the call returns: none is left in a cycle, which
    only a collection frees (and a collection that lands in a later step is that step's pause).
    In an interpreter of its own: the collector's garbage is the process's, and a CI worker's
    earlier tests leave threads behind (an exporter's failing HTTPS retries) whose cycles it finds too."""
    proc = run_script("""
        import gc, json, sys
        from pathlib import Path
        import gnnmon
        from benchmarks.row_opcodes import FORMS

        found = {}
        with gnnmon.collect(Path(sys.argv[1]) / "rows.jsonl", flush_interval=3600):
            for call in FORMS.values():
                call()  # the first calls make what later ones reuse
            gc.collect()
            gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds unreachable is kept in gc.garbage
            for name, call in FORMS.items():
                for _ in range(20):
                    call()
                gc.collect()
                found[name] = sorted({type(o).__name__ for o in gc.garbage})
                gc.garbage.clear()
            gc.set_debug(0)
        print(json.dumps(found))
    """, str(tmp_path))
    found = json.loads(proc.stdout.splitlines()[-1])
    assert set(found) == set(FORMS)
    left = {name: types for name, types in found.items() if types}
    assert not left, f"a call left these in a reference cycle: {left}"


def test_a_forms_parts_add_up_to_its_count():
    """``row_opcodes.py --parts FORM`` splits the form's count by function: the parts, counted as the
    form is, add up to its count (both counted in this process, where the same code runs), and the
    form's wrapper is among them."""
    from benchmarks.row_opcodes import counts, parts

    form = "@gc_controlled"
    named = parts(form)
    with tempfile.TemporaryDirectory() as tmp:
        whole = counts(Path(tmp) / "rows.jsonl")[form]
    assert sum(n for _, n in named) == pytest.approx(whole, abs=0.5)
    assert any(name.startswith("measure/adapters.py:") and name.endswith(" wrapper") for name, _ in named), named
    assert [n for _, n in named] == sorted((n for _, n in named), reverse=True)

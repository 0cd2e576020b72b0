"""The Python a row runs, counted: gnnmon's bytecode instructions a call on the step's thread, for
each form as users write it (no device argument) inside ``collect(path)``, after warm-up
(``benchmarks/row_opcodes.py``, which prints the same counts). Counted, not timed: the same on a
busy machine and an idle one, so a row that grows fails CI on any machine.

The budgets are issue 65's targets where they are met; where not yet, what the code reached, so a
row that grows still fails, each said beside it (docs/performance.md, "A row's bracket, in
Python"). Instructions differ between Python versions: the budgets are Python 3.11's.
"""

from __future__ import annotations

import sys

import pytest

from benchmarks.row_opcodes import PHASE, counts

TARGET = {  # issue 65, "Done when"
    "full stack + 3 phases": 1200,
    "@cuda_timed": 350,
    "@monitor_memory_device": 400,
    "@gc_controlled": 250,
    PHASE: 150,
    "timed scope": 450,
}

BUDGET = {  # what the code reached, above the target still (2026-12, Python 3.11.7): the target is the aim
    "full stack + 3 phases": 2600,  # 3,782 before the step's path was trimmed
    "@cuda_timed": 1180,  # 1,269 before
    "@monitor_memory_device": 1630,  # 1,715 before
    "@gc_controlled": 1190,  # 1,250 before
    "@cuda_timed + 1 phase": 1380,  # 1,840 before
    PHASE: 200,  # 571 before: a phase on the host clock runs flat, in its own frame, with no held section
    "timed scope": 1360,  # 1,446 before
}


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the budgets count Python 3.11's bytecode instructions")
def test_each_form_of_a_row_runs_within_its_budget_of_instructions(tmp_path):
    found = counts(tmp_path / "rows.jsonl")
    over = {form: round(found[form]) for form, most in BUDGET.items() if found[form] > most}
    assert not over, f"instructions a call over the budget {BUDGET} (issue 65's targets: {TARGET}): {over}"

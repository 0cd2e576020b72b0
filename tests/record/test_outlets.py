"""A run's outlets (``gnnmon/record/outlets.py``) beside the sinks themselves: the lines other than
rows wait for the next batch only while a writer thread feeds the sinks, in the order they came;
the GC log's intake keeps every event and passes it on; a file another active run writes is
refused."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace

import pytest

from gnnmon.record.outlets import Outlets, refuse_shared_file


def _outlets() -> Outlets:
    return Outlets([], None, lambda force: None, 60.0, dict)


def test_lines_other_than_rows_wait_for_the_next_batch_only_while_a_writer_feeds_the_sinks():
    outlets = _outlets()
    outlets.pass_on("gc", {"n": 0})  # no writer: no sink would read it
    assert outlets.passed_on() == []
    outlets.writer = object()  # type: ignore[assignment]  # a writer feeds the sinks: they wait
    outlets.pass_on("sample", {"n": 1})
    outlets.pass_on("marker", {"n": 2})
    assert outlets.passed_on() == [("sample", {"n": 1}), ("marker", {"n": 2})]
    assert outlets.passed_on() == []  # taken once
    outlets.pass_on("gc", {"n": 3})
    outlets.forget()  # in a forked child: the parent's
    assert outlets.passed_on() == [] and outlets.writer is None


def test_a_keeper_keeps_every_item_and_passes_it_on_while_a_writer_runs():
    outlets = _outlets()
    kept: deque[dict] = deque(maxlen=2)
    keep = outlets.keeper("gc", kept)
    keep({"n": 0})
    outlets.writer = object()  # type: ignore[assignment]
    keep({"n": 1})
    keep({"n": 2})
    assert list(kept) == [{"n": 1}, {"n": 2}]  # bounded as the run's window is
    assert outlets.passed_on() == [("gc", {"n": 1}), ("gc", {"n": 2})]  # the sinks get all after the writer


def test_a_file_another_active_run_writes_is_refused(tmp_path):
    path = tmp_path / "run.jsonl"
    others = [SimpleNamespace(path=None), SimpleNamespace(path=tmp_path / "other.jsonl")]
    refuse_shared_file(path, others)  # no other run writes it
    with pytest.raises(ValueError, match="already being written"):
        refuse_shared_file(tmp_path / "." / "run.jsonl", [*others, SimpleNamespace(path=path)])

"""The out-of-memory post-mortem: a decorated step that runs out of memory on a planted batch leaves
a row with the batch's shape, the allocator's state at the failure (the fake CUDA allocator, with
planted fragmentation and other processes), the forecast for that batch, and the report says in
words what happened; the allocation history is dumped once, next to the run's file."""

from __future__ import annotations

import pickle
import random
import warnings

import pytest
import torch

import gnnmon
from gnnmon.devices.oom_error import is_oom, requested_bytes

MiB, GiB = 2**20, 2**30
A, B, C = 512 * MiB, 32 * 1024, 16 * 1024  # bytes, per node, per edge


def run_until_oom(fake_cuda, tmp_path, label="step", **options):
    """30 batches of 2k-20k nodes, then one of 60k nodes (3x the largest) on a 4 GiB fake GPU
    whose other processes hold 100 MiB; 512 KiB of its cache is split (planted)."""
    from torch_geometric.data import Data

    fake_cuda.total = 4 * GiB
    fake_cuda.other = 100 * MiB

    @gnnmon.monitor_memory_device(device="cuda:0", label=label)
    def step(batch):
        # a failed allocation leaves the others held, as a traceback holds the frame's tensors
        handles = [fake_cuda.alloc(size, 0) for size in (A, B * batch.num_nodes, C * batch.num_edges)]
        for h in handles:
            fake_cuda.free(h)

    weights = fake_cuda.alloc(200 * MiB, 0)
    rng = random.Random(11)
    shapes = [(n, rng.randint(2 * n, 4 * n)) for n in (rng.randint(2_000, 20_000) for _ in range(30))]
    with gnnmon.collect(tmp_path / "run.jsonl", **options) as run:
        for n, e in shapes:
            step(Data(x=torch.empty(n, 1), edge_index=torch.empty(2, e, dtype=torch.long)))
        fake_cuda.devices[0].split = 512 * 1024
        with pytest.raises(torch.OutOfMemoryError, match="CUDA out of memory"):
            step(Data(x=torch.empty(60_000, 1), edge_index=torch.empty(2, 180_000, dtype=torch.long)))
    fake_cuda.free(weights)
    return run, shapes


def test_the_failed_step_records_its_batch_and_the_allocator_and_the_report_forecasts_it(fake_cuda, tmp_path):
    run, shapes = run_until_oom(fake_cuda, tmp_path)
    failed = run.records[-1]
    assert failed["error"] == "OutOfMemoryError" and failed["index"] == 30
    assert (failed["num_nodes"], failed["num_edges"]) == (60_000, 180_000)
    # the third allocation failed: A and B·nodes were held by tensors, with the weights
    assert failed["oom_requested_bytes"] == pytest.approx(C * 180_000, rel=0.005)  # "2.75 GiB" in the message
    assert failed["oom_allocated_bytes"] == 200 * MiB + A + B * 60_000
    reserved = fake_cuda.devices[0].reserved
    assert failed["oom_reserved_bytes"] == reserved and failed["oom_fragmented_bytes"] == 512 * 1024
    assert failed["oom_cached_free_bytes"] == reserved - failed["oom_allocated_bytes"]
    assert failed["oom_device_total_bytes"] == 4 * GiB
    assert failed["oom_device_free_bytes"] == 4 * GiB - reserved - 100 * MiB
    truth = 200 * MiB + A + B * 60_000 + C * 180_000  # the absolute peak it would have needed
    assert not any(k.startswith("oom_forecast") for k in failed)  # the row holds the raw state only
    (oom,) = run.report().oom()  # the report fits the label's model and forecasts the failed batch
    assert oom["forecast_bytes"] == pytest.approx(truth, rel=0.05)
    assert oom["forecast_upper_bytes"] >= oom["forecast_bytes"]
    again = gnnmon.load(tmp_path / "run.jsonl").records[-1]  # the file has all of it
    assert {k: v for k, v in again.items() if k.startswith("oom_")} == {
        k: v for k, v in failed.items() if k.startswith("oom_")}


def test_no_memory_model_is_fitted_on_the_failing_step_s_thread(fake_cuda, tmp_path, monkeypatch):
    """The failing thread records the raw state and leaves: a spy on the model fit, put wherever a
    gnnmon module holds it, counts no call while the steps run, and the report's fits after."""
    import sys

    from gnnmon.report.memory import model as memory_model

    real, calls = memory_model.fit, []

    def spy(*args, **kwargs):
        calls.append(args[1] if len(args) > 1 else kwargs.get("label"))
        return real(*args, **kwargs)

    for module in [m for name, m in list(sys.modules.items()) if name.startswith("gnnmon")]:
        for attribute, value in list(vars(module).items()):
            if value is real:
                monkeypatch.setattr(module, attribute, spy)
    run, _ = run_until_oom(fake_cuda, tmp_path)
    assert run.records[-1]["error"] == "OutOfMemoryError" and "oom_allocated_bytes" in run.records[-1]
    assert calls == []  # none while the 31 steps ran, the failed one included
    (oom,) = run.report().oom()
    assert calls == ["step"] and oom["forecast_bytes"] is not None  # the report fitted it


def test_the_report_says_what_happened(fake_cuda, tmp_path):
    run, shapes = run_until_oom(fake_cuda, tmp_path)
    report = gnnmon.Report.load(tmp_path / "run.jsonl")
    (oom,) = report.oom()
    largest = max(range(30), key=lambda i: shapes[i][1])
    median_edges = sorted(e for _, e in shapes)[15 - 1: 15 + 1]
    assert oom["key"] == "step#30" and oom["largest_fit"]["key"] == f"step#{largest}"
    assert oom["vs_median"]["num_edges"] == pytest.approx(180_000 / (sum(median_edges) / 2))
    truth = 200 * MiB + A + B * 60_000 + C * 180_000
    assert oom["forecast_bytes"] == pytest.approx(truth, rel=0.05) and oom["forecast_bytes"] > 4 * GiB
    words = oom["words"]
    assert words.startswith("step#30 ran out of memory (OutOfMemoryError) at a batch of 60,000 nodes and "
                            "180,000 edges and 1 graph, ")
    assert "x the median edges" in words and "512 KiB of it in split blocks" in words
    assert "is more than the device's 4 GiB: the batch is too large" in words
    assert f"The largest batch that fit: step#{largest}" in words
    markdown = report.markdown()
    assert "### Out of memory — 1 call(s)" in markdown and words in markdown


def test_the_allocation_history_is_dumped_once_beside_the_run(fake_cuda, tmp_path):
    run, _ = run_until_oom(fake_cuda, tmp_path, memory_history=5000)
    assert fake_cuda.history_calls[0] == ("record", 5000, "python") and fake_cuda.history_calls[-1] == ("record", None)
    snapshot = run.records[-1]["oom_snapshot"]
    assert snapshot == str(tmp_path / "run.oom-step-30.pickle")
    assert pickle.loads((tmp_path / "run.oom-step-30.pickle").read_bytes())["fake"] is True
    assert run.manifest["options"]["memory_history"] == {"entries": 5000, "recording": True}
    assert "pytorch.org/memory_viz" in run.report().oom()[0]["words"]


def test_a_label_that_is_no_file_name_still_dumps_the_history_and_the_oom_reaches_the_user(fake_cuda, tmp_path):
    """A label with a ``/`` (and a space, ``<``, a non-ASCII letter): the OOM reaches the caller
    (run_until_oom expects it), the history lies beside the run under the label's safe spelling."""
    run, _ = run_until_oom(fake_cuda, tmp_path, label="train/step <é>", memory_history=5000)
    failed = run.records[-1]
    assert failed["label"] == "train/step <é>" and failed["error"] == "OutOfMemoryError"
    assert failed["oom_snapshot"] == str(tmp_path / "run.oom-train_step____-30.pickle")
    assert pickle.loads((tmp_path / "run.oom-train_step____-30.pickle").read_bytes())["fake"] is True
    assert failed["oom_device_total_bytes"] == 4 * GiB
    assert not [n for n in failed.get("notes", ()) if "fail" in n or "could not" in n]
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []


def _raise(*args, **kwargs):
    raise RuntimeError("planted")


GNNMON_FAILURES = {
    "the device's state": ("gnnmon.record.oom_row.oom_state",
                           "the device's state could not be read (RuntimeError: planted)"),
    "the history's dump": ("torch.cuda.memory._dump_snapshot",
                           "allocation history was not dumped (failed: RuntimeError: planted)"),
    "the post-mortem": ("gnnmon.record.oom_row.record_oom",
                        "gnnmon failed while recording the error: RuntimeError: planted"),
    "a probe's figures": ("gnnmon.record.probe_ranges.RowRange.close", "probe RowRange failed: RuntimeError: planted"),
}
"""Where gnnmon's code fails while it records a call's out-of-memory error (each planted to raise),
and the note the row keeps."""


@pytest.mark.parametrize("where", list(GNNMON_FAILURES))
def test_whatever_fails_while_gnnmon_records_a_failure_the_users_exception_reaches_the_user(
        fake_cuda, tmp_path, monkeypatch, where):
    """A decorated call, a scope and a phase of their own each raise the user's own OOM object
    while a part of gnnmon's recording raises: the very object reaches the caller with its
    traceback, the row is stored with its ``error`` and a note naming what failed, and the next
    call is recorded as usual."""
    target, note = GNNMON_FAILURES[where]
    planted: list[BaseException] = []

    def fail() -> None:
        planted.append(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
        raise planted[-1]

    @gnnmon.monitor_memory_device(device="cuda:0", label="a/b")
    def step(fails: bool) -> None:
        if fails:
            fail()

    # profiler ranges on where the planted failure is a probe's (the range probe's close)
    ranges = gnnmon.emit_ranges(where == "a probe's figures", nvtx=False)
    with gnnmon.collect(tmp_path / "run.jsonl", memory_history=100), ranges:
        monkeypatch.setattr(target, _raise)
        ways = [step, lambda fails: _in_scope(fails, fail), lambda fails: _in_phase(fails, fail)]
        for way in ways:
            with warnings.catch_warnings(record=True):
                warnings.simplefilter("always")
                with pytest.raises(torch.OutOfMemoryError) as caught:
                    way(True)
            assert caught.value is planted[-1] and caught.traceback[-1].name == "fail"
        monkeypatch.undo()
        step(False)
    rows = gnnmon.load(tmp_path / "run.jsonl").records
    assert [(r["label"], r.get("error")) for r in rows] == [
        ("a/b", "OutOfMemoryError"), ("scope", "OutOfMemoryError"), ("phased", "OutOfMemoryError"), ("a/b", None)]
    assert any(note in n for n in rows[0]["notes"])
    noted = rows[:1] if where == "the history's dump" else rows[:3]  # the history is dumped once per run
    assert all(any("planted" in n for n in r["notes"]) for r in noted)
    assert not [n for n in rows[-1].get("notes", ()) if "planted" in n]


def _in_scope(fails: bool, fail) -> None:
    with gnnmon.memory_scope(label="scope", device="cuda:0"):
        if fails:
            fail()


def _in_phase(fails: bool, fail) -> None:
    with gnnmon.phase("phased", device="cuda:0"):
        if fails:
            fail()


def test_without_cuda_the_history_option_says_it_records_nothing(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    with gnnmon.collect(tmp_path / "run.jsonl", memory_history=10) as run:
        pass
    assert run.manifest["options"]["memory_history"]["recording"] is False
    with pytest.raises(ValueError, match="memory_history must be a positive number"):
        gnnmon.collect(memory_history=0)


def test_a_cpu_allocation_failure_is_an_oom_with_the_request_and_the_machines_ram():
    import psutil

    @gnnmon.monitor_memory_device(device="cpu")
    def step():
        torch.empty(2**50, dtype=torch.uint8)  # 1 PiB: the CPU allocator refuses it

    @gnnmon.cuda_timed
    def other():
        raise ValueError("not memory")

    with gnnmon.collect() as run:
        with pytest.raises(RuntimeError, match="can't allocate memory"):
            step()
        with pytest.raises(ValueError):
            other()
    failed, plain = run.records
    assert failed["oom_requested_bytes"] == 2**50
    assert failed["oom_device_total_bytes"] == psutil.virtual_memory().total
    assert 0 < failed["oom_allocated_bytes"] < failed["oom_device_total_bytes"]
    assert not any(k.startswith("oom_") for k in plain)
    assert any("no forecast for this batch" in n for n in failed["notes"]) is False  # no batch: no forecast asked
    (said,) = run.report().oom()
    assert "(its RSS)" in said["words"] and "of RAM" in said["words"] and "held by tensors" not in said["words"]


def test_what_counts_as_out_of_memory():
    assert is_oom(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 MiB."))
    assert is_oom(MemoryError()) and not is_oom(ValueError("out of memory"))
    assert is_oom(RuntimeError("MPS backend out of memory (MPS allocated: 1.2 GB). Tried to allocate 256.00 MB "
                               "on private pool."))
    assert requested_bytes(RuntimeError("Tried to allocate 256.00 MB on private pool")) == 256 * MiB
    assert requested_bytes(torch.OutOfMemoryError("Tried to allocate 2.50 GiB. GPU 0 has")) == int(2.5 * GiB)
    assert requested_bytes(RuntimeError("you tried to allocate 1024 bytes")) == 1024
    assert requested_bytes(MemoryError()) is None

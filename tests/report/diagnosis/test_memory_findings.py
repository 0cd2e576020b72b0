"""The memory findings (:mod:`gnnmon.report.diagnosis.memory_findings`) read from planted rows and a
planted memory model: peaks of known bytes on devices of known capacity (from the manifest, or an
out-of-memory row, or MPS's recommended maximum), and a trusted model of known coefficients (1 GiB
+ 256 KiB a node + 64 KiB an edge) whose upper bound for the largest batch is therefore known to the
byte. Each finding is asserted whole against the module's documented rules: a peak is said from
HIGH (80 %) of the capacity, a forecast from FORECAST_HIGH (90 %) of it, the highest peak of the
calls that did not fail, on a device whose capacity is known."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gnnmon.data.table import Table
from gnnmon.report.diagnosis import memory_findings as mf

GiB, KiB = 2**30, 2**10
CONST, PER_NODE, PER_EDGE = 1 * GiB, 256 * KiB, 64 * KiB
"""The planted model: its upper bound for a batch, bytes."""

MEMORY_NEXT = ("gnnmon forecast RUN --capacity ... for the largest batch that fits; activation checkpointing, lower "
               "precision or smaller batches to make room")
OOM_NEXT = ("a smaller batch (gnnmon forecast RUN --capacity ... gives the largest that fits), activation "
            "checkpointing or lower precision")
SUMMARY = "mem_peak_bytes = 1 GiB + 256 KiB per node + 64 KiB per edge (planted)"


class Planted:
    """A memory model of known coefficients (``trusted`` as told); records the shapes it was asked for."""

    terms = ("num_nodes", "num_edges")

    def __init__(self, trusted: bool = True) -> None:
        self.trusted = trusted
        self.asked: list[dict] = []

    def predict(self, **shape: float) -> SimpleNamespace:
        self.asked.append(shape)
        return SimpleNamespace(upper_bytes=CONST + PER_NODE * shape["num_nodes"] + PER_EDGE * shape["num_edges"])

    def summary(self) -> str:
        return SUMMARY


def model_of(model: Planted, asked: list | None = None):
    def of(label: str, figure: str) -> Planted:
        assert figure == "mem_peak_bytes", figure  # the model of the peak the finding is about
        if asked is not None:
            asked.append(label)
        return model
    return of


def no_model(label: str, figure: str):
    raise ValueError(f"no memory model of {label!r}: too few rows")


def call(label: str, device: str | None, peak: float | None, **fields) -> dict:
    return {"label": label, "index": 0, "wall_s": 0.1, "device": device, "mem_peak_bytes": peak, **fields}


def memory(label: str, device: str, at_stake: float, capacity: float, words: str, evidence: list[dict]) -> dict:
    return {"kind": "memory", "label": label, "share": at_stake / capacity, "of": "memory", "at_stake": at_stake,
            "unit": "bytes", "words": words, "evidence": evidence, "next": MEMORY_NEXT}


def proof(figure: str, value: float, unit: str, where: str) -> dict:
    return {"figure": figure, "value": value, "unit": unit, "where": where}


def forecast(label: str, nodes: str, upper: float) -> dict:
    return proof("forecast upper bound", upper, "bytes",
                 f"the memory model's upper bound for {label}'s largest batch ({nodes} nodes): {SUMMARY}")


# out of memory


def test_calls_that_ran_out_of_memory_are_said_with_the_first_in_words():
    ooms = [{"label": "step", "words": "step#30 ran out of memory at a batch of 60,000 nodes"},
            {"label": "eval", "words": "eval#2 ran out of memory"}]
    assert mf.out_of_memory(ooms) == {
        "kind": "out of memory", "label": "step", "share": 1.0, "of": "memory", "at_stake": 1.0, "unit": "bytes",
        "words": "2 call(s) ran out of memory; the first: step#30 ran out of memory at a batch of 60,000 nodes",
        "evidence": [proof("error", 2.0, "calls", "the calls' out-of-memory errors (report.oom())")],
        "next": OOM_NEXT}
    assert mf.out_of_memory([{"words": "a call ran out"}])["label"] is None
    assert mf.out_of_memory([]) is None


# capacities


def test_each_device_s_capacity_is_the_manifest_s_first_then_the_first_row_that_tells_it():
    rows = [call("a", "cuda:0", 1.0, oom_device_total_bytes=79 * GiB),  # the manifest's 80 GiB wins
            call("a", "cuda:2", 1.0, oom_device_total_bytes=20 * GiB),
            call("a", "cuda:2", 1.0, oom_device_total_bytes=21 * GiB),  # the first row's wins
            call("a", None, 1.0, oom_device_total_bytes=7 * GiB),  # no device: nobody's
            call("a", "cuda:3", 1.0, oom_device_total_bytes=None),
            call("b", "mps", 1.0, mem_recommended_max_bytes=12 * GiB),
            call("b", "xpu", 1.0, oom_device_total_bytes=10 * GiB, mem_recommended_max_bytes=11 * GiB)]
    manifest = {"devices": {"ram_total_bytes": 64 * GiB, "cuda_memory_total_bytes": [80 * GiB, 40 * GiB]}}
    assert mf.capacities(manifest, Table(rows)) == {
        "cpu": (64.0 * GiB, "the manifest's ram_total_bytes (psutil)"),
        "cuda:0": (80.0 * GiB, "the manifest's cuda_memory_total_bytes (torch)"),
        "cuda:1": (40.0 * GiB, "the manifest's cuda_memory_total_bytes (torch)"),
        "cuda:2": (20.0 * GiB, "an out-of-memory row's oom_device_total_bytes"),
        "mps": (12.0 * GiB, "MPS's recommended maximum (mem_recommended_max_bytes)"),
        "xpu": (10.0 * GiB, "an out-of-memory row's oom_device_total_bytes")}
    assert mf.capacities(None, Table(rows[:1])) == {
        "cuda:0": (79.0 * GiB, "an out-of-memory row's oom_device_total_bytes")}
    assert mf.capacities({"devices": {"ram_total_bytes": 0, "cuda_memory_total_bytes": None}}, Table([])) == {}
    assert mf.capacities({"devices": None}, Table([])) == {}


# a device's peak against its capacity


def test_a_peak_from_80_percent_of_the_device_is_said_with_the_forecast_of_the_largest_batch():
    """cuda:0 holds 5 GiB: train's highest peak that did not fail is 4 GiB, exactly 80 % (a failed
    call's 6 GiB and a row without a device are not its peak); the model forecasts its largest batch
    (2,048 nodes, 8,192 edges) at 1 + 0.5 + 0.5 = 2 GiB. eval's equal 4 GiB peak comes after train's:
    train's is the highest. On the CPU (16 GiB), big peaked at 4 GiB but its largest batch (32,768
    nodes, 131,072 edges) is forecast at 1 + 8 + 8 = 17 GiB: said at that. cuda:1's capacity is not
    known: nothing is said of it; xpu:1's is its kind's (an out-of-memory row on xpu). A label that
    records no peak (loader) has none to say."""
    rows = [{"label": "loader", "index": 0, "wall_s": 0.1, "device": "cuda:0"},  # no peak recorded
            call("train", "cuda:0", 3 * GiB, num_nodes=1024, num_edges=4096),
            call("train", "cuda:0", 4 * GiB, num_nodes=2048, num_edges=8192),
            call("train", "cuda:0", 6 * GiB, num_nodes=1536, num_edges=6144, error="OutOfMemoryError"),
            call("train", None, 7 * GiB, num_nodes=1000, num_edges=4000),
            call("train", "cuda:0", None, num_nodes=1000, num_edges=4000),
            call("eval", "cuda:0", 4 * GiB),
            call("big", "cpu", 4 * GiB, num_nodes=32768, num_edges=131072),
            call("big", "cpu", 2 * GiB, num_nodes=1024, num_edges=4096),
            call("other", "cuda:1", 100 * GiB),
            call("other", "xpu", 1.0, oom_device_total_bytes=4 * GiB),
            call("other", "xpu:1", 3.5 * GiB)]
    manifest = {"devices": {"ram_total_bytes": 16 * GiB, "cuda_memory_total_bytes": [5 * GiB]}}
    asked: list[str] = []
    model = Planted()
    found = mf.device_memory(Table(rows), manifest, model_of(model, asked))
    assert found == [
        memory("train", "cuda:0", 4 * GiB, 5 * GiB,
               "train's peak on cuda:0 reached 4 GiB of 5 GiB; the memory model forecasts its largest batch at up "
               "to 2 GiB",
               [proof("mem_peak_bytes", 4.0 * GiB, "bytes", "the highest of train's calls on cuda:0"),
                proof("capacity", 5.0 * GiB, "bytes", "the manifest's cuda_memory_total_bytes (torch)"),
                forecast("train", "2,048", 2.0 * GiB)]),
        memory("big", "cpu", 17 * GiB, 16 * GiB,
               "big's peak on cpu reached 4 GiB of 16 GiB; the memory model forecasts its largest batch at up to "
               "17 GiB",
               [proof("mem_peak_bytes", 4.0 * GiB, "bytes", "the highest of big's calls on cpu"),
                proof("capacity", 16.0 * GiB, "bytes", "the manifest's ram_total_bytes (psutil)"),
                forecast("big", "32,768", 17.0 * GiB)]),
        memory("other", "xpu:1", 3.5 * GiB, 4 * GiB, "other's peak on xpu:1 reached 3.5 GiB of 4 GiB",
               [proof("mem_peak_bytes", 3.5 * GiB, "bytes", "the highest of other's calls on xpu:1"),
                proof("capacity", 4.0 * GiB, "bytes", "an out-of-memory row's oom_device_total_bytes")])]
    assert model.asked == [{"num_nodes": 2048, "num_edges": 8192}, {"num_nodes": 32768, "num_edges": 131072}]
    assert asked == ["train", "big"]  # other has no batch shapes: no model asked for


def test_a_peak_is_said_from_80_percent_and_a_forecast_from_90_percent_of_the_capacity():
    """5 GiB: 80 % is exactly 4 GiB, 90 % exactly 4.5 GiB. A peak a byte under 4 GiB with no model is
    not said; with a forecast of exactly 4.5 GiB (1 GiB + 8,192 nodes + 24,576 edges) it is, at the
    forecast; a byte less forecast and it is not."""
    manifest = {"devices": {"cuda_memory_total_bytes": [5 * GiB]}}
    under = 4 * GiB - 1
    assert mf.device_memory(Table([call("s", "cuda:0", under)]), manifest, model_of(Planted())) == []
    assert [f["at_stake"] for f in mf.device_memory(Table([call("s", "cuda:0", 4 * GiB)]), manifest,
                                                    model_of(Planted()))] == [4 * GiB]
    rows = [call("s", "cuda:0", under, num_nodes=8192, num_edges=24576)]
    assert mf.device_memory(Table(rows), manifest, model_of(Planted())) == [
        memory("s", "cuda:0", 4.5 * GiB, 5 * GiB,
               "s's peak on cuda:0 reached 4 GiB of 5 GiB; the memory model forecasts its largest batch at up to "
               "4.5 GiB",
               [proof("mem_peak_bytes", float(under), "bytes", "the highest of s's calls on cuda:0"),
                proof("capacity", 5.0 * GiB, "bytes", "the manifest's cuda_memory_total_bytes (torch)"),
                forecast("s", "8,192", 4.5 * GiB)])]
    rows = [call("s", "cuda:0", under, num_nodes=8192, num_edges=24576 - 1)]
    assert mf.device_memory(Table(rows), manifest, model_of(Planted())) == []


def test_a_forecast_from_90_percent_is_said_whatever_the_peak():
    """Calls that recorded a peak of 0 B (nothing held on the device) whose largest batch is forecast
    at exactly 90 % of it (4.5 GiB of 5 GiB): said at the forecast."""
    rows = [call("s", "cuda:0", 0.0, num_nodes=8192, num_edges=24576)]
    manifest = {"devices": {"cuda_memory_total_bytes": [5 * GiB]}}
    assert mf.device_memory(Table(rows), manifest, model_of(Planted())) == [
        memory("s", "cuda:0", 4.5 * GiB, 5 * GiB,
               "s's peak on cuda:0 reached 0 B of 5 GiB; the memory model forecasts its largest batch at up to 4.5 GiB",
               [proof("mem_peak_bytes", 0.0, "bytes", "the highest of s's calls on cuda:0"),
                proof("capacity", 5.0 * GiB, "bytes", "the manifest's cuda_memory_total_bytes (torch)"),
                forecast("s", "8,192", 4.5 * GiB)])]


@pytest.mark.parametrize("case", ["no model", "untrusted", "no node counts", "no edge count"])
def test_a_high_peak_without_a_trusted_forecast_is_said_alone(case):
    """A peak of 4.5 GiB of 5 GiB (90 %): said whatever the model; its forecast only where a trusted
    model has every term of the largest batch."""
    rows = [call("s", "cuda:0", 4.5 * GiB, num_nodes=1024, num_edges=4096),
            call("s", "cuda:0", 3 * GiB, num_nodes=2048, num_edges=8192)]
    of = model_of(Planted())
    if case == "no model":
        of = no_model
    elif case == "untrusted":
        of = model_of(Planted(trusted=False))
    elif case == "no node counts":
        for r in rows:
            r["num_nodes"] = None
    else:
        del rows[1]["num_edges"]  # the largest batch's
    manifest = {"devices": {"cuda_memory_total_bytes": [5 * GiB]}}
    assert mf.device_memory(Table(rows), manifest, of) == [
        memory("s", "cuda:0", 4.5 * GiB, 5 * GiB, "s's peak on cuda:0 reached 4.5 GiB of 5 GiB",
               [proof("mem_peak_bytes", 4.5 * GiB, "bytes", "the highest of s's calls on cuda:0"),
                proof("capacity", 5.0 * GiB, "bytes", "the manifest's cuda_memory_total_bytes (torch)")])]


def test_no_memory_finding_without_peaks_or_a_known_capacity():
    manifest = {"devices": {"cuda_memory_total_bytes": [5 * GiB]}}
    rows = [{"label": "s", "index": 0, "wall_s": 0.1, "device": "cuda:0", "num_nodes": 8192, "num_edges": 24576}]
    assert mf.device_memory(Table(rows), manifest, model_of(Planted())) == []  # no peak recorded
    rows = [call("s", "cuda:1", 5 * GiB, num_nodes=8192, num_edges=24576)]
    assert mf.device_memory(Table(rows), manifest, model_of(Planted())) == []  # cuda:1's capacity unknown
    assert mf.device_memory(Table(rows), {}, model_of(Planted())) == []

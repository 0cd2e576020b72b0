"""Whether a memory model counted the host's memory (:func:`gnnmon.forecast.forecast.on_host`),
judged once for the two next steps that read it: calibrate's note to drop a neighbour loader
before training (``before_training``) and a refused model's advice to make host memory exact
(``_scatter_step``). Planted rows: 40 calls of 100-3,900 nodes at 1,000 bytes a node over 50 MiB,
the same bytes in the device's figures and the host's (RSS), on the CPU, on a CUDA device, or
naming no device."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import gnnmon
from gnnmon.forecast.calibrate import before_training
from gnnmon.forecast.forecast import _scatter_step, on_host
from gnnmon.report.memory.model import MemoryModel

MiB = 2**20
EXACT = "gnnmon.exact_host_memory() first thing"
"""The scatter step's advice to make host memory exact."""

NEIGHBOUR_LOADER = SimpleNamespace(node_sampler=object(), input_data=object())
"""What a PyG neighbour loader shows the calibration (:func:`gnnmon.forecast.shapes.sampling`)."""


def rows(device: str | None) -> list[dict[str, Any]]:
    out = []
    for i in range(40):
        n = 100 * (i + 1) - 100 * (i % 2) * (i % 3)  # spread sizes, a few alike
        peak = 50 * MiB + 1000 * n + 4096 * (i % 5)
        row = {"label": "s", "index": i, "error": None, "num_nodes": n, "num_edges": 3 * n, "wall_s": 0.01,
               "mem_start_bytes": 50 * MiB, "mem_peak_bytes": peak, "mem_peak_delta_bytes": peak - 50 * MiB,
               "rss_start_bytes": 50 * MiB, "rss_peak_bytes": peak, "rss_peak_delta_bytes": peak - 50 * MiB}
        if device is not None:
            row.update(device=device, backend=device.split(":")[0])
        out.append(row)
    return out


def report(device: str | None) -> gnnmon.Report:
    """The planted run, exact host memory recorded as not in force."""
    return gnnmon.Report(rows(device), manifest={"type": "manifest", "pid": -1,
                                                 "host_memory": {"mmap_threshold": None}})


def model(device: str | None, figure: str) -> MemoryModel:
    return report(device).memory_model("s", figure, warmup=0)


CASES = [("cpu", "mem_peak_bytes", True), (None, "mem_peak_bytes", True), ("cuda:0", "mem_peak_bytes", False),
         ("cpu", "rss_peak_bytes", True), ("cuda:0", "rss_peak_bytes", True),
         ("cuda:0", "rss_peak_delta_bytes", True), ("cpu", "mem_peak_delta_bytes", True),
         ("cuda:0", "mem_peak_delta_bytes", False)]


@pytest.mark.parametrize(("device", "figure", "host"), CASES)
def test_on_host_and_both_next_steps_that_read_it(device, figure, host):
    m = model(device, figure)
    assert m.devices == ([] if device is None else [device])
    assert on_host(m) is host
    note = before_training(NEIGHBOUR_LOADER, m, 1000)
    assert (note is not None) is host
    assert note is None or note.startswith("drop this calibration's loader before you build one of 1,000 items")
    assert before_training(NEIGHBOUR_LOADER, m, 0) is None  # no size answered
    assert (EXACT in _scatter_step(m, report(device))) is host

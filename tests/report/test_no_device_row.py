"""A row that did not start because the device it named cannot be measured (``device='cuda'`` on a
machine without CUDA: the call raises DeviceError) keeps ``device`` None (commit 5aec600). The
reports say that such calls ran on no device, never on a device named "None": the markdown's
section heading and the HTML page's devices line, over a real run's rows (a collect() run that
stores such a row beside rows that ran on the CPU).

The machine without an accelerator is planted by the ``no_accelerator`` fixture (tests/conftest.py):
CUDA and MPS unavailable and none in use, whatever machine runs the suite."""

from __future__ import annotations

import re

import pytest
import torch

import gnnmon
from gnnmon.errors import DeviceError


def run_with_a_row_on_no_device(path):
    """A run of three calls: ``f`` (device='cuda', which raises: no device), ``step`` once on the
    CPU and once on 'cuda' (raised: no device), ``g`` on the CPU; its report."""

    @gnnmon.monitor_memory_device(device="cuda")
    def f(x):
        return x

    @gnnmon.monitor_memory_device(label="step", device="cpu")
    def step_cpu(x):
        return x

    @gnnmon.monitor_memory_device(label="step", device="cuda")
    def step_cuda(x):
        return x

    @gnnmon.monitor_memory_device
    def g(x):
        return x * 2

    with gnnmon.collect(path) as run:
        with pytest.raises(DeviceError):
            f(torch.ones(2))
        step_cpu(torch.ones(2))
        with pytest.raises(DeviceError):
            step_cuda(torch.ones(2))
        g(torch.ones(2))
    rows = {(r["label"], r["index"]): (r["device"], r["error"]) for r in run.records}
    assert rows == {("f", 0): (None, "DeviceError"), ("step", 0): ("cpu", None), ("step", 1): (None, "DeviceError"),
                    ("g", 0): ("cpu", None)}, rows
    return gnnmon.Report(run.result())


def test_markdown_says_no_device_for_calls_that_ran_on_none(no_accelerator, tmp_path):
    """Each label's heading names its devices and the calls on none: ``f`` (its one call raised
    before it started) on no device; ``step`` on the CPU, one of its two calls on no device; ``g``
    on the CPU alone. The word None names no device."""
    text = run_with_a_row_on_no_device(tmp_path / "run.jsonl").markdown()
    headings = [line for line in text.splitlines() if line.startswith("### ") and " call(s) on " in line]
    assert headings == ["### f — 1 call(s) on no device, 1 raised",
                        "### step — 2 call(s) on cpu (1 on no device), 1 raised",
                        "### g — 1 call(s) on cpu"], headings


def test_markdown_of_the_runs_file_says_the_same(no_accelerator, tmp_path):
    """The run read back from its file (None stored as JSON null) gives the same headings."""
    run_with_a_row_on_no_device(tmp_path / "run.jsonl")
    text = gnnmon.Report.load(tmp_path / "run.jsonl").markdown()
    assert "### f — 1 call(s) on no device, 1 raised" in text, text
    assert "### step — 2 call(s) on cpu (1 on no device), 1 raised" in text, text
    assert " on None" not in text, text


def test_html_header_lists_the_devices_and_the_rows_on_none(no_accelerator, tmp_path):
    """The page's devices line lists the CPU and counts the 2 rows on no device; None is not listed."""
    report = run_with_a_row_on_no_device(tmp_path / "run.jsonl")
    out = tmp_path / "run.html"
    report.export("html", out)
    page = out.read_text("utf-8")
    devices = re.findall(r"<li><b>devices</b>: ([^<]*)</li>", page)
    assert devices == ["cpu (2 rows on no device)"], devices


def test_html_header_of_a_run_with_every_row_on_none(no_accelerator, tmp_path):
    """A run whose only row ran on no device: the devices line says so, in place of 'None'."""

    @gnnmon.monitor_memory_device(device="cuda")
    def f(x):
        return x

    with gnnmon.collect(tmp_path / "run.jsonl") as run:
        with pytest.raises(DeviceError):
            f(torch.ones(2))
    out = tmp_path / "run.html"
    gnnmon.Report(run.result()).export("html", out)
    devices = re.findall(r"<li><b>devices</b>: ([^<]*)</li>", out.read_text("utf-8"))
    assert devices == ["1 row on no device"], devices

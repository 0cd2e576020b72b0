"""A leak on the host's RSS in a run that kept glibc's default (``gnnmon.exact_host_memory()`` not
called: the manifest's ``host_memory`` says ``mmap_threshold`` None) says that its rate holds the
memory the allocator kept, and how to measure the leak alone; a leak on a GPU's memory, or in a run
with exact host memory on, does not. Planted: 30 MiB more each epoch from 500 MiB, 6 epochs of 40
calls, on the CPU (the host's RSS) or on ``cuda:0``; the rate is the planted one either way."""

from __future__ import annotations

import pytest

import gnnmon
from gnnmon.report.diagnosis import creep, memory_findings
from gnnmon.report.memory.model import format_bytes
from tests.report.diagnosis.test_creep_levels import HOST, LEAK_NEXT, MiB, loop_of, plant

RATE = 30 * MiB
NOTE = "cpu: freed memory stays in the process for reuse (glibc)"


def leak_of(device: str, retained: bool) -> dict:
    rows = plant([500 * MiB + RATE * e for e in range(6)], device=device)
    (found,) = creep.creep(loop_of(rows), HOST if device == "cpu" else 0.0, retained)
    assert found["kind"] == "leak"
    assert found["evidence"][0]["value"] == pytest.approx(RATE)  # the rate is the planted one, note or not
    return found


def test_the_manifest_says_whether_freed_host_memory_was_kept():
    assert memory_findings.host_retained({"host_memory": {"mmap_threshold": None, "note": NOTE}})
    assert not memory_findings.host_retained({"host_memory": {"mmap_threshold": 65536}})  # exact_host_memory()
    assert not memory_findings.host_retained({"host_memory": {}})  # a setting not recorded: no claim
    assert not memory_findings.host_retained({"host_memory": None})
    assert not memory_findings.host_retained({"devices": {"cpu_count": 2}})
    assert not memory_findings.host_retained(None)


def test_a_host_rss_leak_with_freed_memory_kept_says_so_and_how_to_measure_it_alone():
    found = leak_of("cpu", True)
    words = ("a leak: mem_end_bytes of step grew 30 MiB per epoch (95 % interval "
             f"{format_bytes(RATE - HOST / 5)} to "
             f"{format_bytes(RATE + HOST / 5)}) from epoch 0 to the last, that the "
             "batches' shapes do not explain")
    assert found["words"] == words + (" (host RSS with gnnmon.exact_host_memory() off: the rate includes freed "
                                      "memory the allocator, glibc, kept for reuse)")
    assert found["next"] == LEAK_NEXT + ("; gnnmon.exact_host_memory() before the run returns large frees to the OS, "
                                         "so that the rate is what outlives the steps (docs/memory.md)")
    plain = leak_of("cpu", False)  # exact host memory on: the words and next step as they were
    assert (plain["words"], plain["next"]) == (words, LEAK_NEXT)


def test_a_gpu_leak_says_nothing_of_the_hosts_allocator():
    found = leak_of("cuda:0", True)
    assert "exact_host_memory" not in found["words"] and found["next"] == LEAK_NEXT


def test_the_report_reads_the_manifests_host_memory_for_the_leak():
    rows = plant([500 * MiB + RATE * e for e in range(6)], device="cpu")
    manifest = {"devices": {"cpu_count": 2, "cpu_usable": 2}, "host_memory": {"mmap_threshold": None, "note": NOTE}}
    (found,) = [f for f in gnnmon.Report(rows, manifest=manifest).diagnosis() if f["kind"] == "leak"]
    assert "exact_host_memory() off" in found["words"]


def test_the_shells_route_to_exact_host_memory_is_read_as_in_force(monkeypatch):
    """``MALLOC_MMAP_THRESHOLD_=65536 python train.py`` (the shell's route) fixes glibc's threshold
    as ``exact_host_memory()`` would: the manifest records it and no retention is claimed; not set,
    or not a number (which glibc ignores too), the default is said."""
    import sys

    from gnnmon.devices import malloc
    from gnnmon.record.manifest import host_memory
    from gnnmon.report.diagnosis.memory_findings import host_retained

    monkeypatch.setattr(malloc, "_mmap_threshold", None)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    linux = sys.platform.startswith("linux")
    assert host_memory()["mmap_threshold"] == (65536 if linux else None)
    assert host_retained({"host_memory": host_memory()}) is not linux
    for unset in ("", "lots"):
        monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", unset)
        assert host_memory()["mmap_threshold"] is None and host_retained({"host_memory": host_memory()})

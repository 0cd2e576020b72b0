"""The first line of a run: versions, host, devices, start time and the user's config, and what
holds for every row of the run, said once here rather than on each row (format version 3): the
host allocator's setting and what it means for the CPU's memory figures (``host_memory``; the end
line says it again as it was at the end, without the note), and how every sampled figure is had
(``sampled``)."""

from __future__ import annotations

import datetime as _dt
import gc
import os
import platform
import socket
import sys
import time
from importlib import metadata
from typing import Any

import torch

from gnnmon._version import __version__
from gnnmon.data.format import FORMAT, FORMAT_VERSION, MANIFEST
from gnnmon.devices.malloc import mmap_threshold
from gnnmon.devices.ranks import RankInfo, clock_offset
from gnnmon.devices.registry import BACKENDS
from gnnmon.timeline.join import gauge_statement

HOST_MEMORY_NOTE = ("cpu: freed memory stays in the process for reuse (glibc), so a call's peak shows only "
                    "growth beyond what earlier calls left; gnnmon.exact_host_memory() returns large frees "
                    "to the OS (at a cost in page faults: 1.6-1.8x a GraphSAGE step's time, docs/memory.md)")
"""What the CPU rows' memory figures (``mem_*``, ``rss_*``) mean while the allocator keeps freed memory
(:func:`gnnmon.exact_host_memory` not called): said once, in the manifest's ``host_memory``."""


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _devices() -> dict[str, Any]:
    """Each device kind's entries (:mod:`gnnmon.devices.registry`; counting devices does not
    create a CUDA context), and torch's default device."""
    found: dict[str, Any] = {}
    for kind in BACKENDS.values():
        found.update(kind.manifest())
    found["default_device"] = str(torch.get_default_device()) if hasattr(torch, "get_default_device") else "cpu"
    return found


def build_manifest(config: dict[str, Any] | None, options: dict[str, Any]) -> dict[str, Any]:
    """The manifest dict for a new run (plain data, JSON-serialisable); ``options["sample"]``: the
    sampling interval (seconds) whose figures' ``sampled`` statement it holds, or None."""
    manifest = {
        "type": MANIFEST,
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "gnnmon": __version__,
        "torch": torch.__version__,
        "torch_geometric": _version("torch-geometric"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "start_time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
        "start_ns": time.time_ns(),
        "devices": _devices(),
        **gc_state(),
        "options": options,
        "config": dict(config or {}),
        "host_memory": host_memory(),
    }
    interval = options.get("sample")
    if interval is not None:
        manifest["sampled"] = gauge_statement(interval)
    return manifest


def host_memory(note: bool = True) -> dict[str, Any]:
    """The host allocator's setting now, for every CPU row of a run (said once, never on a row):
    ``mmap_threshold`` is what :func:`gnnmon.exact_host_memory` set, None for glibc's default (freed
    memory kept for reuse); ``note`` (where ``note`` is asked and it is None): what that means for
    the CPU's memory figures, :data:`HOST_MEMORY_NOTE`. The manifest holds it with its note as the
    run starts, the end line without as it ends: the two differ where the call came mid-run."""
    threshold = mmap_threshold()
    entry: dict[str, Any] = {"mmap_threshold": threshold}
    if note and threshold is None:
        entry["note"] = HOST_MEMORY_NOTE
    return entry


def at_end(note: bool = False) -> dict[str, Any]:
    """What the end line reads again as the run closes, for what the user may set after its start:
    the host allocator's setting (:func:`host_memory`, ``note`` as there) and torch's intra-op
    threads (``torch_threads``: a script under ``gnnmon run`` sets them after the manifest)."""
    return {"host_memory": host_memory(note), "torch_threads": torch.get_num_threads()}


def gc_state() -> dict[str, int | None]:
    """``gc_frozen``: objects frozen out of the collector (``gnnmon.freeze_gc()``, or what froze
    before it: 375 objects on an H200 machine once torch 2.11 was imported); ``gc_tracked``:
    the objects the collector still walks, counted only where some are frozen (a count walks
    them all: tens of milliseconds for half a million), else None. Set-up counts as frozen where
    the frozen outnumber the tracked: the GC advice knows."""
    frozen = gc.get_freeze_count()
    return {"gc_frozen": frozen, "gc_tracked": len(gc.get_objects()) if frozen else None}


def distributed_entry(rank: RankInfo | None, collectives: bool, job_path: str | None) -> dict[str, Any] | None:
    """The manifest's ``distributed``: this rank, and its clock's offset to rank 0 where a process
    group can measure it (a collective: every rank entering ``collect`` takes part)."""
    if rank is None:
        return None
    entry = rank.describe()
    entry["collectives"] = collectives
    entry["job_path"] = job_path  # the file name every rank was given: finds the others
    if collectives and rank.source == "process group":
        entry.update(clock_offset())
    return entry

"""The first line of a run: versions, host, devices, start time and the user's config."""

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
from gnnmon.devices.ranks import RankInfo, clock_offset
from gnnmon.devices.registry import BACKENDS


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
    """The manifest dict for a new run (plain data, JSON-serialisable)."""
    return {
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
    }


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

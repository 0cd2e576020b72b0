"""The row's vocabulary, shared by every stage: field names and units that more than one stage
needs (the full list of fields is in the README and ``docs/``). Imports nothing from gnnmon."""

from __future__ import annotations

IDENTITY_FIELDS = (
    "label", "index", "parent", "t_start_ns", "t_end_ns", "device", "backend", "device_source", "error",
    "notes",
)
"""Fields every row has; a carried marker may not take one of these names."""

ROW_FIELD_PREFIXES = ("mem_", "rss_", "phase_", "gc_")
"""Prefixes of measured figures; a carried marker may not start with one."""

ENERGY_FIELDS = ("energy_gpu_j", "energy_cpu_j", "energy_ram_j")
"""Energy figures of a row, in joules (each with a ``<field>_source``)."""

J_PER_KWH = 3.6e6
"""Joules in one kilowatt-hour."""

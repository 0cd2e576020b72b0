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

STEP_FIGURES = {
    "wall_s": ("wall_ms", 1e3),
    "device_s": ("device_ms", 1e3),
    "phase_forward_s": ("forward_ms", 1e3),
    "phase_backward_s": ("backward_ms", 1e3),
    "phase_optimizer_s": ("optimizer_ms", 1e3),
    "mem_peak_bytes": ("mem_peak_mib", 1 / 2**20),
    "mem_peak_delta_bytes": ("mem_peak_delta_mib", 1 / 2**20),
    "gc_pause_s": ("gc_ms", 1e3),
    "num_nodes": ("num_nodes", 1),
    "num_edges": ("num_edges", 1),
}
"""Row field -> (name, factor): a step's figures in the units a dashboard shows (ms, MiB,
counts), as the Lightning callback logs them and the TensorBoard export writes them."""

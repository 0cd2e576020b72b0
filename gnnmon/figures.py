"""Every figure a row can hold, declared once: its name, unit, meaning and the stage that fills it.

The renderers read this table: the markdown report's units, the Chrome trace's slice arguments,
the TensorBoard scalars, the Lightning callback's logged step figures, the plots, and the field
reference in ``docs/fields.md`` (made by :func:`reference`; a test keeps it current). Backends
return raw counters; the measurement that fills a figure names it, as declared here. A figure's unit also
shows in its name's suffix (``_bytes``, ``_s``, ``_pct``, ...: :data:`UNITS`), so a field that
is not declared (a marker of yours, an energy counter's source) still renders in the right unit.
Imports nothing from gnnmon.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Unit:
    """How a figure is stored and how it is shown: stored value × ``factor`` = shown value."""

    name: str
    """The stored unit, as the reference names it."""
    suffix: str
    """The suffix of every field name in this unit."""
    shown: str
    """The unit a report shows (MiB for bytes, ms for seconds)."""
    factor: float
    tag: str
    """The shown unit inside a name (``mem_peak_mib``, ``wall_ms``)."""


BYTES = Unit("bytes", "_bytes", "MiB", 1 / 2**20, "mib")
SECONDS = Unit("s", "_s", "ms", 1e3, "ms")
NANOSECONDS = Unit("ns", "_ns", "ns", 1.0, "ns")
PERCENT = Unit("%", "_pct", "%", 1.0, "pct")
WATTS = Unit("W", "_w", "W", 1.0, "w")
JOULES = Unit("J", "_j", "J", 1.0, "j")
KILOGRAMS = Unit("kg", "_kg", "kg", 1.0, "kg")
UNITS = (BYTES, SECONDS, NANOSECONDS, PERCENT, WATTS, JOULES, KILOGRAMS)
"""Units with a suffix, by suffix; anything else is a count or a text."""

COUNT = Unit("count", "", "", 1.0, "")
TEXT = Unit("text", "", "", 1.0, "")


@dataclass(frozen=True)
class Figure:
    """One field of a row. ``name`` may hold a ``<part>`` (a family: ``phase_<name>_s``)."""

    name: str
    unit: Unit
    stage: str
    """What fills it: row, memory, timing, phase, gc, graph, data, steps, layer, ddp, sched, compile, timeline, energy,
    oom."""
    meaning: str
    logged: str | None = None
    """The name of a step figure in shown units, as the Lightning callback logs it and the
    TensorBoard export writes it (``wall_ms``); None: not a step figure."""
    traced: bool = False
    """Shown on its row's slice in the Chrome trace."""

    @property
    def shown_name(self) -> str:
        """The name in shown units: ``logged`` if set, else the suffix swapped (``rss_peak_delta_mib``)."""
        if self.logged:
            return self.logged
        if self.unit.suffix and self.name.endswith(self.unit.suffix):
            return self.name[: -len(self.unit.suffix)] + "_" + self.unit.tag
        return self.name


F = Figure
# The memory figures other stages name, declared here by name: a stage reads or asks for one through
# its declaration (``MEM_PEAK.name``); the memory measurement (gnnmon.measure.memory) computes them.
MEM_START = F("mem_start_bytes", BYTES, "memory", "device memory at the start (CPU: process RSS)")
MEM_END = F("mem_end_bytes", BYTES, "memory", "device memory at the end")
MEM_PEAK = F("mem_peak_bytes", BYTES, "memory", "highest device memory inside the call", "mem_peak_mib", True)
MEM_PEAK_DELTA = F("mem_peak_delta_bytes", BYTES, "memory", "peak minus start: what the call added at its worst",
                   "mem_peak_delta_mib", True)
MEM_END_DELTA = F("mem_end_delta_bytes", BYTES, "memory", "end minus start: what the call left behind")
RSS_START = F("rss_start_bytes", BYTES, "memory", "host process RSS at the start")
RSS_PEAK = F("rss_peak_bytes", BYTES, "memory", "highest host process RSS inside the call")
RSS_END = F("rss_end_bytes", BYTES, "memory", "host process RSS at the end")
RSS_PEAK_DELTA = F("rss_peak_delta_bytes", BYTES, "memory", "RSS peak minus start", traced=True)
# A row's own CPU seconds (gnnmon.record.row), named by its declaration.
CPU_S = F("cpu_s", SECONDS, "timing", "process CPU time during the row (all its threads): a call that took long "
          "but computed no more waited (for a core, I/O, a lock); the CPU energy model reads it")

FIGURES: tuple[Figure, ...] = (
    F("label", TEXT, "row", "the `label=` given, else the function's name as written"),
    F("index", COUNT, "row", "call number per label, from 0"),
    F("parent", TEXT, "row", "`label#index` of the enclosing row, or None"),
    F("t_start_ns", NANOSECONDS, "row", "wall clock at the start (Unix epoch)"),
    F("t_end_ns", NANOSECONDS, "row", "wall clock at the end (Unix epoch)"),
    F("device", TEXT, "row", "the device measured (`cuda:0`, `mps`, `cpu`)"),
    F("backend", TEXT, "row", "the device kind measured (`cuda`, `mps`, `cpu`)"),
    F("device_source", TEXT, "row", "how the device was chosen (`explicit`, `argument`, `cuda in use`, ...)"),
    F("error", TEXT, "row", "the exception type the call raised, or None"),
    F("notes", TEXT, "row", "why a figure is missing or how it was made"),
    MEM_START,
    MEM_END,
    MEM_PEAK,
    MEM_PEAK_DELTA,
    MEM_END_DELTA,
    F("mem_reserved_start_bytes", BYTES, "memory", "CUDA: what the caching allocator holds, at the start"),
    F("mem_reserved_end_bytes", BYTES, "memory", "CUDA: what the caching allocator holds, at the end"),
    F("mem_reserved_peak_bytes", BYTES, "memory", "CUDA: the most the caching allocator held"),
    F("mem_driver_start_bytes", BYTES, "memory", "MPS: what Metal's driver holds, at the start"),
    F("mem_driver_bytes", BYTES, "memory", "MPS: what Metal's driver holds, at the end"),
    F("mem_driver_peak_bytes", BYTES, "memory", "MPS: the most Metal's driver held (sampled)"),
    F("mem_recommended_max_bytes", BYTES, "memory", "MPS: torch.mps.recommended_max_memory()"),
    F("cuda_alloc_retries", COUNT, "memory", "CUDA: allocations that had to free the cache and retry"),
    F("cuda_ooms", COUNT, "memory", "CUDA: out-of-memory errors raised by the allocator"),
    RSS_START,
    RSS_PEAK,
    RSS_END,
    RSS_PEAK_DELTA,
    F("rss_children_start_bytes", BYTES, "memory", "child processes' RSS at the start (sampled)"),
    F("rss_children_peak_bytes", BYTES, "memory", "child processes' highest RSS (sampled)"),
    F("rss_children_end_bytes", BYTES, "memory", "child processes' RSS at the end (sampled)"),
    F("wall_s", SECONDS, "timing", "host time of the call", "wall_ms", True),
    F("device_s", SECONDS, "timing", "device time of the call (events or syncs; CPU: wall time)", "device_ms", True),
    F("phase_forward_s", SECONDS, "phase", "time in `phase(\"forward\")`", "forward_ms"),
    F("phase_backward_s", SECONDS, "phase", "time in `phase(\"backward\")`", "backward_ms"),
    F("phase_optimizer_s", SECONDS, "phase", "time in `phase(\"optimizer\")`", "optimizer_ms"),
    F("phase_<name>_s", SECONDS, "phase", "time in `phase(name)`, summed if it repeats", "<name>_ms"),
    F("phase_<name>_in", TEXT, "phase", "the phase `phase(name)` ran inside, when nested: its time is part of "
      "that phase's (shares of the step count the outer one only)"),
    F("gc_collections", COUNT, "gc", "collections inside the row"),
    F("gc_pause_s", SECONDS, "gc", "time those collections paused the process", "gc_ms", True),
    F("gc_max_generation", COUNT, "gc", "the oldest generation collected, or None"),
    F("num_nodes", COUNT, "graph", "nodes of the PyG batch among the call's arguments", "num_nodes"),
    F("num_edges", COUNT, "graph", "edges of that batch", "num_edges"),
    F("num_graphs", COUNT, "graph", "graphs in that batch"),
    F("batch_size", COUNT, "graph", "seed nodes of a neighbour-sampled batch"),
    F("num_nodes__<type>", COUNT, "graph", "nodes of one node type of a HeteroData batch"),
    F("num_edges__<type>", COUNT, "graph", "edges of one edge type of a HeteroData batch"),
    F("layer_<name>_forward_s", SECONDS, "layer", "a layer's forward (`watch_layers`; device events, CPU: host time)"),
    F("layer_<name>_backward_s", SECONDS, "layer", "its backward: the output's gradient arriving to the inputs' "
      "and parameters' gradients done"),
    F("layer_<name>_backward_peak_delta_bytes", BYTES, "layer", "highest memory above the backward's start, in it"),
    F("layer_<name>_peak_delta_bytes", BYTES, "layer", "highest memory above the forward's start, in it"),
    F("layer_<name>_saved_bytes", BYTES, "layer", "tensors autograd saved for backward in the forward "
      "(distinct storages, parameters left out)"),
    F("layer_<name>_message_bytes", BYTES, "layer", "message passing: the message tensor (edges × features)"),
    F("layer_<name>_output_bytes", BYTES, "layer", "the layer's output tensors"),
    F("ddp_buckets", COUNT, "ddp", "DDP gradient buckets made ready in the row (`watch_buckets`)"),
    F("ddp_first_ready_s", SECONDS, "ddp", "row start to the first bucket ready (host clock)"),
    F("ddp_ready_s", SECONDS, "ddp", "row start to the last bucket ready, before its all-reduce (host clock)"),
    F("ddp_ready_device_s", SECONDS, "ddp", "GPU: the model's forward to the last bucket ready (device events)"),
    F("ddp_ready_thread_cpu_s", SECONDS, "ddp", "CPU rows with `thread_*`: the row's thread's CPU time from the "
      "row's start to the last bucket ready (the all-reduce's wait left out)"),
    F("ddp_ready_thread_preempted", COUNT, "ddp", "`thread_preempted` over that time"),
    F("ddp_ready_thread_waits", COUNT, "ddp", "`thread_waits` over that time"),
    F("ddp_ready_thread_queued_s", SECONDS, "ddp", "`thread_queued_s` over that time"),
    F("thread_cpu_s", SECONDS, "sched", "CPU time (user + system) of the thread that ran the row, in it "
      "(`collect(sched=)`: on in a distributed job); `wall_s` minus it: off the CPU"),
    F("thread_preempted", COUNT, "sched", "times the OS took the CPU from that thread in the row, while it could "
      "run (involuntary context switches)"),
    F("thread_waits", COUNT, "sched", "times that thread gave the CPU up in the row: a sleep, I/O, a lock, a "
      "blocking wait (voluntary context switches)"),
    F("thread_queued_s", SECONDS, "sched", "time that thread waited for a core in the row while it could run "
      "(run-queue delay, Linux schedstat); off the CPU minus it: time it gave the CPU up"),
    F("before_s", SECONDS, "sched", "host time from that thread's previous top-level row's end to this row's start"),
    F("before_thread_cpu_s", SECONDS, "sched", "`thread_cpu_s` over that time"),
    F("before_thread_preempted", COUNT, "sched", "`thread_preempted` over that time"),
    F("before_thread_waits", COUNT, "sched", "`thread_waits` over that time"),
    F("before_thread_queued_s", SECONDS, "sched", "`thread_queued_s` over that time"),
    F("data_wait_s", SECONDS, "data", "the loop's wait in `next()` for the batch this row consumes (`watch_loader`; "
      "`gnnmon run`: summed over the row's batches, as are the loader's times and nodes per hop below)", traced=True),
    F("data_wait_in_row_s", SECONDS, "data", "of `data_wait_s`, the waits inside this row's window, so in its "
      "`wall_s` too (`gnnmon run`: its second and later batches', gradient accumulation's); absent where none was"),
    F("data_sample_s", SECONDS, "data", "neighbour sampling of that batch (PyG neighbour loaders; in a worker too)",
      traced=True),
    F("data_gather_s", SECONDS, "data", "joining its sampled nodes with their features (`filter_fn`, transform aside)",
      traced=True),
    F("data_transform_s", SECONDS, "data", "the loader's `transform` on it", traced=True),
    F("data_to_device_s", SECONDS, "data", "`watch_loader(to=...)`: host time of its copy to the device", traced=True),
    F("data_sampler", TEXT, "data", "`gnnmon` where the batch's neighbours were sampled by gnnmon's pure-PyTorch "
      "sampler (`gnnmon.integrations.pyg_sampler`: neither pyg-lib nor torch-sparse installed); absent otherwise"),
    F("data_workers", COUNT, "data", "the loader's `num_workers` (0: batches made in the training process): the "
      "watched one's (`watch_loader`), or under `gnnmon run` the one that gave the row's last batch"),
    F("data_persistent", COUNT, "data", "1 where that loader's workers are kept across epochs "
      "(`persistent_workers=True`), 0 where they start with each epoch; absent without workers"),
    F("data_hop_<k>_nodes", COUNT, "data", "its nodes per hop (hop 0: the seeds), from `num_sampled_nodes`"),
    F("step_rule", TEXT, "steps", "`gnnmon run`: the rule that cut this row: `update` (a row per optimizer update), "
      "`backward` (no update visible: cut at backward), `batch` or `forward` (no backward: a loader batch, a root "
      "forward)"),
    F("batches", COUNT, "steps", "`gnnmon run`: DataLoader batches the row took (absent where no loader ran)"),
    F("backward_calls", COUNT, "steps", "`gnnmon run`: outermost backward calls in the row"),
    F("updates", COUNT, "steps", "`gnnmon run`: optimizer updates in the row (a GAN's two optimizers: 2)"),
    F("updates_skipped", COUNT, "steps", "`gnnmon run`: updates AMP's GradScaler skipped in the row (inf or NaN "
      "gradients: no `optimizer.step` ran)"),
    F("compile_frames", COUNT, "compile", "frames torch.compile compiled during the call"),
    F("compile_recompiles", COUNT, "compile", "of those, recompilations"),
    F("compile_graphs", COUNT, "compile", "graphs made"),
    F("compile_graph_breaks", COUNT, "compile", "graph breaks (reasons in notes)"),
    F("compile_s", SECONDS, "compile", "time spent compiling, the lazily compiled backward included"),
    F("compile_backward_s", SECONDS, "compile", "of which the backward"),
    F("cpu_util_pct", PERCENT, "timeline", "CPU utilisation of the process, sampled"),
    F("gpu_util_pct", PERCENT, "timeline", "utilisation of the row's GPU (NVML)"),
    F("gpu_power_w", WATTS, "timeline", "power of the row's GPU (NVML)"),
    F("workers_rss_bytes", BYTES, "timeline", "DataLoader workers' RSS, sampled; counts the pages a forked "
      "worker shares with the training process, so it can read far above what the workers hold "
      "(their own memory: gnnmon.devices.children.children_private_memory(), USS/PSS)"),
    F("ram_used_bytes", BYTES, "timeline", "the machine's used RAM, sampled"),
    F("others_cpu_pct", PERCENT, "timeline", "CPU other processes took on the cores this process may run on (its "
      "affinity), % of one core, sampled: the machine's load beside the run"),
    F("idle_cpu_pct", PERCENT, "timeline", "idle time left on those cores, % of one core, sampled (near 0 with "
      "others_cpu_pct high: the run shared its cores)"),
    F("util_samples", COUNT, "timeline", "samples inside the row's window"),
    CPU_S,
    F("energy_gpu_j", JOULES, "energy", "energy of the row's GPU", traced=True),
    F("energy_cpu_j", JOULES, "energy", "CPU energy (RAPL, else a model)", traced=True),
    F("energy_ram_j", JOULES, "energy", "RAM energy (RAPL, else a model)"),
    F("co2_kg", KILOGRAMS, "energy", "emissions of that energy at the carbon intensity"),
    F("oom_requested_bytes", BYTES, "oom", "the allocation that failed, as the out-of-memory error gives it"),
    F("oom_allocated_bytes", BYTES, "oom", "memory held by tensors when it failed (CPU: the process's RSS)"),
    F("oom_reserved_bytes", BYTES, "oom", "CUDA: what the caching allocator held when it failed (MPS: the driver)"),
    F("oom_cached_free_bytes", BYTES, "oom", "reserved but held by no tensor: the cache's free memory"),
    F("oom_fragmented_bytes", BYTES, "oom", "CUDA: of that, free parts of split blocks (`inactive_split_bytes`), "
      "which a request larger than each cannot use"),
    F("oom_device_total_bytes", BYTES, "oom", "the device's memory (CPU: physical RAM; MPS: recommended max)"),
    F("oom_device_free_bytes", BYTES, "oom", "free on the device when it failed "
      "(`cudaMemGetInfo`; CPU: available RAM)"),
    F("oom_snapshot", TEXT, "oom", "the allocation history dumped at the run's first OOM "
      "(`collect(memory_history=N)`), for pytorch.org/memory_viz"),
    F("<field>_source", TEXT, "row", "how a figure was measured (`measured:...`, `sampled:...`, `model:...`)"),
)
"""Every field a row can hold (markers carried on rows aside)."""

LAYER_FIGURES = tuple(f.name[len("layer_<name>_"):] for f in FIGURES if f.name.startswith("layer_<name>_"))
"""A watched layer's figures: ``forward_s``, ... (its fields are ``layer_<name>_<figure>``); the
more specific names first, so that a field's figure is the first whose suffix it has."""


def layer_field(field: str) -> tuple[str, str] | None:
    """``layer_conv1_forward_s`` -> ``("conv1", "forward_s")``; None for a field that is not a layer's."""
    if not field.startswith("layer_"):
        return None
    for figure in LAYER_FIGURES:
        if field.endswith("_" + figure) and len(field) > len(figure) + 7:
            return field[6: -len(figure) - 1], figure
    return None


BY_NAME = {f.name: f for f in FIGURES}

IDENTITY_FIELDS = tuple(f.name for f in FIGURES if f.stage == "row" and "<" not in f.name)
"""Fields every row has; a carried marker may not take one of these names."""

ENERGY_FIELDS = tuple(f.name for f in FIGURES if f.unit is JOULES)
"""Energy figures of a row, in joules (each with a ``<field>_source``)."""

STEP_FIGURES: dict[str, tuple[str, float]] = {
    f.name: (f.shown_name, f.unit.factor) for f in FIGURES if f.logged and "<" not in f.name}
"""Row field -> (name, factor): a step's figures in the units a dashboard shows (ms, MiB,
counts), as the Lightning callback logs them and the TensorBoard export writes them."""

TRACED: dict[str, tuple[str, float]] = {f.name: (f.shown_name, f.unit.factor) for f in FIGURES if f.traced}
"""Row field -> (name, factor): the figures on a row's slice in the Chrome trace."""


_FAMILIES = tuple((f.name.split("<")[0], f.name.split(">")[1], f) for f in FIGURES if "<" in f.name)


def figure_of(field: str) -> Figure | None:
    """A field's declaration: by name, else the family it belongs to (``phase_load_s``,
    ``num_nodes__paper``, ``mem_peak_bytes_source``: a declared figure's source), else None."""
    figure = BY_NAME.get(field)
    if figure is not None:
        return figure
    for head, tail, family in _FAMILIES:
        if field.startswith(head) and field.endswith(tail) and len(field) > len(head) + len(tail):
            if not head and figure_of(field[: -len(tail)]) is None:
                continue  # "<field>_source" only for a declared figure
            return family
    return None


def unit_of(field: str) -> Unit:
    """A field's unit: its declaration, else its name's suffix, else a count."""
    figure = figure_of(field)
    if figure is not None:
        return figure.unit
    for unit in UNITS:
        if field.endswith(unit.suffix):
            return unit
    return COUNT


def phase_field(field: str) -> str | None:
    """The phase a ``phase_<name>_s`` field times, else None."""
    if field.startswith("phase_") and field.endswith("_s") and len(field) > 8:
        return field[6:-2]
    return None


def nested_phases(fields: Iterable[str], parent_of: Callable[[str], Any]) -> dict[str, str]:
    """Phase -> the phase it ran inside, for each ``phase_<name>_in`` among ``fields`` whose
    value (``parent_of(field)``) names a phase those fields time."""
    fields = list(fields)
    timed = {name for name in map(phase_field, fields) if name is not None}
    out = {}
    for field in fields:
        if field.startswith("phase_") and field.endswith("_in") and field[6:-3] in timed:
            parent = parent_of(field)
            if isinstance(parent, str) and parent in timed and parent != field[6:-3]:
                out[field[6:-3]] = parent
    return out


_LOGGED = frozenset(name for name, _ in STEP_FIGURES.values())


def logged_name(field: str) -> tuple[str, float] | None:
    """(name, factor) of a step figure as dashboards show it, any phase included
    (``phase_load_s`` -> ``load_ms``); None for a field that is not one. A phase whose name would
    be a step figure's (``phase("wall")``: ``wall_ms`` is ``wall_s``'s), or would start as these
    do, keeps its ``phase_`` (``phase_wall_ms``): no phase of yours takes a figure's name."""
    known = STEP_FIGURES.get(field)
    if known is not None:
        return known
    name = phase_field(field)
    if name is None:
        return None
    logged = f"{name}_{SECONDS.tag}"
    if logged in _LOGGED or name.startswith("phase_"):
        logged = f"phase_{logged}"
    return logged, SECONDS.factor


def reference() -> str:
    """The field reference (``docs/fields.md``) as markdown, by stage."""
    out = ["# Fields", "", "Every field a row can hold, as declared in `gnnmon/figures.py` (this page is made from",
           "it: `gnnmon fields > docs/fields.md`). Reports show bytes in MiB and seconds in ms;",
           "a step figure's logged name is what Lightning's loggers and TensorBoard get.", ""]
    stages: dict[str, list[Figure]] = {}
    for f in FIGURES:
        stages.setdefault(f.stage, []).append(f)
    for stage, figures in stages.items():
        out += [f"## {stage}", "", "| field | unit | meaning | logged as |", "| --- | --- | --- | --- |"]
        out += [f"| `{f.name}` | {f.unit.name} | {f.meaning} | {f'`{f.logged}`' if f.logged else ''} |"
                for f in figures]
        out.append("")
    return "\n".join(out)

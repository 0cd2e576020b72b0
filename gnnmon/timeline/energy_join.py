"""Energy and CO2 of each row, each figure with its source, from the timeline's counters.

Nothing here runs on the step's path. The sampler follows the cumulative counters and sends
points (:mod:`gnnmon.timeline.counters`); a row's energy is the counter interpolated linearly
between the points around its start and end (:class:`EnergyJoin`), so the rows and the gaps
between them add up to the counter's own delta over the run
(:func:`gnnmon.report.energy_balance.energy_balance`).

* GPU (``energy_gpu_j``): NVML's total-energy counter of the row's own CUDA device (Volta and
  newer). It moves in steps (every ~100 ms on an H100); each point is placed where a step
  happened, so a row longer than a step is ``measured:nvml-energy-counter(interpolated between
  <P>ms steps)`` and a shorter row gets its share of the step it falls in, by time:
  ``measured:nvml-energy-counter(share of a <P>ms step, by time)`` (exact where the power was
  steady within the step). Reading that counter costs ~3.5 ms on an H100: never at a row's ends.
  Where the counter is missing (before Volta): NVML power samples × the row's time,
  ``estimated:nvml-power-x-time@<interval>``.
* CPU (``energy_cpu_j``): RAPL package counters where readable — ``measured:rapl-package`` (the
  whole socket: every process on it) — else CodeCarbon's model applied to the row's window and to
  the process's CPU-seconds in it (``cpu_s``, read by the row itself with ``time.process_time()``
  when energy is on: a clock, about 1 µs), labelled with the TDP it assumed.
* RAM (``energy_ram_j``): RAPL's DRAM counter where present, else CodeCarbon's RAM wattage × time.
* ``co2_kg``: the row's energy × the carbon intensity (CodeCarbon's offline data for ``country``,
  or your ``carbon_intensity`` in g/kWh).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gnnmon.data.points import Counters
from gnnmon.devices.registry import gauge_index
from gnnmon.fields import J_PER_KWH, add_note
from gnnmon.figures import ENERGY_FIELDS
from gnnmon.timeline.carbon import CodeCarbonModel
from gnnmon.timeline.join import gauge_at, samples_in


class EnergyJoin:
    """Fills a row's ``energy_*`` fields and ``co2_kg`` from the timeline (plain data in, fields
    out), as chosen by :meth:`~gnnmon.timeline.energy_sources.EnergySources.describe`."""

    def __init__(self, description: Mapping[str, Any], interval: float) -> None:
        self.interval = interval
        self.every = f"@{interval * 1000:g}ms"
        self.gpu_counter = {int(i): bool(ok) for i, ok in (description.get("nvml_energy_counter") or {}).items()}
        self.gpus = set(description.get("gpus") or []) | set(self.gpu_counter)
        self.rapl_kinds = set(description.get("rapl_kinds") or [])
        model = description.get("codecarbon_model")
        self.model = CodeCarbonModel(**model) if model else None
        self.intensity = description.get("carbon_intensity_kg_per_kwh")
        self.intensity_source = description.get("carbon_intensity_source")

    def fill(self, fields: dict[str, Any], samples: Sequence[Mapping[str, Any]], counters: Counters) -> None:
        """Add ``energy_gpu_j``, ``energy_cpu_j``, ``energy_ram_j`` and ``co2_kg``, each with its
        ``<field>_source`` (None, with a ``notes`` entry saying why, where a figure cannot be had)."""
        f = fields
        a, b = f["t_start_ns"], f["t_end_ns"]
        wall = (b - a) / 1e9
        self._gpu(f, samples, counters, a, b)
        model = self.model
        if "package" in self.rapl_kinds:
            self._rapl(f, "energy_cpu_j", counters, "package", a, b)
        elif model is not None and model.cpu_mode == "cpu_load":
            cpu_s = f.get("cpu_s")  # measured on the row (process CPU-seconds), else from samples
            if not isinstance(cpu_s, (int, float)):
                start, end = gauge_at(samples, "cpu_time_s", a), gauge_at(samples, "cpu_time_s", b)
                cpu_s = None if start is None or end is None else end - start
            if cpu_s is None:
                _none(f, "energy_cpu_j", "no process CPU-time sample before and after the row")
            else:
                f["energy_cpu_j"] = model.cpu_energy_j(wall, cpu_s)
                f["energy_cpu_j_source"] = model.cpu_label()
        elif model is not None and model.cpu_energy_j(wall, 0.0) is not None:
            f["energy_cpu_j"] = model.cpu_energy_j(wall, 0.0)
            f["energy_cpu_j_source"] = model.cpu_label()
        else:
            _none(f, "energy_cpu_j", "no RAPL and no CodeCarbon model")
        if "dram" in self.rapl_kinds:
            self._rapl(f, "energy_ram_j", counters, "dram", a, b)
        elif model is not None and model.ram_w is not None:
            f["energy_ram_j"] = model.ram_w * wall
            f["energy_ram_j_source"] = model.ram_label()
        else:
            _none(f, "energy_ram_j", "no RAPL DRAM counter and no CodeCarbon model")
        self._co2(f)

    def _gpu(self, f: dict[str, Any], samples: Sequence[Mapping[str, Any]], counters: Counters,
             a: int, b: int) -> None:
        index = gauge_index(f.get("device"))
        if index is None:
            _none(f, "energy_gpu_j", "not a CUDA row")
        elif self.gpu_counter.get(index):
            key = f"gpu{index}_energy_mj"
            d = counters.delta(key, a, b)
            if d is None:
                _none(f, "energy_gpu_j", f"no {key} point before and after the row")
                return
            f["energy_gpu_j"] = d * 1e-3
            period = counters.period_s(key)
            if not counters.stepped.get(key) or period is None:
                how = f"interpolated between reads{self.every}"
            elif (b - a) / 1e9 < period:
                how = f"share of a {period * 1000:.0f}ms step, by time"
            else:
                how = f"interpolated between {period * 1000:.0f}ms steps"
            f["energy_gpu_j_source"] = f"measured:nvml-energy-counter({how})"
        elif index in self.gpus:  # NVML sees the GPU, which has no energy counter
            joules = integrate_power(samples, f, index, self.interval)
            if joules is None:
                _none(f, "energy_gpu_j", "no energy counter and no power sample near the row")
            else:
                f["energy_gpu_j"] = joules
                f["energy_gpu_j_source"] = f"estimated:nvml-power-x-time{self.every}"
        else:
            _none(f, "energy_gpu_j", "no NVML for this device")

    def _rapl(self, f: dict[str, Any], name: str, counters: Counters, kind: str, a: int, b: int) -> None:
        key = f"rapl_{kind}_j"
        d = counters.delta(key, a, b)
        if d is None:
            _none(f, name, f"no {key} reading before and after the row")
        else:
            f[name] = d
            f[f"{name}_source"] = f"measured:rapl-{kind}(interpolated{self.every})"

    def _co2(self, f: dict[str, Any]) -> None:
        on_cuda = gauge_index(f.get("device")) is not None
        parts = {k: f.get(k) for k in ENERGY_FIELDS if k != "energy_gpu_j" or on_cuda}
        known = [p for p in parts.values() if isinstance(p, (int, float))]
        if self.intensity is None or not known:
            _none(f, "co2_kg", "no carbon intensity" if self.intensity is None else "no energy figure")
            return
        f["co2_kg"] = sum(known) / J_PER_KWH * self.intensity
        f["co2_kg_source"] = self.intensity_source
        if len(known) < len(parts):
            missing = ", ".join(k for k, v in parts.items() if not isinstance(v, (int, float)))
            add_note(f, f"co2_kg leaves out {missing} (not available)")


def integrate_power(
    samples: Sequence[Mapping[str, Any]], row: Mapping[str, Any], index: int | None, interval: float | None
) -> float | None:
    """Joules: mean NVML power of the samples within the row's window widened by one interval
    (NVML's power is itself a ~1 s average), times the row's duration."""
    if index is None or not samples or not interval:
        return None
    key = f"gpu{index}_power_w"
    widen = int(interval * 1e9)
    near = samples_in(samples, row["t_start_ns"] - widen, row["t_end_ns"] + widen)
    powers = [s[key] for s in near if isinstance(s.get(key), (int, float))]
    if not powers:
        return None
    return sum(powers) / len(powers) * (row["t_end_ns"] - row["t_start_ns"]) / 1e9


def _none(fields: dict[str, Any], name: str, why: str) -> None:
    """A figure that cannot be had: None, and the row's notes say why."""
    fields[name] = None
    fields[f"{name}_source"] = None
    add_note(fields, f"{name}: {why}")

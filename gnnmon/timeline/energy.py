"""Energy and CO2 of each row, each figure with its source, from counters read on the timeline.

Nothing here runs on the step's path. The sampler reads cumulative counters every ``interval``
seconds (:meth:`EnergySources.read_counters`); a row's energy is the difference of those
counters, interpolated linearly to the row's start and end (:class:`EnergyJoin`). A counter that
changes in steps (NVML's total-energy counter moves every ~100 ms) makes a short row's figure the
average power around it times its duration; summed over rows that cover whole sample intervals
the figures are exact. Reading NVML's energy counter costs about 3.5 ms on an H100, so it is never
read at a row's open and close.

* GPU (``energy_gpu_j``): NVML's total-energy counter of the row's own CUDA device (Volta and
  newer) — ``measured:nvml-energy-counter(interpolated@<interval>)``. Where the counter is missing
  (before Volta), NVML power samples integrated over the window — ``estimated:nvml-power-x-time``.
* CPU (``energy_cpu_j``): RAPL package counters where readable — ``measured:rapl-package`` (the
  whole socket: every process on it) — else CodeCarbon's model applied to the row's window and to
  the process's CPU-seconds in it (``cpu_s``, read by the row itself with ``time.process_time()``
  when energy is on: a clock, about 1 µs), labelled with the TDP it assumed.
* RAM (``energy_ram_j``): RAPL's DRAM counter where present, else CodeCarbon's RAM wattage × time.
* ``co2_kg``: the row's energy × the carbon intensity (CodeCarbon's offline data for ``country``,
  or your ``carbon_intensity`` in g/kWh).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from gnnmon.devices.nvml import Nvml
from gnnmon.devices.rapl import POWERCAP, RaplReader, find_zones
from gnnmon.fields import ENERGY_FIELDS, J_PER_KWH
from gnnmon.timeline.carbon import CodeCarbonModel, carbon_intensity, codecarbon_model
from gnnmon.timeline.join import delta_between, samples_in


class EnergySources:
    """Chooses, once, a source per figure: the counters the sampler reads and the model that covers
    what no counter measures. :meth:`describe` is the plain-data choice (for the manifest and for
    :class:`EnergyJoin`)."""

    def __init__(
        self,
        *,
        country: str | None = None,
        region: str | None = None,
        carbon_intensity_g_per_kwh: float | None = None,
        rapl_root: str | os.PathLike[str] = POWERCAP,
        nvml: Nvml | None = None,
        use_codecarbon: bool = True,
    ) -> None:
        self.notes: list[str] = []
        zones, why = find_zones(rapl_root)
        self.rapl = RaplCumulative(RaplReader(zones)) if zones else None
        if why:
            self.notes.append(why)
        self.nvml = nvml if nvml is not None and nvml.ok else None
        if nvml is not None and not nvml.ok:
            self.notes.append(nvml.reason)
        needs_model = self.rapl is None or "dram" not in self.rapl.kinds
        self.model: CodeCarbonModel | None = None
        if needs_model and use_codecarbon:
            self.model, why = codecarbon_model()
            if why:
                self.notes.append(why)
        self.intensity, self.intensity_source = self._intensity(country, region, carbon_intensity_g_per_kwh)

    def _intensity(
        self, country: str | None, region: str | None, g_per_kwh: float | None
    ) -> tuple[float | None, str | None]:
        if g_per_kwh is not None:
            if isinstance(g_per_kwh, bool) or not isinstance(g_per_kwh, (int, float)) or g_per_kwh < 0:
                raise ValueError(f"carbon_intensity must be grams CO2eq per kWh >= 0, got {g_per_kwh!r}")
            return g_per_kwh / 1000.0, f"user:{g_per_kwh:g}g/kWh"
        if country is None:
            self.notes.append("no CO2: pass country= (ISO alpha-3) or carbon_intensity= (g/kWh)")
            return None, None
        kg, source = carbon_intensity(country, region)
        if kg is None:
            self.notes.append(source)
            return None, None
        return kg, source

    def gpu_counters(self) -> dict[int, bool]:
        """CUDA index -> whether NVML's energy counter is read for it."""
        return dict(self.nvml.energy_supported) if self.nvml else {}

    def describe(self) -> dict[str, Any]:
        """What was chosen and why, as plain data (the manifest's ``options.energy``)."""
        return {
            "rapl_zones": [z.name for z in self.rapl.reader.zones] if self.rapl else [],
            "rapl_kinds": list(self.rapl.kinds) if self.rapl else [],
            "nvml_energy_counter": {str(i): ok for i, ok in self.gpu_counters().items()},
            "codecarbon_model": dataclasses.asdict(self.model) if self.model else None,
            "carbon_intensity_kg_per_kwh": self.intensity,
            "carbon_intensity_source": self.intensity_source,
            "notes": list(self.notes),
        }

    def read_counters(self) -> dict[str, Any]:
        """The cumulative counters now (called by the sampler, off the step's path):
        ``gpu<i>_energy_mj`` per CUDA device with a counter, ``rapl_<kind>_j`` (joules since the
        run started, wrap-corrected)."""
        out: dict[str, Any] = {}
        nvml = self.nvml
        if nvml is not None:
            for index, ok in nvml.energy_supported.items():
                if ok:
                    out[f"gpu{index}_energy_mj"] = nvml.energy_mj(index)
        if self.rapl is not None:
            out.update(self.rapl.read())
        return out


class RaplCumulative:
    """RAPL counters as joules since the first reading, per kind, correct across wrap-arounds
    (each zone must be read at least once per wrap: hours at full power)."""

    def __init__(self, reader: RaplReader) -> None:
        self.reader = reader
        self.kinds = reader.kinds
        self._last: tuple[int, ...] | None = None
        self._total = {k: 0.0 for k in reader.kinds}

    def read(self) -> dict[str, float]:
        now = self.reader.read()
        if self._last is not None:
            for kind, joules in self.reader.delta_j(self._last, now).items():
                self._total[kind] += joules
        self._last = now
        return {f"rapl_{kind}_j": total for kind, total in self._total.items()}


class EnergyJoin:
    """Fills a row's ``energy_*`` fields and ``co2_kg`` from timeline samples (plain data in,
    fields out), as chosen by :meth:`EnergySources.describe`."""

    def __init__(self, description: Mapping[str, Any], interval: float) -> None:
        self.interval = interval
        self.every = f"@{interval * 1000:g}ms"
        self.gpu_counter = {int(i): bool(ok) for i, ok in (description.get("nvml_energy_counter") or {}).items()}
        self.rapl_kinds = set(description.get("rapl_kinds") or [])
        model = description.get("codecarbon_model")
        self.model = CodeCarbonModel(**model) if model else None
        self.intensity = description.get("carbon_intensity_kg_per_kwh")
        self.intensity_source = description.get("carbon_intensity_source")

    def fill(self, fields: dict[str, Any], samples: Sequence[Mapping[str, Any]]) -> None:
        """Add ``energy_gpu_j``, ``energy_cpu_j``, ``energy_ram_j`` and ``co2_kg``, each with its
        ``<field>_source`` (None, with a ``notes`` entry saying why, where a figure cannot be had)."""
        f = fields
        a, b = f["t_start_ns"], f["t_end_ns"]
        wall = (b - a) / 1e9
        self._gpu(f, samples, a, b)
        # CPU and RAM.
        model = self.model
        if "package" in self.rapl_kinds:
            self._counter(f, "energy_cpu_j", samples, "rapl_package_j", 1.0, a, b, "measured:rapl-package")
        elif model is not None and model.cpu_mode == "cpu_load":
            cpu_s = f.get("cpu_s")  # measured on the row (process CPU-seconds), else from samples
            if not isinstance(cpu_s, (int, float)):
                cpu_s = delta_between(samples, "cpu_time_s", a, b)
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
            self._counter(f, "energy_ram_j", samples, "rapl_dram_j", 1.0, a, b, "measured:rapl-dram")
        elif model is not None and model.ram_w is not None:
            f["energy_ram_j"] = model.ram_w * wall
            f["energy_ram_j_source"] = model.ram_label()
        else:
            _none(f, "energy_ram_j", "no RAPL DRAM counter and no CodeCarbon model")
        self._co2(f)

    def _gpu(self, f: dict[str, Any], samples: Sequence[Mapping[str, Any]], a: int, b: int) -> None:
        index = cuda_index(f.get("device"))
        if index is None:
            _none(f, "energy_gpu_j", "not a CUDA row")
        elif self.gpu_counter.get(index):
            self._counter(f, "energy_gpu_j", samples, f"gpu{index}_energy_mj", 1e-3, a, b,
                          "measured:nvml-energy-counter")
        elif index in self.gpu_counter:  # NVML sees the GPU, which has no energy counter
            joules = integrate_power(samples, f, index, self.interval)
            if joules is None:
                _none(f, "energy_gpu_j", "no energy counter and no power sample near the row")
            else:
                f["energy_gpu_j"] = joules
                f["energy_gpu_j_source"] = f"estimated:nvml-power-x-time{self.every}"
        else:
            _none(f, "energy_gpu_j", "no NVML for this device")

    def _counter(self, f: dict[str, Any], name: str, samples: Sequence[Mapping[str, Any]], key: str,
                 scale: float, a: int, b: int, source: str) -> None:
        d = delta_between(samples, key, a, b)
        if d is None:
            _none(f, name, f"no {key} reading before and after the row")
        else:
            f[name] = d * scale
            f[f"{name}_source"] = f"{source}(interpolated{self.every})"

    def _co2(self, f: dict[str, Any]) -> None:
        on_cuda = cuda_index(f.get("device")) is not None
        parts = {k: f.get(k) for k in ENERGY_FIELDS if k != "energy_gpu_j" or on_cuda}
        known = [p for p in parts.values() if isinstance(p, (int, float))]
        if self.intensity is None or not known:
            _none(f, "co2_kg", "no carbon intensity" if self.intensity is None else "no energy figure")
            return
        f["co2_kg"] = sum(known) / J_PER_KWH * self.intensity
        f["co2_kg_source"] = self.intensity_source
        if len(known) < len(parts):
            missing = ", ".join(k for k, v in parts.items() if not isinstance(v, (int, float)))
            f.setdefault("notes", []).append(f"co2_kg leaves out {missing} (not available)")


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


def cuda_index(device: Any) -> int | None:
    """The CUDA index of a row's ``device`` field (``"cuda:1"`` -> 1), else None."""
    if isinstance(device, str) and device.startswith("cuda"):
        return int(device.split(":")[1]) if ":" in device else 0
    return None


def _none(fields: dict[str, Any], name: str, why: str) -> None:
    """A figure that cannot be had: None, and the row's notes say why."""
    fields[name] = None
    fields[f"{name}_source"] = None
    notes = fields.setdefault("notes", [])
    text = f"{name}: {why}"
    if text not in notes:
        notes.append(text)

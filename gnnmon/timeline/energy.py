"""Energy and CO2 of each row, each figure with its source.

* GPU (``energy_gpu_j``): the delta of NVML's total-energy counter over the row's window, for the
  row's own CUDA device — ``measured:nvml-energy-counter``. Where the counter is missing (before
  Volta), NVML power samples integrated over the window — ``estimated:nvml-power-x-time`` — which
  needs the utilisation sampler (``collect(sample=...)``).
* CPU (``energy_cpu_j``): RAPL package counters where readable — ``measured:rapl-package`` (the
  whole socket: every process on it) — else CodeCarbon's model applied to the row's window and
  CPU time, labelled with the TDP it assumed.
* RAM (``energy_ram_j``): RAPL's DRAM counter where present, else CodeCarbon's RAM wattage × time.
* ``co2_kg``: the row's energy × the carbon intensity (CodeCarbon's offline data for ``country``,
  or your ``carbon_intensity`` in g/kWh).

Counters are read when a row opens and closes (cheap: a few file reads and NVML queries); the
model estimates cost nothing on the hot path.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gnnmon.devices.nvml import Nvml
from gnnmon.devices.rapl import POWERCAP, RaplReader, find_zones
from gnnmon.fields import ENERGY_FIELDS, J_PER_KWH
from gnnmon.timeline.carbon import CodeCarbonModel, carbon_intensity, codecarbon_model

Reading = tuple[int, float, Any, Any]  # perf ns, process CPU seconds, RAPL µJ, GPU mJ by index


class EnergyMeter:
    """Chooses a source per figure once, then turns two readings into a row's energy fields."""

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
        self.rapl = RaplReader(zones) if zones else None
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

    def describe(self) -> dict[str, Any]:
        """What was chosen and why (for the manifest)."""
        return {
            "rapl_zones": [z.name for z in self.rapl.zones] if self.rapl else [],
            "nvml_energy_counter": dict(self.nvml.energy_supported) if self.nvml else {},
            "codecarbon_model": dataclasses.asdict(self.model) if self.model else None,
            "carbon_intensity_kg_per_kwh": self.intensity,
            "carbon_intensity_source": self.intensity_source,
            "notes": list(self.notes),
        }

    # -- per row ------------------------------------------------------------------------------
    def read(self) -> Reading:
        """Counters now (called when a row opens and when it closes)."""
        rapl = self.rapl.read() if self.rapl is not None else None
        gpus = None
        if self.nvml is not None:
            gpus = {i: self.nvml.energy_mj(i) for i in self.nvml.handles}
        return time.perf_counter_ns(), time.process_time(), rapl, gpus

    def fill_row(self, fields: dict[str, Any], start: Reading, end: Reading) -> None:
        """Add ``energy_gpu_j``, ``energy_cpu_j``, ``energy_ram_j`` and their ``<field>_source`` to a
        row (None, with a ``notes`` entry saying why, where a figure cannot be had). CO2 is added
        by :meth:`finish` once GPU power samples are joined."""
        f = fields
        wall = (end[0] - start[0]) / 1e9
        cpu_s = end[1] - start[1]
        # GPU: this row's CUDA device only.
        index = _cuda_index(f.get("device"))
        if index is None:
            _none(f, "energy_gpu_j", "not a CUDA row")
        elif self.nvml is None or index not in self.nvml.handles:
            _none(f, "energy_gpu_j", "no NVML for this device")
        elif start[3] and end[3] and start[3].get(index) is not None and end[3].get(index) is not None:
            f["energy_gpu_j"] = (end[3][index] - start[3][index]) / 1000.0
            f["energy_gpu_j_source"] = "measured:nvml-energy-counter"
        else:
            f["energy_gpu_j"] = None
            f["energy_gpu_j_source"] = "pending:nvml-power-x-time"  # integrated in finish()
        # CPU and RAM.
        rapl = self.rapl.delta_j(start[2], end[2]) if self.rapl is not None else {}
        cpu_model = self.model.cpu_energy_j(wall, cpu_s) if self.model is not None else None
        if "package" in rapl:
            f["energy_cpu_j"] = rapl["package"]
            f["energy_cpu_j_source"] = "measured:rapl-package"
        elif cpu_model is not None and self.model is not None:
            f["energy_cpu_j"] = cpu_model
            f["energy_cpu_j_source"] = self.model.cpu_label()
        else:
            _none(f, "energy_cpu_j", "no RAPL and no CodeCarbon model")
        if "dram" in rapl:
            f["energy_ram_j"] = rapl["dram"]
            f["energy_ram_j_source"] = "measured:rapl-dram"
        elif self.model is not None and self.model.ram_w is not None:
            f["energy_ram_j"] = self.model.ram_w * wall
            f["energy_ram_j_source"] = self.model.ram_label()
        else:
            _none(f, "energy_ram_j", "no RAPL DRAM counter and no CodeCarbon model")

    def finish(self, fields: dict[str, Any], samples: Sequence[Mapping[str, Any]], interval: float | None) -> None:
        """Integrate GPU power samples where the counter was missing, then add ``co2_kg``."""
        if fields.get("energy_gpu_j_source") == "pending:nvml-power-x-time":
            joules = integrate_power(samples, fields, _cuda_index(fields.get("device")), interval)
            if joules is None:
                _none(fields, "energy_gpu_j", "no energy counter and no power sample near the row "
                                              "(collect(sample=...))")
            else:
                fields["energy_gpu_j"] = joules
                fields["energy_gpu_j_source"] = f"estimated:nvml-power-x-time@{(interval or 0) * 1000:g}ms"
        on_cuda = _cuda_index(fields.get("device")) is not None
        parts = {k: fields.get(k) for k in ENERGY_FIELDS if k != "energy_gpu_j" or on_cuda}
        known = [p for p in parts.values() if isinstance(p, (int, float))]
        if self.intensity is None or not known:
            _none(fields, "co2_kg", "no carbon intensity" if self.intensity is None else "no energy figure")
            return
        fields["co2_kg"] = sum(known) / J_PER_KWH * self.intensity
        fields["co2_kg_source"] = self.intensity_source
        if len(known) < len(parts):
            missing = ", ".join(k for k, v in parts.items() if not isinstance(v, (int, float)))
            fields.setdefault("notes", []).append(f"co2_kg leaves out {missing} (not available)")


def integrate_power(
    samples: Sequence[Mapping[str, Any]], row: Mapping[str, Any], index: int | None, interval: float | None
) -> float | None:
    """Joules: mean NVML power of the samples within the row's window widened by one interval
    (NVML's power is itself a ~1 s average), times the row's duration."""
    if index is None or not samples or not interval:
        return None
    key = f"gpu{index}_power_w"
    a = row["t_start_ns"] - int(interval * 1e9)
    b = row["t_end_ns"] + int(interval * 1e9)
    powers = [s[key] for s in samples if a <= s["t_ns"] <= b and isinstance(s.get(key), (int, float))]
    if not powers:
        return None
    return sum(powers) / len(powers) * (row["t_end_ns"] - row["t_start_ns"]) / 1e9


def _cuda_index(device: Any) -> int | None:
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

"""Which source each energy figure of a run comes from, chosen once when the run starts: the
counters the sampler found (NVML's GPU energy, RAPL's package and DRAM), CodeCarbon's model (or
your ``cpu_power_w`` / ``ram_power_w``) for what no counter measures, and the carbon intensity.
:meth:`EnergySources.describe` is the choice as plain data: the manifest keeps it and
:class:`~gnnmon.timeline.energy_join.EnergyJoin` fills rows by it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gnnmon.timeline.carbon import CodeCarbonModel, carbon_intensity, codecarbon_model, user_model


class EnergySources:
    """Chooses, once, a source per figure: the counters the sampler found (its ``hello``) and the
    model that covers what no counter measures. :meth:`describe` is the plain-data choice (for
    the manifest and for :class:`EnergyJoin`)."""

    def __init__(
        self,
        found: Mapping[str, Any],
        *,
        country: str | None = None,
        region: str | None = None,
        carbon_intensity_g_per_kwh: float | None = None,
        cpu_power_w: float | None = None,
        ram_power_w: float | None = None,
        use_codecarbon: bool = True,
    ) -> None:
        self.found = dict(found)
        self.notes: list[str] = []
        for what in ("nvml", "rapl"):
            status = found.get(what)
            if status not in (None, "ok"):
                self.notes.append(str(status))
        needs_model = "dram" not in (found.get("rapl_kinds") or [])
        self.model: CodeCarbonModel | None = None
        if needs_model and use_codecarbon and (cpu_power_w is None or ram_power_w is None):
            self.model, why = codecarbon_model()
            if why:
                self.notes.append(why)
        if needs_model:
            self.model = user_model(cpu_power_w, ram_power_w, self.model)
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
        """What was chosen and why, as plain data (the manifest's ``options.energy``)."""
        found = self.found
        return {
            "rapl_zones": list(found.get("rapl_zones") or []),
            "rapl_kinds": list(found.get("rapl_kinds") or []),
            "nvml_energy_counter": dict(found.get("nvml_energy_counter") or {}),
            "gpus": list(found.get("gpus") or []),
            "codecarbon_model": dataclasses.asdict(self.model) if self.model else None,
            "carbon_intensity_kg_per_kwh": self.intensity,
            "carbon_intensity_source": self.intensity_source,
            "notes": list(self.notes),
        }

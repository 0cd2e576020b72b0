"""CodeCarbon's power model and offline carbon intensity, read once and used without its tracker.

CodeCarbon's task API takes one reading per ``stop_task`` and blocks the calling thread while it
does (3.3.2 on this project's machine: ``start()`` 1.46 s once, ``start_task`` 1.7 ms,
``stop_task`` 4.1 ms per call; see docs/energy.md). gnnmon never calls it per step. Instead, at
set-up, it starts an ``OfflineEmissionsTracker`` once to learn which model CodeCarbon would apply
on this machine — its CPU mode (``cpu_load``: TDP × the process's share of the CPUs; ``constant``:
0.5 × TDP), the TDP it assumed, its RAM wattage — stops it (its threads end), and then applies
that model to each row's own window. Carbon intensity comes from CodeCarbon's offline
energy-mix data for a country (ISO 3166 alpha-3) and, for the USA and Canada, a region.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class CodeCarbonModel:
    """What CodeCarbon would assume here. Powers in watts; intensity in kg CO2eq per kWh."""

    version: str
    cpu_mode: str
    cpu_model: str
    tdp_w: float | None
    cpu_count: int
    tracking_mode: str
    ram_w: float | None
    setup_s: float

    def cpu_label(self) -> str:
        if self.cpu_mode == "cpu_load":
            return f"estimated:codecarbon-{self.version}-cpu_load(TDP={self.tdp_w:g}W,{self.tracking_mode})"
        if self.cpu_mode == "constant":
            return f"estimated:codecarbon-{self.version}-constant(0.5xTDP={0.5 * (self.tdp_w or 0):g}W)"
        return f"estimated:codecarbon-{self.version}-{self.cpu_mode}"

    def cpu_energy_j(self, wall_s: float, cpu_s: float) -> float | None:
        """Joules CodeCarbon's model gives a window of ``wall_s`` seconds in which this process
        used ``cpu_s`` CPU-seconds."""
        if self.tdp_w is None:
            return None
        if self.cpu_mode == "cpu_load":
            # CodeCarbon (process mode): power = TDP × (CPU-seconds / wall-seconds) / cpu_count.
            return self.tdp_w * cpu_s / max(self.cpu_count, 1)
        if self.cpu_mode == "constant":
            return 0.5 * self.tdp_w * wall_s
        return None

    def ram_label(self) -> str:
        return f"estimated:codecarbon-{self.version}-ram({self.ram_w:g}W)"


_CACHE: dict[str, tuple[CodeCarbonModel | None, str]] = {}
_LOCK = threading.Lock()


def codecarbon_model() -> tuple[CodeCarbonModel | None, str]:
    """CodeCarbon's model on this machine (cached per process), or (None, why not)."""
    with _LOCK:
        if "model" not in _CACHE:
            _CACHE["model"] = _probe()
        return _CACHE["model"]


def version_tuple(version: str) -> tuple[int, ...]:
    """``"3.3.2"`` -> ``(3, 3, 2)`` (non-numeric parts end it)."""
    out = []
    for part in version.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def _quiet() -> tuple[logging.Logger, int]:
    log = logging.getLogger("codecarbon")
    level = log.level
    log.setLevel(logging.ERROR)
    return log, level


def _probe() -> tuple[CodeCarbonModel | None, str]:
    try:
        import codecarbon
        from codecarbon import OfflineEmissionsTracker
    except ImportError:
        return None, "codecarbon not installed (pip install 'gnnmon[energy]')"
    version: str = getattr(codecarbon, "__version__", "unknown")
    log, level = _quiet()
    t0 = time.perf_counter()
    try:
        options: dict = {"country_iso_code": "USA", "measure_power_secs": 60,
                         "log_level": "error", "tracking_mode": "process"}
        if version_tuple(version) >= (3, 0):
            options["output_methods"] = []  # nothing written (save_to_file is deprecated there)
        else:
            options["save_to_file"] = False
        tracker = OfflineEmissionsTracker(**options)
        tracker.start()
        try:
            hardware = list(getattr(tracker, "_hardware", []))
        finally:
            tracker.stop()
        cpu = next((h for h in hardware if type(h).__name__ == "CPU"), None)
        ram = next((h for h in hardware if type(h).__name__ == "RAM"), None)
        if cpu is None:
            return None, f"codecarbon {version} set up no CPU model"
        ram_w = float(ram.total_power().W) if ram is not None else None
        return CodeCarbonModel(
            version=version,
            cpu_mode=str(getattr(cpu, "_mode", "unknown")),
            cpu_model=str(getattr(cpu, "_model", "unknown")),
            tdp_w=float(cpu._tdp) if getattr(cpu, "_tdp", None) is not None else None,
            cpu_count=int(getattr(cpu, "_cpu_count", None) or os.cpu_count() or 1),
            tracking_mode=str(getattr(cpu, "_tracking_mode", "machine")),
            ram_w=ram_w,
            setup_s=time.perf_counter() - t0,
        ), ""
    except Exception as exc:  # noqa: BLE001 - an optional estimate must not break a run
        return None, f"codecarbon failed to set up: {type(exc).__name__}: {exc}"
    finally:
        log.setLevel(level)


def carbon_intensity(country: str, region: str | None = None) -> tuple[float | None, str]:
    """kg CO2eq per kWh for a country (ISO alpha-3, e.g. ``"FRA"``) from CodeCarbon's offline data,
    and its source label; (None, why not) if unknown."""
    if not isinstance(country, str) or len(country) != 3 or not country.isalpha():
        raise ValueError(f"country must be an ISO 3166 alpha-3 code such as 'FRA', got {country!r}")
    try:
        from codecarbon.core.emissions import Emissions
        from codecarbon.core.units import Energy
        from codecarbon.external.geography import GeoMetadata
        from codecarbon.input import DataSource
    except ImportError:
        return None, "codecarbon not installed: no offline carbon intensity (pass carbon_intensity=)"
    log, level = _quiet()
    try:
        emissions = Emissions(DataSource())
        geo = GeoMetadata(country_iso_code=country.upper(), region=region)
        one = Energy.from_energy(1.0)  # 1 kWh
        if region:
            kg = emissions.get_region_emissions(one, geo)
        else:
            kg = emissions.get_country_emissions(one, geo)
    except Exception as exc:  # noqa: BLE001
        return None, f"no offline carbon intensity for {country}/{region}: {exc}"
    finally:
        log.setLevel(level)
    where = country.upper() + (f"/{region}" if region else "")
    return float(kg), f"estimated:codecarbon-offline({where},{float(kg) * 1000:.1f}g/kWh)"


"""CodeCarbon's power model and offline carbon intensity, read once and used without its tracker.

CodeCarbon's task API takes one reading per ``stop_task`` and blocks the calling thread while it
does (3.3.2 on this project's machine: ``start()`` 1.46 s once, ``start_task`` 1.7 ms,
``stop_task`` 4.1 ms per call; see docs/energy.md). gnnmon never calls it per step. Instead, at
set-up, it starts an ``OfflineEmissionsTracker`` once, in a child process of its own (CodeCarbon's
set-up queries every GPU through NVML from a thread pool and sets up logging: none of that in the
training process), to learn which model CodeCarbon would apply on this machine — its CPU mode
(``cpu_load``: TDP × the process's share of the CPUs; ``constant``: 0.5 × TDP), the TDP it assumed,
its RAM wattage — stops it (its threads end), and then applies that model to each row's own window.
The probe's answer is kept per machine (:func:`cache_path`), so only the first run with energy on a
machine waits for it; ``cpu_power_w=`` and ``ram_power_w=`` replace CodeCarbon's guesses (both
given: no probe). Carbon intensity comes from CodeCarbon's offline energy-mix data for a country
(ISO 3166 alpha-3) and, for the USA and Canada, a region.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import platform
import threading
import time
from dataclasses import dataclass
from pathlib import Path


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
    cpu_source: str = "codecarbon"  # "user": cpu_power_w= replaced CodeCarbon's TDP
    ram_source: str = "codecarbon"  # "user": ram_power_w= replaced its RAM power
    cached: bool = False  # read from this machine's cache (no probe this time)

    def cpu_label(self) -> str:
        if self.cpu_source == "user":
            return f"estimated:user-cpu_load(TDP={self.tdp_w:g}W,process)"
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
        if self.ram_source == "user":
            return f"estimated:user-ram({self.ram_w:g}W)"
        return f"estimated:codecarbon-{self.version}-ram({self.ram_w:g}W)"


_CACHE: dict[str, tuple[CodeCarbonModel | None, str]] = {}
_LOCK = threading.RLock()


def codecarbon_model() -> tuple[CodeCarbonModel | None, str]:
    """CodeCarbon's model on this machine, or (None, why not): kept per process, and per machine
    in :func:`cache_path` (the probe starts CodeCarbon's tracker: 1.5 s, once per machine)."""
    with _LOCK:
        if "model" not in _CACHE:
            _CACHE["model"] = _probe_cached()
        return _CACHE["model"]


def user_model(cpu_power_w: float | None, ram_power_w: float | None,
               base: CodeCarbonModel | None) -> CodeCarbonModel | None:
    """The model with the user's powers in place of CodeCarbon's guesses (``cpu_power_w``: the CPU's
    power at full load, W, applied as CodeCarbon's cpu_load mode; ``ram_power_w``: W, constant)."""
    if cpu_power_w is None and ram_power_w is None:
        return base
    if base is None:
        base = CodeCarbonModel(version="-", cpu_mode="unknown", cpu_model="unknown", tdp_w=None,
                               cpu_count=os.cpu_count() or 1, tracking_mode="process", ram_w=None, setup_s=0.0)
    if cpu_power_w is not None:
        base = dataclasses.replace(base, cpu_mode="cpu_load", tdp_w=float(cpu_power_w), tracking_mode="process",
                                   cpu_count=os.cpu_count() or 1, cpu_source="user")
    if ram_power_w is not None:
        base = dataclasses.replace(base, ram_w=float(ram_power_w), ram_source="user")
    return base


def cache_path() -> Path:
    """Where the probed model is kept per machine: ``$GNNMON_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/gnnmon``, else ``~/.cache/gnnmon``; file ``codecarbon-model.json``."""
    root = os.environ.get("GNNMON_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "gnnmon")
    return Path(root) / "codecarbon-model.json"


def machine_key(version: str) -> str:
    """What the probe's answer depends on: CodeCarbon's version, the CPU model, core count, RAM."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 0
    return f"codecarbon {version} | {cpu} | {os.cpu_count()} cpus | {ram} bytes | {platform.node()}"


def _probe_cached() -> tuple[CodeCarbonModel | None, str]:
    try:
        import codecarbon
    except ImportError:
        return None, "codecarbon not installed (pip install 'gnnmon[energy]')"
    key = machine_key(getattr(codecarbon, "__version__", "unknown"))
    path = cache_path()
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        if kept.get("key") == key:
            return dataclasses.replace(CodeCarbonModel(**kept["model"]), cached=True), ""
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass  # no cache, another machine's, or unreadable: probe
    model, why = _probe()
    if model is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            temp.write_text(json.dumps({"key": key, "model": dataclasses.asdict(model)}), encoding="utf-8")
            os.replace(temp, path)  # whole or not at all, even with runs starting side by side
        except OSError:
            pass  # a read-only home: probe again next time
    return model, why


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


PROBE_TIMEOUT_S = 120.0
"""The longest the probe's child process may take (it takes 1.5-3 s)."""


def _probe() -> tuple[CodeCarbonModel | None, str]:
    """:func:`probe_here` in a child process: the model, or (None, why not)."""
    import subprocess
    import sys

    code = "import json, sys; from gnnmon.timeline.carbon import probe_here; json.dump(probe_here(), sys.stdout)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # gnnmon as this process sees it
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                              timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"codecarbon's probe did not run: {type(exc).__name__}: {exc}"
    try:
        model, why = json.loads(done.stdout.strip().splitlines()[-1])
        return (CodeCarbonModel(**model) if model is not None else None), why
    except (ValueError, IndexError, TypeError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"codecarbon's probe failed (exit {done.returncode}): {tail}"


def probe_here() -> tuple[dict | None, str]:
    """Start and stop CodeCarbon's tracker in this process: its model as a dict, or (None, why not)."""
    model, why = _probe_in_process()
    return (dataclasses.asdict(model) if model is not None else None), why


def _probe_in_process() -> tuple[CodeCarbonModel | None, str]:
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


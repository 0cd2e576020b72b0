"""Intel/AMD RAPL energy counters from Linux's powercap tree (``/sys/class/powercap``).

Each zone ``intel-rapl:N`` is a CPU package; its sub-zones ``intel-rapl:N:M`` are ``core``,
``uncore`` or ``dram``. ``energy_uj`` counts microjoules and wraps at ``max_energy_range_uj``.
The counters cover the whole package / DRAM, not this process: every process on the machine adds
to them. Reading needs permission (root on most kernels since 2020).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

POWERCAP = "/sys/class/powercap"


@dataclass(frozen=True)
class RaplZone:
    """One counter: ``kind`` is ``package`` or ``dram`` (``core``/``uncore`` are inside package)."""

    name: str
    kind: str
    path: Path
    max_range_uj: int


def find_zones(root: str | os.PathLike[str] = POWERCAP) -> tuple[list[RaplZone], str]:
    """Readable package and DRAM zones under ``root``, or ([], why not)."""
    base = Path(root)
    if not base.is_dir():
        return [], f"no RAPL: {base} does not exist"
    zones: list[RaplZone] = []
    problems: list[str] = []
    for zone in sorted(base.glob("intel-rapl:*")):
        try:
            name = (zone / "name").read_text().strip()
        except OSError as exc:
            problems.append(f"{zone.name}: {exc.strerror or exc}")
            continue
        depth = zone.name.count(":")
        if depth == 1 and name.startswith("package"):
            kind = "package"
        elif depth == 2 and name == "dram":
            kind = "dram"
        else:
            continue  # core/uncore/psys: already inside package, or not a CPU counter
        try:
            int((zone / "energy_uj").read_text())
            max_range = int((zone / "max_energy_range_uj").read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"{zone.name}/energy_uj: {getattr(exc, 'strerror', None) or exc}")
            continue
        zones.append(RaplZone(f"{zone.name}:{name}", kind, zone / "energy_uj", max_range))
    if not zones:
        why = "; ".join(problems) if problems else "no package zone"
        return [], f"no readable RAPL counter in {base} ({why})"
    return zones, ""


class RaplReader:
    """Reads all zones at once; :meth:`delta_j` turns two readings into joules per kind."""

    def __init__(self, zones: list[RaplZone]) -> None:
        self.zones = zones
        self.kinds = sorted({z.kind for z in zones})

    def read(self) -> tuple[int, ...]:
        """Counter values in µJ, one per zone."""
        out = []
        for z in self.zones:
            with open(z.path, "rb") as f:
                out.append(int(f.read()))
        return tuple(out)

    def delta_j(self, start: tuple[int, ...], end: tuple[int, ...]) -> dict[str, float]:
        """Joules per kind between two readings, correct across one counter wrap-around."""
        total: dict[str, float] = {k: 0.0 for k in self.kinds}
        for z, a, b in zip(self.zones, start, end, strict=True):
            d = b - a
            if d < 0:  # wrapped once
                d += z.max_range_uj
            total[z.kind] += d / 1e6
        return total


class RaplCumulative:
    """RAPL counters as joules since the first reading, per kind, correct across wrap-arounds
    (each zone must be read at least once per wrap: hours at full power)."""

    def __init__(self, reader: RaplReader) -> None:
        self.reader = reader
        self.kinds = reader.kinds
        self._last: tuple[int, ...] | None = None
        self._total = {k: 0.0 for k in reader.kinds}

    def read(self) -> dict[str, float]:
        """``{kind: joules since the first read}``."""
        now = self.reader.read()
        if self._last is not None:
            for kind, joules in self.reader.delta_j(self._last, now).items():
                self._total[kind] += joules
        self._last = now
        return dict(self._total)

    def reader_of(self, kind: str) -> RaplKindReader:
        """A ``() -> (joules, t_ns)`` reader of one kind (the timeline's counter)."""
        return RaplKindReader(RaplCumulative(RaplReader([z for z in self.reader.zones if z.kind == kind])), kind)


class RaplKindReader:
    """``() -> (joules since the first read, t_ns at the middle of the read)`` for one kind."""

    def __init__(self, cumulative: RaplCumulative, kind: str) -> None:
        self.cumulative = cumulative
        self.kind = kind

    def __call__(self) -> tuple[float, int]:
        a = time.time_ns()
        joules = self.cumulative.read()[self.kind]
        return joules, (a + time.time_ns()) // 2

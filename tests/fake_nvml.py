"""A faithful fake of the ``pynvml`` module (nvidia-ml-py), for the training process *and* for the
sampler process, which imports ``pynvml`` itself. Imports no torch.

:meth:`FakeNvml.install` puts it in this process's ``sys.modules`` and writes a ``pynvml.py`` shim
that builds the same fake (same parameters, same ``t0``) in any Python started with the
``PYTHONPATH`` it sets: the sampler process then reads a counter ramping on the same clock.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import types
import uuid
from pathlib import Path
from typing import Any

REPO = str(Path(__file__).resolve().parents[1])

SHIM = """import sys
sys.path.insert(0, {repo!r})
from tests.fake_nvml import FakeNvml
_fake = FakeNvml(**{params!r})
globals().update(_fake.module_dict())
"""


class FakeNvml:
    """``n`` GPUs whose NVML order is the reverse of CUDA's (see FakeCuda.uuids), known utilisation
    and power, and a total-energy counter in millijoules that ramps at ``ramp_w`` watts per GPU
    from ``t0`` (``time.time()``; now by default), or follows ``schedule`` — ``[(seconds, watts),
    ...]`` from ``t0``, the last power held after it — on every GPU. NVML's own counter moves in
    steps: ``period`` > 0 updates it only every ``period`` seconds from ``t0`` (a real one does
    every ~0.1 s), the value at a step being the energy up to it. A moment a test cannot place
    before its run has started is a *cue*: :meth:`cue` writes its time to a file beside the shim,
    read by every process's fake; a schedule's phase of ``None`` seconds lasts until it, and
    ``energy_fails_at_cue`` makes every counter read from it on raise (a driver error mid-run).
    ``energy=False`` stands for a GPU older than Volta: the counter query raises
    NVMLError_NotSupported; ``power_w=None``: so does the power query. Every call is recorded in
    ``calls`` as (function name, thread name), and appended to the file ``calls_log`` if given (one
    ``name`` per line: how a test sees the sampler process's calls)."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):  # pynvml's name
        pass

    def __init__(self, n: int = 2, energy: bool = True, power_w: float | None = 200.0,
                 ramp_w: float = 0.0, period: float = 0.0, t0: float | None = None,
                 schedule: list[tuple[float | None, float]] | None = None, calls_log: str | None = None,
                 read_delay: float = 0.0, energy_fails_at_cue: bool = False, cue_file: str | None = None) -> None:
        self.params = {"n": n, "energy": energy, "power_w": power_w, "ramp_w": ramp_w, "period": period,
                       "schedule": schedule, "calls_log": calls_log, "read_delay": read_delay,
                       "energy_fails_at_cue": energy_fails_at_cue,
                       "cue_file": cue_file}
        self.energy_fails_at_cue = energy_fails_at_cue
        self.cue_file = cue_file
        self._cue_at: float | None = None
        self.energy_reads = 0
        self.n = n
        self.energy = energy
        self.util = [37.0 + 10 * i for i in range(n)]  # NVML index -> %
        self.mem_util = [11.0] * n
        self.power_mw: list[int | None] = [None if power_w is None else int(power_w * 1000)] * n
        self.ramp_w = [ramp_w] * n
        self.schedule = [tuple(s) for s in schedule] if schedule else None
        self.period = period
        self.read_delay = read_delay
        self.t0 = time.time() if t0 is None else t0
        self.params["t0"] = self.t0
        self.added_mj = [5_000_000 + i for i in range(n)]
        self.initialised = 0
        self.shutdowns = 0
        self.calls: list[tuple[str, str]] = []
        self._log = open(calls_log, "a", buffering=1) if calls_log else None

    def add_energy(self, nvml_index: int, mj: int) -> None:
        self.added_mj[nvml_index] += mj

    def cue(self, ahead: float = 0.3) -> float:
        """Set the cue ``ahead`` seconds from now or a little more, in every process's fake; its
        ``time.time()``. With ``period``, the cue falls on one of the counter's steps, and so do a
        schedule's later phases where they last whole steps: the tests that plant a profile judge
        each row within a step of constant power (the counter cannot say where, inside a step,
        the power changed). A read that came before the file did took the cue as not yet come: so
        it must still be to come when the file is there (a stall of ``ahead`` seconds here raises,
        naming it)."""
        if self.cue_file is None:
            raise RuntimeError("install() the fake first: the cue is a file beside its shim")
        at = time.time() + ahead
        if self.period:
            at = self.t0 + math.ceil((at - self.t0) / self.period) * self.period
        part = Path(self.cue_file + ".part")
        part.write_text(repr(at))
        part.replace(self.cue_file)
        if time.time() >= at:
            raise RuntimeError(f"the cue's file took over {ahead} s to write: reads may have missed it")
        return at

    def cue_at(self) -> float | None:
        """The cue's ``time.time()``, once set (in any process); None before."""
        if self._cue_at is None and self.cue_file is not None and os.path.exists(self.cue_file):
            self._cue_at = float(Path(self.cue_file).read_text())
        return self._cue_at

    def joules(self, nvml_index: int, a: float, b: float) -> float:
        """The planted energy between two ``time.time()`` instants (no steps), J."""
        return self._energy_j(nvml_index, b - self.t0) - self._energy_j(nvml_index, a - self.t0)

    def _energy_j(self, nvml_index: int, t: float) -> float:
        if self.schedule is None:
            return self.ramp_w[nvml_index] * t
        joules, start = 0.0, 0.0
        for seconds, watts in self.schedule:
            if seconds is None:  # until the cue: not yet come, it lasts past t
                cue = self.cue_at()
                seconds = float("inf") if cue is None else cue - self.t0 - start
            if t <= start + seconds:
                return joules + watts * max(0.0, t - start)
            joules += watts * seconds
            start += seconds
        return joules + self.schedule[-1][1] * (t - start)

    def counter_mj(self, nvml_index: int, at: float | None = None) -> int:
        """The counter at time ``at`` (time.time(); now if None)."""
        t = (time.time() if at is None else at) - self.t0
        if self.period:
            t = t // self.period * self.period
        return int(self.added_mj[nvml_index] + self._energy_j(nvml_index, t) * 1000)

    def nvmlInit(self) -> None:  # pynvml's names below
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return self.n

    def nvmlDeviceGetHandleByIndex(self, i: int) -> tuple[str, int]:
        return ("handle", i)

    def nvmlDeviceGetHandleByUUID(self, uid: str) -> tuple[str, int]:
        value = uuid.UUID(uid.removeprefix("GPU-")).int - 1000
        if not 0 <= value < self.n:
            raise self.NVMLError("Not Found")
        return ("handle", value)

    def nvmlDeviceGetUtilizationRates(self, h: Any) -> Any:
        return types.SimpleNamespace(gpu=self.util[h[1]], memory=self.mem_util[h[1]])

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> Any:
        return types.SimpleNamespace(used=(h[1] + 1) * 2**30, total=16 * 2**30, free=0)

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:
        power = self.power_mw[h[1]]
        if power is None:
            raise self.NVMLError_NotSupported("Not Supported")
        return power

    def nvmlDeviceGetClockInfo(self, h: Any, kind: int) -> int:
        return 1410

    def nvmlDeviceGetTemperature(self, h: Any, kind: int) -> int:
        return 55

    def nvmlDeviceGetTotalEnergyConsumption(self, h: Any) -> int:
        if not self.energy:
            raise self.NVMLError_NotSupported("Not Supported")
        self.energy_reads += 1
        if self.energy_fails_at_cue and (cue := self.cue_at()) is not None and time.time() >= cue:
            raise self.NVMLError("Unknown Error")  # a driver error mid-run
        if self.read_delay:
            time.sleep(self.read_delay)  # a real H100's read takes ~3.5 ms
        return self.counter_mj(h[1])

    # -- installing ------------------------------------------------------------------------------
    def module_dict(self) -> dict[str, Any]:
        """What ``pynvml`` exposes, bound to this fake (calls recorded)."""
        out: dict[str, Any] = {}
        for name in dir(self):
            if name.startswith("nvml"):
                out[name] = self._recorded(name, getattr(self, name))
            elif name.startswith("NVML"):
                out[name] = getattr(self, name)
        return out

    def install(self, monkeypatch: Any, tmp_dir: str | os.PathLike[str]) -> FakeNvml:
        """This process's ``pynvml`` becomes the fake; so does the sampler process's, through a
        shim on ``PYTHONPATH`` in ``tmp_dir`` (a test's ``tmp_path``: pytest removes it, where a
        directory of the fake's own would be left behind)."""
        module = types.ModuleType("pynvml")
        for name, value in self.module_dict().items():
            setattr(module, name, value)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        shim_dir = Path(tmp_dir)
        shim_dir.mkdir(parents=True, exist_ok=True)
        if self.cue_file is None:
            self.cue_file = self.params["cue_file"] = str(shim_dir / "cue")
        (shim_dir / "pynvml.py").write_text(SHIM.format(repo=REPO, params=self.params))
        old = os.environ.get("PYTHONPATH")
        monkeypatch.setenv("PYTHONPATH", str(shim_dir) + (os.pathsep + old if old else ""))
        return self

    def _recorded(self, name: str, fn: Any) -> Any:
        def call(*args: Any) -> Any:
            self.calls.append((name, threading.current_thread().name))
            if self._log is not None:
                self._log.write(name + "\n")
            return fn(*args)

        return call


def logged_calls(path: str | os.PathLike[str]) -> list[str]:
    """The calls a fake with ``calls_log=path`` made (in any process)."""
    p = Path(path)
    return p.read_text().split() if p.exists() else []


def hide_pynvml(monkeypatch: Any, tmp_dir: str | os.PathLike[str]) -> None:
    """As if nvidia-ml-py were not installed, here and in the sampler process."""
    monkeypatch.setitem(sys.modules, "pynvml", None)
    shim_dir = Path(tmp_dir)
    shim_dir.mkdir(parents=True, exist_ok=True)
    (shim_dir / "pynvml.py").write_text("raise ImportError('No module named pynvml (hidden by a test)')\n")
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(shim_dir) + (os.pathsep + old if old else ""))

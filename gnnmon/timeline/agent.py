"""The sampler's loop, as it runs in the sampler process (or, where no process can be started, on a
thread of the training process).

It samples the training process (``pid``: CPU %, CPU time, RSS; its children, the DataLoader
workers: their RSS and CPU %), the machine's RAM, and per NVIDIA GPU utilisation, memory, power,
SM clock and temperature, every ``interval`` seconds on a fixed grid; and, with ``energy``, it
follows the cumulative energy counters (NVML's per GPU, RAPL's per kind) as points placed where
the counters stepped (:mod:`gnnmon.timeline.counters`). Everything is stamped with
``time.time_ns()``, the clock of rows' ``t_start_ns``/``t_end_ns``: the one clock two processes on
one machine share (``perf_counter`` and ``monotonic`` are per-boot too, but rows are stamped in
epoch time so that runs can be lined up with other logs).

Messages go out through ``emit`` as plain dicts, ``m`` saying what each is: ``hello`` (what can
be read here), ``sample``, ``point`` (a counter's step), ``reply`` (to ``now <id>``), ``bye`` (the
sampler's own cost). Commands come in as lines on ``commands_fd``: ``go``, ``now <id>``, ``stop``.
End of input (the training process closed the pipe or died) ends the loop at once.

Imports no torch and nothing that does: a process that starts it needs only psutil and pynvml.
"""

from __future__ import annotations

import json
import os
import queue
import select
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from gnnmon.devices.children import descendant_pids, is_python_helper
from gnnmon.devices.nvml import Nvml
from gnnmon.devices.rapl import POWERCAP, RaplCumulative, RaplReader, find_zones
from gnnmon.timeline.counters import ReadCounter, SteppedCounter
from gnnmon.timeline.machine_load import CoresLoad

Emit = Callable[[list[dict[str, Any]]], None]

PARENT_CHECK_S = 0.25
"""Seconds between two checks that the training process is still this process's parent."""


MIN_UTIL_WINDOW_S = 0.015
"""The shortest window a CPU utilisation is measured over: the kernel counts a process's CPU time
in clock ticks (10 ms), so a much shorter window reads 0 % or a multiple of 100 %. A sample taken
sooner after the previous measured one (the one the run's start asks for) has no utilisation;
the next one measures the longer window."""


class Utilisation:
    """CPU utilisation (% of one core) of processes from their CPU times, each over the window
    since its last measured reading, never shorter than :data:`MIN_UTIL_WINDOW_S`."""

    def __init__(self) -> None:
        self.base: dict[int, tuple[float, float]] = {}  # pid -> (cpu seconds, monotonic seconds)

    def measure(self, pid: int, cpu_s: float, now: float) -> float | None:
        base = self.base.get(pid)
        if base is None:
            self.base[pid] = (cpu_s, now)
            return None
        window = now - base[1]
        if window < MIN_UTIL_WINDOW_S:
            return None  # keep the baseline: the next sample measures the longer window
        self.base[pid] = (cpu_s, now)
        return 100.0 * max(cpu_s - base[0], 0.0) / window

    def keep(self, pids: set[int]) -> None:
        """Forget the processes not in ``pids`` (gone)."""
        for pid in [p for p in self.base if p not in pids]:
            del self.base[pid]


class ProcessProbe:
    """CPU and memory of one process and its children (psutil ``Process`` objects kept per pid)."""

    def __init__(self, pid: int, include_children: bool, exclude: int | None) -> None:
        import psutil

        self.psutil = psutil
        self.me = psutil.Process(pid)
        self.util = Utilisation()
        times = self.me.cpu_times()
        self.util.measure(pid, times.user + times.system, time.monotonic())  # the baseline
        self.children: dict[int, Any] = {}
        self.include_children = include_children
        self.exclude = exclude  # the sampler process itself, a child of the training process
        self.load = CoresLoad(psutil, self.me)

    def sample(self, sampler_cpu_s: float = 0.0) -> dict[str, Any]:
        """The process's and its children's figures, and the load on its cores
        (:mod:`gnnmon.timeline.machine_load`; ``sampler_cpu_s``: the sampler process's CPU so far)."""
        psutil = self.psutil
        me = self.me
        with me.oneshot():
            times = me.cpu_times()
            rss = me.memory_info().rss
        now = time.monotonic()
        cpu = self.util.measure(me.pid, times.user + times.system, now)
        kids_rss = kids_cpu = 0.0
        if self.include_children:
            alive: dict[int, Any] = {}
            pids = descendant_pids(me.pid)
            if pids is None:  # no /proc children files: psutil walks every process
                found = {c.pid: c for c in me.children(recursive=True)}
            else:
                found = {p: self.children.get(p) for p in pids}
            for pid, child in found.items():
                if pid == self.exclude:
                    continue
                proc = self.children.get(pid) or child
                if proc is None:
                    try:
                        proc = psutil.Process(pid)
                    except psutil.NoSuchProcess:
                        continue
                if is_python_helper(proc):  # multiprocessing's resource tracker or forkserver
                    continue
                try:
                    kid = proc.cpu_times()
                    kids_rss += proc.memory_info().rss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                pct = self.util.measure(pid, kid.user + kid.system, now)  # None: a new child's baseline
                kids_cpu += pct or 0.0
                alive[pid] = proc
            self.children = alive
            self.util.keep({me.pid, *alive})
        return {
            "cpu_time_s": times.user + times.system,
            "cpu_util_pct": None if cpu is None else cpu + kids_cpu,
            "rss_bytes": rss,
            "children": len(self.children),
            "children_rss_bytes": int(kids_rss),
            "children_cpu_pct": kids_cpu,
            "ram_used_bytes": psutil.virtual_memory().used,
            **self.load.read(None if cpu is None else cpu + kids_cpu, sampler_cpu_s, now),
        }


class Agent:
    """Probes chosen once from ``settings`` (plain data: ``pid``, ``interval``, ``uuids``,
    ``energy``, ``rapl_root``, ``include_children``, ``mode``); :meth:`serve` runs the loop."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.interval_ns = int(float(settings["interval"]) * 1e9)
        self.mode = settings.get("mode", "process")
        self.probe = ProcessProbe(int(settings["pid"]), bool(settings.get("include_children", True)),
                                  os.getpid() if self.mode == "process" else None)
        self.nvml = Nvml(settings.get("uuids"))
        nvml_ok = self.nvml.open()
        self.counters: list[SteppedCounter | ReadCounter] = []
        hello: dict[str, Any] = {
            "m": "hello", "pid": os.getpid(), "mode": self.mode,
            "nvml": "ok" if nvml_ok else self.nvml.reason,
            "gpus": sorted(self.nvml.handles) if nvml_ok else [],
            "nvml_energy_counter": {}, "rapl_zones": [], "rapl_kinds": [], "rapl": None,
            "torch_loaded": "torch" in sys.modules,
        }
        if settings.get("energy"):
            for index, ok in sorted(self.nvml.energy_supported.items()):
                hello["nvml_energy_counter"][str(index)] = ok
                if ok:
                    self.counters.append(SteppedCounter(f"gpu{index}_energy_mj", self.nvml.energy_reader(index)))
            zones, why = find_zones(settings.get("rapl_root") or POWERCAP)
            if zones:
                everything = RaplCumulative(RaplReader(zones))
                hello["rapl_zones"] = [z.name for z in zones]
                hello["rapl_kinds"] = list(everything.kinds)
                for kind in everything.kinds:
                    self.counters.append(ReadCounter(f"rapl_{kind}_j", everything.reader_of(kind)))
            hello["rapl"] = why or "ok"
        self.hello = hello
        self.samples = 0
        self.skipped = 0
        self.max_late_s = 0.0
        self._cpu = time.process_time if self.mode == "process" else time.thread_time

    # -- one sample ------------------------------------------------------------------------------
    def sample(self, due_ns: int) -> list[dict[str, Any]]:
        """A sample (``due_ns``: when it was due, epoch ns) and the points of the counters read
        with it (those that are current when read). The sample is stamped at the middle of the
        process's reads (psutil: ``t_ns``; ``read_s``: their span, so each of those figures was read
        within ``t_ns ± read_s/2``), taken after the counters' reads (an H100's energy query takes
        ~3.5 ms): its ``cpu_time_s`` is a cumulative figure that the energy join reads at row ends.
        NVML's figures, averages over 1/6 s or more, are read just after."""
        out: list[dict[str, Any]] = []
        for counter in self.counters:  # each point stamped at its own read
            if counter.continuous and (point := counter.read_now()) is not None:
                out.append(point | {"m": "point"})
        start = time.time_ns()
        sample: dict[str, Any] = {"m": "sample", "t_ns": start, "late_s": 0.0,
                                  "interval_s": self.interval_ns / 1e9}
        try:
            sample.update(self.probe.sample(self._cpu() if self.mode == "process" else 0.0))
        except self.probe.psutil.NoSuchProcess:
            raise  # the training process is gone: the loop ends
        except Exception as exc:  # noqa: BLE001 - say what failed in the sample, keep sampling
            sample["probe_error"] = f"{type(exc).__name__}: {exc}"
        end = time.time_ns()
        t_ns = sample["t_ns"] = (start + end) // 2
        late = sample["late_s"] = max(0.0, (t_ns - due_ns) / 1e9)  # t_ns - late_s: when it was due
        sample["read_s"] = (end - start) / 1e9
        self.max_late_s = max(self.max_late_s, late)
        if self.nvml.ok:
            sample.update(self.nvml.sample())
        sample["sampler_cpu_s"] = self._cpu()
        self.samples += 1
        out.append(sample)
        return out

    def stats(self) -> dict[str, Any]:
        """The sampler's own cost and what it learned (the ``bye`` message)."""
        return {"m": "bye", "mode": self.mode, "samples": self.samples, "skipped": self.skipped,
                "max_late_s": self.max_late_s, "cpu_s": self._cpu(),
                "counters": {c.key: c.describe() for c in self.counters},
                "nvml_energy_reads": self.nvml.energy_reads}

    # -- the loop --------------------------------------------------------------------------------
    def serve(self, emit: Emit, commands_fd: int, parent: int | None = None) -> None:
        """Run until ``stop`` (then a last sample, the counters' next points, ``bye``) or the end of
        the commands (no more output: nobody reads it). ``parent``: exit when the process
        stops being this one's parent (it died and this one was re-parented)."""
        emit([self.hello])
        step = self.interval_ns
        started = False
        next_sample = 2**62
        requests: list[tuple[str, int, int]] = []  # (id, covers from, give up at), epoch ns
        stopping = closed = False
        buffer = b""
        next_check = time.time_ns()
        while True:
            now = time.time_ns()
            dues = [c.due_ns(now) for c in self.counters] if started else []
            wake = min([next_sample, next_check, *dues] + [r[2] for r in requests])
            watched = [] if closed else [commands_fd]
            ready, _, _ = select.select(watched, [], [], max(0, wake - now) / 1e9)
            out: list[dict[str, Any]] = []
            now = time.time_ns()
            if started and now >= next_sample:  # before a command's sample: samples go out in time order
                out.extend(self.sample(next_sample))
                next_sample += step
                now = time.time_ns()
                if now > next_sample:  # deadlines missed (this process was paused): skip them
                    missed = (now - next_sample) // step + 1
                    self.skipped += missed
                    next_sample += missed * step
            if ready:
                data = os.read(commands_fd, 4096)
                if not data:  # the pipe closed: the training process is gone or done with us
                    closed = True
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    word, _, arg = line.decode().partition(" ")
                    if word in ("go", "now", "stop"):
                        t = time.time_ns()
                        if not started:
                            started, next_sample = True, t + step
                        out.extend(self.sample(t))
                        if word != "go":  # covered once every counter has a point after t
                            requests.append((arg if word == "now" else "bye", t, t + self._patience()))
                        if word == "stop":  # its sample is the last: none on the grid after it
                            stopping, next_sample = True, 2**62
                if closed and not stopping:
                    return  # nobody asked for a last sample: nobody will read it
            now = time.time_ns()
            if parent is not None and now >= next_check:
                next_check = now + int(PARENT_CHECK_S * 1e9)
                if os.getppid() != parent:
                    return
            for counter in self.counters if started else ():
                if now >= counter.due_ns(now):
                    point = counter.poll()
                    if point is not None:
                        out.append(point | {"m": "point"})
            done = False
            for request in list(requests):
                ident, since, give_up = request
                if all(c.covers(since) for c in self.counters) or time.time_ns() >= give_up:
                    requests.remove(request)
                    if ident == "bye":
                        out.append(self.stats())
                        done = True
                    else:
                        out.append({"m": "reply", "id": ident})
            if out:
                emit(out)
            if done and stopping:
                return

    def _patience(self) -> int:
        """How long a request waits for every counter's next step (ns): two periods, at least
        0.25 s (NVML's ~0.1 s), at most 2 s."""
        periods = [c.period_ns for c in self.counters if isinstance(c, SteppedCounter) and c.period_ns]
        return int(min(2e9, max(0.25e9, 2 * max(periods, default=0) + 50e6)))


# -- the process ---------------------------------------------------------------------------------
def _die_with_parent() -> None:
    """Linux: ask the kernel for SIGTERM when the thread that started this process exits (a
    SIGKILL of the training process included; asked only when that thread is the main thread,
    whose end is the process's). Elsewhere the end of stdin and the parent check do the same."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def main(settings_json: str) -> None:
    """The sampler process: settings as JSON, commands on stdin, JSON lines on stdout."""
    settings = json.loads(settings_json)
    if settings.get("main_thread"):
        _die_with_parent()
    parent = int(settings["pid"])
    if os.getppid() != parent:  # the training process died before this one started
        return
    out = sys.stdout.buffer
    # A thread writes to the pipe: when the training process does not read it (a long pause
    # holding its GIL) and the pipe fills up, the writes wait, the sampling does not.
    pending: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    broken = threading.Event()

    def write() -> None:
        while (data := pending.get()) is not None:
            try:
                out.write(data)
                out.flush()
            except (BrokenPipeError, OSError):
                broken.set()  # nobody reads: the loop ends at its next check
                return

    def emit(messages: list[dict[str, Any]]) -> None:
        if broken.is_set():
            raise BrokenPipeError("the training process no longer reads the sampler")
        pending.put(b"".join(json.dumps(m, separators=(",", ":")).encode() + b"\n" for m in messages))

    writer = threading.Thread(target=write, name="gnnmon-sampler-writer", daemon=True)
    writer.start()
    try:
        try:
            agent = Agent(settings)
        except Exception as exc:  # noqa: BLE001 - say why, then exit: the parent falls back to a thread
            emit([{"m": "failed", "error": f"{type(exc).__name__}: {exc}"}])
            return
        try:
            agent.serve(emit, sys.stdin.fileno(), parent)
        except (BrokenPipeError, KeyboardInterrupt, agent.probe.psutil.NoSuchProcess):
            pass  # nobody reads any more, or the training process is gone
        except Exception as exc:  # noqa: BLE001 - tell the training process, which keeps its rows
            emit([{"m": "failed", "error": f"{type(exc).__name__}: {exc}"}])
        finally:
            agent.nvml.close()
    finally:
        pending.put(None)
        writer.join(2.0)

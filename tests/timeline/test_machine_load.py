"""The machine's load beside the run (gnnmon/timeline/machine_load.py): on planted per-CPU
counters, the idle time and the CPU other processes took on the cores the training process may
run on (its affinity), the process's, its workers' and the sampler's own time taken out; and on
this machine, a busy process pinned to the run's one core reads as others' CPU with no idle left."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import namedtuple

import psutil
import pytest

from gnnmon.timeline.machine_load import CoresLoad

Times = namedtuple("Times", "user nice system idle iowait irq softirq steal guest guest_nice")


class FakePsutil:
    Error = psutil.Error

    def __init__(self) -> None:
        self.cpus = [Times(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0) for _ in range(4)]

    def cpu_times(self, percpu: bool = False) -> list[Times]:
        assert percpu
        return list(self.cpus)

    def spend(self, cpu: int, busy: float, idle: float, steal: float = 0.0, guest: float = 0.0) -> None:
        """Busy (user, the guest part of it included), idle (a quarter of it I/O wait) and steal seconds."""
        t = self.cpus[cpu]
        self.cpus[cpu] = t._replace(user=t.user + busy, idle=t.idle + idle * 0.75,  # guest: part of user
                                    iowait=t.iowait + idle * 0.25, steal=t.steal + steal, guest=t.guest + guest)


class Pinned:
    def __init__(self, cores: list[int] | None) -> None:
        self.cores = cores

    def cpu_affinity(self) -> list[int]:
        if self.cores is None:
            raise AttributeError("no affinity here")
        return self.cores


def test_planted_counters_on_the_process_cores_only():
    """Cores 1 and 2 are the process's. Over 2 s: core 1 busy 1.5 s (0.2 s of it steal, another
    guest's: counted once), idle 0.5 s; core 2 busy 0.5 s, idle 1.5 s; cores 0 and 3 busy
    throughout (not ours: left out). Busy on ours: 2.0 s = 100 % of a core; the process and its
    workers used 60 % of a core and the sampler 0.1 s (5 %): others 35 %; idle 2.0 s = 100 %."""
    fake = FakePsutil()
    load = CoresLoad(fake, Pinned([1, 2]))
    first = load.read(0.0, 1.0, now=10.0)
    assert first == {"cores": 2, "idle_cpu_pct": None, "others_cpu_pct": None}
    fake.spend(1, busy=1.3, idle=0.5, steal=0.2, guest=0.4)
    fake.spend(2, busy=0.5, idle=1.5)
    fake.spend(0, busy=2.0, idle=0.0)
    fake.spend(3, busy=2.0, idle=0.0)
    out = load.read(60.0, 1.1, now=12.0)
    assert out["cores"] == 2
    assert out["idle_cpu_pct"] == pytest.approx(100.0)
    assert out["others_cpu_pct"] == pytest.approx(35.0)


def test_every_core_counts_where_the_affinity_is_unknown_and_a_short_window_waits():
    fake = FakePsutil()
    load = CoresLoad(fake, Pinned(None))
    load.read(0.0, 0.0, now=1.0)
    fake.spend(0, busy=0.001, idle=0.0)
    assert load.read(0.0, 0.0, now=1.001)["idle_cpu_pct"] is None  # under 15 ms: the baseline is kept
    for cpu in range(4):
        fake.spend(cpu, busy=0.5, idle=0.5)
    out = load.read(None, 0.0, now=2.0)
    assert out["cores"] == 4 and out["idle_cpu_pct"] == pytest.approx(200.0, rel=0.01)
    assert out["others_cpu_pct"] is None  # the process's own CPU unknown: so are the others'


BUSY = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_a_busy_process_on_the_run_core_reads_as_others_cpu(tmp_path):
    """The real counters: this test's child process pins itself to one core and samples while a
    busy loop pinned to that core runs, then after it has stopped: others' CPU on that core is
    high with it (the loop had about half the core against a sleeping process: nearly all of it)
    and low without it."""
    core = min(os.sched_getaffinity(0))
    busy = subprocess.Popen([sys.executable, "-c", BUSY, str(core)])
    try:
        me = psutil.Process()
        previous = me.cpu_affinity()
        me.cpu_affinity([core])
        try:
            load = CoresLoad(psutil, me)
            load.read(0.0, 0.0, time.monotonic())
            time.sleep(0.5)
            with_loop = load.read(0.0, 0.0, time.monotonic())
        finally:
            me.cpu_affinity(previous)
    finally:
        busy.kill()
        busy.wait()
    assert with_loop["cores"] == 1
    assert with_loop["others_cpu_pct"] > 70, with_loop
    assert with_loop["idle_cpu_pct"] < 30, with_loop

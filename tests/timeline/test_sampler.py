"""The timeline's sampler: a process of its own that keeps its cadence through a busy loop or a GC
pause of the training process, leaves nothing behind (stop, exception, SIGKILL of the parent),
falls back to a thread where no process can be started; and the join of samples to rows by time."""

from __future__ import annotations

import bisect
import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

import gnnmon
import gnnmon.timeline.sampler as sampler_module
from gnnmon.timeline.join import join_gauges, samples_in
from gnnmon.timeline.sampler import ThreadSampler, start_sampler
from tests.conftest import sampler_processes


def sampler_threads():
    return [t for t in threading.enumerate() if t.name == "gnnmon-sampler"]


def in_window(samples, a_ns, b_ns):
    return [s for s in samples if a_ns <= s["t_ns"] <= b_ns]


# -- cadence -------------------------------------------------------------------------------------

CPU_TICK_S = 1 / os.sysconf("SC_CLK_TCK")
"""The kernel counts a process's CPU time to the sampler (``/proc/<pid>/stat``, through psutil) in
clock ticks: a difference of two readings is within one tick of the CPU time between them."""


def sampler_busy_ns(pid: int) -> int:
    """The sampler process's time on a CPU and waiting for one, all its threads together (ns, from
    the kernel's ``/proc/<pid>/task/<tid>/schedstat``): a deadline passed while it slept is late
    only by that, and the timer's slack."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            on_cpu, waiting, _ = f.read().split()
        total += int(on_cpu) + int(waiting)
    return total


def traced_share(trace: list[tuple[int, int]], before: dict, sample: dict) -> tuple[float, float, int, int, int]:
    """The CPU share (%) this process got in ``sample``'s window (from ``before``'s stamp to its
    own), read off ``trace`` (``(epoch ns, this process's CPU ns)``, in time order, around the
    window), and what a reading of it may be off by: a tick of the kernel's CPU count (over the
    window) and the trace's steps around either stamp, where the interpolation may be off. Also
    the window (ns) and those two steps (ns)."""
    times = [t for t, _ in trace]

    def cpu_ns(t: int) -> tuple[float, int]:
        assert trace[0][0] <= t <= trace[-1][0], "a window outside the trace"
        i = min(max(bisect.bisect_left(times, t), 1), len(trace) - 1)
        (t0, c0), (t1, c1) = trace[i - 1], trace[i]
        return c0 + (c1 - c0) * (t - t0) / max(t1 - t0, 1), c1 - c0

    window_ns = sample["t_ns"] - before["t_ns"]
    (c0, step0), (c1, step1) = cpu_ns(before["t_ns"]), cpu_ns(sample["t_ns"])
    return (100 * (c1 - c0) / window_ns, 100 * (CPU_TICK_S * 1e9 + step0 + step1) / window_ns, window_ns,
            step0, step1)


def test_a_pure_python_busy_loop_does_not_stall_the_sampler_process():
    """The bar: at sample=0.1 a 2 s pure-Python busy loop gets at least 16 samples from the sampler
    process (a thread sampler gets as many here: the loop hands the GIL over every switch interval;
    what a thread cannot do, sample while the GIL is held throughout, is the GC-pause test's plant
    below), and they read the CPU share the loop got, each
    over its own window, whatever else the machine runs: the loop traces this process's CPU time
    (``process_time_ns``, every 4,096 turns), and a sample's share is within a tick (over its
    window) of the traced CPU time between it and the sample before, plus what the trace's own
    steps either side leave unplaced. The median sample is held to that (a sample whose own read
    the scheduler held up after its stamp reads a window a little off; a load that comes and goes
    moves the loop's share from window to window, and so the readings, which is why no reading is
    judged against the share over the whole loop). The samples are late by no more than the
    sampler process spent running or waiting for a CPU meanwhile (the kernel's count) and its
    timer's slack: the loop, which holds this process's GIL, delays none; a busy machine may."""
    if not os.path.exists(f"/proc/{os.getpid()}/schedstat"):
        pytest.skip("no /proc/<pid>/schedstat: the kernel's count of a process's waits")
    with gnnmon.collect(sample=0.1) as run:
        pid = run.manifest["options"]["sampler"]["pid"]
        with open(f"/proc/{pid}/timerslack_ns") as f:
            slack_ns = int(f.read())
        busy0 = sampler_busy_ns(pid)
        a = time.time_ns()
        trace = [(a, time.process_time_ns())]  # (epoch ns, this process's CPU ns)
        x = 0
        while (now := time.time_ns()) - a < 2_000_000_000:
            x += 1  # pure Python: holds the GIL but for the switch interval
            if not x & 0xFFF:
                trace.append((now, time.process_time_ns()))
        b = now
        trace.append((b, time.process_time_ns()))
        busy1 = sampler_busy_ns(pid)
    assert run.manifest["options"]["sampler"]["mode"] == "process"
    inside = in_window(run.samples, a, b)
    assert len(inside) >= 16, len(inside)
    # each sample late from its due (t_ns - late_s) to its stamp, all after the first count and
    # before the second; those spans do not overlap (the next due is after the stamp). The kernel
    # adds a running thread's time at its ticks: one tick of the sampler's may be missing.
    late = [s for s in inside if s["t_ns"] - s["late_s"] * 1e9 >= a]
    late_ns = sum(s["late_s"] * 1e9 for s in late)  # + per sample: the slack, select's rounding to a µs
    assert late_ns <= busy1 - busy0 + len(late) * (slack_ns + 1_000) + CPU_TICK_S * 1e9, (
        late_ns, busy1 - busy0, [s["late_s"] for s in inside])
    # a sample's window runs from the one before that has a reading (one under 15 ms after it has
    # none, and the next reads both); the first's window began before a: it is not judged
    measured = [s for s in inside if s["cpu_util_pct"] is not None]
    excess = []  # per sample: how far its reading is off its window's share, less what is allowed
    for before, s in zip(measured, measured[1:], strict=False):
        share, allowed, *_ = traced_share(trace, before, s)
        excess.append(abs(s["cpu_util_pct"] - share) - allowed)
    assert statistics.median(excess) <= 0, excess  # it saw the busy loop, window by window


def _huge_heap(n=3_000_000):
    return [[i] for i in range(n)]  # containers: a full collection must visit each


def test_a_gc_pause_of_the_parent_does_not_delay_the_samples_around_it():
    """A planted pause (gc.collect on a heap of millions of containers: the GIL held throughout)
    does not move the sampler's grid: each sample says when it was due (``t_ns - late_s``), the
    dues keep to the grid, and a gap between two samples is the deadlines between their dues
    (those skipped included) and the later one's lateness, however long the pause. And samples
    keep coming during the pause: a deadline that fell due inside it is sampled while it lasts,
    more than an interval before its end, which a sampler waiting for the GIL cannot do (it
    takes such a deadline's sample only once the collection has let the GIL go)."""
    interval = 0.1
    heap = _huge_heap()
    with gnnmon.collect(sample=interval) as run:
        time.sleep(0.25)
        a = time.time_ns()
        gc.collect()  # one collection: no GIL switch inside the pause
        b = time.time_ns()
        time.sleep(0.25)
    del heap
    pause = (b - a) / 1e9
    if pause < 3 * interval:
        pytest.skip(f"the planted pause took only {pause:.3f} s on this machine")
    # the grid's samples around the pause (the start's and the stop's are a quarter second away)
    around = in_window(run.samples, a - 200_000_000, b + 200_000_000)
    dues = [s["t_ns"] - round(s["late_s"] * 1e9) for s in around]
    interval_ns = interval * 1e9
    paired = list(zip(around, dues, strict=True))
    for (x, due_x), (y, due_y) in zip(paired, paired[1:], strict=False):
        k = (due_y - due_x) / interval_ns  # deadlines from one due to the next: 1 + those skipped
        assert k >= 0.999 and abs(k - round(k)) < 1e-3, (k, around)  # the grid is not moved
        assert y["t_ns"] - x["t_ns"] <= round(k) * interval_ns + y["late_s"] * 1e9 + 1, (x, y)
    # the pause lasts at least three intervals: at least two deadlines fall due in its first
    # 2 intervals, more than an interval before its end; one of them was sampled by then
    well_inside = [s for s, due in zip(around, dues, strict=True) if a <= due and s["t_ns"] <= b - interval_ns]
    assert well_inside, (pause, [(s["t_ns"] - a, s["late_s"]) for s in around])


def test_a_long_gil_hold_that_fills_the_pipe_does_not_stall_the_sampler():
    """The training process holds its GIL for 2 s (libc ``usleep`` called through ``ctypes.PyDLL``,
    which keeps the GIL) while the sampler sends a sample every 5 ms: nobody reads the pipe, it
    fills up, and the sampler's writer waits, not its sampling. On Linux the pipe is cut to one
    page first, so that the samples a loaded machine's scheduler lets through fill it (of 400
    due, 94 on this VM at load 7: 34 KiB, under the default 64 KiB)."""
    import ctypes
    import fcntl

    libc = ctypes.PyDLL(None)
    capacity = 65536  # a pipe's default on Linux and macOS
    with gnnmon.collect(sample=0.005) as run:
        sampler = run.timeline.session.sampler
        if sampler.mode == "process" and hasattr(fcntl, "F_SETPIPE_SZ"):
            out = sampler.proc.stdout.fileno()
            fcntl.fcntl(out, fcntl.F_SETPIPE_SZ, 4096)
            capacity = fcntl.fcntl(out, fcntl.F_GETPIPE_SZ)
        time.sleep(0.05)
        a = time.time_ns()
        libc.usleep(2_000_000)
        b = time.time_ns()
        time.sleep(0.05)
    during = in_window(run.samples, a, b)
    assert (b - a) / 1e9 >= 1.9
    # more was sampled while nobody read than the pipe holds: a sampler that waited on the pipe
    # would have stopped at what it holds (of 400 due, a busy machine's scheduler may skip some)
    assert sum(len(json.dumps(s)) for s in during) > capacity, (len(during), capacity)


def test_samples_are_timestamped_and_have_process_and_host_figures():
    with gnnmon.collect(sample=0.02) as run:
        x = sum(i * i for i in range(2_000_000))  # keep a core busy
    assert x > 0
    s = run.samples[-1]
    assert s["t_ns"] > 0 and s["rss_bytes"] > 10 * 2**20 and s["ram_used_bytes"] > s["rss_bytes"]
    assert s["interval_s"] == 0.02 and s["children"] == 0  # the sampler process is not a worker
    assert [g["t_ns"] for g in run.samples] == sorted(g["t_ns"] for g in run.samples)
    assert run.samples[-1]["cpu_time_s"] >= run.samples[0]["cpu_time_s"]
    assert run.sampler_stats["samples"] == len(run.samples) and run.sampler_stats["cpu_s"] > 0


def test_the_sampler_sees_dataloader_workers():
    """Children of the training process (DataLoader workers) count in the samples: a child that
    holds 64 MiB shows in ``children_rss_bytes``; the sampler process itself never does. The
    child says when its pages are touched; every sample the run takes comes after that."""
    code = ("import sys, time; b = bytearray(64 * 2**20); b[::4096] = b'x' * len(b[::4096]); "
            "print('ready', flush=True); time.sleep(600)")
    worker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert worker.stdout.readline().strip() == b"ready"
        with gnnmon.collect(sample=0.05) as run:
            waited = time.perf_counter()  # a sample of the grid's, after the start's: polled for
            while len(run.samples) < 2 and time.perf_counter() - waited < 60:
                time.sleep(0.01)
    finally:
        worker.kill()
        worker.wait()
    assert len(run.samples) >= 3  # the start's, the grid's, the stop's: each taken while the child held its pages
    for s in run.samples:
        assert s["children"] == 1, s
        assert s["children_rss_bytes"] >= 64 * 2**20, s


# -- nothing left behind -------------------------------------------------------------------------

def test_no_process_or_thread_left_after_a_run_or_an_exception():
    with gnnmon.collect(sample=0.01) as run:
        pid = run.manifest["options"]["sampler"]["pid"]
        assert psutil.pid_exists(pid) and pid != os.getpid()
    assert not sampler_threads() and not sampler_processes()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

    with pytest.raises(KeyError):
        with gnnmon.collect(sample=0.01) as run:
            pid = run.manifest["options"]["sampler"]["pid"]
            time.sleep(0.05)
            raise KeyError("x")
    assert not sampler_threads() and not sampler_processes() and len(run.samples) >= 2
    assert not psutil.pid_exists(pid)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


TRAIN = {
    "main": """
        import time
        import gnnmon
        with gnnmon.collect(sample=0.05) as run:
            print(run.manifest["options"]["sampler"]["pid"], flush=True)
            while True:
                time.sleep(0.01)
    """,
    # started from a thread (no PR_SET_PDEATHSIG) with a forked worker holding the sampler's stdin
    # open (no end of input): only the parent check is left to end it
    "thread-and-worker": """
        import os, threading, time
        import gnnmon
        def train():
            with gnnmon.collect(sample=0.05) as run:
                if os.fork() == 0:
                    time.sleep(5)
                    os._exit(0)
                print(run.manifest["options"]["sampler"]["pid"], flush=True)
                while True:
                    time.sleep(0.01)
        threading.Thread(target=train).start()
    """,
}


@pytest.mark.parametrize("how", sorted(TRAIN))
def test_sigkill_of_the_training_process_leaves_no_sampler_behind(tmp_path, how):
    """A training process killed with SIGKILL: its sampler is gone within 2 s."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(TRAIN[how]))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env)
    try:
        line = proc.stdout.readline()
        pid = int(line)
        assert psutil.pid_exists(pid) and psutil.Process(pid).ppid() == proc.pid
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = time.perf_counter()
        while not _gone(pid) and time.perf_counter() - killed < 2.0:
            time.sleep(0.01)
        took = time.perf_counter() - killed
        assert _gone(pid), "the sampler outlived its training process by 2 s"
        assert took < 2.0
    finally:
        proc.kill()
        proc.wait()
        for child in psutil.Process().children(recursive=True):  # the forked worker, reparented or not
            if child.pid != os.getpid() and "train.py" in " ".join(child.cmdline()):
                child.kill()


# -- fallback ------------------------------------------------------------------------------------

def test_where_no_process_can_start_a_thread_samples_and_the_manifest_says_so(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("fork/exec not allowed here")

    monkeypatch.setattr(sampler_module.subprocess, "Popen", refuse)

    @gnnmon.cuda_timed(label="step")
    def step():
        time.sleep(0.1)

    with gnnmon.collect(sample=0.02) as run:
        assert sampler_threads()
        step()
    info = run.manifest["options"]["sampler"]
    assert info["mode"] == "thread" and "fork/exec not allowed here" in info["why"]
    (row,) = run.records
    assert row["util_samples"] >= 3 and "cpu_util_pct" in row
    assert run.manifest["sampled"]["sources"]["cpu_util_pct"] == "measured:psutil@20ms"
    assert run.sampler_stats["mode"] == "thread" and not sampler_threads()


def test_a_thread_sampler_asked_for_and_its_cadence_on_a_quiet_process():
    """The thread keeps the 50 ms grid: samples and skipped deadlines fill the time between go and
    stop, and it wakes no later than a bare thread waiting on the same grid beside it (what this
    machine's scheduler gives any thread: the check holds on a busy machine too)."""
    got = []
    bare_late: list[float] = []
    stop_bare = threading.Event()

    def bare(start_ns: int) -> None:  # a thread that only waits for the same deadlines
        due = start_ns
        while not stop_bare.is_set():
            due += 50_000_000
            stop_bare.wait(max(0, due - time.time_ns()) / 1e9)
            now = time.time_ns()
            bare_late.append(max(0, now - due) / 1e9)
            while due + 50_000_000 < now:  # a missed deadline is skipped
                due += 50_000_000

    s = ThreadSampler({"pid": os.getpid(), "interval": 0.05}, got.append, why="asked")
    t_go = time.time_ns()
    s.go()
    beside = threading.Thread(target=bare, args=(time.time_ns(),))
    beside.start()
    time.sleep(1.02)
    t_stop = time.time_ns()
    s.stop()
    stop_bare.set()
    beside.join()
    grid = [m for m in got if m["type"] == "sample"][1:-1]  # grid only
    # each sample says when it was due; the dues keep to the 50 ms grid, and a deadline the
    # thread woke too late for is skipped, counted, not shifted: samples and skips fill the time
    dues = [m["t_ns"] / 1e9 - m["late_s"] for m in grid]
    steps = [(b - a) / 0.05 for a, b in zip(dues, dues[1:], strict=False)]
    assert all(k >= 0.999 and abs(k - round(k)) < 1e-3 for k in steps), steps
    deadlines = (t_stop - t_go) // 50_000_000  # those passed between go and stop, measured
    assert deadlines - 2 <= len(grid) + s.bye["skipped"] <= deadlines + 1, (deadlines, len(grid), s.bye)
    late, usual = statistics.median(m["late_s"] for m in grid), statistics.median(bare_late)
    assert late < usual + 0.010, (late, usual)  # most on time: as on time as a bare thread
    assert not sampler_threads()


def test_the_sampler_process_imports_no_torch_and_answers_now():
    got = []
    s = start_sampler({"interval": 10.0}, got.append)
    try:
        assert s.mode == "process" and s.hello["torch_loaded"] is False
        s.go()
        t = time.time_ns()
        assert s.now()
        assert got[-1]["t_ns"] >= t  # the sample taken for "now" has arrived when now() returns
    finally:
        s.stop()
    assert len([m for m in got if m["type"] == "sample"]) == 3  # go, now, stop
    assert s.bye["samples"] == 3


def test_a_start_that_fails_after_the_sampler_started_leaves_no_sampler(tmp_path):
    (tmp_path / "taken.jsonl").write_text("{}\n")
    with pytest.raises(FileExistsError):
        gnnmon.collect(tmp_path / "taken.jsonl", mode="x", sample=0.05).start()
    with pytest.raises(ValueError, match="carbon_intensity"):
        gnnmon.collect(sample=0.05, energy=True, carbon_intensity=-1.0).start()
    assert not sampler_processes() and not sampler_threads()


def test_bad_intervals_and_modes():
    with pytest.raises(ValueError, match="sample must be"):
        gnnmon.collect(sample=-1)
    with pytest.raises(ValueError, match="interval"):
        gnnmon.sample_utilisation(0)
    with pytest.raises(ValueError, match="sampler must be"):
        gnnmon.collect(sample=0.1, sampler="fork")


# -- the join ------------------------------------------------------------------------------------

def planted_samples():
    # one sample every 100 ms from t = 1 s; CPU % = 10 × k; GPU 0 util = k, GPU 1 util = 100 - k
    return [{"t_ns": 1_000_000_000 + k * 100_000_000, "cpu_util_pct": 10.0 * k, "ram_used_bytes": 1000 * k,
             "children_rss_bytes": 100 * k, "gpu0_util_pct": float(k), "gpu1_util_pct": 100.0 - k,
             "gpu1_power_w": 200.0 + k} for k in range(10)]


def test_join_planted_timestamps():
    samples = planted_samples()
    assert [s["cpu_util_pct"] for s in samples_in(samples, 1_150_000_000, 1_400_000_000)] == [20, 30, 40]
    row = {"t_start_ns": 1_150_000_000, "t_end_ns": 1_400_000_000, "device": "cuda:1", "notes": []}
    join_gauges(row, samples)
    assert row["util_samples"] == 3 and row["cpu_util_pct"] == 30.0
    assert row["gpu_util_pct"] == 97.0
    assert row["gpu_power_w"] == 203.0 and row["ram_used_bytes"] == 3000.0
    assert row["workers_rss_bytes"] == 300.0 and not [k for k in row if k.endswith("_source")]
    cpu_row = {"t_start_ns": 1_000_000_000, "t_end_ns": 1_000_000_000, "device": "cpu", "notes": []}
    join_gauges(cpu_row, samples)
    assert cpu_row["cpu_util_pct"] == 0.0 and "gpu_util_pct" not in cpu_row and cpu_row["notes"] == []


def test_a_row_between_samples_gets_the_next_samples_utilisation_and_says_so():
    row = {"t_start_ns": 1_010_000_000, "t_end_ns": 1_090_000_000, "device": "cpu", "notes": []}
    join_gauges(row, planted_samples())
    assert row["util_samples"] == 0
    assert row["cpu_util_pct"] == 10.0  # the 1.1 s sample's: its mean over 1.0-1.1 s holds the row
    late = {"t_start_ns": 2_000_000_000, "t_end_ns": 2_050_000_000, "device": "cpu", "notes": []}
    join_gauges(late, planted_samples())
    assert "cpu_util_pct" not in late and late["notes"] == []


def test_rows_of_a_sampled_run_get_utilisation_and_the_file_keeps_the_samples(tmp_path):
    import torch

    @gnnmon.cuda_timed(label="busy")
    def busy():  # torch work, which releases the GIL as real training does
        a = torch.ones(200, 200)
        t = time.perf_counter()
        while time.perf_counter() - t < 0.25:
            a = (a @ a).clamp_(max=1.0)

    path = tmp_path / "s.jsonl"
    with gnnmon.collect(path, sample=0.02) as run:
        cpu0 = time.process_time()
        busy()
        cpu = time.process_time() - cpu0
    (row,) = run.records
    assert row["util_samples"] >= 5
    truth = 100 * cpu / row["wall_s"]  # the CPU the process got over the call (a loaded machine lends part of a core)
    assert abs(row["cpu_util_pct"] - truth) <= max(15, 0.25 * truth), (row["cpu_util_pct"], truth)
    assert row["cpu_util_pct"] <= 100 * (os.cpu_count() or 1) + 10  # busy on up to every core
    loaded = gnnmon.load(path)
    assert len(loaded.samples) == len(run.samples) and loaded.samples[0]["t_ns"] == run.samples[0]["t_ns"]
    assert loaded.sampler_stats["samples"] == len(run.samples)


def test_sample_utilisation_block():
    @gnnmon.cuda_timed(label="inside")
    def inside():
        time.sleep(0.1)

    with gnnmon.collect() as run:
        with gnnmon.sample_utilisation(0.01):
            inside()
        inside()  # after the block: no sampling, no join
    a, b = run.records
    assert a["util_samples"] >= 3 and "util_samples" not in b
    assert run.sample_interval is None and not sampler_threads() and not sampler_processes()


def test_descendants_from_proc_match_psutil():
    """The sampler's cheap walk of /proc/<pid>/task/<tid>/children finds what psutil's full scan
    finds: two children, one of them with a child of its own."""
    from gnnmon.devices.children import descendant_pids

    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(30)']); print(p.pid, flush=True); time.sleep(30)")
    a = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    b = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        grandchild = int(a.stdout.readline())
        pids = descendant_pids(os.getpid())
        if pids is None:
            pytest.skip("this kernel has no /proc/<pid>/task/<tid>/children")
        expected = {c.pid for c in psutil.Process().children(recursive=True)}
        assert {a.pid, b.pid, grandchild} <= set(pids)
        assert set(pids) == expected
    finally:
        for p in (a, b):
            p.kill()
            p.wait()
        psutil.Process(grandchild).kill()


def test_host_memory_of_workers_leaves_the_sampler_process_out():
    """The sampler process is a child of the training process but not a worker: the children's
    memory that ``monitor_memory_device(include_children=True)`` reads does not count it."""
    from gnnmon.devices.children import children_private_memory, children_rss

    with gnnmon.collect(sample=0.05) as run:
        pid = run.manifest["options"]["sampler"]["pid"]
        assert pid in {c.pid for c in psutil.Process().children()}
        assert children_rss() == (0, 0)
        assert children_private_memory()["processes"] == 0


def test_pythons_own_helper_processes_are_not_workers(tmp_path):
    """multiprocessing's resource tracker and forkserver are children of the training process that
    outlive every worker: neither host memory nor the sampler counts them, while a worker forked by
    the forkserver (its grandchild) and a plain forked worker are counted. Planted in a fresh
    interpreter, so the helpers end with it."""
    script = tmp_path / "helpers.py"
    script.write_text(textwrap.dedent("""
        import json, multiprocessing as mp, sys, time
        from multiprocessing import forkserver, resource_tracker
        import gnnmon
        from gnnmon.devices.children import children_rss

        if __name__ == "__main__":
            resource_tracker.ensure_running()
            forkserver.ensure_running()
            assert children_rss()[1] == 0, children_rss()
            workers = [mp.get_context(m).Process(target=time.sleep, args=(60,)) for m in ("fork", "forkserver")]
            for w in workers:
                w.start()
            try:
                counted = children_rss()[1]
                with gnnmon.collect(sys.argv[1], sample=0.02):
                    time.sleep(0.5)
            finally:
                for w in workers:
                    w.terminate()
                    w.join()
            print(json.dumps({"counted": counted}))
    """))
    path = tmp_path / "run.jsonl"
    out = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True, timeout=120,
                         cwd=os.getcwd())
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == {"counted": 2}
    samples = gnnmon.load(path).samples
    assert samples and {s["children"] for s in samples} == {2}


def test_max_records_bounds_the_samples_kept_in_memory_too(tmp_path, monkeypatch):
    """A long run at a short interval: with max_records the oldest samples leave memory (the file
    keeps every one), but never one that a row still waiting for its join needs."""
    import gnnmon.record.run as run_module

    monkeypatch.setattr(run_module, "SAMPLE_SLACK", 2)

    @gnnmon.cuda_timed(label="step")
    def step():
        time.sleep(0.02)

    path = tmp_path / "r.jsonl"
    with gnnmon.collect(path, max_records=10, sample=0.005, flush_interval=0.01) as run:
        first = run.samples[0]["t_ns"]  # the start's sample: gone from memory once a trim came
        for _ in range(20):
            step()
        waited = time.perf_counter()  # however few samples a busy machine let the sampler take: more steps
        while run.samples[0]["t_ns"] == first and time.perf_counter() - waited < 60:
            step()
    rows = run.records
    assert len(rows) == 10 and all(r["util_samples"] >= 1 for r in rows)
    assert len(run.samples) <= 10 + 2 + 5  # the bound, the slack, what came after the last trim
    taken = run.sampler_stats["samples"]  # every sample the sampler took, by its own count
    assert len(gnnmon.load(path).samples) == taken > len(run.samples)  # the file has them all; memory has not


def test_no_sample_reads_a_utilisation_over_a_window_the_kernel_cannot_resolve():
    """A step that burns one core for 0.6 s of its CPU, sampled every 50 ms: the samples taken
    while it runs and the row read the CPU share it got, whatever else the machine runs (traced as
    in the busy-loop test above: this process's CPU time every 4,096 turns, and each reading judged
    against the CPU in its own window, within a tick plus the trace's steps). The row's figure is
    the mean of the readings inside it (:func:`join_gauges`), and so within what the ticks and
    the trace's steps at their stamps leave of the mean of their windows' shares (an error at a
    stamp two windows share cancels but for the windows' lengths). A window shorter than the kernel's ticks
    (planted CPU times) has no utilisation instead of a 0 % or 100 % read; the next sample
    measures the longer one."""
    from gnnmon.timeline.agent import MIN_UTIL_WINDOW_S, Utilisation

    trace: list[tuple[int, int]] = []  # (epoch ns, this process's CPU ns)

    @gnnmon.cuda_timed(label="busy")
    def busy() -> None:
        end = time.process_time_ns() + 600_000_000
        x = 0
        while (cpu := time.process_time_ns()) < end:
            x += 1
            if not x & 0xFFF:
                trace.append((time.time_ns(), cpu))
        trace.append((time.time_ns(), cpu))

    with gnnmon.collect(sample=0.05) as run:
        # the windows of the row's samples begin at a sample that has a reading: wait for one,
        # tracing the wait, so that each window lies inside the trace
        waited = time.perf_counter()
        trace.append((time.time_ns(), time.process_time_ns()))
        while (not any(s["cpu_util_pct"] is not None and s["t_ns"] >= trace[0][0] for s in run.samples)
               and time.perf_counter() - waited < 60):
            time.sleep(0.002)
            trace.append((time.time_ns(), time.process_time_ns()))
        trace.append((time.time_ns(), time.process_time_ns()))
        busy()
        trace.append((time.time_ns(), time.process_time_ns()))
    row = run.records[0]
    measured = [s for s in run.samples if s["cpu_util_pct"] is not None]
    cores = os.cpu_count() or 1
    # no reading over a window the kernel cannot resolve: the CPU of a window of at least
    # MIN_UTIL_WINDOW_S is within a tick of what every core could give it
    assert max(s["cpu_util_pct"] for s in measured) <= 100 * (cores + CPU_TICK_S / MIN_UTIL_WINDOW_S)
    judged = {}  # sample's t_ns -> (its reading, its window's traced share, what is allowed)
    for before, s in zip(measured, measured[1:], strict=False):
        if before["t_ns"] < trace[0][0] or s["t_ns"] > trace[-1][0]:
            continue  # the first reading's window began before the trace; the stop's ends after it
        judged[s["t_ns"]] = (s["cpu_util_pct"], *traced_share(trace, before, s))
    in_row = samples_in(run.samples, row["t_start_ns"], row["t_end_ns"])
    assert row["util_samples"] == len(in_row)
    busy_ones = [judged[s["t_ns"]] for s in in_row if s["cpu_util_pct"] is not None]
    assert len(busy_ones) >= 5, (row, in_row)
    excess = [abs(v - share) - allowed for v, share, allowed, *_ in judged.values()]
    assert statistics.median(excess) <= 0, excess  # each sample read its own window's share
    # the row: the mean of its samples (two decimals)
    readings, shares, _, windows, steps0, steps1 = zip(*busy_ones, strict=True)
    assert row["cpu_util_pct"] == round(statistics.mean(readings), 2), (row, readings)
    # and so the mean of its windows' shares, within what the kernel's ticks and the trace's steps
    # leave at the stamps: consecutive windows share a stamp, and an error there enters one
    # window's share with + and the next one's with -, so the mean holds it once, weighted by
    # 1/w of the first and last windows and by |1/w_k - 1/w_k+1| between two
    inverse = [1e9 / w for w in windows]
    weights = [inverse[0], *(abs(x - y) for x, y in zip(inverse, inverse[1:], strict=False)), inverse[-1]]
    at_stamps = [steps0[0], *(max(x, y) for x, y in zip(steps1, steps0[1:], strict=False)), steps1[-1]]
    allowed = 100 * sum(w * (CPU_TICK_S + step / 1e9) for w, step in zip(weights, at_stamps, strict=True))
    allowed /= len(readings)
    assert abs(row["cpu_util_pct"] - statistics.mean(shares)) <= allowed + 0.005, (
        row["cpu_util_pct"], statistics.mean(shares), allowed, readings, shares)

    from gnnmon.timeline.join import gauge_at

    planted = [{"t_ns": 10, "cpu_util_pct": None}, {"t_ns": 20, "cpu_util_pct": 150.0},
               {"t_ns": 30, "cpu_util_pct": 100.0}]
    assert gauge_at(planted, "cpu_util_pct", 15, window=True) == 150.0  # the window ending at 20 holds 15
    assert gauge_at(planted, "cpu_util_pct", 25, window=True) == 125.0
    assert gauge_at(planted, "cpu_util_pct", 15) is None and gauge_at(planted, "cpu_util_pct", 35, window=True) is None

    probe = Utilisation()  # planted CPU times: a window shorter than the kernel's ticks keeps its baseline
    assert probe.measure(1, 10.0, 100.0) is None
    assert probe.measure(1, 10.001, 100.0 + MIN_UTIL_WINDOW_S / 2) is None
    assert probe.measure(1, 10.05, 100.1) == pytest.approx(50.0)


def test_a_sample_is_stamped_at_the_middle_of_its_reads(monkeypatch, tmp_path):
    """A sample's process figures (psutil) are stamped at the middle of their reads, the span said
    (``read_s``), so each was read within ``t_ns ± read_s/2``; NVML's figures are read after them.
    Planted: the process's CPU-times read sleeps 20 ms and notes when it returned, and each of two
    fake GPUs' temperature query sleeps 20 ms and notes when it returned."""
    import psutil

    from gnnmon.timeline.agent import Agent
    from tests.fake_nvml import FakeNvml

    plant_ns = 20_000_000
    fake = FakeNvml(n=2)
    gpu_read_at: list[int] = []
    query = fake.nvmlDeviceGetTemperature

    def slow_temperature(handle, kind):
        time.sleep(plant_ns / 1e9)
        gpu_read_at.append(time.time_ns())
        return query(handle, kind)

    fake.nvmlDeviceGetTemperature = slow_temperature  # before install: the fake module binds it
    fake.install(monkeypatch, tmp_path)
    agent = Agent({"pid": os.getpid(), "interval": 1.0})
    cpu_read_at: list[int] = []
    cpu_times = psutil.Process.cpu_times

    def slow_cpu_times(self):
        if self.pid == os.getpid():
            time.sleep(plant_ns / 1e9)
            cpu_read_at.append(time.time_ns())
        return cpu_times(self)

    slow_cpu_times.cache_activate = cpu_times.cache_activate  # psutil's oneshot() switches its cache
    slow_cpu_times.cache_deactivate = cpu_times.cache_deactivate
    monkeypatch.setattr(psutil.Process, "cpu_times", slow_cpu_times)
    due = time.time_ns()
    (sample,) = [m for m in agent.sample(due) if m["m"] == "sample"]
    assert "probe_error" not in sample, sample
    assert len(cpu_read_at) == 1 and len(gpu_read_at) == 2 and sample["gpu1_temp_c"] == 55
    span_ns = sample["read_s"] * 1e9
    assert span_ns >= plant_ns  # the planted sleep inside the process's reads
    assert abs(cpu_read_at[0] - sample["t_ns"]) <= span_ns / 2 + 1, (cpu_read_at[0] - sample["t_ns"], span_ns)
    assert all(t >= sample["t_ns"] + span_ns / 2 - 1 for t in gpu_read_at)  # NVML's, after those reads
    assert due <= sample["t_ns"] - span_ns / 2 + 1
    assert round(sample["late_s"] * 1e9) == sample["t_ns"] - due  # t_ns - late_s: when it was due

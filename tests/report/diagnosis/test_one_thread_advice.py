"""The off-CPU wait's next step reads the run's threads: a run whose torch already ran on one thread
(``devices.torch_threads`` 1, or the end line's where the script set it after the start, as under
``gnnmon run``) is not told to run torch on one thread; one on 4 threads still is.
Planted: 40 host calls of 125 ms whose process computed 31.25 ms each, on cores sampled full
(others 150 % of a core, 24 % idle), no run queue recorded: a wait whose cause the rows cannot say."""

from __future__ import annotations

import gnnmon
from gnnmon.data.result import RunResult

LEVEL, CPU = 0.125, 0.03125


def planted() -> list[dict]:
    return [{"label": "step", "index": i, "t_start_ns": int(i * LEVEL * 1e9), "t_end_ns": int((i + 1) * LEVEL * 1e9),
             "wall_s": LEVEL, "cpu_s": CPU, "backend": "cpu", "others_cpu_pct": 150.0, "idle_cpu_pct": 24.0}
            for i in range(40)]


def off_cpu_next(threads: int, at_end: int | None = None) -> str:
    manifest = {"devices": {"cpu_count": 2, "cpu_usable": 2, "torch_threads": threads}}
    result = RunResult(planted(), manifest=manifest, end=None if at_end is None else {"torch_threads": at_end})
    (found,) = [f for f in gnnmon.Report(result).diagnosis() if f["kind"] == "off-CPU wait"]
    assert "its cores were full while sampled" in found["words"]
    return found["next"]


def test_a_run_on_one_thread_is_told_to_record_the_run_queue_not_to_use_one_thread():
    advice = off_cpu_next(1)
    assert "set_num_threads" not in advice
    assert advice.startswith("a run with collect(sched=True), recording the thread's run-queue and CPU time (torch "
                             "ran on one thread already: torch_threads 1 as the run ended)")


def test_a_run_on_four_threads_is_still_told_to_use_one_thread():
    assert off_cpu_next(4).startswith("a run with torch on one thread (torch.set_num_threads(1)) and "
                                      "collect(sched=True)")


def test_a_script_that_set_one_thread_after_the_start_is_judged_by_its_end_line():
    """Under ``gnnmon run`` the manifest is written before the script's ``set_num_threads(1)``:
    the end line's count is the run's, either way."""
    assert off_cpu_next(2, at_end=1) == off_cpu_next(1)
    assert off_cpu_next(1, at_end=4) == off_cpu_next(4)

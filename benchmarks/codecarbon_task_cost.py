"""What CodeCarbon's task API costs the calling thread, per call, with the installed version.

Run: ``.venv/bin/python benchmarks/codecarbon_task_cost.py``. Prints the time ``start()``,
``start_task()`` and ``stop_task()`` block the caller (median and max over 20 tasks of 50 ms of
work each), the energy one task reports, and whether threads are left after ``stop()``, for both
tracking modes.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time


def measure(tracking_mode: str) -> None:
    import codecarbon
    from codecarbon import OfflineEmissionsTracker

    before = set(threading.enumerate())
    tracker = OfflineEmissionsTracker(country_iso_code="FRA", measure_power_secs=0.5, log_level="error",
                                      tracking_mode=tracking_mode, output_methods=[])
    t = time.perf_counter()
    tracker.start()
    start_s = time.perf_counter() - t
    starts, stops, data = [], [], None
    for i in range(20):
        t = time.perf_counter()
        tracker.start_task(f"step{i}")
        starts.append(time.perf_counter() - t)
        end = time.perf_counter() + 0.05
        while time.perf_counter() < end:
            sum(range(1000))
        t = time.perf_counter()
        data = tracker.stop_task()
        stops.append(time.perf_counter() - t)
    tracker.stop()
    time.sleep(0.2)
    left = [th.name for th in set(threading.enumerate()) - before]
    ms = lambda xs: f"median {statistics.median(xs) * 1e3:.1f} ms, max {max(xs) * 1e3:.1f} ms"  # noqa: E731
    print(f"codecarbon {codecarbon.__version__}, tracking_mode={tracking_mode!r}")
    print(f"start():      {start_s * 1e3:.0f} ms (once)")
    print(f"start_task(): {ms(starts)}")
    print(f"stop_task():  {ms(stops)}  (blocks the caller: one reading per call)")
    print(f"last task: duration {data.duration:.3f} s, cpu_power {data.cpu_power:.2f} W, "
          f"cpu_energy {data.cpu_energy:.3e} kWh, ram_power {data.ram_power:.1f} W, "
          f"ram_energy {data.ram_energy:.3e} kWh, emissions {data.emissions:.3e} kg")
    print(f"threads left after stop(): {left or 'none'}")


def main() -> int:
    logging.getLogger("codecarbon").setLevel(logging.ERROR)
    for mode in ("process", "machine"):
        measure(mode)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

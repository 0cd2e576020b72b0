"""Cumulative counters on the timeline, turned into points ``(t_ns, value)``: a row's share of a
counter is the counter interpolated linearly between the points around the row's start and end.

Two kinds of counter:

* :class:`SteppedCounter` — a counter that moves in steps, such as NVML's total-energy counter
  (every ~100 ms on an H100; a read returns the value of the last step, not the energy up to the
  read). The value a step shows is the energy up to *when the step happened*, so a point must be
  placed there, not at the read. The counter is read often just before the next step is due
  (learned from the steps seen: ``period_s``) and the step is placed midway between the last read
  that showed the old value and the first that showed the new one (``err_ns``: half that gap).
  A counter that moves at every read (steps shorter than :data:`CONTINUOUS_S`) is read on the
  sample cadence instead, each read a point: known so from the spacing of steps placed precisely,
  or from reads in a row that each showed a new value, whatever their spacing: ``n`` of them hold
  ``n`` steps, so the steps come at most their span / (n - 1) apart (:data:`MOVING_READS`). A busy
  machine's scheduler may give the sampler the CPU only every 3-6 ms, so no step is placed
  precisely and no two reads come 5 ms apart: once two reads in a row have moved, the next are
  made at once, one after another, without handing the CPU back.
* :class:`ReadCounter` — a counter that is current when read (RAPL: µJ, updated every ~1 ms): a
  point per read, at the middle of the read.

Imports nothing from gnnmon: it runs in the sampler process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

Point = dict[str, Any]
"""``{"key", "t_ns", "value", "err_ns", "step"}``: the counter ``key`` was ``value`` at ``t_ns``
(epoch ns) ± ``err_ns``; ``step``: placed where the counter stepped (else: where it was read)."""

FINE_S = 0.0005
"""Seconds between two reads while a step is due (about one read after another where a read is
slower, as NVML's 3.5 ms energy read is)."""

MAX_FAILURES = 3
"""Reads in a row that may raise before a counter is given up."""

RETRY_NS = 500_000_000
"""Nanoseconds before a read that raised is tried again (a counter is given up ~1 s after its
first failure)."""

CONTINUOUS_S = 0.005
"""A counter whose steps come faster than this is treated as continuous (read, not hunted)."""

MOVING_READS = 6
"""Reads in a row that each showed a new value before their span may say the counter is
continuous: ``n`` of them spanning ``L`` (from the read before them, plus a read) hold ``n`` steps,
so no period is over ``L / (n - 1)``; at or under :data:`CONTINUOUS_S`, the counter is read, not
hunted. Six: on a busy machine the two reads that start a burst may each come 6 ms after the one
before, and two more of the burst be held up as long, and the span still says under 5 ms."""

SLOW_READ_NS = 1_000_000
"""A read this much slower than the counter's fastest (and over twice as slow) was held up — the
process was preempted mid-read, so its middle may be up to half the hold-up off: it is taken again."""

REREADS = 2
"""Extra reads at most after a held-up one; the tightest of them gives the point."""


class _Counter:
    """What both kinds share: the read (timed, its failures counted: retried after
    :data:`RETRY_NS`, given up after :data:`MAX_FAILURES` in a row), the newest point, ``covers``."""

    continuous = True

    def __init__(self, key: str, read: Callable[[], tuple[float, int]]) -> None:
        self.key = key
        self.read = read  # () -> (value, t_ns at the middle of the read)
        self.reads = 0
        self.failures = 0  # reads that raised, in a row
        self.dead = False  # given up: nothing waits for this counter any more
        self.error = ""
        self.last: Point | None = None  # the newest point given out
        self._retry_ns = 0
        self._read_ns = 0  # how long a read takes (the longest kept)
        self._fastest_ns: int | None = None  # the fastest read seen: what a read costs unhindered
        self.rereads = 0  # reads taken again because they were held up
        self.points = 0  # points given out

    def _take(self) -> tuple[float, int] | None:
        """One read: ``(value, t_ns)``, or None if the counter is given up or the read raised. A
        read held up (see :data:`SLOW_READ_NS`) is taken again, up to :data:`REREADS` times, and the
        tightest kept: its middle is the surest time for its value."""
        best: tuple[float, int, int] | None = None  # (value, t_ns, span_ns)
        for _ in range(1 + REREADS):
            read = self._read_once()
            if read is None:
                if best is None:
                    return None
                break  # a reread that raised: the held-up read still stands
            if best is None or read[2] < best[2]:
                best = read
            if not self._held_up(best[2]):
                break
            self.rereads += 1
        assert best is not None
        self._read_ns = max(self._read_ns, best[2])
        return best[0], best[1]

    def _held_up(self, span_ns: int) -> bool:
        fastest = span_ns if self._fastest_ns is None else self._fastest_ns
        return span_ns > max(2 * fastest, fastest + SLOW_READ_NS)

    def _read_once(self) -> tuple[float, int, int] | None:
        if self.dead:
            return None
        a = time.time_ns()
        try:
            value, t_ns = self.read()
        except Exception as exc:  # noqa: BLE001 - an NVML error mid-run must not end the sampler
            self.failures += 1
            self.error = f"{type(exc).__name__}: {exc}"
            self._retry_ns = time.time_ns() + RETRY_NS
            self.dead = self.failures >= MAX_FAILURES
            return None
        span = time.time_ns() - a
        self.failures = 0
        self._fastest_ns = span if self._fastest_ns is None else min(self._fastest_ns, span)
        self.reads += 1
        return value, t_ns, span

    def _point(self, t_ns: int, value: float, err_ns: int, step: bool) -> Point:
        point = {"key": self.key, "t_ns": t_ns, "value": value, "err_ns": err_ns, "step": step}
        self.last = point
        self.points += 1
        return point

    def covers(self, t_ns: int) -> bool:
        """True once a point at or after ``t_ns`` has been given out (or the counter is given up)."""
        return self.dead or (self.last is not None and self.last["t_ns"] >= t_ns)


class SteppedCounter(_Counter):
    """Finds the steps of a counter that moves every ``period_s`` (learned). :meth:`due_ns` says when
    to call :meth:`poll` next; :meth:`poll` returns the point of a step it found, else None."""

    def __init__(self, key: str, read: Callable[[], tuple[float, int]], fine_s: float = FINE_S) -> None:
        super().__init__(key, read)
        self.fine_ns = int(fine_s * 1e9)
        self.steps = 0
        self.period_ns: int | None = None
        self.continuous = False
        self._value: float | None = None  # the value the last read showed
        self._t_ns = 0  # when that read was made
        self._step_ns: int | None = None  # when the last step happened (an estimate)
        self._spacings: list[int] = []
        self._moving_since = 0  # the read before the newest run of reads that each moved (t_ns)
        self._moving = 0  # reads in that run

    # -- schedule -----------------------------------------------------------------------------
    def due_ns(self, now_ns: int) -> int:
        """When the next read should be made (epoch ns)."""
        if self.dead:
            return 2**62
        if self.failures:
            return self._retry_ns
        if self.continuous or self._value is None:
            return now_ns if self._value is None else 2**62  # continuous: read with the samples
        if self._moving >= 2:  # two reads in a row moved: the next at once (see MOVING_READS)
            return self._t_ns
        if self.period_ns is None or self._step_ns is None:
            return self._t_ns + self.fine_ns  # still learning the period: read often
        guard = self._guard_ns()
        expected = self._step_ns + self.period_ns
        if now_ns > expected + 3 * self.period_ns:  # the counter stopped moving: look now and then
            return self._t_ns + self.period_ns // 4
        return max(expected - guard, self._t_ns + self.fine_ns)

    # -- reading ------------------------------------------------------------------------------
    def poll(self) -> Point | None:
        """Read once; the point of a step if one is seen (a continuous counter: every read). A
        read that raises is retried half a second later; after :data:`MAX_FAILURES` in a row the
        counter is given up (``dead``: nothing waits for it any more)."""
        taken = self._take()
        if taken is None:
            return None
        value, t_ns = taken
        previous, previous_t = self._value, self._t_ns
        self._value, self._t_ns = value, t_ns
        if self.continuous:
            return self._point(t_ns, value, self._read_ns // 2, step=False)
        if previous is None or value == previous:
            self._moving_since, self._moving = t_ns, 0
            return None
        self._moving += 1
        if self._moving >= MOVING_READS:
            if self._moving_reads_say_continuous(t_ns):
                self.continuous = True  # this read's value is the counter's at its middle: a point there
                return self._point(t_ns, value, self._read_ns // 2, step=False)
            self._moving_since, self._moving = t_ns, 0  # too spread to say: a fresh run from here
        gap = t_ns - previous_t
        step = previous_t + gap // 2
        self.steps += 1
        precise = gap <= 4 * self.fine_ns + 2 * self._read_ns
        if self._step_ns is not None and precise:
            self._learn(step - self._step_ns)  # only steps placed precisely teach the period
        elif self._step_ns is not None and self.period_ns is not None:
            step = _seen_late(self._step_ns, self.period_ns, previous_t, t_ns)
        self._step_ns = step
        # the step the value shows came between the two reads, wherever in the gap it is placed
        return self._point(step, value, max(step - previous_t, t_ns - step), step=True)

    def read_now(self) -> Point | None:
        """A continuous counter's point now (what a sample or a request takes); None if the read
        raised."""
        taken = self._take()
        if taken is None:
            return None
        self._value, self._t_ns = taken
        return self._point(taken[1], taken[0], self._read_ns // 2, step=False)

    def _guard_ns(self) -> int:
        """How early before the expected step the reads begin: a tenth of the period, twice the
        largest wander of a recent step from the period, at least 3 ms and two reads."""
        period = self.period_ns or 0
        wander = max((abs(s - period) for s in self._spacings), default=0)
        return max(3_000_000, 2 * self._read_ns, period // 10, 2 * wander)

    def _moving_reads_say_continuous(self, t_ns: int) -> bool:
        """True when the reads since ``_moving_since``, which each showed a new value, span (plus a
        read: a read's middle stands for the instant it took its value) at most one less than
        their number times :data:`CONTINUOUS_S`: so far apart at most are the counter's steps."""
        return (t_ns - self._moving_since + self._read_ns) <= (self._moving - 1) * CONTINUOUS_S * 1e9

    def _learn(self, spacing: int) -> None:
        spacings = self._spacings
        spacings.append(spacing)
        del spacings[:-9]
        self.period_ns = sorted(spacings)[len(spacings) // 2]
        if len(spacings) >= 3 and self.period_ns < CONTINUOUS_S * 1e9:
            self.continuous = True

    def describe(self) -> dict[str, Any]:
        """What was learned: ``period_s`` (None if no two steps were seen close enough),
        ``continuous``, ``reads``, ``rereads`` (held-up reads taken again), ``steps``, ``read_s``
        (the slowest read kept), ``given_up``, ``error``."""
        return {"period_s": self.period_ns / 1e9 if self.period_ns else None,
                "continuous": self.continuous, "reads": self.reads, "rereads": self.rereads,
                "steps": self.steps,
                "read_s": self._read_ns / 1e9, "given_up": self.dead, "error": self.error or None}


def _seen_late(last_step_ns: int, period_ns: int, previous_t: int, t_ns: int) -> int:
    """Where a step seen late (it came before the reads began) is placed (epoch ns): the value is
    the counter's at its newest step, and a gap longer than a period (the sampler held up under
    load) may hold several: the last that the period puts after ``last_step_ns`` and before
    ``t_ns``, kept within the gap (``previous_t`` to ``t_ns``)."""
    periods = max(1, (t_ns - last_step_ns) // period_ns)
    return min(max(last_step_ns + periods * period_ns, previous_t), t_ns)


class ReadCounter(_Counter):
    """A counter that is current when read: every read is a point (RAPL)."""

    def due_ns(self, now_ns: int) -> int:
        return 2**62  # read with the samples

    def poll(self) -> Point | None:
        return self.read_now()

    def read_now(self) -> Point | None:
        taken = self._take()
        return None if taken is None else self._point(taken[1], taken[0], 0, step=False)

    def describe(self) -> dict[str, Any]:
        return {"period_s": None, "continuous": True, "reads": self.reads, "rereads": self.rereads,
                "steps": self.points,
                "read_s": None, "given_up": self.dead, "error": self.error or None}

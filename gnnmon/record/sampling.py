"""``with gnnmon.sample_utilisation(0.5):`` — the timeline's sampler feeding the active run for a
block (what ``collect(sample=0.5)`` does for a whole run)."""

from __future__ import annotations

from typing import Any

from gnnmon.errors import is_positive_number
from gnnmon.record.active import active_run
from gnnmon.record.run import Run
from gnnmon.timeline.join import RowJoin
from gnnmon.timeline.sampler import DEFAULT_INTERVAL
from gnnmon.timeline.session import Session


class sample_utilisation:
    """``with gnnmon.sample_utilisation(0.5):`` — sample into the active run for a block (what
    ``collect(sample=0.5)`` does for a whole run). Rows closed inside get the sampled figures
    (``cpu_util_pct``, ``gpu_util_pct``, ...). The sampler (a process; ``sampler="thread"`` for a
    thread) is stopped on exit, also when the block raised. Inside a run that already samples,
    the run's sampler covers the block and no second one starts."""

    def __init__(self, interval: float = DEFAULT_INTERVAL, *, include_children: bool = True,
                 sampler: str = "process") -> None:
        if not is_positive_number(interval):
            raise ValueError(f"sample interval must be a finite number of seconds > 0, got {interval!r}")
        self.interval = float(interval)
        self.include_children = include_children
        self.mode = sampler
        self._session: Session | None = None

    def __enter__(self) -> sample_utilisation:
        self._run = run = active_run()
        timeline = run.timeline
        self._previous = (run.sample_interval, timeline.join)
        if timeline.join is not None:
            return self
        self._session = session = Session(self.interval, timeline.take, self.mode,
                                          include_children=self.include_children)
        run.sample_interval = session.interval
        _join_from_now(run, session.join(timeline.samples, timeline.counters))
        session.go()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._session is not None:
                self._session.stop()  # its last sample covers the rows closed inside
        finally:
            self._run.sample_interval = self._previous[0]
            if self._run.timeline.join is not self._previous[1]:
                _join_from_now(self._run, self._previous[1])  # rows closed inside are joined first


def _join_from_now(run: Run, join: RowJoin | None) -> None:
    """Join ``run``'s rows closed from now on with ``join``: rows closed before keep the one they
    were closed under (they are finished first)."""
    run.flush()
    run.timeline.join = join

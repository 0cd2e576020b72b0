"""Every-row figures beyond a row's own (its label, index, window, CPU seconds, collections, error
and device: :mod:`gnnmon.record.row`): each a probe that a row opens as it opens and closes as it
closes, where the run's options turn it on. The probes are listed here, in
:data:`PROBES`, each by the function that chooses it for a run; a row runs the run's choice,
made once (as the run is made and as it starts) and again only when something a chooser reads
has changed (:func:`gnnmon.record.state.probes_changed`: profiler ranges turned on or off, a
watched loader's pass begun or ended), never tested per row.

A probe's ``open`` runs on the step's path: it reads a clock or a counter and returns what its
``close`` needs; nothing that can be read later (see "The hot path" in DESIGN.md). A new
every-row figure is a probe module listed here, its figure declared in :mod:`gnnmon.figures`, and
the option that turns it on.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, Protocol

from gnnmon.record import oom_row, probe_batch, probe_ranges, probe_sched, state


class Row(Protocol):
    """What a probe sees of a row (:class:`gnnmon.record.row.Row`)."""

    fields: dict[str, Any]


class Run(Protocol):
    """What a probe's chooser sees of a run (:class:`gnnmon.record.run.Run`): its resolved options."""

    @property
    def energy(self) -> Any: ...  # its energy sources; None: energy off

    @property
    def sched(self) -> bool: ...  # whether rows read their thread's scheduler counters


class Probe(Protocol):
    """Figures a row gets from its opening to its closing."""

    top_level: bool
    """Only rows with no parent (their children's time is theirs already)."""

    def open(self, row: Row) -> Any:
        """At the row's opening (on the step's path): what :meth:`close` needs."""

    def close(self, row: Row, opened: Any, fields: dict[str, Any], error: BaseException | None) -> None:
        """At the row's closing, inside its window (before its ``cpu_s`` and ``t_end_ns`` are read):
        put the figures in ``fields``."""


PROBES: list[Callable[[Run], Probe | None]] = [
    probe_sched.choose,  # thread_* and before_*, top-level rows, with the run's sched
    probe_batch.choose,  # the watched loader's data_* figures, the top-level row that takes its batch
    probe_ranges.choose,  # a torch.profiler / NVTX range a row, while gnnmon.emit_ranges() is on
]
"""What chooses each probe for a run, in the order rows open them: the probe, or None where the
run's options (or the process's state, see :func:`gnnmon.record.state.probes_changed`) leave it off."""

ON_ERROR: list[Callable[[Run], Probe | None]] = [oom_row.choose]
"""Probes closed only on a row whose call raised (an out-of-memory post-mortem)."""


class Chosen(tuple[tuple[Probe, ...], tuple[Probe, ...]]):
    """A run's probes, as a row opens them: ``chosen[False]`` for a nested row, ``chosen[True]`` for
    a top-level one (one index on the step's path, no test per probe); ``all`` every one,
    ``on_error`` those a failed row closes too, ``stamp`` when it was made."""

    stamp = -1
    on_error: tuple[Probe, ...] = ()

    @property
    def all(self) -> tuple[Probe, ...]:
        return self[1]


def _ask(run: Run, choosers: list[Callable[[Run], Probe | None]]) -> tuple[Probe, ...]:
    """Each chooser's probe; one that raises is named in a warning and left out."""
    found = []
    for choose in list(choosers):
        try:
            probe = choose(run)
        except Exception as exc:  # noqa: BLE001 - a broken chooser must not stop the run
            name = f"{getattr(choose, '__module__', '?')}.{getattr(choose, '__qualname__', choose)}"
            warnings.warn(f"gnnmon left out a probe: choosing it ({name}) raised {exc!r}", RuntimeWarning, 4)
            continue
        if probe is not None:
            found.append(probe)
    return tuple(found)


def chosen(run: Run) -> Chosen:
    """The probes ``run``'s options turn on now, in :data:`PROBES`' order."""
    stamp = state.PROBES_STAMP[0]
    found = _ask(run, PROBES)
    made = Chosen((tuple(p for p in found if not p.top_level), found))
    made.stamp, made.on_error = stamp, _ask(run, ON_ERROR)
    return made

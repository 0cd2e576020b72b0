"""Every-row figures beyond a row's own (label, index, its window, error, device): each a probe that
a row opens as it opens and closes as it closes, chosen once from the run's options (as it is made,
and again as it starts, when its energy sources are known). A new every-row figure is a probe
module that registers itself here (:func:`register_probe`), its figure declared in
:mod:`gnnmon.figures`, and the option that turns it on.

A package's probe is found through its entry point in the group :data:`ENTRY_POINTS` (``name =
"module:choose"``, the chooser), loaded as the first ``collect`` run starts (a run that is never
started, the default one, has the probes registered by then).

A probe's ``open`` runs on the step's path: it reads a clock or a counter and returns what its
``close`` needs; nothing that can be read later (see "The hot path" in DESIGN.md). Built in:
:mod:`gnnmon.record.probe_cpu` (``cpu_s``, with ``energy``) and :mod:`gnnmon.record.probe_sched`
(the thread's scheduler counters, with ``sched``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from importlib import metadata
from typing import Any, Protocol


class Row(Protocol):
    """What a probe sees of a row (:class:`gnnmon.record.row.Row`)."""

    fields: dict[str, Any]
    sched0: Any  # the thread's scheduler counters at its opening: the sched probe's, which others read


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
        """At the row's closing (its ``t_end_ns`` set): put the figures in ``fields``."""


PROBES: dict[str, Callable[[Run], Probe | None]] = {}
"""Probe name -> what chooses it for a run: the probe, or None where the run's options leave it off."""


def register_probe(name: str, choose: Callable[[Run], Probe | None]) -> Callable[[Run], Probe | None]:
    """Make every run ask ``choose(run)`` for this probe (replacing one of that name)."""
    if not isinstance(name, str) or not name or not callable(choose):
        raise TypeError(f"register_probe(name, choose): a non-empty name and a callable; got {name!r}, {choose!r}")
    PROBES[name] = choose
    return choose


ENTRY_POINTS = "gnnmon.probes"
"""The entry-point group that names packages' probes: ``name = "module:choose"``."""

_DECLARED: list[bool] = []  # whether the declared probes were loaded (once per process)


def _load_declared() -> None:
    """Register the probes packages declare (each imported once; one already registered stays). One
    that cannot be loaded (its package broken, no file descriptor left) is named in a warning and
    left out: the run goes on without it."""
    _DECLARED.append(True)
    try:
        declared = list(metadata.entry_points(group=ENTRY_POINTS))
    except Exception as exc:  # noqa: BLE001 - reading packages' metadata failed: no declared probe
        warnings.warn(f"gnnmon could not read the probes packages declare ({ENTRY_POINTS}): {exc!r}",
                      RuntimeWarning, 4)
        return
    for ep in declared:
        if ep.name in PROBES:
            continue
        try:
            register_probe(ep.name, ep.load())
        except Exception as exc:  # noqa: BLE001 - a package's broken probe must not stop the run
            warnings.warn(f"gnnmon could not load the probe {ep.name!r} ({ep.value}): {exc!r}", RuntimeWarning, 4)


class Chosen(tuple[tuple[Probe, ...], tuple[Probe, ...]]):
    """A run's probes, as a row opens them: ``chosen[False]`` for a nested row, ``chosen[True]`` for
    a top-level one (one index on the step's path, no test per probe); ``all`` every one."""

    @property
    def all(self) -> tuple[Probe, ...]:
        return self[1]


def _ask(run: Run) -> Callable[[tuple[str, Callable[[Run], Probe | None]]], Probe | None]:
    """Asks one chooser for its probe: one that raises is named in a warning and left out."""
    def ask(item: tuple[str, Callable[[Run], Probe | None]]) -> Probe | None:
        name, choose = item
        try:
            return choose(run)
        except Exception as exc:  # noqa: BLE001 - a package's broken chooser must not stop the run
            warnings.warn(f"gnnmon left out the probe {name!r}: choosing it raised {exc!r}", RuntimeWarning, 4)
            return None
    return ask


def chosen(run: Run, declared: bool = True) -> Chosen:
    """The probes ``run``'s options turn on, in the order they were registered (the built-in ones
    first, then those packages declare; ``declared=False``: those registered so far only, as a run
    is made, which may be on a step's path: the packages' metadata is read as a run starts)."""
    if declared and not _DECLARED:
        _load_declared()
    found = tuple(probe for probe in map(_ask(run), list(PROBES.items())) if probe is not None)
    return Chosen((tuple(p for p in found if not p.top_level), found))

"""Garbage-collection control: no automatic collections inside a step, collections where asked.

Pauses are reference counted across threads and nesting (:mod:`gnnmon.record.gc_pause`): GC is
turned off by the first pause and restored to exactly what it was when the last pause ends, even
when the body raised.
"""

from __future__ import annotations

import functools
import gc
import itertools
from collections.abc import Callable
from typing import Any

from gnnmon.measure.adapters import make_decorator
from gnnmon.measure.bracket import hold, reentered, release, releasing
from gnnmon.measure.lifecycle import Measurement
from gnnmon.record.gc_log import requested_collection
from gnnmon.record.gc_pause import pause_gc, resume_gc

_frozen = False


def _check_generation(generation: Any, where: str) -> int:
    if generation not in (0, 1, 2) or isinstance(generation, bool):
        raise ValueError(f"{where}: generation must be 0, 1 or 2, got {generation!r}")
    return generation


def collect_garbage(generation: int = 2) -> dict[str, Any]:
    """The deferred collection, e.g. between epochs: ``gc.collect(generation)``, logged as asked for.

    Returns ``{"generation", "collected" (objects), "pause_s" (seconds)}``.
    """
    _check_generation(generation, "collect_garbage()")
    collected, seconds = requested_collection(generation, "collect_garbage")
    return {"generation": generation, "collected": collected, "pause_s": seconds}


def freeze_gc() -> int:
    """Collect, then ``gc.freeze()``: objects alive now (the model, the dataset) leave the
    collector's generations, so later full collections do not traverse them. Returns how many
    objects are frozen. ``gc.unfreeze()`` undoes it."""
    requested_collection(2, "freeze")
    gc.freeze()
    return gc.get_freeze_count()


class gc_paused:
    """``with gc_paused(collect_on_exit=False, generation=2):`` — automatic GC off inside.

    Nesting-safe and exception-safe; process-wide (see the module doc for threads). With
    ``collect_on_exit=True`` the block ends with one collection of ``generation``, logged as asked.
    Also a decorator, bare or with those options (``@gc_paused``, ``@gc_paused(collect_on_exit=True)``):
    each call of the function runs in a pause of its own (no row: ``@gc_controlled`` records one).
    """

    __slots__ = ("collect_on_exit", "generation", "_token")

    def __new__(cls, collect_on_exit: Any = False, generation: int = 2) -> Any:
        if callable(collect_on_exit):  # bare @gc_paused on a function: the function, wrapped
            return cls._wrap(collect_on_exit, False, 2)
        return super().__new__(cls)

    def __init__(self, collect_on_exit: bool = False, generation: int = 2) -> None:
        if not isinstance(collect_on_exit, bool):
            raise TypeError("gc_paused(): collect_on_exit must be True or False")
        self.collect_on_exit = collect_on_exit
        self.generation = _check_generation(generation, "gc_paused()")

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """``@gc_paused(collect_on_exit=True)``: ``func`` wrapped, each call in a pause of its own."""
        if not callable(func):
            raise TypeError("gc_paused(...) decorates a function: @gc_paused(collect_on_exit=True)")
        return gc_paused._wrap(func, self.collect_on_exit, self.generation)

    @staticmethod
    def _wrap(func: Callable[..., Any], collect_on_exit: bool, generation: int) -> Callable[..., Any]:
        @functools.wraps(func)
        def paused(*args: Any, **kwargs: Any) -> Any:
            with gc_paused(collect_on_exit, generation):
                return func(*args, **kwargs)

        return paused

    @releasing
    def __enter__(self) -> gc_paused:
        if reentered():  # a signal handler's block while gnnmon's code is interrupted: GC as it is
            self._token = None
            return self
        held = hold()  # a Ctrl-C waits until the pause is counted (record/interrupts.py)
        token = self._token = object()  # this block's pause: its exit ends it once
        pause_gc(token)
        return release(held, undo=lambda: resume_gc(token), value=self)  # a Ctrl-C here: the block never runs

    @releasing
    def __exit__(self, *exc: Any) -> None:
        if self._token is None:
            return
        held = hold()
        try:
            resume_gc(self._token)
        finally:
            release(held)
        if self.collect_on_exit:
            requested_collection(self.generation, "gc_paused")


class GcControl(Measurement):
    """No automatic GC inside the call; a collection after it (every call or every N) if asked."""

    __slots__ = ()
    name = "gc"
    option_names = ("collect", "generation", "freeze")
    defaults = {"collect": "never", "generation": 2, "freeze": False}

    @classmethod
    def check_options(cls, options: dict[str, Any], where: str) -> dict[str, Any]:
        options = super().check_options(options, where)
        collect = options.get("collect", "never")
        ok_int = isinstance(collect, int) and not isinstance(collect, bool) and collect >= 1
        if collect not in ("never", "after") and not ok_int:
            raise ValueError(
                f"{where}: collect must be 'never', 'after' or a number of calls N >= 1, got {collect!r}"
            )
        _check_generation(options.get("generation", 2), where)
        if not isinstance(options.get("freeze", False), bool):
            raise TypeError(f"{where}: freeze must be True or False")
        options["_calls"] = itertools.count(1)  # calls of this decorated function
        return options

    def __enter__(self) -> GcControl:
        global _frozen
        if self.options["freeze"] and not _frozen:
            _frozen = True
            self.row.note(f"gc.freeze() after set-up: {freeze_gc()} objects frozen")
        # Automatic GC comes back on once the row has closed: the collection that its first
        # allocation may then trigger (the garbage the call made) falls outside the row, in the
        # enclosing row or in none, as the GC log says. The row holds it before it is counted: whatever
        # interrupts the call from here on, closing the row (or healing it) ends this pause.
        row = self.row
        row.gc_paused = True
        pause_gc(row)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        row = self.row
        o = self.options
        c = o["collect"]
        if c == "never":
            return
        if c == "after" or next(o["_calls"]) % c == 0:
            gen = o["generation"]
            row.after_close(lambda: requested_collection(gen, "gc_controlled"))


gc_controlled = make_decorator(GcControl, "gc_controlled", "gnnmon.gc_paused()")
gc_controlled.__doc__ = """No automatic GC inside each call: ``@gc_controlled`` or
``@gc_controlled(collect="never" | "after" | N, generation=2, freeze=False)``.

``collect="after"`` runs one collection after every call, ``N`` after every N-th call (outside the
row's window, logged as asked for); ``freeze=True`` collects and calls ``gc.freeze()`` once, at the
first call, when set-up is done. GC state is restored after every call, even one that raised."""

"""Steps found in an unmodified script (``gnnmon run``): one row per optimizer update, cut by
PyTorch's own global hooks, with fallbacks that each say what they are.

What is watched, on the thread that runs the script only (a DataLoader worker, a prefetch thread or
a forked child sees nothing), and only while the run is open (every hook and patch is removed when
it ends):

* **updates** — ``torch.optim``'s global step hooks (``register_optimizer_step_pre_hook`` /
  ``_post_hook``, public since torch 2.0), de-nested (a wrapper optimizer that steps an inner one
  is one update); ``torch.amp.GradScaler.step`` is wrapped to see an update the scaler skipped (an
  inf or NaN gradient: no ``optimizer.step`` ran);
* **batches** — ``next()`` on a ``torch.utils.data.DataLoader`` iterator (PyG's loaders are
  DataLoaders), timed: its wait is the row's ``data_wait_s`` (the waits of a row's later batches,
  made while it is open, are in its window too: ``data_wait_in_row_s``). The outermost ``next()`` is timed:
  where a loader's ``__iter__`` returns an iterator of another class (PyG's ``DataLoaderIterator``,
  whose ``__next__`` gathers the sampled nodes' features and runs the loader's ``transform``),
  that class's ``__next__`` is wrapped too, the first time one is returned, so the wait holds what
  ``watch_loader``'s does. A PyG neighbour loader's time is split as ``watch_loader`` splits it
  (``data_sample_s``, ``data_gather_s``, ``data_transform_s``, and its nodes per hop
  ``data_hop_<k>_nodes``, summed over the row's batches), by the same wrappers, put on the loader
  when it is first iterated and taken off when the run ends. The row carries its batches' loader's
  settings as ``watch_loader``'s rows do (``data_workers``, ``data_persistent``, ``data_sampler``:
  :func:`gnnmon.measure.loader.loader_settings`, read when a pass begins; the last batch's loader's
  where a row took batches of two);
* **backward calls** — ``torch.autograd.backward`` (``Tensor.backward`` calls it), outermost only:
  on Python 3.12+ through ``sys.monitoring``'s local events on its code (:data:`MONITORING`), below
  it a wrapper put in its place;
* **root forwards** — a global module forward hook that finds the outermost module calls until the
  first row with a forward closes, then hooks those root modules alone and drops the global hook
  (a global hook takes every submodule off torch's fast path);
* **optimizers made** — ``torch.optim.Optimizer.__init__``: an update is to be expected.

The phases, timed into the open row with the fields :class:`gnnmon.phase` gives them
(``phase_forward_s``, ``phase_backward_s``, ``phase_optimizer_s``; summed where a row holds
several), from the same hooks and nothing more: ``forward`` from a root module's forward pre-hook
to its forward hook (the outermost call only), ``backward`` around the outermost
``torch.autograd.backward`` call (its start and return as seen above; one that raises where
``sys.monitoring`` sees it is left out, said by the row: :data:`BACKWARD_RAISED`), ``optimizer``
from the update's pre-hook to its post-hook (the outermost, as updates are de-nested). A phase
opens only in a row of the engine's (never a row of its own); one inside another (a closure
optimizer's forward and backward inside its ``step``) is marked so by the row
(``phase_forward_in = "optimizer"``), as the decorated ``phase()`` marks it. On a CPU row a
phase is the host clock's, read here (what ``phase()`` reads there, without its objects: the
engine's row may not cost more than a decorated one); on a device's row it is a ``phase()``,
timed as the device's (events on CUDA). A row's close ends its phases still open.

The rule (:data:`RULES`; a row's ``step_rule`` names the one that made it):

1. ``update`` — a row is one optimizer update: with a loader, the batches up to and including the
   one that stepped (gradient accumulation: ``batches`` of them; a GAN's two optimizers in one
   batch: ``updates`` 2); without one, from the first forward to the update. Label ``step``. An
   update AMP's scaler skipped still ends its row, which says ``updates_skipped``.
2. ``backward`` — no update was ever seen and no optimizer was made (a hand-written update) or none
   stepped in :data:`PATIENCE` batches (a compiled step hides the hooks): a row ends at the next
   batch, or forward of the same model, after a backward. Label ``step``.
3. ``batch`` / ``forward`` — no backward: a row is a batch, or a root forward where no loader
   runs. Labelled ``batch`` / ``forward`` (inference), or ``eval`` once the script has trained: an
   eval pass between updates is its own rows, never part of a step.

Rows of a batch that began a backward but ended (the run's end, an eval pass) before any update are
``partial``. Nothing seen: no row at all, and :meth:`AutoSteps.summary` says what was looked for.
Every hook returns at once while ``torch.compile`` traces, never raises (a fault is counted), and
does nothing in a forked child.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from threading import get_ident
from time import perf_counter_ns
from types import FunctionType
from typing import Any

import torch

from gnnmon.measure.bracket import Bracket, hold, is_compiling, release
from gnnmon.measure.lifecycle import Measurement, open_row
from gnnmon.measure.loader import _begin_pass, _end_pass, _splittable, add_batch, loader_settings
from gnnmon.measure.memory import MemoryMeasurement
from gnnmon.measure.timing import TimingMeasurement, phase
from gnnmon.record.run import Run

PHASE_FIELDS = {"forward": "phase_forward_s", "backward": "phase_backward_s", "optimizer": "phase_optimizer_s"}
"""The engine's phases and their fields (``phase()``'s names)."""

_INSIDE = {name: f"phase_{name}_in" for name in PHASE_FIELDS}

_NO_KWARGS: dict[str, Any] = {}  # a row's keyword arguments: the engine's rows have none
_clock = time.perf_counter_ns  # the loader's wait (the phases read perf_counter_ns)
_getframe = sys._getframe

MONITORING = sys.version_info >= (3, 12)
"""Whether backward is seen through ``sys.monitoring`` (PEP 669, Python 3.12+): local ``PY_START``
and ``PY_RETURN`` events on ``torch.autograd.backward``'s code, which cost nothing elsewhere and
patch nothing (a caller that holds its own reference to the function is seen too). Below 3.12, a
wrapper put in ``torch.autograd.backward``'s place, removed at the run's end."""

TOOL_IDS = (4, 3)
"""The ``sys.monitoring`` tool ids the engine may take, the first free one (0 is debuggers', 1
coverage's, 2 profilers' (cProfile takes it), 5 optimizers'). None free: the wrapper."""

BACKWARD_SEEN_BY = {"monitoring": "sys.monitoring (local events on torch.autograd.backward's code)",
                    "wrapper": "a wrapper in torch.autograd.backward's place"}
"""How backward calls were seen (the summary's ``backward_seen_by``)."""

BACKWARD_RAISED = ("a backward call raised (no end seen: Python 3.12 has no local event for a frame that unwinds): "
                   "its phase is left out of the row's backward time")
"""The note of a row whose backward raised where ``sys.monitoring`` sees backward: its phase's time
is not known, and not made up."""

HOST_CLOCK = frozenset(("cpu",))
"""The backends whose rows' phases the engine times itself on the host clock (a device's are
``phase()``'s, timed as the device's)."""

__all__ = ["HIDDEN", "LOOKED_FOR", "PATIENCE", "RULES", "AutoSteps"]

RULES = {
    "update": "a row per optimizer update (torch.optim's global step hooks), with the batches and backward calls "
              "it took",
    "backward": "optimizer not visible: rows cut at backward (a row ends at the next batch, or the next forward "
                "of the same model, after a backward)",
    "batch": "no backward: a row per DataLoader batch (labelled batch, or eval once the script had trained)",
    "forward": "no backward and no loader: a row per root model forward (labelled forward, or eval once the "
               "script had trained)",
}
"""Each rule a row can be made by (its ``step_rule``), in words."""

LOOKED_FOR = ("optimizer updates (torch.optim step hooks)", "backward calls (torch.autograd.backward)",
              "DataLoader batches (next() on its iterator)", "root model forwards (module forward hooks)")
"""What the engine watches, as the report says it when nothing was seen."""

PATIENCE = 64
"""Batches (or forwards, with no loader) with a backward a row waits for an update, where an
optimizer was made but none has stepped yet (a compiled step hides the hooks), before the rule
falls back to cutting at backward."""

HIDDEN = ("an optimizer was made but neither an update nor a backward was seen: a step compiled whole (loss, "
          "backward and optimizer.step inside one torch.compile) hides both, and so does a script that only "
          "evaluates: the rows are its batches or forwards, as inference's")
"""The note where the rows fell back to batches or forwards though an optimizer was made."""

_IN_CHILD: list[bool] = []


_ENGINES: weakref.WeakSet[AutoSteps] = weakref.WeakSet()
"""The engines of this process: a forked child turns them off."""


def _forked() -> None:
    _IN_CHILD.append(True)
    for engine in list(_ENGINES):
        engine.watched = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _give_back(tool: int, code: Any) -> None:
    """The run's end: the engine's ``sys.monitoring`` events, callbacks and tool id given back."""
    if sys.version_info < (3, 12):
        return
    monitoring = sys.monitoring
    monitoring.set_local_events(tool, code, 0)
    monitoring.register_callback(tool, monitoring.events.PY_START, None)
    monitoring.register_callback(tool, monitoring.events.PY_RETURN, None)
    monitoring.free_tool_id(tool)


class _Open:
    """The row being filled and what it has seen (the counts start from class defaults: a row is
    opened on every step)."""

    batches = backwards = updates = skipped = forwards = 0
    wait_s = 0.0
    wait_in_row_s = 0.0  # of wait_s, the waits while this row was open (its later batches'): in its window
    split: dict[str, float] | None = None  # a PyG neighbour loader's sample / gather / transform times, hop nodes
    settings: dict[str, Any] | None = None  # its last batch's loader's settings (loader_settings)

    def __init__(self, bracket: Bracket) -> None:
        self.bracket = bracket
        self.fields = fields = bracket.row.fields
        self.host = fields["backend"] in HOST_CLOCK  # its phases read by the engine on the host clock
        self.roots: dict[int, Any] = {}  # the root modules called in it, by id


class _Phase:
    """One of the engine's phases on the host clock, made once: its name, its field and its nesting
    mark's field, when it started (0: not open) and the phase open when it started (its outer)."""

    __slots__ = ("name", "field", "inside", "t0", "outer")

    def __init__(self, name: str) -> None:
        self.name = name
        self.field = PHASE_FIELDS[name]
        self.inside = _INSIDE[name]
        self.t0 = 0
        self.outer: _Phase | None = None


class AutoSteps:
    """The step engine of one run (see the module doc): :meth:`start` installs the hooks,
    :meth:`stop` closes the open row, removes them and returns :meth:`summary`."""

    def __init__(self, run: Run, *, memory: bool = True) -> None:
        self.run = run
        where = "gnnmon run"
        self.measures: list[tuple[type[Measurement], dict]] = [
            (TimingMeasurement, TimingMeasurement.check_options({}, where))]
        if memory:
            self.measures.append((MemoryMeasurement, MemoryMeasurement.check_options({}, where)))
        self.thread = threading.get_ident()
        self.watched = 0  # the thread whose calls the hooks measure: the script's while active, 0 when off
        self.open: _Open | None = None
        self.seen_update = self.seen_backward = self.seen_loader = False
        self.gave_up = False  # an optimizer was made but none stepped in PATIENCE batches
        self.optimizers_made = 0
        self.optimizers: set[int] = set()
        self.depth_fwd = self.depth_bwd = self.depth_opt = 0
        self._bwd_code: Any = None  # torch.autograd.backward's code where sys.monitoring sees it, else None
        self._bwd_tool = 0  # the sys.monitoring tool id that sees it
        self.updates_total = self.skipped_total = self.batches_total = self.backwards_total = 0
        self.labels: dict[str, int] = {}  # rows closed with each label, in the order first closed
        # the rows of the two labels that two rules share, by their second rule (rules: the rest follow)
        self._steps_at_backward = self._evals_of_forwards = 0
        self.notes: list[str] = []
        self.faults = 0
        self.roots_hooked = False
        self._roots_due: dict[int, Any] | None = None
        self._undo: list[Callable[[], Any]] = []
        self._global_fwd: list[Any] = []
        self._started: dict[str, Any] = {}  # a device's row's phases open now: name -> its phase()
        self._fwd, self._bwd, self._opt = self._phases = tuple(_Phase(name) for name in PHASE_FIELDS)
        self._inner: _Phase | None = None  # the innermost host-clock phase open
        self.depth_next = 0  # next() calls under way: the outermost is the wait
        self._iterators: set[type] = set()  # iterator classes a loader's __iter__ returned
        self._timed: set[type] = set()  # the classes whose __next__ is wrapped
        # a pass's iterator -> its loader's settings (held weakly: an epoch's iterator goes when dropped)
        self._settings: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
        # PyG neighbour loaders split -> their wrappers (held weakly: a loader made each epoch goes when dropped)
        self._splits: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self.active = False

    # -- life cycle -----------------------------------------------------------------------------
    def start(self) -> AutoSteps:
        """Install every hook (see the module doc)."""
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim
        from torch.utils.data import dataloader

        self.active = True
        self.watched = 0 if _IN_CHILD else self.thread
        _ENGINES.add(self)
        self._undo.append(optim.register_optimizer_step_pre_hook(self._opt_pre).remove)
        self._undo.append(optim.register_optimizer_step_post_hook(self._opt_post).remove)
        self._global_fwd = [nn_module.register_module_forward_pre_hook(self._fwd_pre),
                            nn_module.register_module_forward_hook(self._fwd_post, always_call=True)]
        self._patch(dataloader._BaseDataLoaderIter, "__next__", self._wrap_next)
        self._timed.add(dataloader._BaseDataLoaderIter)
        self._patch(dataloader.DataLoader, "__iter__", self._wrap_iter)
        if not (MONITORING and self._monitor_backward()):
            self._patch(torch.autograd, "backward", self._wrap_backward)
        self._patch(optim.Optimizer, "__init__", self._wrap_optimizer_init)
        scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
        if scaler is not None:
            self._patch(scaler, "step", self._wrap_scaler_step)
        return self

    def _patch(self, owner: Any, name: str, wrap: Callable[[Any], Any]) -> None:
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        setattr(owner, name, wrap(original))
        self._undo.append(lambda: setattr(owner, name, original))

    def stop(self, error: BaseException | None = None) -> dict[str, Any]:
        """Close the open row (``error``: what ended the script, if anything), remove every hook
        and patch, and return :meth:`summary`."""
        if self.active:
            self.active = False
            self.watched = 0
            try:
                self._close(error, ended=True)
            finally:
                for handle in self._global_fwd:
                    handle.remove()
                self._global_fwd = []
                while self._undo:
                    self._undo.pop()()
                for loader, split in list(self._splits.items()):
                    _end_pass(loader, split)
                self._splits.clear()
        return self.summary()

    @property
    def rules(self) -> dict[str, int]:
        """The rows each rule made (:data:`RULES`' order), from the rows of each label: a step is an
        update's or, cut at backward, counted apart; an eval row is a batch's or, counted apart, a
        forward's (so a row's close counts its label alone)."""
        n = self.labels.get
        return {"update": n("step", 0) - self._steps_at_backward + n("partial", 0),
                "backward": self._steps_at_backward,
                "batch": n("batch", 0) + n("eval", 0) - self._evals_of_forwards,
                "forward": n("forward", 0) + self._evals_of_forwards}

    def summary(self) -> dict[str, Any]:
        """The rule used and its fallbacks, what was counted, and what was looked for: the end
        line's ``steps``, which the report says."""
        rules = self.rules
        used = [r for r in RULES if rules[r]]
        out: dict[str, Any] = {
            "rule": used[0] if used else None,
            "rules": {r: rules[r] for r in used},
            "said": [RULES[r] for r in used],
            "labels": dict(self.labels),
            "updates": self.updates_total, "updates_skipped": self.skipped_total,
            "batches": self.batches_total, "backward_calls": self.backwards_total,
            "optimizers": len(self.optimizers),
            "backward_seen_by": BACKWARD_SEEN_BY["monitoring" if self._bwd_code is not None else "wrapper"],
            "looked_for": list(LOOKED_FOR),
        }
        notes = list(self.notes)
        if self.optimizers_made and not (self.seen_update or self.seen_backward) and used:
            notes.append(HIDDEN)
        if notes:
            out["notes"] = notes
        if self.faults:
            out["faults"] = self.faults
        return out

    # -- the rows -------------------------------------------------------------------------------
    def _off(self) -> bool:
        """Whether a hook must do nothing: torch.compile tracing, another thread, a forked child or
        the run over (the last two: ``watched`` is 0). Compiling is asked first: dynamo folds it,
        where tracing the thread's id would break the user's graph (and run the hook eagerly inside
        the compiled step). The hooks run once a step or more ask the same inline."""
        return is_compiling() or get_ident() != self.watched

    def _expect_update(self) -> bool:
        return self.seen_update or (self.optimizers_made > 0 and not self.gave_up)

    def _begin(self, args: tuple[Any, ...]) -> _Open:
        """Open a row (its label guessed now, settled when it closes) on the batch or the
        forward's arguments (their device and graph shape), in a held section of this frame."""
        held = hold()
        try:
            label = "step" if (self.seen_update or self.seen_backward) else ("batch" if self.seen_loader else "forward")
            row = open_row(label, args, _NO_KWARGS)
            row.fields["index"] = self.labels.get(label, 0)
            opened = self.open = _Open(Bracket(row.open(), True, self.measures))
        finally:
            release(held)
        return opened

    def _close(self, error: BaseException | None = None, ended: bool = False) -> None:
        opened = self.open
        if opened is None:
            return
        held = hold()
        try:
            if self._inner is not None or self._started:
                self._end_all()
            self.open = None
            fields = opened.fields
            if opened.updates or opened.skipped:
                label, rule = "step", "update"
            elif opened.backwards:
                if self._expect_update():
                    label, rule = "partial", "update"
                    fields["notes"] = (*fields.get("notes", ()),
                                       "backward without an optimizer update: the run ended, or an eval pass or "
                                       "another loader began, before the update")
                else:
                    label, rule = "step", "backward"
                    self._steps_at_backward += 1
            elif opened.batches:
                label, rule = ("eval" if self._trained() else "batch"), "batch"
            else:
                label, rule = ("eval" if self._trained() else "forward"), "forward"
                if label == "eval":
                    self._evals_of_forwards += 1
            if label != fields["label"]:  # the guess at its opening was not it (its index was the guess's)
                fields["label"] = label
                fields["index"] = self.labels.get(label, 0)
            self.labels[label] = fields["index"] + 1  # the rows of each label (each rule's: rules)
            fields["step_rule"] = rule
            if self.seen_loader:
                fields["batches"] = opened.batches
                fields["data_wait_s"] = opened.wait_s
                if opened.wait_in_row_s:
                    fields["data_wait_in_row_s"] = opened.wait_in_row_s
                if opened.split:
                    fields.update(opened.split)
                if opened.settings:
                    fields.update(opened.settings)
            fields["backward_calls"] = opened.backwards
            fields["updates"] = opened.updates
            if opened.skipped:
                fields["updates_skipped"] = opened.skipped
            opened.bracket.close(error if ended else None)
        finally:
            release(held)
        if not self.roots_hooked and opened.forwards and self._roots_due is None and not ended:
            self._roots_due = opened.roots  # hooked once no forward runs (_fwd_post)

    def _trained(self) -> bool:
        return self.seen_update or self.seen_backward

    # -- batches --------------------------------------------------------------------------------
    def _wrap_next(self, original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        engine = self

        def __next__(it: Any) -> Any:
            # inside the outermost next() (PyG's), or not ours
            if engine.depth_next or is_compiling() or get_ident() != engine.watched:
                return original(it)
            opened = engine.open
            if opened is not None:  # a batch begins: the open row ends here, or goes on (accumulation)
                try:
                    if opened.updates or opened.skipped or not opened.backwards or not engine._expect_update():
                        engine._close()
                    elif not engine.seen_update and opened.batches >= PATIENCE:
                        engine._give_up()
                except Exception:  # noqa: BLE001 - never the script's problem
                    engine.faults += 1
            engine.depth_next = 1  # it was 0: only the outermost next() gets here
            going_on = engine.open  # a row open through this wait (accumulation): the wait is in its window
            t0 = _clock()
            try:
                batch = original(it)  # StopIteration (the pass's end) passes through: no row opened
            finally:
                engine.depth_next = 0
            wait = (_clock() - t0) / 1e9
            try:
                engine.seen_loader = True
                engine.batches_total += 1
                opened = engine.open
                if opened is None:
                    opened = engine._begin((batch,))
                elif opened is going_on:
                    opened.wait_in_row_s += wait
                opened.batches += 1
                opened.wait_s += wait
                opened.settings = engine._settings.get(it)
                if engine._splits:
                    engine._split_came(opened, batch)
            except Exception:  # noqa: BLE001
                engine.faults += 1
            return batch

        __next__.__wrapped__ = original  # type: ignore[attr-defined]
        return __next__

    def _wrap_iter(self, original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        engine = self

        def __iter__(loader: Any) -> Any:
            if engine._off():
                return original(loader)
            try:
                engine._split(loader)  # before the iterator is made: it keeps the loader's functions
            except Exception:  # noqa: BLE001
                engine.faults += 1
            iterator = original(loader)
            try:
                engine._iterated(iterator)
                engine._settings_of(loader, iterator)
            except Exception:  # noqa: BLE001
                engine.faults += 1
            return iterator

        __iter__.__wrapped__ = original  # type: ignore[attr-defined]
        return __iter__

    def _split(self, loader: Any) -> None:
        """A PyG neighbour loader's first pass: its sample / gather / transform wrappers put on
        (``watch_loader``'s), until the run ends."""
        if loader not in self._splits and _splittable(loader):
            self._splits[loader] = _begin_pass(loader)

    def _settings_of(self, loader: Any, iterator: Any) -> None:
        """A loader's pass has begun: its settings (``watch_loader``'s, read as its pass reads them)
        kept for the rows of the batches its iterator gives; an iterator that cannot be held weakly
        (or hashed) gives rows none."""
        try:
            self._settings[iterator] = loader_settings(loader)
        except TypeError:
            pass

    def _iterated(self, iterator: Any) -> None:
        """A loader's pass has begun: the class that gives its iterator's ``__next__`` timed, once
        (a Python function's: never a builtin's, such as a generator's)."""
        kind = type(iterator)
        if kind in self._iterators:
            return
        self._iterators.add(kind)
        owner = next((k for k in kind.__mro__ if "__next__" in vars(k)), None)
        if owner is None or owner in self._timed or not isinstance(vars(owner)["__next__"], FunctionType):
            return
        self._timed.add(owner)
        self._patch(owner, "__next__", self._wrap_next)

    def _give_up(self) -> None:
        self.gave_up = True
        self.notes.append(f"an optimizer was made but none stepped in {PATIENCE} batches with a backward (a compiled "
                          "step hides torch.optim's hooks): rows from then on are cut at backward, and the first "
                          "row holds those batches")
        self._close()

    def _split_came(self, opened: _Open, batch: Any) -> None:
        """A batch while a split loader runs: its sample / gather / transform times and nodes per
        hop added to the row's (``watch_loader``'s :func:`~gnnmon.measure.loader.add_batch`)."""
        split = opened.split
        if split is None:
            split = opened.split = {}
        add_batch(batch, split)

    # -- phases ---------------------------------------------------------------------------------
    def _start(self, opened: _Open, ph: _Phase) -> None:
        """Open phase ``ph`` in the engine's open row ``opened`` (a phase never makes a row of its
        own here)."""
        if opened.host:
            outer = self._inner
            if outer is not None:
                outer = self._nested(opened, ph, outer)
            ph.outer = outer
            ph.t0 = perf_counter_ns()
            self._inner = ph  # once started: a start that failed leaves nothing open
        else:
            timed = phase(ph.name)
            timed.__enter__()
            self._started[ph.name] = timed

    def _nested(self, opened: _Open, ph: _Phase, outer: _Phase) -> _Phase | None:
        """Phase ``ph`` starts while ``outer`` is open: the row marks it so (``phase_<name>_in``);
        returns the phase it is in (a backward seen through sys.monitoring that raised is not open
        any more: dropped first, see :meth:`_backward_raised`)."""
        if outer is self._bwd and self._bwd_code is not None and not self._in_backward(_getframe(1)):
            self._backward_raised()
            found = self._inner
            if found is None:
                return None
            outer = found
        opened.fields.setdefault(ph.inside, outer.name)
        return outer

    def _end(self, ph: _Phase) -> None:
        """End phase ``ph`` if it is open: its time added to its row (a row's close has ended it
        already: then nothing)."""
        t0 = ph.t0
        if t0:
            ph.t0 = 0
            outer = ph.outer
            while outer is not None and not outer.t0:  # one that ended before it (out of order) is not open
                outer = outer.outer
            self._inner = outer
            fields, field = self.open.fields, ph.field  # type: ignore[union-attr]  # open: see _close
            fields[field] = fields.get(field, 0.0) + (perf_counter_ns() - t0) / 1e9
        elif self._started:
            timed = self._started.pop(ph.name, None)
            if timed is not None:
                timed.__exit__(None, None, None)

    def _end_all(self) -> None:
        """The open row closes: its phases still open end with it, the innermost first."""
        try:
            if self._bwd.t0 and self._bwd_code is not None and not self._in_backward(_getframe(1)):
                self._backward_raised()  # no end seen, and none will be
            ph = self._inner
            while ph is not None and ph.t0:  # the innermost first
                self._end(ph)
                ph = self._inner
            for ph in self._phases:
                if ph.t0:
                    self._end(ph)
            by_name = {ph.name: ph for ph in self._phases}
            for name in reversed(list(self._started)):
                self._end(by_name[name])
        except Exception:  # noqa: BLE001
            self.faults += 1
        self._started.clear()
        for ph in self._phases:
            ph.t0 = 0
        self._inner = None

    # -- forwards -------------------------------------------------------------------------------
    def _fwd_pre(self, module: Any, args: Any) -> None:
        if is_compiling() or get_ident() != self.watched:
            return
        depth = self.depth_fwd
        self.depth_fwd = depth + 1
        if depth:
            return
        try:  # a root forward begins: the open row ends here or goes on; the phase starts in the row it is in
            opened = self.open
            key = id(module)
            if opened is not None:
                if opened.batches:
                    if (opened.updates or opened.skipped) and not torch.is_grad_enabled():
                        self._close()  # an eval forward after the batch's update: its own row
                elif opened.updates or opened.skipped:
                    self._close()
                elif opened.backwards:
                    if not self._expect_update() and key in opened.roots:
                        self._close()  # the same model again after a backward: the next step
                    elif not self.seen_update and opened.forwards >= PATIENCE:
                        self._give_up()
                elif key in opened.roots:
                    self._close()  # the same model again with no backward: the next forward
                opened = self.open
            if opened is None:
                opened = self._begin(tuple(args) if isinstance(args, tuple) else ())
            opened.forwards += 1
            opened.roots[key] = module
            self._start(opened, self._fwd)
        except Exception:  # noqa: BLE001
            self.faults += 1

    def _fwd_post(self, module: Any, args: Any, output: Any) -> None:
        if is_compiling() or get_ident() != self.watched:
            return
        depth = self.depth_fwd
        if depth > 1:
            self.depth_fwd = depth - 1
            return
        self.depth_fwd = 0
        try:
            self._end(self._fwd)
        except Exception:  # noqa: BLE001
            self.faults += 1
        if self._roots_due is not None:
            try:
                self._hook_roots(self._roots_due)
            except Exception:  # noqa: BLE001 - the global hooks stay
                self.faults += 1

    def _hook_roots(self, roots: dict[int, Any]) -> None:
        """The first row with a forward has closed and no forward runs: hook its root modules alone,
        and drop the global hooks (every submodule goes back to torch's fast path)."""
        self.roots_hooked = True
        self._roots_due = None
        for module in roots.values():
            self._undo.append(module.register_forward_pre_hook(self._fwd_pre).remove)
            self._undo.append(module.register_forward_hook(self._fwd_post, always_call=True).remove)
        for handle in self._global_fwd:
            handle.remove()
        self._global_fwd = []

    # -- backward -------------------------------------------------------------------------------
    def _wrap_backward(self, original: Callable[..., Any]) -> Callable[..., Any]:
        engine = self

        def backward(*args: Any, **kwargs: Any) -> Any:
            if is_compiling() or get_ident() != engine.watched or engine.depth_bwd:
                return original(*args, **kwargs)
            try:
                engine._backward_begins()
            except Exception:  # noqa: BLE001
                engine.faults += 1
            engine.depth_bwd = 1  # it was 0: the outermost call only
            try:
                return original(*args, **kwargs)
            finally:
                engine.depth_bwd = 0
                engine._backward_ends()

        backward.__wrapped__ = original  # type: ignore[attr-defined]
        backward.__doc__ = original.__doc__
        return backward

    def _backward_begins(self) -> None:
        """The outermost backward call begins: counted in its row (opened if none is), its phase
        started."""
        self.seen_backward = True
        self.backwards_total += 1
        opened = self.open
        if opened is None:
            opened = self._begin(())
        elif opened.backwards and not (opened.batches or opened.forwards or opened.updates or opened.skipped) \
                and not self._expect_update():
            self._close()  # no loader, no model call seen: a backward after a backward is the next step
            opened = self._begin(())
        opened.backwards += 1
        self._start(opened, self._bwd)

    def _backward_ends(self) -> None:
        """The outermost backward call has ended (returned or raised): its phase ends. Never raises."""
        try:
            self._end(self._bwd)
        except Exception:  # noqa: BLE001
            self.faults += 1

    def _monitor_backward(self) -> bool:
        """Python 3.12+: see backward's start and return through ``sys.monitoring`` (:data:`MONITORING`),
        on the first free tool id of :data:`TOOL_IDS`; False where that cannot be (no tool id free,
        ``torch.autograd.backward`` not a Python function): the wrapper is put on instead."""
        if sys.version_info < (3, 12):
            return False
        monitoring = sys.monitoring
        code = getattr(torch.autograd.backward, "__code__", None)
        tool = next((t for t in TOOL_IDS if monitoring.get_tool(t) is None), None)
        if code is None or tool is None:
            return False
        events = monitoring.events
        monitoring.use_tool_id(tool, "gnnmon")
        self._undo.append(lambda: _give_back(tool, code))
        monitoring.register_callback(tool, events.PY_START, self._backward_started)
        monitoring.register_callback(tool, events.PY_RETURN, self._backward_returned)
        monitoring.set_local_events(tool, code, events.PY_START | events.PY_RETURN)
        self._bwd_code, self._bwd_tool = code, tool
        return True

    def _backward_started(self, code: Any, offset: int) -> None:
        """``PY_START`` of ``torch.autograd.backward`` (Python 3.12+): the wrapper's entry. A
        backward inside a backward (a reentrant checkpoint's) belongs to the outer one; one that
        finds the last still counted as running while no backward frame is on the stack finds
        that the last raised (:meth:`_backward_raised`)."""
        if is_compiling() or get_ident() != self.watched:
            return
        if self.depth_bwd:
            try:
                if self._in_backward(_getframe(1).f_back):
                    self.depth_bwd += 1  # the outer backward's: nothing of its own
                    return
                self._backward_raised()
            except Exception:  # noqa: BLE001
                self.faults += 1
                return
        try:
            self._backward_begins()
        except Exception:  # noqa: BLE001
            self.faults += 1
        self.depth_bwd = 1

    def _backward_returned(self, code: Any, offset: int, value: Any) -> None:
        """``PY_RETURN`` of ``torch.autograd.backward`` (Python 3.12+): the wrapper's exit (a return
        on the script's thread while a start was counted there, which a traced step never is)."""
        if get_ident() != self.watched:
            return
        depth = self.depth_bwd
        if depth > 1:
            self.depth_bwd = depth - 1
        elif depth:
            self.depth_bwd = 0
            self._backward_ends()

    def _in_backward(self, frame: Any) -> bool:
        """Whether ``frame`` or one below it runs ``torch.autograd.backward`` (seen by sys.monitoring)."""
        code = self._bwd_code
        while frame is not None:
            if frame.f_code is code:
                return True
            frame = frame.f_back
        return False

    def _backward_raised(self) -> None:
        """The outermost backward that sys.monitoring saw start never returned: it raised (no local
        event sees a frame unwind on Python 3.12). Its phase, if still open, is left out of its row
        with a note (:data:`BACKWARD_RAISED`): when it ended is not known. A device row's
        ``phase()`` ends now, its time an upper bound, under the same note."""
        self.depth_bwd = 0
        ph = self._bwd
        opened = self.open
        if opened is None:
            return
        if ph.t0:
            ph.t0 = 0
            if self._inner is ph:
                outer = ph.outer
                while outer is not None and not outer.t0:
                    outer = outer.outer
                self._inner = outer
        elif ph.name in self._started:
            self._end(ph)
        else:
            return
        fields = opened.fields
        fields["notes"] = (*fields.get("notes", ()), BACKWARD_RAISED)

    # -- updates --------------------------------------------------------------------------------
    def _opt_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if is_compiling() or get_ident() != self.watched:
            return
        depth = self.depth_opt
        self.depth_opt = depth + 1
        if depth:
            return
        try:
            opened = self.open
            if opened is None:
                opened = self._begin(())  # an update with nothing before it (a closure optimizer's first step)
            self._start(opened, self._opt)
        except Exception:  # noqa: BLE001
            self.faults += 1

    def _opt_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if is_compiling() or get_ident() != self.watched:
            return
        depth = self.depth_opt
        if depth > 1:
            self.depth_opt = depth - 1
            return  # an inner optimizer that a wrapper steps: the wrapper's step is the update
        self.depth_opt = 0
        try:
            self._end(self._opt)
        except Exception:  # noqa: BLE001
            self.faults += 1
        try:  # an update: counted in its row, which it ends where no loader runs (else the next batch does)
            self.seen_update = True
            opened = self.open
            if opened is None:
                opened = self._begin(())
            opened.updates += 1
            self.updates_total += 1
            self.optimizers.add(id(optimizer))
            if not opened.batches:
                self._close()
        except Exception:  # noqa: BLE001
            self.faults += 1

    def _skipped(self) -> None:
        """An update AMP's scaler skipped (inf or NaN gradients): counted in its row, which it ends
        where no loader runs, as an update does."""
        self.seen_update = True
        opened = self.open
        if opened is None:
            opened = self._begin(())
        opened.skipped += 1
        self.skipped_total += 1
        if not opened.batches:
            self._close()

    def _wrap_optimizer_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        engine = self

        def __init__(opt: Any, *args: Any, **kwargs: Any) -> None:
            original(opt, *args, **kwargs)
            if not engine._off():
                engine.optimizers_made += 1

        __init__.__wrapped__ = original  # type: ignore[attr-defined]
        return __init__

    def _wrap_scaler_step(self, original: Callable[..., Any]) -> Callable[..., Any]:
        engine = self

        def step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            if engine._off():
                return original(scaler, optimizer, *args, **kwargs)
            before = engine.updates_total
            result = original(scaler, optimizer, *args, **kwargs)
            try:
                if engine.updates_total == before and getattr(scaler, "_enabled", True):
                    engine._skipped()  # the scaler found inf or NaN gradients: no optimizer.step ran
            except Exception:  # noqa: BLE001
                engine.faults += 1
            return result

        step.__wrapped__ = original  # type: ignore[attr-defined]
        return step

"""A Lightning callback: one gnnmon row per training batch, covering forward, backward and the
optimizer step, with its phases taken from Lightning's own hooks.

Decorating ``training_step`` times the forward pass only: Lightning runs backward and the optimizer
outside it. :class:`GnnmonCallback` opens the row at ``on_train_batch_start`` (after the batch is on
its device, so the row reads the batch's graph shape and device) and closes it at
``on_train_batch_end``; in between, phases::

    forward    on_train_batch_start  -> on_before_backward     (training_step, zero_grad)
    backward   on_before_backward    -> on_after_backward
    optimizer  on_before_optimizer_step -> on_train_batch_end  (the step, the batch-end hooks before ours)

The row carries the batch's wait for data (``data_wait_s``, as :func:`gnnmon.watch_loader` would
record it: the time the loop stood in the fetch of the batch), read from the fetch Lightning's fit
loop brackets with ``trainer.profiler.start/stop("[...].train_dataloader_next")``, any profiler, a
train loader with a length (without one Lightning fetches a batch ahead, and the fetch under a batch
is the next one's: no wait is recorded; :func:`gnnmon.watch_loader` around the loader times each
batch's own); a row that ``watch_loader`` already gave a wait keeps it.

A batch without backward (``training_step`` returned None) has only ``forward``; an accumulating
batch has no ``optimizer``. Epochs are marked (rows carry ``epoch``); validation batches get rows
labelled ``validation_step`` (sanity-check batches get none). The step figures go to the Trainer's
loggers every ``log_every_n_steps`` (as Lightning's own DeviceStatsMonitor does), each at its own
step once its rows are final: a sink of the run (:class:`LoggerSink`) logs them on the run's writer
thread, never a sync or a logger call on the step's path.

Usage::

    from gnnmon.integrations.lightning import GnnmonCallback
    trainer = lightning.Trainer(callbacks=[GnnmonCallback("runs/fit.jsonl")])

Under ``gnnmon run`` no callback is needed in the process it runs (its engine finds ``fit``'s
updates); :func:`callbacks_factory`, Lightning's ``callbacks_factory`` entry point, adds one to the
processes Lightning's DDP launcher starts, which re-run the script without gnnmon.

Importing this module imports Lightning (``lightning``, else ``pytorch_lightning``).
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from gnnmon.fields import row_key
from gnnmon.figures import STEP_FIGURES
from gnnmon.measure.bracket import Bracket, held_section
from gnnmon.measure.lifecycle import Measurement, open_row
from gnnmon.measure.loader import loader_settings
from gnnmon.measure.memory import MemoryMeasurement
from gnnmon.measure.timing import TimingMeasurement, phase
from gnnmon.record.active import active_run, collect
from gnnmon.record.options import Options
from gnnmon.record.run import Run
from gnnmon.record.sinks import Batch

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # pragma: no cover - the older package name
    try:
        from pytorch_lightning.callbacks import Callback  # type: ignore[assignment]
    except ImportError as exc:
        raise ImportError(
            "gnnmon.integrations.lightning needs Lightning: pip install lightning (or 'gnnmon[lightning]')"
        ) from exc

__all__ = ["RUN_OUTPUT", "RUN_PID", "GnnmonCallback", "LoggerSink", "callbacks_factory"]

RUN_OUTPUT = "GNNMON_RUN_OUTPUT"
"""Set by ``gnnmon run`` while its script runs: the run file (its children's ranks write beside it)."""

RUN_PID = "GNNMON_RUN_PID"
"""Set by ``gnnmon run`` with it: the process it runs the script in (its own engine records there)."""

RUN_MODE = "GNNMON_RUN_MODE"
"""Set by ``gnnmon run`` with it: ``w`` where it was told to overwrite (``-f``), else ``x``."""

LOGGED: dict[str, tuple[str, float, Callable[[list[float]], float]]] = {
    field: (name, factor, max if "peak" in field else sum) for field, (name, factor) in STEP_FIGURES.items()
}
"""Row field -> (logged name after the prefix, factor, how the batches of one optimizer step
combine: times and sizes summed, peaks the largest): what goes to the Trainer's loggers."""

FETCH = "train_dataloader_next"
"""How the profiler action that brackets the fit loop's fetch of a training batch ends (Lightning's
``[_TrainingEpochLoop].train_dataloader_next``; its profilers' reports show the same name)."""

MAX_WAITING = 256
"""Optimizer steps kept waiting for their rows before they are logged; older ones are dropped."""

MAX_ARRIVED = 4 * MAX_WAITING
"""Finished rows kept until the step they belong to is known (the newest; older ones are dropped)."""


def step_metrics(rows: list[dict[str, Any]], prefix: str) -> dict[str, float]:
    """The logged figures of one optimizer step (ms, MiB, counts) from the rows of its batches
    (several under gradient accumulation: times and sizes summed, peaks the largest)."""
    out: dict[str, float] = {}
    for field, (name, factor, combine) in LOGGED.items():
        values = [v for v in (r.get(field) for r in rows) if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if values:
            out[prefix + name] = combine(values) * factor
    return out


class LoggerSink:
    """A run's sink that sends each optimizer step's figures (:func:`step_metrics`) to Lightning
    loggers, once every row of the step has finished: on the run's writer thread. The callback
    tells it which rows make a step (:meth:`expect`); rows may finish before or after that."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._lock = threading.Lock()
        self._arrived: OrderedDict[str, dict[str, Any]] = OrderedDict()  # row key -> finished row
        self._waiting: deque[tuple[int, list[str], list[Any]]] = deque(maxlen=MAX_WAITING)
        self.logged = 0

    def expect(self, step: int, keys: list[str], loggers: list[Any]) -> None:
        """The rows ``keys`` (``label#index``) make optimizer step ``step``, for ``loggers``."""
        with self._lock:
            self._waiting.append((step, keys, loggers))

    def open(self, manifest: dict[str, Any]) -> None:
        """Nothing to open: the loggers are the Trainer's."""

    def write(self, batch: Batch) -> None:
        with self._lock:
            arrived = self._arrived
            for row in batch.rows:
                arrived[row_key(row)] = row
            while len(arrived) > MAX_ARRIVED:
                arrived.popitem(last=False)
        self._log_ready()

    def close(self, end: dict[str, Any]) -> None:
        self._log_ready()

    def _log_ready(self) -> None:
        """Log, in order, the waiting steps whose rows have all finished."""
        while True:
            with self._lock:
                waiting, arrived = self._waiting, self._arrived
                if not waiting or not all(k in arrived for k in waiting[0][1]):
                    return
                step, keys, loggers = waiting.popleft()
                rows = [arrived.pop(k) for k in keys]
            metrics = step_metrics(rows, self.prefix)
            for logger in loggers:
                try:
                    logger.log_metrics(metrics, step=step)
                except Exception as exc:  # noqa: BLE001 - a logger's failure must not stop training
                    warnings.warn(f"gnnmon could not log to {type(logger).__name__}: {exc!r}", RuntimeWarning, 2)
            self.logged += 1


class _OpenRow:
    """The bracket of the batch in flight (its row and measurements) and the open phase."""

    __slots__ = ("bracket", "row", "phase", "stepped")

    def __init__(self, bracket: Bracket) -> None:
        self.bracket = bracket
        self.row = bracket.row
        self.phase: phase | None = None
        self.stepped = False  # the optimizer stepped in this batch

    def switch(self, name: str | None) -> None:
        """Close the open phase, open ``name`` (None: none)."""
        if self.phase is not None:
            self.phase.__exit__(None, None, None)
            self.phase = None
        if name is not None:
            opened = phase(name)
            opened.__enter__()
            self.phase = opened

    def close(self, error: BaseException | None = None) -> dict[str, Any]:
        """Close the phase, the measurements (innermost first) and the row; the row's fields."""
        try:
            if self.phase is not None:
                self.phase.__exit__(None if error is None else type(error), error, None)
                self.phase = None
        finally:
            self.bracket.close(error)
        return self.row.fields


class GnnmonCallback(Callback):
    """One gnnmon row per training (and validation) batch; see the module doc.

    ``path``: where the rows stream (``gnnmon.collect(path, **collect_options)`` is opened at fit
    start and closed at fit end or on an exception); None with no ``collect_options`` records into
    the run active when fit starts (your ``with gnnmon.collect(...)`` or the default run).
    ``label``: the training rows' label. ``memory``: also record memory (``mem_*``, ``rss_*``).
    ``sync``: the timing mode (``"events"``: no sync on the step's path). ``validation``: rows for
    validation batches too. ``log``: send the step figures (ms, MiB) to the Trainer's loggers under
    ``prefix``, every ``log_every_n_steps``.
    """

    def __init__(
        self,
        path: str | None = None,
        *,
        label: str = "training_step",
        memory: bool = True,
        sync: str = "events",
        validation: bool = True,
        log: bool = True,
        prefix: str = "gnnmon/",
        **collect_options: Any,
    ) -> None:
        where = "GnnmonCallback"
        if not isinstance(label, str) or not label or "#" in label:
            raise ValueError(f"{where}: label must be a non-empty string without '#', got {label!r}")
        self.label = label
        self.validation = validation
        self.log = log
        self.prefix = prefix
        self._measures: list[tuple[type[Measurement], dict]] = [
            (TimingMeasurement, TimingMeasurement.check_options({"sync": sync}, where))]
        if memory:
            self._measures.append((MemoryMeasurement, MemoryMeasurement.check_options({}, where)))
        self._collect_args = (path, collect_options) if path is not None or collect_options else None
        if self._collect_args is not None:
            Options.of(where, collect_options)  # bad options fail here, not at fit start (nothing opened)
        self.run: Run | None = None
        self._own_run = False
        self._open: _OpenRow | None = None
        self._sink: LoggerSink | None = None
        self._batches: list[str] = []  # keys of the rows of the optimizer step under way
        self._fetch_t0: int | None = None  # perf_counter_ns at the fetch under way
        self._wait_s: float | None = None  # seconds in fetches since the last training row opened
        self._settings: dict[str, Any] = {}  # the train loader's settings (loader_settings), one loader
        self._profiler: Any = None  # the profiler whose start/stop this callback wraps
        self._mine: tuple[Any, Any] = (None, None)  # its wrappers, as put there
        self._before: dict[str, Any] = {}  # the instance's own start/stop before them (another tool's)
        self._sized = True  # the train loader has a length: Lightning fetches no batch ahead

    # -- the run ------------------------------------------------------------------------------
    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        self._sink = LoggerSink(self.prefix) if self.log else None
        sinks = [self._sink] if self._sink is not None else []
        if self._collect_args is not None:
            path, options = self._collect_args
            self.run = collect(path, sinks=sinks, **options).start()
            self._own_run = True
        else:
            self.run = active_run()
            if self._sink is not None:
                self.run.add_sink(self._sink)

        self._watch_fetches(trainer)

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self._finish(trainer)

    # -- the wait for data --------------------------------------------------------------------
    def _watch_fetches(self, trainer: Any) -> None:
        """Wrap ``trainer.profiler``'s ``start``/``stop`` (on the instance; :meth:`_unwatch_fetches`
        takes them off) to time the fit loop's fetch of each training batch; a trainer without a
        profiler object records no wait."""
        profiler = getattr(trainer, "profiler", None)
        start, stop = getattr(profiler, "start", None), getattr(profiler, "stop", None)
        if profiler is None or not callable(start) or not callable(stop) or self._profiler is not None:
            return

        def timed_start(action_name: str) -> None:
            start(action_name)
            if action_name.endswith(FETCH) and self._sized:  # unsized: each fetch is the next batch's
                self._fetch_t0 = time.perf_counter_ns()

        def timed_stop(action_name: str) -> None:
            t0 = self._fetch_t0
            if t0 is not None and action_name.endswith(FETCH):
                self._fetch_t0 = None
                self._wait_s = (self._wait_s or 0.0) + (time.perf_counter_ns() - t0) / 1e9
            stop(action_name)

        own = getattr(profiler, "__dict__", {})
        self._before = {name: own[name] for name in ("start", "stop") if name in own}  # another tool's wrappers
        try:
            profiler.start, profiler.stop = timed_start, timed_stop
        except AttributeError:  # a profiler that takes no instance attributes (slots): no wait
            return
        self._profiler = profiler
        self._mine = (timed_start, timed_stop)

    def _unwatch_fetches(self) -> None:
        """Give the profiler back its own ``start``/``stop``, or what another tool had put there,
        wherever they are still this callback's (one put over them since stays)."""
        profiler, self._profiler = self._profiler, None
        self._fetch_t0 = self._wait_s = None
        if profiler is not None:
            for name, mine in zip(("start", "stop"), self._mine, strict=True):
                if vars(profiler).get(name) is not mine:
                    continue
                if name in self._before:
                    setattr(profiler, name, self._before[name])
                else:
                    delattr(profiler, name)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        try:
            self._close_open(exception)
        finally:  # the run ended and the profiler given back, whatever the close raised
            self._finish(trainer)

    def _close_open(self, error: BaseException | None = None) -> None:
        with held_section():
            opened, self._open = self._open, None
            if opened is not None:
                opened.close(error)

    def _finish(self, trainer: Any) -> None:
        self._close_open()
        self._unwatch_fetches()
        run, sink = self.run, self._sink
        if run is None:
            return
        try:
            if self._own_run:
                run.stop()  # the last rows reach the sink, which logs them, then closes
            elif sink is not None:
                run.remove_sink(sink)  # the same, on the user's run, which goes on
        finally:
            self.run = self._sink = None
            self._own_run = False

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if self.run is not None:
            self.run.mark("epoch", int(trainer.current_epoch))
        self._wait_s = None  # a fetch that ended the last epoch (StopIteration) is no batch's wait
        loader = getattr(trainer, "train_dataloader", None)  # one loader: its settings; several: none
        self._settings = loader_settings(loader) if loader is not None and hasattr(loader, "__iter__") else {}
        try:  # without a length, Lightning fetches a batch ahead: the fetch under a batch is the next one's
            self._sized = loader is not None and len(loader) >= 0
        except TypeError:
            self._sized = False

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._close_open()  # a batch whose end never came (on_train_batch_start returned -1)

    # -- a training batch ---------------------------------------------------------------------
    def _open_row(self, label: str, batch: Any) -> _OpenRow:
        return _OpenRow(Bracket(open_row(label, (batch,), {}).open(), True, self._measures))

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        with held_section():  # a Ctrl-C waits until the row is whole (record/interrupts.py)
            self._close_open()  # a batch whose end never came
            self._open = self._open_row(self.label, batch)
            fields, wait = self._open.row.fields, self._wait_s
            self._wait_s = None
            if wait is not None and "data_wait_s" not in fields:  # watch_loader's own figures win
                fields["data_wait_s"] = wait
                for name, value in self._settings.items():
                    fields.setdefault(name, value)
            self._open.switch("forward")

    def on_before_backward(self, trainer: Any, pl_module: Any, loss: Any) -> None:
        with held_section():  # a Ctrl-C waits until the row is whole (record/interrupts.py)
            if self._open is not None:
                self._open.switch("backward")

    def on_after_backward(self, trainer: Any, pl_module: Any) -> None:
        with held_section():  # a Ctrl-C waits until the row is whole (record/interrupts.py)
            if self._open is not None:
                self._open.switch(None)

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        with held_section():  # a Ctrl-C waits until the row is whole (record/interrupts.py)
            if self._open is not None:
                self._open.stepped = True
                self._open.switch("optimizer")

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        with held_section():
            opened, self._open = self._open, None
            if opened is not None:
                opened.close()
        sink = self._sink
        if opened is None or sink is None or not trainer.loggers:
            return
        self._batches.append(opened.row.key)
        if opened.stepped:  # logged per optimizer step, as Lightning logs (accumulated batches together)
            step = _logging_step(trainer)
            every = int(getattr(trainer, "log_every_n_steps", 1) or 0)
            if every and (step + 1) % every == 0:
                sink.expect(step, self._batches, list(trainer.loggers))
            self._batches = []

    # -- a validation batch -------------------------------------------------------------------
    def on_validation_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        if self.validation and not trainer.sanity_checking and self._open is None:
            with held_section():
                self._open = self._open_row("validation_step", batch)

    def on_validation_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        opened = self._open
        if opened is not None and opened.row.fields["label"] == "validation_step":
            with held_section():
                self._open = None
                opened.close()


def _logging_step(trainer: Any) -> int:
    """The step Lightning's own loggers use: batches that stepped the optimizer so far (as
    DeviceStatsMonitor and LearningRateMonitor log), else ``global_step``."""
    loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
    stepped = getattr(loop, "_batches_that_stepped", None)
    return int(stepped if isinstance(stepped, int) else trainer.global_step)


def callbacks_factory() -> list[Any]:
    """Lightning's ``callbacks_factory`` entry point (loaded by every Trainer): in a process that
    ``gnnmon run`` did not start itself but whose environment it set (a child Lightning's DDP
    launcher starts, re-running the script without gnnmon), a :class:`GnnmonCallback` recording
    that rank beside ``gnnmon run``'s file (``.rank<N>`` before the suffix, no collective);
    elsewhere none: no ``gnnmon run``, or its own process, whose engine records the steps."""
    path = os.environ.get(RUN_OUTPUT)
    if not path or os.environ.get(RUN_PID) == str(os.getpid()):
        return []
    mode = "w" if os.environ.get(RUN_MODE) == "w" else "x"
    return [GnnmonCallback(path, distributed=False, mode=mode, config={"gnnmon_run": {"child_of": path}})]

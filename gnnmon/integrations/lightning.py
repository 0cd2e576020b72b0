"""A Lightning callback: one gnnmon row per training batch, covering forward, backward and the
optimizer step, with its phases taken from Lightning's own hooks.

Decorating ``training_step`` times the forward pass only: Lightning runs backward and the optimizer
outside it. :class:`GnnmonCallback` opens the row at ``on_train_batch_start`` (after the batch is on
its device, so the row reads the batch's graph shape and device) and closes it at
``on_train_batch_end``; in between, phases::

    forward    on_train_batch_start  -> on_before_backward     (training_step, zero_grad)
    backward   on_before_backward    -> on_after_backward
    optimizer  on_before_optimizer_step -> on_train_batch_end  (the step, the batch-end hooks before ours)

A batch without backward (``training_step`` returned None) has only ``forward``; an accumulating
batch has no ``optimizer``. Epochs are marked (rows carry ``epoch``); validation batches get rows
labelled ``validation_step`` (sanity-check batches get none). The step figures go to the Trainer's
loggers every ``log_every_n_steps`` (as Lightning's own DeviceStatsMonitor does), each at its own
step once its device time is read: never a sync on the step's path.

Usage::

    from gnnmon.integrations.lightning import GnnmonCallback
    trainer = lightning.Trainer(callbacks=[GnnmonCallback("runs/fit.jsonl")])

Importing this module imports Lightning (``lightning``, else ``pytorch_lightning``).
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Callable
from typing import Any

from gnnmon.fields import STEP_FIGURES
from gnnmon.measure.adapters import Measurement, enter_measurements, exit_measurements, open_row
from gnnmon.measure.memory import MemoryMeasurement
from gnnmon.measure.timing import TimingMeasurement, phase
from gnnmon.record.interrupts import held_section
from gnnmon.record.row import Row
from gnnmon.record.run import Run, active_run, collect

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # pragma: no cover - the older package name
    try:
        from pytorch_lightning.callbacks import Callback  # type: ignore[assignment]
    except ImportError as exc:
        raise ImportError(
            "gnnmon.integrations.lightning needs Lightning: pip install lightning (or 'gnnmon[lightning]')"
        ) from exc

__all__ = ["GnnmonCallback"]

LOGGED: dict[str, tuple[str, float, Callable[[list[float]], float]]] = {
    field: (name, factor, max if "peak" in field else sum) for field, (name, factor) in STEP_FIGURES.items()
}
"""Row field -> (logged name after the prefix, factor, how the batches of one optimizer step
combine: times and sizes summed, peaks the largest): what goes to the Trainer's loggers."""

MAX_WAITING = 256
"""Optimizer steps kept waiting for their device time before they are logged; older ones are dropped."""


def step_metrics(rows: list[dict[str, Any]], prefix: str) -> dict[str, float]:
    """The logged figures of one optimizer step (ms, MiB, counts) from the rows of its batches
    (several under gradient accumulation: times and sizes summed, peaks the largest)."""
    out: dict[str, float] = {}
    for field, (name, factor, combine) in LOGGED.items():
        values = [v for v in (r.get(field) for r in rows) if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if values:
            out[prefix + name] = combine(values) * factor
    return out


def _settled(fields: dict[str, Any]) -> bool:
    """True once the run has read the row's device time (or there is none to read)."""
    return fields.get("device_s") is not None or fields.get("device_s_source") == "none"


class _OpenRow:
    """The row of the batch in flight, its measurements and the open phase."""

    __slots__ = ("row", "measures", "phase", "stepped")

    def __init__(self, row: Row, measures: list[Measurement]) -> None:
        self.row, self.measures = row, measures
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
            exit_measurements(self.measures, self.row, error)
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
            collect(path, **collect_options)  # bad options fail here, not at fit start (nothing opened)
        self.run: Run | None = None
        self._own_run = False
        self._open: _OpenRow | None = None
        self._waiting: deque[tuple[int, list[dict[str, Any]]]] = deque(maxlen=MAX_WAITING)
        self._batches: list[dict[str, Any]] = []  # rows of the optimizer step under way

    # -- the run ------------------------------------------------------------------------------
    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        if self._collect_args is not None:
            path, options = self._collect_args
            self.run = collect(path, **options).start()
            self._own_run = True
        else:
            self.run = active_run()

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self._finish(trainer)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._close_open(exception)
        self._finish(trainer)

    def _close_open(self, error: BaseException | None = None) -> None:
        with held_section():
            opened, self._open = self._open, None
            if opened is not None:
                opened.close(error)

    def _finish(self, trainer: Any) -> None:
        self._close_open()
        run = self.run
        if run is None:
            return
        try:
            run.flush()  # every row's device time read: the last steps can be logged
            self._log_settled(trainer)
        finally:
            if self._own_run:
                run.stop()
            self.run = None
            self._own_run = False

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if self.run is not None:
            self.run.mark("epoch", int(trainer.current_epoch))

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._close_open()  # a batch whose end never came (on_train_batch_start returned -1)

    # -- a training batch ---------------------------------------------------------------------
    def _open_row(self, label: str, batch: Any) -> _OpenRow:
        row = open_row(label, (batch,), {})
        measures: list[Measurement] = []
        try:
            enter_measurements(self._measures, row, measures)
        except BaseException as exc:
            row.note(f"did not start: {exc}")
            exit_measurements(measures, row, exc)
            raise
        return _OpenRow(row, measures)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        with held_section():  # a Ctrl-C waits until the row is whole (record/interrupts.py)
            self._close_open()  # a batch whose end never came
            self._open = self._open_row(self.label, batch)
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
            fields = opened.close() if opened is not None else None
        if opened is None or fields is None or not (self.log and trainer.loggers):
            return
        self._batches.append(fields)
        if opened.stepped:  # logged per optimizer step, as Lightning logs (accumulated batches together)
            step = _logging_step(trainer)
            every = int(getattr(trainer, "log_every_n_steps", 1) or 0)
            if every and (step + 1) % every == 0:
                self._waiting.append((step, self._batches))
            self._batches = []
        self._log_settled(trainer)

    def _log_settled(self, trainer: Any) -> None:
        """Log, in order, the waiting steps whose rows' device time has been read."""
        waiting = self._waiting
        while waiting and all(_settled(fields) for fields in waiting[0][1]):
            step, rows = waiting.popleft()
            metrics = step_metrics(rows, self.prefix)
            for logger in trainer.loggers:
                try:
                    logger.log_metrics(metrics, step=step)
                except Exception as exc:  # noqa: BLE001 - a logger's failure must not stop training
                    warnings.warn(f"gnnmon could not log to {type(logger).__name__}: {exc!r}", RuntimeWarning, 2)

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

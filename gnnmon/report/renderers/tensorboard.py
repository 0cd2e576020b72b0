"""A run as TensorBoard scalars: per label, each row's figures at its call number (tag
``<label>/<figure>``; a label ``timeline`` is written ``timeline_``: :func:`gnnmon.fields.own_part`);
the sampled timeline at each sample's number (``timeline/<figure>``); wall-clock times kept, so
TensorBoard's relative and wall axes are true. A distributed job's ranks go to ``rank<N>/`` under
the log folder.

Needs ``tensorboard`` (``pip install tensorboard`` or ``gnnmon[tensorboard]``), whose own event
file writer is used (no torch); it is imported when an export is asked for.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from gnnmon.data.result import RunResult
from gnnmon.fields import own_part
from gnnmon.figures import STEP_FIGURES, logged_name
from gnnmon.report.exports import Written, register_export
from gnnmon.report.sampled import sampled_figures


def _figures(row: dict[str, Any]) -> Iterator[tuple[str, tuple[str, float]]]:
    """The step figures, then any other phase (``phase_load_s`` -> ``load_ms``)."""
    yield from STEP_FIGURES.items()
    for field in row:
        if field not in STEP_FIGURES:
            named = logged_name(field)
            if named is not None:
                yield field, named


def scalars(report: RunResult) -> Iterator[tuple[int, str, float, int, float]]:
    """(rank, tag, value, step, wall time s) of every scalar the export writes."""
    for row in report.records:
        rank = int(row.get("rank") or 0)
        walltime = (row.get("t_end_ns") or row.get("t_start_ns") or 0) / 1e9
        for field, (name, factor) in _figures(row):
            value = row.get(field)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                yield rank, f"{own_part(str(row['label']))}/{name}", value * factor, int(row["index"]), walltime
    counts: dict[int, int] = {}
    for sample in report.samples:
        rank = int(sample.get("rank") or 0)
        step = counts[rank] = counts.get(rank, -1) + 1
        for figure, unit, value in sampled_figures(sample):
            yield rank, f"timeline/{figure}_{unit}", value, step, sample["t_ns"] / 1e9


class TensorBoardExport:
    """The ``tensorboard`` export: event files under a log folder."""

    name = "tensorboard"
    what = "event files of each label's figures per call and of the sampled timeline (tensorboard --logdir OUT)"

    def write(self, result: RunResult, out: str | os.PathLike[str]) -> str:
        """Write ``result``'s scalars under the log folder ``out``; says what was written."""
        return Written(write_tensorboard(result, out), "scalars")


def write_tensorboard(report: RunResult, logdir: str | os.PathLike[str]) -> int:
    """Write the run's scalars as TensorBoard event files under ``logdir``; returns how many."""
    try:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError as exc:
        raise ImportError("the TensorBoard export needs tensorboard: pip install tensorboard") from exc
    ranked = any("rank" in r for r in report.records)
    writers: dict[int, Any] = {}
    written = 0
    try:
        for rank, tag, value, step, walltime in scalars(report):
            writer = writers.get(rank)
            if writer is None:
                where = os.path.join(os.fspath(logdir), f"rank{rank}") if ranked else os.fspath(logdir)
                os.makedirs(where, exist_ok=True)
                writer = writers[rank] = EventFileWriter(where)
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(value))])
            writer.add_event(Event(summary=summary, step=step, wall_time=walltime))
            written += 1
    finally:
        for writer in writers.values():
            writer.close()
    return written


register_export(TensorBoardExport())

"""The exports, by name: each is ``write(result, out, **options) -> str`` (what it wrote, in words),
over a run's plain data (:class:`~gnnmon.report.source.Source`). ``Report.export(name, out)`` and
``gnnmon export NAME RUN -o OUT`` read this table; add an entry to add an export."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from gnnmon.report.html import write_html
from gnnmon.report.source import Source
from gnnmon.report.tensorboard import export_tensorboard
from gnnmon.report.trace import write_trace

Export = Callable[..., str]

EXPORTS: dict[str, tuple[Export, str]] = {
    "trace": (write_trace, "a Chrome trace JSON (rows, phases, GC pauses, markers and samples on one timeline; "
                           "open it in ui.perfetto.dev or chrome://tracing)"),
    "tensorboard": (export_tensorboard, "event files of each label's figures per call and of the sampled "
                                        "timeline (tensorboard --logdir OUT)"),
    "html": (write_html, "one self-contained page to open in a browser, offline: header, zoomable timeline, "
                         "memory per call with its forecast, and the whole report"),
}
"""name -> (writer, what it writes)."""


def export(name: str, result: Source, out: str | os.PathLike[str], **options: Any) -> str:
    """Write ``result`` with the export ``name`` to ``out``; returns what was written, in words."""
    entry = EXPORTS.get(name)
    if entry is None:
        raise ValueError(f"no export named {name!r}; the exports: {', '.join(EXPORTS)}")
    return entry[0](result, out, **options)

"""The utilisation timeline: samples over time, with rows, GC events and markers under them.

Drawn with matplotlib's object API (no pyplot, no global backend change). A reader should
understand it without the text: every axis says what it shows and in which unit, utilisation and
memory start at 0 (a 2-point wobble does not fill the height), panels without data are left out,
markers (epochs, configurations) are drawn, and on a GPU the memory panel shows the GPU's memory
(NVML's used memory, and each row's allocator peak) beside the host's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from gnnmon.fields import HOST_BACKEND
from gnnmon.figures import BYTES, MEM_PEAK

MAX_MARKER_TEXTS = 40
"""Markers beyond this many are drawn as lines without their text."""


def _devices(records: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted({str(r["device"]) for r in records if r.get("device")})


class Timed(Protocol):
    """What the timeline reads: a :class:`~gnnmon.report.Report` or a
    :class:`~gnnmon.data.result.RunResult` (``gnnmon.load(path)``)."""

    @property
    def records(self) -> list[dict[str, Any]]: ...

    samples: list[dict[str, Any]]
    gc_events: list[dict[str, Any]]
    markers: list[dict[str, Any]]


def plot_timeline(run: Timed, path: str | os.PathLike[str] | None = None, *, title: str | None = None) -> Any:
    """The run's timeline as a matplotlib Figure: CPU and GPU utilisation (%), memory (MiB: host
    RSS, GPU used, each GPU row's allocator peak), then one lane per row label with each row as a
    bar, GC pauses in red and markers as dashed lines. ``run``: a report or a run's result. Saved
    as PNG if ``path`` is given. ``title``: default names the rows' devices."""
    records, samples, gc_events, markers = run.records, run.samples, run.gc_events, run.markers
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the timeline needs matplotlib: pip install 'gnnmon[report]'") from exc
    records = [r for r in records if r.get("t_start_ns") is not None]  # a row without its start has no place
    starts = [r["t_start_ns"] for r in records] + [s["t_ns"] for s in samples]
    if not starts:
        raise ValueError("nothing to plot: the run has no rows and no samples")
    t0 = min(starts)

    def sec(ns: int) -> float:
        return (ns - t0) / 1e9

    gpu_rows = [r for r in records if r.get("backend") not in (None, HOST_BACKEND) and r.get(MEM_PEAK.name) is not None]
    panels = (["util", "mem"] if samples else (["mem"] if gpu_rows else [])) + (["rows"] if records else [])
    ratios = {"util": 2, "mem": 1.5, "rows": 2}
    fig = Figure(figsize=(11, 2.2 + 1.6 * len(panels)), layout="constrained")
    FigureCanvasAgg(fig)
    made = fig.subplots(len(panels), 1, sharex=True, height_ratios=[ratios[p] for p in panels], squeeze=False)
    axes = dict(zip(panels, made[:, 0], strict=True))
    ts = [sec(s["t_ns"]) for s in samples]
    if "util" in axes:
        ax = axes["util"]
        highest = 100.0
        series = [("cpu_util_pct", "CPU (process + workers)")]
        series += [(k, f"GPU {k[3:-9]}") for k in sorted({k for s in samples for k in s})
                   if k.startswith("gpu") and k.endswith("_util_pct") and "mem" not in k]
        for key, name in series:
            values = [s.get(key) for s in samples]
            if any(v is not None for v in values):
                ax.plot(ts, values, label=name)
                highest = max(highest, *(v for v in values if v is not None))
        ax.set_ylim(0, highest * 1.05)  # from 0: CPU % over cores can pass 100
        ax.set_ylabel("utilisation (%)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    if "mem" in axes:
        ax = axes["mem"]
        if samples:
            ax.plot(ts, _mib(samples, "rss_bytes"), label="host: process RSS")
            if any(s.get("children_rss_bytes") for s in samples):
                ax.plot(ts, _mib(samples, "children_rss_bytes"), label="host: workers' RSS")
            for key in sorted({k for s in samples for k in s if k.startswith("gpu") and k.endswith("_mem_used_bytes")}):
                ax.plot(ts, _mib(samples, key), label=f"GPU {key[3:-15]}: used (NVML)")
        for device in sorted({str(r["device"]) for r in gpu_rows}):
            mine = [r for r in gpu_rows if str(r["device"]) == device and r.get("t_end_ns")]
            ax.scatter([sec(r["t_end_ns"]) for r in mine], [r[MEM_PEAK.name] * BYTES.factor for r in mine], s=10,
                       marker="v", label=f"{device}: allocator peak per row", zorder=3)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("memory (MiB)")
        ax.ticklabel_format(axis="y", useOffset=False, style="plain")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    if "rows" in axes:
        ax = axes["rows"]
        labels = list(dict.fromkeys(r["label"] for r in records))
        for lane, label in enumerate(labels):
            spans = [(sec(r["t_start_ns"]), (r["t_end_ns"] - r["t_start_ns"]) / 1e9)
                     for r in records if r["label"] == label and r.get("t_end_ns")]
            ax.broken_barh(spans, (lane - 0.35, 0.7), facecolors=f"C{lane % 10}", edgecolors="none")
        for e in gc_events:
            x = sec(e["t_start_ns"])
            gen = min(max(int(e.get("generation") or 0), 0), 2)
            ax.axvspan(x, x + e.get("duration_s", 0), color="red", alpha=0.25 + 0.25 * gen, lw=0 if gen < 2 else 1.5)
        ax.set_yticks(range(len(labels)), [_plain(label) for label in labels])
        ax.set_ylim(-0.6, len(labels) - 0.4)
        ax.set_ylabel("rows by label")
        ax.set_title("rows (bars) and GC collections (red; darker = older generation)", fontsize=9)
    carried = [m for m in markers if m.get("carry", True)]
    for k, m in enumerate(carried):
        x = sec(m["t_ns"])
        for ax in axes.values():
            ax.axvline(x, color="0.4", ls="--", lw=0.8)
        if k < MAX_MARKER_TEXTS:
            top = made[0, 0]
            top.text(x, 0.97, _plain(f" {m['kind']}={m.get('value')}"), transform=top.get_xaxis_transform(), fontsize=7,
                     va="top", ha="left", rotation=90)  # inside the panel: clear of the title
    made[-1, 0].set_xlabel("seconds since the first row or sample")
    devices = _devices(records)
    heading = title or _plain(f"gnnmon timeline — {', '.join(devices) or 'no device'}")
    if not samples:
        heading += "\n(no utilisation or memory over time: collect(sample=0.5) samples them)"
    fig.suptitle(heading)
    if path is not None:
        folder = os.path.dirname(os.fspath(path))
        if folder:
            os.makedirs(folder, exist_ok=True)  # as collect() makes its file's folder
        fig.savefig(path, dpi=110)
    return fig


def _mib(samples: Sequence[Mapping[str, Any]], key: str) -> list[float | None]:
    """Each sample's ``key`` in MiB (None where it has none: a gap in the line)."""
    return [None if s.get(key) is None else s[key] * BYTES.factor for s in samples]


def _plain(text: str) -> str:
    """``text`` drawn as it is: matplotlib reads ``$...$`` as mathematics (and fails on a lone
    ``\\``), so each ``$`` is escaped."""
    return str(text).replace("$", r"\$")

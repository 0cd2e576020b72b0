"""The utilisation timeline: samples over time, with rows and GC events under them.

Drawn with matplotlib's object API (no pyplot, no global backend change)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any


def plot_timeline(
    records: Sequence[Mapping[str, Any]],
    samples: Sequence[Mapping[str, Any]],
    gc_events: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str] | None = None,
    *,
    title: str = "gnnmon timeline",
) -> Any:
    """A matplotlib Figure: CPU (and GPU) utilisation, process RSS, then one lane per row label
    with each row as a bar and GC pauses as red marks. Saved as PNG if ``path`` is given."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the timeline needs matplotlib: pip install 'gnnmon[report]'") from exc
    starts = [r["t_start_ns"] for r in records] + [s["t_ns"] for s in samples]
    if not starts:
        raise ValueError("nothing to plot: the run has no rows and no samples")
    t0 = min(starts)

    def sec(ns: int) -> float:
        return (ns - t0) / 1e9

    fig = Figure(figsize=(11, 6.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax_util, ax_mem, ax_rows = fig.subplots(3, 1, sharex=True, height_ratios=[2, 1, 2])
    ts = [sec(s["t_ns"]) for s in samples]
    if samples:
        ax_util.plot(ts, [s.get("cpu_util_pct") for s in samples], label="CPU % (process + children)")
        gpu_keys = sorted({k for s in samples for k in s if k.startswith("gpu") and k.endswith("_util_pct")
                           and "mem" not in k})
        for k in gpu_keys:
            ax_util.plot(ts, [s.get(k) for s in samples], label=k.replace("_util_pct", " util %"))
        ax_util.legend(loc="upper right", fontsize=8)
        ax_mem.plot(ts, [s.get("rss_bytes", 0) / 2**20 for s in samples], label="RSS MiB")
        if any(s.get("children_rss_bytes") for s in samples):
            ax_mem.plot(ts, [s.get("children_rss_bytes", 0) / 2**20 for s in samples], label="children RSS MiB")
        ax_mem.legend(loc="upper right", fontsize=8)
    else:
        ax_util.text(0.5, 0.5, "no utilisation samples (collect(sample=...))", ha="center",
                     transform=ax_util.transAxes)
    ax_util.set_ylabel("utilisation %")
    ax_mem.set_ylabel("MiB")
    ax_mem.ticklabel_format(axis="y", useOffset=False, style="plain")
    labels = list(dict.fromkeys(r["label"] for r in records))
    for lane, label in enumerate(labels):
        spans = [(sec(r["t_start_ns"]), (r["t_end_ns"] - r["t_start_ns"]) / 1e9)
                 for r in records if r["label"] == label and r.get("t_end_ns")]
        ax_rows.broken_barh(spans, (lane - 0.35, 0.7), facecolors=f"C{lane % 10}",
                            edgecolors="none")
    for e in gc_events:
        x = sec(e["t_start_ns"])
        gen = e.get("generation", 0)
        ax_rows.axvspan(x, x + e.get("duration_s", 0), color="red", alpha=0.25 + 0.25 * gen,
                        lw=0 if gen < 2 else 1.5)
    ax_rows.set_yticks(range(len(labels)), labels)
    ax_rows.set_xlabel("seconds since the first row or sample")
    ax_rows.set_title("rows (bars) and GC collections (red; darker = older generation)", fontsize=9)
    ax_util.set_title(title)
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig

"""play/flickr_memory.py's chart: axis labels with units, a title that names the data and the
device, axes from 0, one legend off the data, GPU memory on a GPU. Checked on the matplotlib Figure
the script returns."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from play.flickr_memory import plot_sweep


def _results(workers_total: list[float], backend: str = "cpu", device: str = "cpu") -> list[dict]:
    return [{"name": str(w), "summary": {"step_peak_mib_median": 40.0 + w, "step_peak_mib_max": 45.0 + w,
                                         "with_workers_mib": total, "device": device, "backend": backend}}
            for w, total in zip((0, 2, 4, 6), workers_total, strict=True)]


def test_the_flickr_chart_names_its_axes_data_and_device():
    fig = plot_sweep("workers", _results([860.0, 900.0, 940.0, 952.0]), None,
                     "synthetic Flickr stand-in flickr: 89,250 nodes")
    ax, ax2 = fig.axes
    assert ax.get_xlabel() == "DataLoader workers"
    assert ax.get_ylabel() == "peak above the step's start (MiB, host RSS)"
    assert ax.get_title().startswith("GCN on synthetic Flickr stand-in (cpu)")
    assert ax.get_ylim()[0] == 0 and ax2.get_ylim()[0] == 0  # +10.8 % does not fill the height
    assert ax2.get_ylabel() == "main process peak + workers' USS (MiB)"
    # one legend, above the plot: none on the bars
    assert ax.get_legend() is None and ax2.get_legend() is None and len(fig.legends) == 1
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert fig.legends[0].get_window_extent(renderer).y0 >= ax.get_window_extent(renderer).y1 - 1


def test_the_flickr_chart_on_cuda_says_so():
    fig = plot_sweep("hidden", _results([0, 0, 0, 0], backend="cuda", device="cuda:0"), None,
                     "PyG Flickr from data/Flickr: 89,250 nodes")
    (ax,) = fig.axes
    assert ax.get_title().startswith("GCN on Flickr (cuda:0)") and "CUDA allocator" in ax.get_ylabel()
    assert ax.get_xlabel() == "hidden channels"

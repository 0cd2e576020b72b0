"""The main job's study on a real CUDA device (skipped where there is none)."""

from __future__ import annotations

import pytest
import torch

from play.flickr_memory import Setting, run_sweep
from play.synthetic import GraphSpec, planted_partition

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    pytest.mark.usefixtures("real_cuda"),
]


def test_the_flickr_study_on_the_gpu_keeps_each_devices_memory_apart(tmp_path):
    """The main job's sweeps on a tiny graph on the GPU: pinning really pins (features gathered
    before the DataLoader pins), autocast lowers the convolution's matmul, and no figure is
    negative (the host's RSS is never subtracted from the GPU's)."""
    tiny = planted_partition(GraphSpec("tiny", 400, 3200, 16, 3), seed=3)
    base = Setting(batch_size=32, hidden=16)
    dev = torch.device("cuda:0")
    pin = {r["name"]: r for r in run_sweep("pin_memory", tiny, base=base, steps=2, warmup=1, device=dev,
                                              out=tmp_path, data_note="tiny", log=lambda m: None)}
    assert pin["on"]["readback"]["batch_pinned"] is True and "note" not in pin["on"]["readback"]
    assert pin["off"]["readback"]["batch_pinned"] is False
    prec = {r["name"]: r for r in run_sweep("precision", tiny, base=base, steps=2, warmup=1, device=dev,
                                               out=tmp_path, data_note="tiny", log=lambda m: None)}
    assert prec["bfloat16-autocast"]["readback"]["activation_dtype"] == "torch.bfloat16"
    workers = run_sweep("workers", tiny, base=base, steps=2, warmup=1, device=dev, out=tmp_path,
                        data_note="tiny", log=lambda m: None)
    for r in [*pin.values(), *prec.values(), *workers]:
        s = r["summary"]
        assert s["backend"] == "cuda" and s["device_peak_mib_median"] > 0
        assert s["own_peak_mib_median"] > 0 and s["with_workers_mib"] > 0
        assert s["h2d_ms_median"] is not None

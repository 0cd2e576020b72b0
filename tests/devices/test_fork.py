"""A forked child (a DataLoader worker) of a process that runs CUDA: gnnmon never creates, queries
or frees a CUDA object there, and a decorated function that runs there measures the host.

The fake CUDA behaves as the real one does in such a child (tests/fakes.py): every device call
raises, and an inherited event that is destroyed there aborts the child."""

from __future__ import annotations

import faulthandler
import gc
import multiprocessing
import os
import signal

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import gnnmon
from gnnmon import cuda_timed, monitor_memory_device, phase

MiB = 2**20


def _fork_ok() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


needs_fork = pytest.mark.skipif(not _fork_ok(), reason="this platform cannot fork")


def _in_child(fn) -> int:
    """Run ``fn`` in a forked child; its exit status as ``os.waitstatus_to_exitcode`` gives it
    (a negative number: the signal that ended it)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        faulthandler.disable()  # an abort planted here is expected: no stack dump
        code = 1
        try:
            fn()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@needs_fork
def test_the_fake_aborts_a_child_that_destroys_an_inherited_event_as_cuda_does(fake_cuda):
    """The fake's own faithfulness: what kills a real worker kills a fake one."""
    ev = torch.cuda.Event(enable_timing=True)
    ev.record()
    holder = [ev]
    del ev
    assert _in_child(lambda: holder.clear()) == -signal.SIGABRT
    assert _in_child(lambda: None) == 0  # kept, not freed: the child lives

    def touch():
        with pytest.raises(RuntimeError, match="initialization error"):
            holder[0].query()
        with pytest.raises(RuntimeError, match="forked subprocess"):
            torch.cuda.synchronize()
        with pytest.raises(RuntimeError, match="forked subprocess"):
            torch._C._cuda_memoryStats(0)
        assert not torch.cuda.is_initialized() and torch.cuda._is_in_bad_fork()
        assert torch.cuda.memory_stats(0) == {}

    assert _in_child(touch) == 0


class _Numbers(Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        gc.collect()  # the child's collector finds nothing of the parent's to free
        return torch.full((4,), float(i))


@needs_fork
def test_a_forked_dataloader_worker_survives_rows_whose_cuda_events_are_pending(fake_cuda, tmp_path):
    """Rows closed with their events still pending (the device is busy) when the workers fork: every
    batch arrives, no worker dies, and the parent's rows are all read once the device is done."""

    @monitor_memory_device(device="cuda:0")
    @cuda_timed
    def step(x):
        with phase("forward"):
            fake_cuda.launch(0.05)
            h = fake_cuda.alloc(MiB, 0)
        fake_cuda.free(h)
        return x

    fake_cuda.free(fake_cuda.alloc(MiB, 0))  # the model is on the GPU before the first workers fork
    with gnnmon.collect(tmp_path / "r.jsonl") as run:
        for _epoch in range(2):
            loader = DataLoader(_Numbers(), batch_size=8, num_workers=2, multiprocessing_context="fork")
            seen = []
            for batch in loader:  # the workers fork while earlier steps' events are pending
                seen.append(step(batch))
                fake_cuda.launch(0.05)
            assert sorted(int(v) for b in seen for v in b[:, 0]) == list(range(64))
    rows = run.records
    assert len(rows) == 16
    assert all(r["device_s"] is not None and r["device_s"] >= 0.05 - 1e-9 for r in rows)
    assert all(r["phase_forward_s"] >= 0.05 - 1e-9 for r in rows)
    assert all(r["mem_peak_delta_bytes"] == MiB for r in rows)


class _Measured(Dataset):
    """Each item is read by decorated functions in the worker: what their rows said comes back
    with the item."""

    def __init__(self, run) -> None:
        self.run = run  # the worker's copy of the parent's run (forked: not pickled)

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> dict:
        @monitor_memory_device(device="cuda:0")
        @cuda_timed(device="cuda")
        def explicit(n):
            return torch.ones(n)

        @monitor_memory_device
        @cuda_timed
        def inferred():
            return torch.ones(4)

        explicit(1000)
        inferred()
        rows = self.run.records[-2:]
        return {"i": i, "backend": [r["backend"] for r in rows], "source": [r["device_source"] for r in rows],
                "device_s": [r["device_s"] for r in rows], "wall_s": [r["wall_s"] for r in rows],
                "rss": [r["mem_peak_bytes_source"] for r in rows]}


@needs_fork
def test_a_decorated_function_in_a_forked_worker_measures_the_host(fake_cuda, tmp_path):
    """A dataset's ``__getitem__`` in a worker forked from a CUDA process: its rows are the host's
    (CUDA cannot run there), explicit ``device="cuda"`` included, each saying why."""
    fake_cuda.alloc(MiB, 0)  # CUDA started in the parent

    with gnnmon.collect(tmp_path / "r.jsonl") as run:
        items = list(DataLoader(_Measured(run), batch_size=None, num_workers=2, multiprocessing_context="fork"))
    assert sorted(item["i"] for item in items) == list(range(8))
    for item in items:
        assert item["backend"] == ["cpu", "cpu"]
        assert item["source"] == ["cpu: a forked child, where cuda cannot run"] * 2
        assert item["device_s"] == item["wall_s"]  # the host's work is synchronous
        assert all(how.startswith("measured:") or how.startswith("sampled:") for how in item["rss"])
    assert run.records == []  # the workers' rows stayed in the workers


class _Cycle:
    """Garbage the parent's collector has not reached yet, holding a recorded CUDA event."""

    def __init__(self) -> None:
        self.me = self
        self.event = torch.cuda.Event(enable_timing=True)
        self.event.record()


@needs_fork
def test_the_parents_cyclic_garbage_holding_a_cuda_event_is_never_freed_in_a_worker(fake_cuda):
    """A worker whose collector runs (``_Numbers.__getitem__`` calls ``gc.collect()``) while the
    parent's uncollected garbage holds a recorded CUDA event: gnnmon freezes what the child
    inherited (``gc.freeze``), so the event is not destroyed there and the worker lives."""
    fake_cuda.alloc(MiB, 0)
    with gnnmon.collect(), gnnmon.gc_paused():  # the garbage stays uncollected until the workers fork
        _Cycle()
        loader = iter(DataLoader(_Numbers(), batch_size=8, num_workers=2, multiprocessing_context="fork"))
        first = next(loader)
    rest = list(loader)
    assert sorted(int(v) for b in [first, *rest] for v in b[:, 0]) == list(range(64))
    gc.collect()  # the parent frees its garbage as usual

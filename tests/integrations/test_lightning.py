"""The Lightning callback, with a real ``lightning.Trainer`` on a small PyG model: one row per
training batch covering forward, backward and the optimizer (each a planted sleep), the batch's
graph shape, epochs marked, the figures sent to the Trainer's logger, failures closed cleanly."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

pytest.importorskip("torch_geometric")
lightning = pytest.importorskip("lightning")

from lightning.pytorch.loggers.logger import Logger  # noqa: E402
from torch_geometric.data import Data  # noqa: E402
from torch_geometric.loader import DataLoader  # noqa: E402
from torch_geometric.nn import GCNConv, global_mean_pool  # noqa: E402

import gnnmon  # noqa: E402
from gnnmon.integrations.lightning import GnnmonCallback  # noqa: E402
from gnnmon.record import state  # noqa: E402
from tests.stopwatch import TICK_S  # noqa: E402

FORWARD_S, BACKWARD_S, OPTIMIZER_S = 0.03, 0.02, 0.04
NODES, EDGES, GRAPHS_PER_BATCH, BATCHES = 5, 8, 2, 3


def graphs(n: int) -> list[Data]:
    """``n`` graphs of NODES nodes and EDGES edges each (a ring plus three chords)."""
    src = torch.tensor([0, 1, 2, 3, 4, 0, 1, 2])
    dst = torch.tensor([1, 2, 3, 4, 0, 2, 3, 4])
    return [Data(x=torch.randn(NODES, 4), edge_index=torch.stack([src, dst]), y=torch.randn(1)) for _ in range(n)]


class SlowBackward(torch.autograd.Function):
    """Identity whose backward sleeps BACKWARD_S."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        time.sleep(BACKWARD_S)
        return grad


class SlowSGD(torch.optim.SGD):
    """SGD whose step (after Lightning's closure: forward and backward) sleeps OPTIMIZER_S."""

    def step(self, closure: Any = None) -> Any:
        loss = closure() if closure is not None else None
        time.sleep(OPTIMIZER_S)
        super().step()
        return loss


class GCN(lightning.LightningModule):
    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.conv = GCNConv(4, 8)
        self.head = torch.nn.Linear(8, 1)
        self.fail_at = fail_at

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.fail_at is not None and batch_idx == self.fail_at:
            raise RuntimeError("planted failure")
        time.sleep(FORWARD_S)
        h = self.conv(batch.x, batch.edge_index).relu()
        out = self.head(global_mean_pool(SlowBackward.apply(h), batch.batch)).squeeze(-1)
        return torch.nn.functional.mse_loss(out, batch.y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.conv(batch.x, batch.edge_index)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return SlowSGD(self.parameters(), lr=0.01)


class ListLogger(Logger):
    """A Trainer logger that keeps what it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.logged: list[tuple[int, dict[str, float]]] = []

    @property
    def name(self) -> str:
        return "list"

    @property
    def version(self) -> int:
        return 0

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        pass

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.logged.append((int(step or 0), dict(metrics)))


class Batches(lightning.Callback):
    """The test's own clock around each training batch, listed before gnnmon's callback: a batch's
    start is read before gnnmon's row opens, and the next batch's start (or the epoch's end, a
    hook Lightning calls after every callback's batch end) after it closes."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ceilings: list[float] = []  # seconds from a batch's start to the next such event

    def _next(self) -> float:
        now = time.perf_counter()
        if len(self.ceilings) < len(self.starts):
            self.ceilings.append(now - self.starts[-1] + TICK_S)
        return now

    def on_train_batch_start(self, *args: Any) -> None:
        self.starts.append(self._next())

    def on_train_epoch_end(self, *args: Any) -> None:
        self._next()


def fit(callback: GnnmonCallback, model: GCN, epochs: int = 2, before: list[Any] | None = None,
        **trainer_options: Any) -> ListLogger:
    logger = ListLogger()
    trainer = lightning.Trainer(
        accelerator="cpu", max_epochs=epochs, logger=logger, callbacks=[*(before or []), callback],
        log_every_n_steps=1,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=1, **trainer_options,
    )
    data = graphs(GRAPHS_PER_BATCH * BATCHES)
    trainer.fit(model, DataLoader(data, batch_size=GRAPHS_PER_BATCH),
                DataLoader(data[:GRAPHS_PER_BATCH], batch_size=GRAPHS_PER_BATCH))
    return logger


def test_one_row_per_training_batch_covers_forward_backward_and_the_optimizer(tmp_path):
    path = tmp_path / "fit.jsonl"
    batches = Batches()
    logger = fit(GnnmonCallback(str(path)), GCN(), before=[batches])
    run = gnnmon.load(path)
    train = [r for r in run.records if r["label"] == "training_step"]
    assert len(train) == len(batches.ceilings) == 2 * BATCHES
    assert [r["epoch"] for r in train] == [0] * BATCHES + [1] * BATCHES
    for r, ceiling in zip(train, batches.ceilings, strict=True):
        # the planted sleeps, each in its own phase, all inside the row, the row inside the batch
        assert FORWARD_S <= r["phase_forward_s"]
        assert BACKWARD_S <= r["phase_backward_s"]
        assert OPTIMIZER_S <= r["phase_optimizer_s"]
        phases = r["phase_forward_s"] + r["phase_backward_s"] + r["phase_optimizer_s"]
        assert phases <= r["wall_s"] <= ceiling, (phases, r["wall_s"], ceiling)
        # the batch's graph shape, read from the batch Lightning hands the hooks
        assert (r["num_nodes"], r["num_edges"], r["num_graphs"]) == (
            NODES * GRAPHS_PER_BATCH, EDGES * GRAPHS_PER_BATCH, GRAPHS_PER_BATCH)
        assert r["device"] == "cpu" and r["error"] is None and "mem_peak_bytes" in r
    # validation batches get rows of their own (2 epochs x 1 batch; the sanity check none)
    assert [r["epoch"] for r in run.records if r["label"] == "validation_step"] == [0, 1]
    # the figures went to the Trainer's logger, one entry per step, at Lightning's steps
    steps = [s for s, m in logger.logged if "gnnmon/wall_ms" in m]
    assert steps == list(range(2 * BATCHES))
    by_step = {s: m for s, m in logger.logged if "gnnmon/wall_ms" in m}
    for row, step in zip(train, steps, strict=True):
        m = by_step[step]
        assert m["gnnmon/wall_ms"] == pytest.approx(row["wall_s"] * 1e3)
        assert m["gnnmon/forward_ms"] == pytest.approx(row["phase_forward_s"] * 1e3)
        assert m["gnnmon/optimizer_ms"] == pytest.approx(row["phase_optimizer_s"] * 1e3)
        assert m["gnnmon/num_nodes"] == NODES * GRAPHS_PER_BATCH
    assert state.CURRENT_ROW.get() is None and state.OPEN_PHASE.get() is None
    assert not state.RUNS  # the callback's run is closed


def test_log_every_n_steps_is_kept_and_accumulating_batches_have_no_optimizer_phase():
    with gnnmon.collect() as run:
        logger = fit(GnnmonCallback(validation=False), GCN(), epochs=1, accumulate_grad_batches=3)
    rows = [r for r in run.records if r["label"] == "training_step"]
    assert len(rows) == BATCHES and not [r for r in run.records if r["label"] == "validation_step"]
    assert [r.get("phase_optimizer_s") is not None for r in rows] == [False, False, True]
    assert all(r["phase_backward_s"] >= BACKWARD_S for r in rows)
    # one optimizer step, logged once with its three batches together
    logged = [(s, m) for s, m in logger.logged if "gnnmon/wall_ms" in m]
    assert [s for s, _ in logged] == [0]
    assert logged[0][1]["gnnmon/wall_ms"] == pytest.approx(sum(r["wall_s"] for r in rows) * 1e3)
    assert logged[0][1]["gnnmon/num_nodes"] == BATCHES * NODES * GRAPHS_PER_BATCH


def test_a_failing_training_step_closes_its_row_and_the_run(tmp_path):
    path = tmp_path / "fail.jsonl"
    with pytest.raises(RuntimeError, match="planted failure"):
        fit(GnnmonCallback(str(path)), GCN(fail_at=1), epochs=1)
    run = gnnmon.load(path)  # the end line was written: the file is whole
    rows = [r for r in run.records if r["label"] == "training_step"]
    assert [r["error"] for r in rows] == [None, "RuntimeError"]
    assert state.CURRENT_ROW.get() is None and state.OPEN_PHASE.get() is None and not state.RUNS


def test_bad_options_fail_when_the_callback_is_made():
    with pytest.raises(ValueError, match="sync"):
        GnnmonCallback(sync="always")
    with pytest.raises(ValueError, match="label"):
        GnnmonCallback(label="a#b")
    with pytest.raises(TypeError):
        GnnmonCallback("x.jsonl", sampel=0.5)


def test_a_step_is_logged_once_its_rows_are_final_in_order_on_the_writer_thread():
    """The callback's logging is a sink of the run: a step's figures go to the loggers once every
    row of the step has finished (on CUDA: its events read), in step order, from the writer
    thread; rows may finish before or after the callback says which step they make."""
    import threading

    from gnnmon.integrations.lightning import LoggerSink
    from gnnmon.record.sinks import Batch

    class ThreadLogger(ListLogger):
        def log_metrics(self, metrics, step=None):
            self.threads = [*getattr(self, "threads", []), threading.current_thread().name]
            super().log_metrics(metrics, step)

    logger = ThreadLogger()
    sink = LoggerSink("gnnmon/")
    first = {"label": "training_step", "index": 0, "wall_s": 0.010, "device_s": 0.008}
    second = {"label": "training_step", "index": 1, "wall_s": 0.020, "device_s": 0.015}
    sink.write(Batch([second], [], []))  # step 1's row finished first
    sink.expect(0, ["training_step#0"], [logger])
    sink.expect(1, ["training_step#1"], [logger])
    assert logger.logged == []  # step 1 is ready, but step 0 comes first
    sink.write(Batch([first], [], []))
    assert [(s, m["gnnmon/device_ms"]) for s, m in logger.logged] == [(0, pytest.approx(8.0)), (1, pytest.approx(15.0))]
    # on a real run the sink's writes come from the writer thread
    logger = ThreadLogger()
    with gnnmon.collect(sinks=[live := LoggerSink("gnnmon/")], flush_interval=0.001):
        with gnnmon.timed(label="training_step"):
            pass
        live.expect(0, ["training_step#0"], [logger])
        with gnnmon.timed(label="training_step"):
            pass
    assert [s for s, _ in logger.logged] == [0] and logger.threads == ["gnnmon-writer"]


def test_the_play_script_runs_and_writes_every_view(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(root / "play" / "lightning_gcn.py"), "--epochs", "2", "--graphs", "80",
                           "--batch-size", "32", "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "### training_step — 4 call(s)" in proc.stdout  # 64 training graphs in batches of 32, 2 epochs
    run = gnnmon.load(tmp_path / "lightning.jsonl")
    assert sum(r["num_graphs"] for r in run.records if r["label"] == "training_step") == 2 * 64
    assert json.loads((tmp_path / "lightning.trace.json").read_text())["traceEvents"]
    header = (tmp_path / "lightning_logs" / "version_0" / "metrics.csv").read_text().splitlines()[0]
    assert "gnnmon/wall_ms" in header and "gnnmon/forward_ms" in header
    assert list((tmp_path / "lightning_tb").glob("events.out.tfevents.*"))

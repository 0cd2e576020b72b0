"""The Lightning callback records each training batch's wait for data by itself (no
``watch_loader``): a real ``lightning.Trainer`` on CPU over a dataset whose ``__getitem__`` sleeps
a planted time. Each training row's ``data_wait_s`` holds at least the batch's planted sleeps (its
items, one process: ``num_workers=0``) and at most the test's own clock from the previous batch's
end (or the epoch's start) to the batch's start; the report's input-bound finding names the wait."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

lightning = pytest.importorskip("lightning")

from torch.utils.data import DataLoader, Dataset  # noqa: E402

import gnnmon  # noqa: E402
from gnnmon.integrations.lightning import GnnmonCallback  # noqa: E402
from tests.stopwatch import TICK_S  # noqa: E402

ITEM_SLEEP_S = 0.01
"""The planted sleep in each item's ``__getitem__`` (s)."""

BATCH, BATCHES, EPOCHS = 2, 3, 2
STEP_S = 0.002
"""The planted sleep in each ``training_step`` (s): far under a batch's wait (BATCH x ITEM_SLEEP_S)."""


class SlowItems(Dataset):
    """BATCH x BATCHES items of 4 features, each ``__getitem__`` sleeping ITEM_SLEEP_S."""

    def __len__(self) -> int:
        return BATCH * BATCHES

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(ITEM_SLEEP_S)
        return torch.full((4,), float(i))


class Tiny(lightning.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        time.sleep(STEP_S)
        return self.lin(batch).square().mean()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Gaps(lightning.Callback):
    """The test's own clock: for each training batch, seconds from the previous batch's end (or
    its epoch's start) to its start: the fit loop fetches the batch between these hooks."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.gaps: list[float] = []

    def on_train_epoch_start(self, *args: Any) -> None:
        self.since = time.perf_counter()

    def on_train_batch_start(self, *args: Any) -> None:
        assert self.since is not None
        self.gaps.append(time.perf_counter() - self.since + TICK_S)

    def on_train_batch_end(self, *args: Any) -> None:
        self.since = time.perf_counter()


def test_each_training_rows_wait_holds_its_batchs_planted_sleep_and_the_report_names_it(tmp_path):
    path = tmp_path / "fit.jsonl"
    gaps = Gaps()
    trainer = lightning.Trainer(
        accelerator="cpu", max_epochs=EPOCHS, logger=False, callbacks=[gaps, GnnmonCallback(str(path))],
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    profiler = trainer.profiler
    trainer.fit(Tiny(), DataLoader(SlowItems(), batch_size=BATCH, num_workers=0))
    run = gnnmon.load(path)
    train = [r for r in run.records if r["label"] == "training_step"]
    assert len(train) == len(gaps.gaps) == EPOCHS * BATCHES
    for r, gap in zip(train, gaps.gaps, strict=True):
        # the batch's BATCH items each slept ITEM_SLEEP_S inside the fetch; the fetch lies inside the gap
        assert BATCH * ITEM_SLEEP_S <= r["data_wait_s"] <= gap, (r["data_wait_s"], gap)
        assert r["data_workers"] == 0
    # the profiler is the trainer's own again: its methods are its class's
    assert "start" not in vars(profiler) and "stop" not in vars(profiler)

    (found,) = [f for f in gnnmon.Report.load(path).diagnosis() if f["kind"] == "input-bound"]
    assert found["label"] == "training_step"
    # the waits at stake: every batch's planted sleeps at least, the test's own gaps at most
    assert EPOCHS * BATCHES * BATCH * ITEM_SLEEP_S <= found["at_stake"] <= sum(gaps.gaps)
    assert "training_step waited" in found["words"] and "for its data" in found["words"]


def test_a_watched_loaders_own_figures_are_kept(tmp_path):
    """``watch_loader`` around the DataLoader still works beside the callback: each row has one
    wait (the watch's, which holds the planted sleeps too), never two added."""
    path = tmp_path / "fit.jsonl"
    gaps = Gaps()
    trainer = lightning.Trainer(
        accelerator="cpu", max_epochs=1, logger=False, callbacks=[gaps, GnnmonCallback(str(path))],
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(Tiny(), gnnmon.watch_loader(DataLoader(SlowItems(), batch_size=BATCH)))
    train = [r for r in gnnmon.load(path).records if r["label"] == "training_step"]
    assert len(train) == len(gaps.gaps) == BATCHES
    for r, gap in zip(train, gaps.gaps, strict=True):
        assert BATCH * ITEM_SLEEP_S <= r["data_wait_s"] <= gap, (r["data_wait_s"], gap)


class Unsized(torch.utils.data.IterableDataset):
    """The same items without a length: batch k's items sleep ``WAITS[k]`` (s) each, so a wait read
    from the wrong batch's fetch (Lightning fetches one ahead without a length) shows."""

    WAITS = (0.2, 0.01, 0.01, 0.1)

    def __iter__(self) -> Any:
        for k, wait in enumerate(self.WAITS):
            for i in range(BATCH):
                time.sleep(wait)
                yield torch.full((4,), float(k * BATCH + i))


def test_a_loader_without_a_length_gets_no_wait_from_the_batch_ahead(tmp_path):
    """Without a length Lightning fetches a batch ahead, so the fetch under batch k is batch k+1's:
    no row takes it (a 200 ms batch then 10 ms ones would read 10 ms for the 200 ms one)."""
    path = tmp_path / "fit.jsonl"
    trainer = lightning.Trainer(
        accelerator="cpu", max_epochs=1, logger=False, callbacks=[GnnmonCallback(str(path))],
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(Tiny(), DataLoader(Unsized(), batch_size=BATCH))
    train = [r for r in gnnmon.load(path).records if r["label"] == "training_step"]
    assert len(train) == len(Unsized.WAITS)
    assert all("data_wait_s" not in r for r in train), [r.get("data_wait_s") for r in train]


def test_another_tools_wrapper_on_the_profiler_is_given_back(tmp_path):
    """A ``stop`` another tool put on the profiler instance before the fit is there after it."""
    trainer = lightning.Trainer(
        accelerator="cpu", max_epochs=1, logger=False, callbacks=[GnnmonCallback(str(tmp_path / "fit.jsonl"))],
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    profiler = trainer.profiler
    stopped: list[str] = []
    theirs_stop = profiler.stop

    def their_stop(action_name: str) -> None:
        stopped.append(action_name)
        theirs_stop(action_name)

    profiler.stop = their_stop
    trainer.fit(Tiny(), DataLoader(SlowItems(), batch_size=BATCH))
    assert vars(profiler).get("stop") is their_stop and "start" not in vars(profiler)
    assert any(name.endswith("train_dataloader_next") for name in stopped)  # theirs ran under gnnmon's

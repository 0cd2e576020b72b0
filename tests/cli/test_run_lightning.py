"""Lightning under ``gnnmon run``: ``fit`` in the script's own process is the engine's (see
test_run_cases.py); the processes Lightning's DDP launcher starts re-run the script without gnnmon,
and its ``callbacks_factory`` entry point gives them gnnmon's callback, each rank its file beside
``gnnmon run``'s. The entry point is the one gnnmon's own metadata declares (pyproject.toml), as an
installed gnnmon gives it to every Trainer."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import gnnmon
from gnnmon.cli.run import CHILD_ENV
from tests.cli.running import ROOT

lightning_module = pytest.importorskip("gnnmon.integrations.lightning")


def test_the_factory_adds_the_callback_only_to_a_process_gnnmon_run_did_not_run_itself(monkeypatch, tmp_path):
    factory = lightning_module.callbacks_factory
    assert (lightning_module.RUN_OUTPUT, lightning_module.RUN_PID, lightning_module.RUN_MODE) == CHILD_ENV
    for name in CHILD_ENV:
        monkeypatch.delenv(name, raising=False)
    assert factory() == []  # no gnnmon run
    monkeypatch.setenv(CHILD_ENV[0], str(tmp_path / "r.jsonl"))
    monkeypatch.setenv(CHILD_ENV[1], str(os.getpid()))
    assert factory() == []  # gnnmon run's own process: its engine records
    monkeypatch.setenv(CHILD_ENV[1], str(os.getpid() + 1))
    made = factory()  # a child it did not run itself
    assert len(made) == 1 and isinstance(made[0], lightning_module.GnnmonCallback)


DDP = """
    import torch
    import lightning as L
    from torch.utils.data import DataLoader, TensorDataset


    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 1)

        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.mse_loss(self.lin(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)


    if __name__ == "__main__":
        data = TensorDataset(torch.randn(48, 8), torch.randn(48, 1))  # planted: 48 samples, 2 ranks, batches of 4
        trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                            enable_model_summary=False, accelerator="cpu", devices=2, strategy="ddp")
        trainer.fit(Model(), DataLoader(data, batch_size=4))
"""


@pytest.mark.slow
def test_lightning_s_ddp_children_record_through_the_entry_point(tmp_path: Path):
    declared = [e.value for e in entry_points(group="lightning.pytorch.callbacks_factory") if e.name == "gnnmon"]
    assert declared == ["gnnmon.integrations.lightning:callbacks_factory"]  # installed: Lightning finds it
    (tmp_path / "train.py").write_text(textwrap.dedent(DDP))
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "gnnmon", "run", "-o", "r.jsonl", "train.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    own = gnnmon.load(tmp_path / "r.jsonl").records  # rank 0, in gnnmon run's process: the engine's rows
    child = gnnmon.load(tmp_path / "r.rank1.jsonl").records  # rank 1, Lightning's child: the callback's
    assert [(r["label"], r["updates"]) for r in own] == [("step", 1)] * 6  # 24 samples a rank, batches of 4
    assert [r["label"] for r in child] == ["training_step"] * 6
    assert all(r["phase_forward_s"] > 0 and r["phase_backward_s"] > 0 for r in child)
    assert "its children wrote" in done.stderr and "r.rank1.jsonl" in done.stderr

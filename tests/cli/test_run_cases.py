"""``gnnmon run`` on the step cases of issue 68 that part one left: a compiled step (its fallback
named), a WGAN critic loop, a spawn DataLoader with workers, Lightning's ``fit`` (with and without
gradient accumulation). Each script plants its numbers of batches, backward calls and updates;
the rows must show them, with the labels and the rule that cut them."""

from __future__ import annotations

import sys

import gnnmon
from gnnmon.measure.auto_steps import HIDDEN, PATIENCE
from tests.cli.running import counts, gnnmon_run

COMPILED_OPTIMIZER = """
    import sys
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    N = int(sys.argv[1])                                       # planted: N batches, each a backward and an update
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)


    @torch.compile(backend="eager")                            # the update traced by dynamo: its hooks hidden
    def update():
        opt.step()


    for x, y in DataLoader(TensorDataset(torch.randn(4 * N, 8), torch.randn(4 * N, 1)), batch_size=4):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        update()
"""


def test_a_compiled_update_falls_back_to_cutting_at_backward_and_names_it(tmp_path):
    n = PATIENCE + 6
    done = gnnmon_run(tmp_path, "-o", "c.jsonl", "train.py", str(n), script=COMPILED_OPTIMIZER)
    assert done.returncode == 0, done.stderr[-3000:]
    result = gnnmon.load(tmp_path / "c.jsonl")
    rows = result.records
    # the first PATIENCE batches wait for an update that never shows, then a row a batch, cut at backward
    assert counts(rows) == [("step", PATIENCE, PATIENCE, 0, "backward")] + [("step", 1, 1, 0, "backward")] * 6
    steps = result.end["steps"]
    assert (steps["rule"], steps["updates"], steps["batches"], steps["backward_calls"]) == ("backward", 0, n, n)
    assert any("compiled step" in note for note in steps["notes"])
    assert "optimizer not visible: rows cut at backward" in done.stderr and "note: an optimizer was made" in done.stderr
    for r in rows[1:]:  # the eager forward and backward timed; the compiled update not
        assert r["phase_forward_s"] > 0 and r["phase_backward_s"] > 0 and "phase_optimizer_s" not in r


def test_a_step_compiled_whole_gives_its_batches_and_says_what_hid_the_update(tmp_path):
    """Below Python 3.12 a step compiled whole hides both its update and its backward (dynamo traces
    the wrapper of ``torch.autograd.backward`` with the rest): a row a batch, and a note. On 3.12+
    ``sys.monitoring`` sees the backward, which dynamo's graph break runs eagerly: the update alone
    is hidden, as a compiled update's, and the rows fall back to cutting at backward after
    ``PATIENCE`` batches, said."""
    n = PATIENCE + 3
    done = gnnmon_run(tmp_path, "-o", "w.jsonl", "train.py", str(n), script="""
        import sys
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        N = int(sys.argv[1])
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)


        @torch.compile(backend="eager")                        # loss, backward and update in one compiled call
        def train_step(x, y):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()


        for x, y in DataLoader(TensorDataset(torch.randn(4 * N, 8), torch.randn(4 * N, 1)), batch_size=4):
            train_step(x, y)                                   # planted: N batches
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    result = gnnmon.load(tmp_path / "w.jsonl")
    steps = result.end["steps"]
    if sys.version_info < (3, 12):
        assert counts(result.records) == [("batch", 1, 0, 0, "batch")] * n  # what is seen; no step made up
        assert HIDDEN in steps["notes"] and f"note: {HIDDEN}" in done.stderr
    else:
        first = ("step", PATIENCE, PATIENCE, 0, "backward")  # the batches that waited for an update
        assert counts(result.records) == [first] + [("step", 1, 1, 0, "backward")] * 3
        assert (steps["rule"], steps["updates"], steps["backward_calls"]) == ("backward", 0, n)
        assert any("compiled step" in note for note in steps["notes"]) and HIDDEN not in steps["notes"]


def test_a_wgan_critic_loop_makes_the_batch_the_row_with_each_update_in_it(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "wgan.jsonl", "train.py", script="""
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        N_CRITIC, CLIP = 5, 0.01                               # as PyTorch-GAN's wgan.py
        generator = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh())
        critic = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LeakyReLU(0.2), torch.nn.Linear(8, 1))
        opt_g = torch.optim.RMSprop(generator.parameters(), lr=5e-5)
        opt_c = torch.optim.RMSprop(critic.parameters(), lr=5e-5)
        real = TensorDataset(torch.randn(40, 8))
        for i, (x,) in enumerate(DataLoader(real, batch_size=4)):   # planted: 10 batches
            opt_c.zero_grad()
            fake = generator(torch.randn(4, 4)).detach()
            (critic(fake).mean() - critic(x).mean()).backward()     # the critic: every batch
            opt_c.step()
            for p in critic.parameters():
                p.data.clamp_(-CLIP, CLIP)
            if i % N_CRITIC == 0:                              # the generator: every N_CRITIC-th batch
                opt_g.zero_grad()
                (-critic(generator(torch.randn(4, 4))).mean()).backward()
                opt_g.step()
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    result = gnnmon.load(tmp_path / "wgan.jsonl")
    updates = [2 if i % 5 == 0 else 1 for i in range(10)]
    assert counts(result.records) == [("step", 1, u, u, "update") for u in updates]
    steps = result.end["steps"]
    assert (steps["updates"], steps["optimizers"], steps["batches"]) == (sum(updates), 2, 10)


def test_a_spawn_dataloader_with_workers_runs_and_its_workers_record_nothing(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "s.jsonl", "train.py", script="""
        import torch
        from torch.utils.data import DataLoader, Dataset


        class Items(Dataset):                                  # found by the spawned workers in train.py
            def __len__(self):
                return 24

            def __getitem__(self, i):
                return torch.full((8,), float(i)), torch.ones(1)


        if __name__ == "__main__":
            model = torch.nn.Linear(8, 1)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            loader = DataLoader(Items(), batch_size=4, num_workers=2, multiprocessing_context="spawn")
            for epoch in range(2):                             # planted: 2 epochs of 6 batches, an update each
                for x, y in loader:
                    opt.zero_grad()
                    torch.nn.functional.mse_loss(model(x), y).backward()
                    opt.step()
            print("trained", __name__)
    """, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trained __main__" in done.stdout
    result = gnnmon.load(tmp_path / "s.jsonl")
    assert counts(result.records) == [("step", 1, 1, 1, "update")] * 12  # the workers' fetches: no row of theirs
    assert all(r["data_wait_s"] >= 0 for r in result.records)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".jsonl") == ["s.jsonl"]
    assert not (tmp_path / "runs").exists()


LIGHTNING = """
    import sys
    import torch
    import lightning as L
    from torch.utils.data import DataLoader, TensorDataset

    ACCUMULATE = int(sys.argv[1])


    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 1)

        def forward(self, x):
            return self.lin(x)

        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.mse_loss(self(x), y)

        def validation_step(self, batch, i):
            x, y = batch
            self.log("val", torch.nn.functional.mse_loss(self(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)


    data = TensorDataset(torch.randn(48, 8), torch.randn(48, 1))
    trainer = L.Trainer(max_epochs=2, accumulate_grad_batches=ACCUMULATE, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu", devices=1,
                        num_sanity_val_steps=2)
    # planted: 2 sanity batches, then per epoch 12 training batches of 4 and 3 validation batches of 16
    trainer.fit(Model(), DataLoader(data, batch_size=4), DataLoader(data, batch_size=16))
"""


def test_lightning_fit_gives_a_row_per_update_and_its_validation_rows(tmp_path):
    for accumulate in (1, 4):
        done = gnnmon_run(tmp_path, "-o", f"l{accumulate}.jsonl", "train.py", str(accumulate), script=LIGHTNING)
        assert done.returncode == 0, done.stderr[-3000:]
        result = gnnmon.load(tmp_path / f"l{accumulate}.jsonl")
        per_epoch = 12 // accumulate
        epoch = [("step", accumulate, accumulate, 1, "update")] * per_epoch + [("eval", 1, 0, 0, "batch")] * 3
        # the sanity check runs before any update: inference's label, not a step
        assert counts(result.records) == [("batch", 1, 0, 0, "batch")] * 2 + epoch * 2
        for r in result.records:
            if r["label"] == "step":  # Lightning's closure runs forward and backward inside optimizer.step
                assert r["phase_forward_in"] == r["phase_backward_in"] == "optimizer"
                assert r["phase_optimizer_s"] > 0 and r["phase_forward_s"] > 0 and r["phase_backward_s"] > 0
        assert result.end["steps"]["updates"] == 2 * per_epoch

"""``gnnmon run``: real tiny torch scripts run unmodified as ``python -m gnnmon run ...`` in a fresh
interpreter, each with a planted truth (its number of updates, batches and backward calls) that
the rows must show, and the launcher's exit statuses, arguments and refusals."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import gnnmon
from gnnmon.cli.run import split
from gnnmon.measure.auto_steps import AutoSteps
from tests.cli.running import ROOT, counts, gnnmon_run, rows_of

PLAIN = """
    import sys
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    N = int(sys.argv[1])                                   # planted: N batches, one update each
    data = TensorDataset(torch.randn(4 * N, 8), torch.randn(4 * N, 1))
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in DataLoader(data, batch_size=4):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    print("argv", sys.argv, __name__)
"""


def test_a_plain_loop_gives_a_row_per_update_with_its_batch_and_backward(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "run.jsonl", "train.py", "7", "--lr", "3", script=PLAIN)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "argv ['train.py', '7', '--lr', '3'] __main__" in done.stdout  # the script's own argv and __main__
    rows = rows_of(tmp_path / "run.jsonl")
    assert counts(rows) == [("step", 1, 1, 1, "update")] * 7
    assert [r["index"] for r in rows] == list(range(7))
    assert all(r["wall_s"] > 0 and r["data_wait_s"] >= 0 and r["mem_peak_bytes"] > 0 for r in rows)
    steps = gnnmon.load(tmp_path / "run.jsonl").end["steps"]
    assert (steps["rule"], steps["updates"], steps["batches"], steps["backward_calls"]) == ("update", 7, 7, 7)
    assert "gnnmon_run" in gnnmon.load(tmp_path / "run.jsonl").manifest["config"]
    assert "7 rows (step 7)" in done.stderr and "gnnmon report run.jsonl" in done.stderr
    report = subprocess.run([sys.executable, "-m", "gnnmon", "report", "run.jsonl"], cwd=tmp_path, text=True,
                            capture_output=True, env={"PYTHONPATH": str(ROOT)}, timeout=120, check=True).stdout
    assert "Steps found by `gnnmon run` (step 7): a row per optimizer update" in report


def test_two_optimizers_a_batch_make_the_batch_the_row(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "gan.jsonl", "train.py", script="""
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        G, D = torch.nn.Linear(4, 8), torch.nn.Linear(8, 1)
        og, od = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
        bce = torch.nn.BCEWithLogitsLoss()
        for (real,) in DataLoader(TensorDataset(torch.randn(20, 8)), batch_size=4):   # planted: 5 batches
            fake = G(torch.randn(4, 4))
            od.zero_grad()
            (bce(D(real), torch.ones(4, 1)) + bce(D(fake.detach()), torch.zeros(4, 1))).backward()
            od.step()
            og.zero_grad()
            bce(D(fake), torch.ones(4, 1)).backward()
            og.step()
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert counts(rows_of(tmp_path / "gan.jsonl")) == [("step", 1, 2, 2, "update")] * 5
    assert gnnmon.load(tmp_path / "gan.jsonl").end["steps"]["optimizers"] == 2


def test_gradient_accumulation_gives_a_row_per_update(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "acc.jsonl", "train.py", script="""
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loader = DataLoader(TensorDataset(torch.randn(48, 8), torch.randn(48, 1)), batch_size=4)  # 12 batches
        for i, (x, y) in enumerate(loader):
            (torch.nn.functional.mse_loss(model(x), y) / 4).backward()
            if (i + 1) % 4 == 0:                                                              # an update per 4
                opt.step()
                opt.zero_grad()
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert counts(rows_of(tmp_path / "acc.jsonl")) == [("step", 4, 4, 1, "update")] * 3


def test_a_hand_written_update_cuts_rows_at_backward_and_says_so(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "manual.jsonl", "train.py", script="""
        import torch

        model = torch.nn.Linear(8, 1)
        x, y = torch.randn(32, 8), torch.randn(32, 1)
        for _ in range(6):                                      # planted: 6 steps, no torch.optim
            loss = torch.nn.functional.mse_loss(model(x), y)
            model.zero_grad()
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.01 * p.grad
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(tmp_path / "manual.jsonl")
    assert [(r["label"], r["backward_calls"], r["updates"], r["step_rule"]) for r in rows] == [
        ("step", 1, 0, "backward")] * 6
    assert "batches" not in rows[0]  # no loader ran: not counted, rather than a made-up 0
    assert "optimizer not visible: rows cut at backward" in done.stderr


def test_an_inference_script_gives_batch_and_forward_rows_never_steps(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "infer.jsonl", "train.py", script="""
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).eval()
        with torch.no_grad():
            for (x,) in DataLoader(TensorDataset(torch.randn(40, 8)), batch_size=8):   # planted: 5 batches
                model(x)
            for _ in range(3):                                                        # then 3 bare forwards
                model(torch.randn(2, 8))
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(tmp_path / "infer.jsonl")
    assert [(r["label"], r["batches"], r["step_rule"]) for r in rows] == [("batch", 1, "batch")] * 5 + [
        ("forward", 0, "forward")] * 3
    assert all(r["backward_calls"] == 0 and r["updates"] == 0 for r in rows)


def test_an_eval_pass_between_updates_is_its_own_eval_rows(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "eval.jsonl", "train.py", script="""
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        train = DataLoader(TensorDataset(torch.randn(16, 8), torch.randn(16, 1)), batch_size=4)  # 4 batches
        val = DataLoader(TensorDataset(torch.randn(12, 8), torch.randn(12, 1)), batch_size=4)    # 3 batches
        for epoch in range(2):
            for x, y in train:
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            with torch.no_grad():
                for x, y in val:
                    model(x)
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(tmp_path / "eval.jsonl")
    epoch = [("step", 1, 1, 1, "update")] * 4 + [("eval", 1, 0, 0, "batch")] * 3
    assert counts(rows) == epoch * 2
    assert [r["index"] for r in rows if r["label"] == "eval"] == list(range(6))


def test_full_batch_training_without_a_loader_and_its_eval_forward(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "full.jsonl", "train.py", script="""
        import torch

        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        loss_fn = torch.nn.MSELoss()                           # a root module of its own: inside the step
        opt = torch.optim.Adam(model.parameters())
        x, y = torch.randn(32, 8), torch.randn(32, 1)
        for epoch in range(5):                                 # planted: 5 updates, 5 eval forwards
            model.train(); opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
            model.eval()
            with torch.no_grad():
                model(x)
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(tmp_path / "full.jsonl")
    assert [(r["label"], r["backward_calls"], r["updates"], r["step_rule"]) for r in rows] == [
        ("step", 1, 1, "update"), ("eval", 0, 0, "forward")] * 5


def test_an_update_amp_s_scaler_skipped_is_marked_not_a_slow_step(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "amp.jsonl", "train.py", script="""
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        scaler = torch.amp.GradScaler("cpu")
        loader = DataLoader(TensorDataset(torch.randn(20, 8), torch.randn(20, 1)), batch_size=4)  # 5 batches
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.mse_loss(model(x), y)
            if i == 2:
                loss = loss * float("inf")                     # planted: the third update is skipped
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(tmp_path / "amp.jsonl")
    assert [(r["batches"], r["updates"], r.get("updates_skipped")) for r in rows] == [
        (1, 1, None), (1, 1, None), (1, 0, 1), (1, 1, None), (1, 1, None)]


def test_nothing_seen_makes_no_row_and_says_what_was_looked_for(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "none.jsonl", "train.py", script="print(sum(range(10)))\n")
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows_of(tmp_path / "none.jsonl") == []
    assert gnnmon.load(tmp_path / "none.jsonl").end["steps"]["rule"] is None
    assert "no step found: looked for optimizer updates" in done.stderr


SCRIPT_ENDS = """
    import os, signal, sys
    import torch

    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(100):
        model(torch.randn(4, 2)).sum().backward()
        opt.step()
        if i == 4:                                             # planted: 5 updates, then the ending
            how = sys.argv[1]
            if how == "exit":
                sys.exit(3)
            if how == "raise":
                raise ValueError("planted")
            if how == "sigint":
                os.kill(os.getpid(), signal.SIGINT)
            if how == "message":
                sys.exit("stopped early")
"""


@pytest.mark.parametrize(("how", "status"), [("exit", 3), ("raise", 1), ("sigint", 130), ("message", 1)])
def test_the_exit_status_is_the_script_s_and_every_row_is_kept(tmp_path, how, status):
    done = gnnmon_run(tmp_path, "-o", "end.jsonl", "train.py", how, script=SCRIPT_ENDS)
    assert done.returncode == status, done.stderr[-3000:]
    result = gnnmon.load(tmp_path / "end.jsonl")
    assert [r["updates"] for r in result.records] == [1] * 5 and result.complete
    if how == "raise":
        tb = done.stderr.split("Traceback (most recent call last):\n", 1)[1]
        assert tb.startswith(f'  File "{tmp_path / "train.py"}"') and "ValueError: planted" in tb  # the script's only
        assert result.end["ended"] == "exception ValueError"
    if how == "sigint":
        assert result.end["ended"] == "exception KeyboardInterrupt"
    if how == "message":
        assert "stopped early" in done.stderr


def test_a_module_runs_as_python_m_runs_it_with_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("N = 3\n")
    (pkg / "train.py").write_text(textwrap.dedent("""
        import sys
        import torch
        from .helper import N

        model = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(N):
            model(torch.randn(4, 2)).sum().backward()
            opt.step()
        print("argv", sys.argv[1:], __name__)
    """))
    done = gnnmon_run(tmp_path, "-o", "m.jsonl", "-m", "pkg.train", "a", "--b", "-o", "x")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "argv ['a', '--b', '-o', 'x'] __main__" in done.stdout  # -m ended gnnmon's options
    assert [r["updates"] for r in rows_of(tmp_path / "m.jsonl")] == [1, 1, 1]


@pytest.mark.parametrize("launcher", [("torchrun", "--nproc_per_node=2"), ("-m", "torch.distributed.run")])
def test_a_launcher_is_refused_with_the_form_that_works(tmp_path, launcher):
    done = gnnmon_run(tmp_path, *launcher, "train.py", "--lr", "3")
    assert done.returncode == 2
    assert "torchrun [its options] -m gnnmon run train.py [args]" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_a_script_that_records_itself_gets_the_launcher_only(tmp_path):
    done = gnnmon_run(tmp_path, "train.py", "mine.jsonl", script="""
        import sys
        import torch
        import gnnmon

        model = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        @gnnmon.cuda_timed
        def train_step():
            model(torch.randn(4, 2)).sum().backward()
            opt.step()

        with gnnmon.collect(sys.argv[1]):
            for _ in range(3):
                train_step()
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (tmp_path / "runs").exists()  # no second run
    rows = rows_of(tmp_path / "mine.jsonl")
    assert [r["label"] for r in rows] == ["train_step"] * 3 and "step_rule" not in rows[0]
    assert "records itself" in done.stderr and "gnnmon report mine.jsonl" in done.stderr


def test_an_existing_file_is_never_overwritten_without_force(tmp_path):
    script = "open('ran', 'a').write('x')\n"
    (tmp_path / "taken.jsonl").write_text("keep\n")
    done = gnnmon_run(tmp_path, "-o", "taken.jsonl", "train.py", script=script)
    assert done.returncode == 2 and "exists" in done.stderr
    assert (tmp_path / "taken.jsonl").read_text() == "keep\n" and not (tmp_path / "ran").exists()
    assert gnnmon_run(tmp_path, "-f", "-o", "taken.jsonl", "train.py").returncode == 0
    first, second = gnnmon_run(tmp_path, "train.py"), gnnmon_run(tmp_path, "train.py")
    assert first.returncode == second.returncode == 0
    made = sorted((tmp_path / "runs").iterdir())
    assert len(made) == 2 and all(p.name.startswith("train-") for p in made)  # the second took a new name


def test_a_missing_or_broken_script_is_refused_before_it_runs(tmp_path):
    assert gnnmon_run(tmp_path, "nope.py").returncode == 2
    done = gnnmon_run(tmp_path, "train.py", script="def broken(:\n")
    assert done.returncode == 2 and "does not parse" in done.stderr and not (tmp_path / "runs").exists()


LIVE = """
    import sys, time
    import torch

    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(12):                                        # planted: 12 steps of 0.2 s: ticks come
        time.sleep(0.2)
        model(torch.randn(4, 2)).sum().backward()
        opt.step()
        if i % 4 == 3:
            print("MIDDLE", i, file=sys.stderr)
"""


def test_the_live_line_is_drawn_only_when_asked_off_a_terminal_and_leaves_prints_whole(tmp_path):
    quiet = gnnmon_run(tmp_path, "-o", "a.jsonl", "train.py", script=LIVE)
    assert quiet.returncode == 0 and "▸" not in quiet.stderr  # stderr is a pipe: no live line
    assert "gnnmon: recording train.py to a.jsonl" in quiet.stderr  # a start line instead
    live = gnnmon_run(tmp_path, "--status", "-o", "b.jsonl", "train.py")
    assert live.returncode == 0, live.stderr[-3000:]
    assert "gnnmon ▸ step" in live.stderr and "ms a step (p50)" in live.stderr
    for i in (3, 7, 11):  # each of the script's lines whole, on a line of its own (the live line erased first)
        at = live.stderr.index(f"MIDDLE {i}\n")
        assert at == 0 or live.stderr[at - 1] == "\n" or live.stderr[:at].endswith("\r\033[K")


def test_split_tells_gnnmon_s_options_from_the_script_s():
    assert split(["run", "-o", "x", "-f", "t.py", "-o", "y", "--lr"]) == (["run", "-o", "x", "-f", "t.py"],
                                                                         ["-o", "y", "--lr"])
    assert split(["run", "-m", "pkg.mod", "-q"]) == (["run", "-m", "pkg.mod"], ["-q"])
    assert split(["run", "--", "t.py", "--"]) == (["run", "--", "t.py"], ["--"])
    assert split(["report", "x"]) == (["report", "x"], [])


def test_every_hook_and_patch_is_removed_when_the_run_ends():
    from torch.utils.data import dataloader

    before = (dataloader._BaseDataLoaderIter.__next__, dataloader.DataLoader.__iter__, torch.autograd.backward,
              torch.optim.Optimizer.__init__, torch.amp.GradScaler.step)
    hooks = torch.nn.modules.module._global_forward_pre_hooks
    with gnnmon.collect() as run:
        engine = AutoSteps(run).start()
        model = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.randn(4, 2)).sum().backward()
            opt.step()
        summary = engine.stop()
    assert summary["updates"] == 3 and [r["label"] for r in run.records] == ["step"] * 3
    assert (dataloader._BaseDataLoaderIter.__next__, dataloader.DataLoader.__iter__, torch.autograd.backward,
            torch.optim.Optimizer.__init__, torch.amp.GradScaler.step) == before
    assert not hooks and not torch.nn.modules.module._global_forward_hooks
    assert not model._forward_pre_hooks and not model._forward_hooks  # the root's own hooks too
    opt.step()  # the optimizer's global hooks are gone: a step now opens no row
    assert len(run.records) == 3


def test_the_end_names_every_finding_after_the_lead(tmp_path, capsys):
    """Two loops that each waited 30 ms for 10 ms steps (a newcomer's step and eval, 46 % each):
    stderr leads with one and says the other's headline too (it showed the lead alone)."""
    from types import SimpleNamespace

    from gnnmon.cli.run import _say_end
    from tests.report.diagnosis.planted import write_run
    from tests.report.diagnosis.test_input_finding import planted

    rows = planted(40, 0.03, 0.01, "step") + [{**r, "t_start_ns": r["t_start_ns"] + 500_000_000,
                                                 "t_end_ns": r["t_end_ns"] + 500_000_000}
                                                for r in planted(40, 0.03, 0.01, "eval")]
    path = write_run(tmp_path / "run.jsonl", [{"type": "row", **r} for r in rows])
    _say_end(SimpleNamespace(path=path), {"rule": "planted", "labels": {"step": 40, "eval": 40}, "said": []}, [], 0)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("gnnmon: ")]
    lead, also = said[1], said[2]
    assert lead.startswith("gnnmon: input-bound — ") and ("(step)" in lead or "step waited" in lead), said
    other = "eval" if "step waited" in lead else "step"
    assert also.startswith("gnnmon: also: input-bound — ") and f"({other})" in also, said

"""gnnmon under torch.distributed: each rank writes a file of its own, its manifest says which rank
it is, and the job loads back as one run whose rows carry their rank. Ranks are planted through
torchrun's environment and, for real, by a 2-process gloo job on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import gnnmon
from gnnmon.devices.ranks import current_rank, job_files, rank_path

ROOT = Path(__file__).resolve().parents[1]


def test_outside_a_job_nothing_changes(monkeypatch, tmp_path):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert current_rank() is None
    assert rank_path(tmp_path / "run.jsonl", None) == tmp_path / "run.jsonl"
    assert rank_path(tmp_path / "run.{rank}.jsonl", None) == tmp_path / "run.0.jsonl"
    with gnnmon.collect(tmp_path / "run.jsonl") as run:
        pass
    assert run.path == tmp_path / "run.jsonl" and run.manifest["distributed"] is None


def test_torchruns_environment_names_the_rank_and_its_file(monkeypatch, tmp_path):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    info = current_rank()
    assert (info.rank, info.world_size, info.local_rank, info.source) == (3, 4, 1, "environment")
    assert rank_path(tmp_path / "job.jsonl", info) == tmp_path / "job.rank3.jsonl"
    assert rank_path(tmp_path / "job-{rank}.jsonl", info) == tmp_path / "job-3.jsonl"
    with gnnmon.collect(tmp_path / "job.jsonl") as run:
        gnnmon.cuda_timed(label="step")(lambda: None)()
    assert run.path == tmp_path / "job.rank3.jsonl" and not (tmp_path / "job.jsonl").exists()
    manifest = json.loads((tmp_path / "job.rank3.jsonl").read_text().splitlines()[0])
    assert manifest["distributed"]["rank"] == 3 and manifest["distributed"]["world_size"] == 4


def test_a_job_of_one_is_not_a_job(monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert current_rank() is None


def test_job_files_find_each_rank_in_rank_order(tmp_path):
    for r in (10, 2, 0, 1):
        (tmp_path / f"job.rank{r}.jsonl").write_text("")
        (tmp_path / f"job-{r}.jsonl").write_text("")
    (tmp_path / "job.rankx.jsonl").write_text("")
    (tmp_path / "other.rank0.jsonl").write_text("")
    assert [f.name for f in job_files(tmp_path / "job.jsonl")] == [f"job.rank{r}.jsonl" for r in (0, 1, 2, 10)]
    assert [f.name for f in job_files(tmp_path / "job-{rank}.jsonl")] == [f"job-{r}.jsonl" for r in (0, 1, 2, 10)]


JOB = textwrap.dedent("""
    import os, sys, time
    import torch, torch.distributed as dist, torch.multiprocessing as mp
    sys.path.insert(0, {root!r})
    import gnnmon

    def work(rank, path):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
        dist.init_process_group("gloo", rank=rank, world_size=2)
        step = gnnmon.cuda_timed(label="step")(lambda s: time.sleep(0.05 if (rank, s) == (1, 5) else 0.001))
        with gnnmon.collect(path):
            for s in range(10):
                step(s)
                dist.barrier()
        dist.destroy_process_group()

    if __name__ == "__main__":
        mp.spawn(work, args=(sys.argv[1],), nprocs=2)
""")


def test_a_two_process_gloo_job_writes_a_file_per_rank_and_loads_as_one(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(JOB.format(root=str(ROOT)))
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "job.jsonl"), port],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(f.name for f in tmp_path.glob("job*.jsonl")) == ["job.rank0.jsonl", "job.rank1.jsonl"]
    for rank in (0, 1):
        manifest = json.loads((tmp_path / f"job.rank{rank}.jsonl").read_text().splitlines()[0])
        d = manifest["distributed"]
        assert (d["rank"], d["world_size"], d["backend"], d["source"]) == (rank, 2, "gloo", "process group")
    for given in (tmp_path / "job.jsonl", str(tmp_path / "job.rank*.jsonl")):
        run = gnnmon.load(given)
        assert run.complete and [m["rank"] for m in run.manifest["ranks"]] == [0, 1]
        rows = run.records
        assert sorted((r["rank"], r["index"]) for r in rows) == [(k, i) for k in (0, 1) for i in range(10)]
        planted = next(r for r in rows if (r["rank"], r["index"]) == (1, 5))
        assert planted["wall_s"] >= 0.05  # the planted sleep on rank 1, read back from its own file
        assert all(r["wall_s"] < 0.05 for r in rows if r["rank"] == 0)


def test_a_file_whose_name_looks_like_a_glob_loads_as_itself(tmp_path):
    with gnnmon.collect(tmp_path / "run[1].jsonl") as run:
        gnnmon.cuda_timed(label="step")(lambda: None)()
    with gnnmon.collect(tmp_path / "run1.jsonl"):
        pass
    loaded = gnnmon.load(tmp_path / "run[1].jsonl")
    assert len(loaded.records) == len(run.records) == 1 and "rank" not in loaded.records[0]

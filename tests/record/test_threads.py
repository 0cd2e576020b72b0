"""Threads: two threads, each inside its own ``collect()`` at the same time, each get their own
rows; a thread with no run of its own (a data loader's) records into the newest run."""

from __future__ import annotations

import threading
import warnings

import gnnmon


def test_two_threads_each_in_its_own_collect_get_their_own_rows(tmp_path):
    n = 1000
    both_in = threading.Barrier(2)
    runs = {}

    def train(name: str) -> None:
        @gnnmon.cuda_timed(label=f"step_{name}", device="cpu")
        def step(i):
            return i

        with gnnmon.collect(tmp_path / f"{name}.jsonl", config={"thread": name}) as run:
            both_in.wait()  # both runs active from here on: their rows interleave in time
            for i in range(n):
                step(i)
            both_in.wait()
        runs[name] = run

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=train, args=(name,)) for name in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [str(w.message) for w in caught] == []
    for name in ("a", "b"):
        rows = gnnmon.load(tmp_path / f"{name}.jsonl").records
        assert [r["label"] for r in rows] == [f"step_{name}"] * n
        assert [r["index"] for r in rows] == list(range(n))
        assert len(runs[name].records) == n


def test_a_thread_without_a_run_records_into_the_newest_run(tmp_path):
    @gnnmon.cuda_timed(label="load", device="cpu")
    def load_batch(i):
        return i

    with gnnmon.collect(tmp_path / "main.jsonl") as run:
        worker = threading.Thread(target=lambda: [load_batch(i) for i in range(5)])
        worker.start()
        worker.join()
    assert [r["label"] for r in run.records] == ["load"] * 5

"""The input-bound finding as its user reads it (planted in rows, every figure a constant of the
plant): what the wait was made of (the loader's parts, the rest, the copy, the nodes per hop),
the evidence behind each figure, and the one lever its next step names — pyg-lib for gnnmon's
fallback sampler, pinned memory for a batch that is mostly its copy, more workers only where cores
stood idle (as many as they allow, at most 4 more), else less work per batch in the part that made
most of it. The sentences are compared whole: a figure, a unit or a lever said wrongly is a wrong
answer to the user."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

import gnnmon

RUN = " — at most {wait} a batch to win ({share} % of the measured time): data_wait_s in the next run says how much was"
"""How every next step ends: the wait per batch the plant made, and its share of the measured time."""

NEW_WORKERS = ("num_workers{n} in the DataLoader{why}, with persistent_workers=True (workers kept across epochs) and "
               "prefetch_factor: batches are then made while the step runs; and {lighter}")
"""The next step for a loader without workers, where cores allow them."""


def planted(n: int, wait: float, step: float, label: str = "step", **fields) -> list[dict]:
    """``n`` top-level calls of ``step`` s, each after a wait of ``wait`` s for its batch, every
    other field the same constant in each row."""
    out = []
    for i in range(n):
        t = int(i * 1e9)
        row = {"label": label, "index": i, "t_start_ns": t, "t_end_ns": t + int(step * 1e9), "wall_s": step}
        if wait is not None:
            row["data_wait_s"] = wait
        out.append({**row, **fields})
    return out


def input_bound(rows: list[dict], cores: int | None = None) -> dict:
    manifest = {"devices": {"cpu_count": cores, "cpu_usable": cores}} if cores else None
    (found,) = [f for f in gnnmon.Report(rows, manifest=manifest).diagnosis() if f["kind"] == "input-bound"]
    return found


def test_a_neighbour_loaders_wait_is_told_part_by_part_with_its_rest_its_copy_and_its_hops():
    """40 batches: 30 ms waited and 2 ms copied to the device (32 ms), sampling 20 ms, gathering
    4 ms, collation 2 ms (26 ms made: under 90 % of the wait, so the rest, 32 - 26 - 2 = 4 ms, is
    named), one seed grown to 10 nodes in hop 1; 2 workers, 2 cores idle of 4 (idle_cpu_pct 200):
    2 more workers. A second loop (eval, 10 x 40 ms) makes the run longer than this loop: 1.28 s
    waited is 76 % of the loop (1.68 s) and 62 % of the run (2.08 s)."""
    rows = planted(40, 0.030, 0.010, data_to_device_s=0.002, data_sample_s=0.020, data_gather_s=0.004,
                   data_transform_s=0.002, data_hop_0_nodes=1, data_hop_1_nodes=10, data_workers=2,
                   idle_cpu_pct=200.0, others_cpu_pct=0.0)
    found = input_bound(rows + planted(10, None, 0.040, label="eval"), cores=4)
    assert found["label"] == "step" and found["at_stake"] == pytest.approx(40 * 0.032)
    assert found["words"] == (
        "step waited 32.0 ms per batch for its data against 10.0 ms per step (76 % of its loop); of it sampling "
        "20.0 ms, feature gathering 4.0 ms, transform/collation 2.0 ms, the copy to the device 2.0 ms, the rest "
        "4.0 ms (the sampler's input, collation); num_workers=2 on 4 core(s); nodes per hop 1 → 10")
    assert found["next"] == ("more workers (num_workers=4) (2.0 core(s) stood idle beside the run), or less work per "
                             "batch: smaller fanouts in the outer hops (hop 1 has 10.0× hop 0's nodes; its fanout is "
                             "num_neighbors[0])"
                             + RUN.format(wait="32.0 ms", share=62))
    workers = " (in the loader's workers where it has them)"
    assert found["evidence"] == [
        {"figure": "data_wait_s", "value": pytest.approx(0.030), "unit": "s",
         "where": "the loop's next(), timed by watch_loader, mean of 40 batches"},
        {"figure": "data_sample_s", "value": pytest.approx(0.020), "unit": "s",
         "where": "watch_loader, mean per batch" + workers},
        {"figure": "data_gather_s", "value": pytest.approx(0.004), "unit": "s",
         "where": "watch_loader, mean per batch" + workers},
        {"figure": "data_transform_s", "value": pytest.approx(0.002), "unit": "s",
         "where": "watch_loader, mean per batch" + workers},
        {"figure": "data_to_device_s", "value": pytest.approx(0.002), "unit": "s",
         "where": "watch_loader, mean per batch"},
        {"figure": "data_hop_<k>_nodes", "value": None, "unit": "nodes", "where": "num_sampled_nodes: 1 → 10"},
    ]


def test_sampling_is_made_lighter_at_the_hop_that_samples_the_most_nodes():
    """Nodes per hop 512 → 5,120 → 2,560 (the second hop's neighbourhoods overlap): hop 1 samples the
    most, so its fanout is the lever, not the outer hop's, which samples half as many (a newcomer was
    told "smaller fanouts in the outer hops (hop 2 has 0.5× hop 1's nodes)"); a tie goes to the outer
    hop; where the last hop samples the most, the outer hops, as before."""
    from gnnmon.report.diagnosis.input_finding import _fix

    assert _fix("sampling", [512, 5120, 2560]) == ("a smaller fanout at hop 1 (num_neighbors[0]), which samples the "
                                                   "most nodes (5,120 a batch; hop 2, 2,560)")
    assert _fix("sampling", [512, 2560, 2560]) == ("smaller fanouts in the outer hops (hop 2 has 1.0× hop 1's "
                                                   "nodes; its fanout is num_neighbors[1])")
    assert _fix("sampling", [1, 10, 80]) == ("smaller fanouts in the outer hops (hop 2 has 8.0× hop 1's nodes; its "
                                             "fanout is num_neighbors[1])")
    assert _fix("sampling", [64]) == "smaller fanouts in the outer hops"
    # the seeds (hop 0) are not sampled: where they outnumber every hop, the hop sampling the most is still hop 1
    assert _fix("sampling", [512, 256, 128]) == ("a smaller fanout at hop 1 (num_neighbors[0]), which samples the "
                                                 "most nodes (256 a batch; hop 2, 128)")
    rows = planted(40, 0.030, 0.010, data_sample_s=0.025, data_hop_0_nodes=512, data_hop_1_nodes=5120,
                   data_hop_2_nodes=2560, idle_cpu_pct=0.0, others_cpu_pct=0.0)
    assert "a smaller fanout at hop 1 (num_neighbors[0]), which samples the most nodes" in input_bound(rows, cores=2)[
        "next"]


def test_gnnmons_sampler_is_replaced_first_then_workers_counted_without_a_machine():
    """A short loop (10 batches, 0.44 s: under a second) sampled by gnnmon's fallback sampler, 20 ms
    of a 34 ms wait (4 ms of it the copy, the rest 10 ms), three hops growing 8x in the last; no
    workers, cores or idle recorded: pyg-lib, then workers of a number the user picks (=N)."""
    rows = planted(10, 0.030, 0.010, data_to_device_s=0.004, data_sample_s=0.020, data_hop_0_nodes=512,
                   data_hop_1_nodes=5120, data_hop_2_nodes=40960, data_sampler="gnnmon")
    found = input_bound(rows)
    assert found["words"] == (
        "step waited 34.0 ms per batch for its data against 10.0 ms per step (77 % of its loop); of it sampling "
        "20.0 ms, the copy to the device 4.0 ms, the rest 10.0 ms (the sampler's input, collation); nodes per hop "
        "512 → 5,120 → 40,960; sampled by gnnmon's pure-PyTorch sampler (neither pyg-lib nor torch-sparse is "
        "installed)")
    assert found["next"] == (
        "install pyg-lib, PyG's compiled sampler (pip install pyg-lib -f https://data.pyg.org/whl/torch-<version>+"
        "<cpu|cu12x>.html): gnnmon's fallback sampler took 20.0 ms of each wait, and PyG's loaders use pyg-lib once "
        "it is there; then " + NEW_WORKERS.format(n="=N", why="", lighter="smaller fanouts in the outer hops (hop 2 "
                                                                           "has 8.0× hop 1's nodes; its fanout is "
                                                                           "num_neighbors[1])")
        + RUN.format(wait="34.0 ms", share=77))
    assert found["evidence"][-1] == {"figure": "data_hop_<k>_nodes", "value": None, "unit": "nodes",
                                     "where": "num_sampled_nodes: 512 → 5,120 → 40,960"}


def test_a_batch_that_is_mostly_its_copy_is_told_to_pin_its_memory():
    """20 ms of each 30 ms wait is the copy to the device, 5 ms sampling by PyG's own sampler
    (pyg-lib: nothing to install), the rest 5 ms; cores to spare would not be the lever."""
    rows = planted(40, 0.010, 0.010, data_to_device_s=0.020, data_sample_s=0.005, data_sampler="pyg-lib",
                   data_workers=0)
    found = input_bound(rows, cores=2)
    assert found["words"] == (
        "step waited 30.0 ms per batch for its data against 10.0 ms per step (75 % of its loop); of it sampling "
        "5.0 ms, the copy to the device 20.0 ms, the rest 5.0 ms (the sampler's input, collation); num_workers=0 "
        "on 2 core(s)")
    assert found["next"] == PIN + RUN.format(wait="30.0 ms", share=75)


PLAIN = "a plain DataLoader: its dataset's __getitem__ and collation (PyG's neighbour loaders are split)"
"""What the words say of a loader that is not split (its copy to the device aside)."""

PIN = ("pin_memory=True in the loader and watch_loader(loader, to=device): the copy is then queued non_blocking from "
       "pinned memory")
"""The next step for a batch that is mostly its copy."""


def test_a_plain_loaders_small_copy_leaves_it_a_plain_loader_with_the_plain_loaders_lever():
    """A plain DataLoader watched with to=device: 29 ms in next() and a 1 ms copy (30 ms waited),
    the copy its only timed part. The copy is 1/30 of the wait: pinned memory would win at most
    that 1 ms, the loader's own 29 ms is the lever; 2 cores idle (idle_cpu_pct 200), no workers:
    2 of them. The words stay a plain loader's, the copy told beside them."""
    rows = planted(40, 0.029, 0.010, data_to_device_s=0.001, data_workers=0, idle_cpu_pct=200.0,
                   others_cpu_pct=0.0)
    found = input_bound(rows)
    assert found["words"] == ("step waited 30.0 ms per batch for its data against 10.0 ms per step (75 % of its "
                              f"loop); {PLAIN}, and the copy to the device 1.0 ms; num_workers=0")
    assert found["next"] == NEW_WORKERS.format(n="=2", why=" (2.0 core(s) stood idle beside the run)",
                                               lighter="a lighter dataset __getitem__ or collation") + RUN.format(
        wait="30.0 ms", share=75)
    assert found["evidence"] == [
        {"figure": "data_wait_s", "value": pytest.approx(0.029), "unit": "s",
         "where": "the loop's next(), timed by watch_loader, mean of 40 batches"},
        {"figure": "data_to_device_s", "value": pytest.approx(0.001), "unit": "s",
         "where": "watch_loader, mean per batch"},
    ]


def test_a_plain_loader_that_is_mostly_its_copy_is_told_to_pin_its_memory():
    """A plain DataLoader: 10 ms in next() and a 20 ms copy: the copy outweighs next()'s whole
    wait, so pinned memory wins more than any lever on the loader; the words stay a plain
    loader's."""
    rows = planted(40, 0.010, 0.010, data_to_device_s=0.020, data_workers=0)
    found = input_bound(rows, cores=2)
    assert found["words"] == ("step waited 30.0 ms per batch for its data against 10.0 ms per step (75 % of its "
                              f"loop); {PLAIN}, and the copy to the device 20.0 ms; num_workers=0 on 2 core(s)")
    assert found["next"] == PIN + RUN.format(wait="30.0 ms", share=75)


def test_a_copy_that_is_exactly_half_the_wait_is_not_the_lever():
    """A plain DataLoader: 0.125 s in next() and a 0.125 s copy (8 batches, 0.25 s waited: every
    figure exact in doubles): the copy is half the wait, not most of it, so the loader's lever
    (no workers, cores not known: =N) comes first."""
    found = input_bound(planted(8, 0.125, 0.25, data_to_device_s=0.125, data_workers=0))
    assert found["words"] == ("step waited 250.0 ms per batch for its data against 250.0 ms per step (50 % of its "
                              f"loop); {PLAIN}, and the copy to the device 125.0 ms; num_workers=0")
    assert found["next"] == NEW_WORKERS.format(n="=N", why="", lighter="a lighter dataset __getitem__ or collation") \
        + RUN.format(wait="250.0 ms", share=50)


def test_a_neighbour_loaders_copy_larger_than_each_part_but_under_half_the_wait_is_not_the_lever():
    """Sampling 5 ms, the copy 12 ms, 18 ms in next() (30 ms waited): the copy is the largest part
    timed but 12 of 30 ms, under next()'s 18 (the rest, 13 ms, untimed); no workers, 2 cores: one
    worker, and the largest part the loader made is sampling."""
    rows = planted(40, 0.018, 0.010, data_to_device_s=0.012, data_sample_s=0.005, data_workers=0)
    found = input_bound(rows, cores=2)
    assert found["words"] == (
        "step waited 30.0 ms per batch for its data against 10.0 ms per step (75 % of its loop); of it sampling "
        "5.0 ms, the copy to the device 12.0 ms, the rest 13.0 ms (the sampler's input, collation); num_workers=0 "
        "on 2 core(s)")
    assert found["next"] == NEW_WORKERS.format(n="=1", why=" (2 core(s), one for the training process)",
                                               lighter="smaller fanouts in the outer hops") + RUN.format(
        wait="30.0 ms", share=75)


def test_parts_timed_on_some_batches_are_means_over_the_batches_waited_for():
    """40 batches of 10 ms in next(): the first 20 sampled by a neighbour loader (16 ms, no copy),
    the other 20 from a loader watched with to=device (a 16 ms copy, not split). Every figure is a
    mean over the same 40 batches: 18 ms waited, sampling 8 ms, the copy 8 ms, next()'s 10 ms less
    the 8 ms sampled a rest of 2 ms. The copy (8 ms) is under next()'s 10: not the lever; no
    workers on 2 cores: one. (Each part's mean over only its own batches said sampling 16 ms and a
    16 ms copy, leaving next() 2 ms: work made in workers, which there were none of.)"""
    rows = planted(40, 0.010, 0.010, data_workers=0)
    for row in rows[:20]:
        row["data_sample_s"] = 0.016
    for row in rows[20:]:
        row["data_to_device_s"] = 0.016
    found = input_bound(rows, cores=2)
    assert found["words"] == (
        "step waited 18.0 ms per batch for its data against 10.0 ms per step (64 % of its loop); of it sampling "
        "8.0 ms, the copy to the device 8.0 ms, the rest 2.0 ms (the sampler's input, collation); num_workers=0 on "
        "2 core(s)")
    assert found["next"] == NEW_WORKERS.format(n="=1", why=" (2 core(s), one for the training process)",
                                               lighter="smaller fanouts in the outer hops") + RUN.format(
        wait="18.0 ms", share=64)
    assert found["evidence"] == [
        {"figure": "data_wait_s", "value": pytest.approx(0.010), "unit": "s",
         "where": "the loop's next(), timed by watch_loader, mean of 40 batches"},
        {"figure": "data_sample_s", "value": pytest.approx(0.008), "unit": "s",
         "where": "watch_loader, mean per batch (in the loader's workers where it has them)"},
        {"figure": "data_to_device_s", "value": pytest.approx(0.008), "unit": "s",
         "where": "watch_loader, mean per batch"},
    ]


def test_a_sampler_without_its_copy_names_its_rest_and_workers_already_there_get_more_of_them():
    """Sampling 20 ms of a 30 ms wait, no copy timed (the rest is the other 10 ms), one hop; 3
    workers and nothing known of the machine: more of them, the number left to the user."""
    rows = planted(40, 0.030, 0.010, data_sample_s=0.020, data_hop_0_nodes=64, data_workers=3)
    found = input_bound(rows)
    assert found["words"] == (
        "step waited 30.0 ms per batch for its data against 10.0 ms per step (75 % of its loop); of it sampling "
        "20.0 ms, the rest 10.0 ms (the sampler's input, collation); num_workers=3; nodes per hop 64")
    assert found["next"] == ("more workers (num_workers), or less work per batch: smaller fanouts in the outer hops"
                             + RUN.format(wait="30.0 ms", share=75))


def test_gnnmons_sampler_that_took_no_time_is_not_the_lever():
    """gnnmon's fallback sampler recorded, but the wait was feature gathering: with no sampling
    timed, or sampling of 0 s, pyg-lib would win nothing and is not named."""
    for sampling in ({}, {"data_sample_s": 0.0}):
        rows = planted(40, 0.030, 0.010, data_gather_s=0.025, data_sampler="gnnmon", **sampling)
        found = input_bound(rows, cores=2)
        assert "pyg-lib" not in found["words"] and "pyg-lib" not in found["next"], found
        assert found["next"].startswith("num_workers=1 in the DataLoader"), found["next"]


def test_feature_gathering_with_most_of_a_core_idle_is_told_a_worker_and_the_features_on_the_device():
    """Gathering 18 ms of a 30 ms wait (sampling 10, collation 2: 30 ms made, the wait itself, so
    no rest); no workers, and 90 % of one core idle of 2: over the 75 % a worker needs, one worker."""
    rows = planted(40, 0.030, 0.010, data_sample_s=0.010, data_gather_s=0.018, data_transform_s=0.002,
                   data_workers=0, idle_cpu_pct=90.0, others_cpu_pct=0.0)
    found = input_bound(rows, cores=2)
    assert found["words"] == (
        "step waited 30.0 ms per batch for its data against 10.0 ms per step (75 % of its loop); of it sampling "
        "10.0 ms, feature gathering 18.0 ms, transform/collation 2.0 ms; num_workers=0 on 2 core(s)")
    assert found["next"] == NEW_WORKERS.format(
        n="=1", why=" (0.9 core(s) stood idle beside the run)",
        lighter="keep the features where the step reads them (on the device: a GPU feature store), or fewer sampled "
                "nodes") + RUN.format(wait="30.0 ms", share=75)


def test_parts_made_in_workers_beyond_the_wait_and_a_heavy_transform():
    """2 workers made 50 ms a batch (collation 40, gathering 10) against a 30 ms wait: made
    partly while the step ran; 5 % of one core idle (no cores recorded): no room for a worker."""
    rows = planted(40, 0.030, 0.010, data_gather_s=0.010, data_transform_s=0.040, data_workers=2,
                   idle_cpu_pct=5.0, others_cpu_pct=0.0)
    found = input_bound(rows)
    assert found["words"] == (
        "step waited 30.0 ms per batch for its data against 10.0 ms per step (75 % of its loop); of it feature "
        "gathering 10.0 ms, transform/collation 40.0 ms (made in the loader's workers, partly while the step ran); "
        "num_workers=2")
    assert found["next"] == ("the 2 worker(s) and the training process keep the cores full (5 % of a core stood "
                             "idle): more workers cannot help here; less work per batch: a lighter transform, or one "
                             "done once (pre_transform) instead of per batch" + RUN.format(wait="30.0 ms", share=75))


def test_a_wait_of_seconds_with_more_cores_idle_than_the_process_may_use():
    """2 s waited a batch, 0.5 s of it sampling (the rest 1.5 s), 0.5 s steps; idle_cpu_pct 1200
    on a machine of which the process may use 4 cores: at most 4 idle, and 4 more workers."""
    rows = planted(10, 2.0, 0.5, data_sample_s=0.5, data_workers=1, idle_cpu_pct=1200.0, others_cpu_pct=0.0)
    found = input_bound(rows, cores=4)
    assert found["words"] == (
        "step waited 2.00 s per batch for its data against 500.0 ms per step (80 % of its loop); of it sampling "
        "500.0 ms, the rest 1.50 s (the sampler's input, collation); num_workers=1 on 4 core(s)")
    assert found["next"] == ("more workers (num_workers=5) (4.0 core(s) stood idle beside the run), or less work per "
                             "batch: smaller fanouts in the outer hops" + RUN.format(wait="2.00 s", share=80))


def test_a_plain_dataloader_with_idle_cores_is_told_their_number_of_workers():
    """No split (a plain DataLoader), no workers, 2 cores idle (idle_cpu_pct 200), cores not
    recorded: 2 workers."""
    rows = planted(40, 0.030, 0.010, data_workers=0, idle_cpu_pct=200.0, others_cpu_pct=0.0)
    found = input_bound(rows)
    assert found["words"] == (
        "step waited 30.0 ms per batch for its data against 10.0 ms per step (75 % of its loop); a plain "
        "DataLoader: its dataset's __getitem__ and collation (PyG's neighbour loaders are split); num_workers=0")
    assert found["next"] == NEW_WORKERS.format(n="=2", why=" (2.0 core(s) stood idle beside the run)",
                                               lighter="a lighter dataset __getitem__ or collation") + RUN.format(
        wait="30.0 ms", share=75)


@pytest.mark.parametrize("made, said", [(1.125, "1.12 s"), (1.375, "1.38 s")])
def test_parts_within_ten_percent_of_the_wait_are_the_wait(made, said):
    """Sampling exactly 90 % and exactly 110 % of a 1.25 s wait (8 batches: every figure exact in
    doubles, 0.9 x 1.25 = 1.125 and 1.1 x 1.25 = 1.375): the parts account for the wait, and
    neither a rest nor work made beside the step is said."""
    found = input_bound(planted(8, 1.25, 0.25, data_sample_s=made))
    assert found["words"].endswith(f"; of it sampling {said}"), found["words"]


def test_a_copy_longer_than_the_wait_in_next_leaves_no_negative_rest():
    """10 ms in next() and a 20 ms copy to the device (30 ms waited), sampling 15 ms: the parts are
    next()'s, and 15 ms made in 10 ms were made in workers beside the step; no rest (it was said
    as "-5.0 ms" when the parts were held against the wait with its copy)."""
    rows = planted(40, 0.010, 0.010, data_to_device_s=0.020, data_sample_s=0.015)
    found = input_bound(rows)
    assert found["words"] == (
        "step waited 30.0 ms per batch for its data against 10.0 ms per step (75 % of its loop); of it sampling "
        "15.0 ms, the copy to the device 20.0 ms (made in the loader's workers, partly while the step ran)")


def test_a_loader_that_waits_off_the_cpu_on_full_cores_is_told_more_workers_overlap_it():
    """The newcomer's sleeping Dataset on a busy 2-core machine: 2 workers, 20 ms waited a batch, 4
    ms steps of 4 ms CPU (cpu_s: a thread that could run got all its wall time), the process and
    its workers 20 % of a core (cpu_util_pct), others 180 %, none idle. The loop takes 24 ms a
    batch: the steps' CPU is 100 × 4 / 24 = 16.7 % of a core, so the loader's is at most 3.3 %,
    while a batch was being made at least 20 / 24 = 83 % of the time: off the CPU. A worker took
    2 × 24 = 48 ms a batch; a batch a 4 ms step takes 12 workers. (It was told "the 2 worker(s)
    and the training process keep the cores full": more workers halved the newcomer's wait.)"""
    rows = planted(40, 0.020, 0.004, cpu_s=0.004, data_workers=2, cpu_util_pct=20.0, idle_cpu_pct=0.0,
                   others_cpu_pct=180.0)
    found = input_bound(rows, cores=2)
    assert found["next"] == (
        "the loader waits off the CPU (I/O, a sleep, a lock), not for the cores: it used at most 3 % of a core while "
        "batches were being made 83 % of the time, under half what a thread that could run got (100 %); a waiting "
        "worker holds no core, so more workers overlap the wait even on full cores: num_workers=12 makes a batch a "
        "step at this pace (a batch took 48.0 ms of a worker's time, a step 4.0 ms); and a lighter dataset "
        "__getitem__ or collation" + RUN.format(wait="20.0 ms", share=83))
    assert found["evidence"][1:] == [
        {"figure": "loader CPU", "value": pytest.approx(20.0 - 100 * 4 / 24), "unit": "%",
         "where": "at most: cpu_util_pct (sampled, the process and its workers) less cpu_s in the steps, % of one "
                  "core over the loop"},
        {"figure": "loader time per batch", "value": pytest.approx(0.048), "unit": "s",
         "where": "num_workers × the loop time per batch: batches made 83 % of the loop's time at least"}]


def test_a_loader_without_workers_that_waits_off_the_cpu_is_told_workers_overlap_it():
    """No workers: the loader sleeps in next() (30 ms a batch, 10 ms steps of 10 ms CPU), the
    process 26 % of a core: its steps' 100 × 10 / 40 = 25 %, next()'s at most 1 % while next()
    made batches 75 % of the time. 30 ms a batch against 10 ms steps: 3 workers; 0.5 core idle of 2."""
    rows = planted(40, 0.030, 0.010, cpu_s=0.010, data_workers=0, cpu_util_pct=26.0, idle_cpu_pct=50.0,
                   others_cpu_pct=124.0)
    found = input_bound(rows, cores=2)
    assert found["next"].startswith(
        "the loader waits off the CPU (I/O, a sleep, a lock), not for the cores: it used at most 1 % of a core while "
        "batches were being made 75 % of the time, under half what a thread that could run got (100 %), in next(); "
        "workers overlap it with the step even on full cores, a waiting one holding no core: num_workers=3 in the "
        "DataLoader, with persistent_workers=True (a batch took 30.0 ms of a worker's time, a step 10.0 ms)"), found


@pytest.mark.parametrize("own, cpu_s, others, said", [
    (190.0, 0.004, 10.0, "the 2 worker(s) and the training process keep the cores full (0 % of a core stood idle): "
                         "more workers cannot help here"),
    (50.0, 0.002, 150.0, "the cores were full (0 % of a core stood idle), other processes taking 150 % of a core on "
                         "them (the busy machine's, not the loader's): more workers would share those cores, not add "
                         "to them; free the cores")])
def test_a_loader_that_computes_on_full_cores_is_told_whose_work_filled_them(own, cpu_s, others, said):
    """2 workers, 20 ms waited, 4 ms steps, no core idle; a batch made at least 20 / 24 = 83 % of
    the loop's time. The process and its workers took 190 %: the loader at most 190 - 16.7 % (the
    steps' 4 ms CPU in 24), over half of it: it computed, and its own work filled the cores. Or they
    took 50 % while others took 150 %, the steps computing half their wall time (cpu_s 2 ms of 4):
    the loader's 50 - 8.3 = 41.7 % is over half what a runnable thread got, 0.5 × 0.5 × 83 =
    20.8 %: it computed, on cores other processes filled."""
    rows = planted(40, 0.020, 0.004, cpu_s=cpu_s, data_workers=2, cpu_util_pct=own, idle_cpu_pct=0.0,
                   others_cpu_pct=others)
    assert input_bound(rows, cores=2)["next"].startswith(said)


def epochs(starts: list[float], **fields) -> list[dict]:
    """``len(starts)`` epochs of 21 calls of 10 ms (``epoch`` marked), the first batch of epoch k
    waiting ``starts[k]`` s, the other 20 0.4 and 0.6 ms in turn (median 0.5 ms, robust spread
    1.4826 × 0.1 ms): with ``data_workers=2`` recorded, two turns of 0.4 and 0.6 ms."""
    rows = planted(21 * len(starts), 0.0, 0.010, **fields)
    for i, row in enumerate(rows):
        row["epoch"] = i // 21
        row["data_wait_s"] = starts[i // 21] if i % 21 == 0 else (0.0004, 0.0006)[i % 21 % 2]
    return rows


def test_a_wait_at_each_epochs_first_batch_is_said_with_the_workers_start():
    """3 epochs of 21 batches, 200 ms waited at each epoch's first batch, 0.4 / 0.6 ms at the
    others (10 ms steps), 2 workers: 630 ms of steps, 600 ms at the starts and 30 ms at the rest
    (1.26 s in all; 10 ms waited a batch, 50 % of the loop). The per-batch test fails on it (of
    eight stretches, three hold a start: their spread, 3 × 4.6 ms, hides the 10 ms mean), as the
    newcomer's 135, 58, 58 ms starts went unsaid. The starts' excess over the longest-waiting turn
    of the two workers (0.6 ms), 3 × 199.4 = 598.2 ms (47.5 % of the run: said 47), is beyond its
    noise; the rest, 2.4 % of the run, is not a finding: the starts alone are at stake, 9.5 ms a
    batch."""
    from gnnmon.report.loops import cost_beyond_noise

    rows = epochs([0.200, 0.200, 0.200], data_workers=2)
    assert not cost_beyond_noise(np.array([r["data_wait_s"] for r in rows]), 1.26)
    found = input_bound(rows, cores=2)
    assert found["at_stake"] == pytest.approx(3 * 0.1994)
    assert found["words"] == (
        "step waited 10.0 ms per batch for its data against 10.0 ms per step (50 % of its loop); " + PLAIN
        + "; num_workers=2 on 2 core(s); 598.2 ms of it at 3 epoch start(s) beyond the 0.6 ms that every 2nd batch "
        "waited (the longest-waiting turn of the 2 workers) (each epoch's first batch: 200, 200, 200 ms)")
    assert found["next"] == (
        "the loader's workers start with each epoch (their start-up and first batches wait at its first batch): "
        "persistent_workers=True in the DataLoader keeps them across epochs (not recorded whether it was set; where "
        "it was, each epoch's first batch is still made only once that epoch begins)"
        + RUN.format(wait="9.5 ms", share=47))
    assert found["evidence"][-1] == {"figure": "data_wait_s at epoch starts", "value": pytest.approx(0.2),
                                     "unit": "s", "where": "the loop's next(), timed by watch_loader, each epoch's "
                                                           "first batch, mean of 3"}
    # watch_loader recorded whether the workers are kept (data_persistent): the advice says which
    kept = input_bound(epochs([0.200, 0.200, 0.200], data_workers=2, data_persistent=1), cores=2)
    assert kept["next"].startswith("the loader's workers are kept across epochs (persistent_workers=True), yet each "
                                   "epoch's first batch waits: it is made only once that epoch begins"), kept["next"]
    anew = input_bound(epochs([0.200, 0.200, 0.200], data_workers=2, data_persistent=0), cores=2)
    assert anew["next"] == ("the loader's workers start with each epoch (their start-up and first batches wait at its "
                            "first batch): persistent_workers=True in the DataLoader keeps them across epochs"
                            + RUN.format(wait="9.5 ms", share=47))
    # the start-up paid in the first epoch alone (200 ms, then 60 ms: 59.4 ms beyond the level, under half of 199.4)
    found = input_bound(epochs([0.200, 0.060, 0.060], data_workers=2), cores=2)
    assert found["at_stake"] == pytest.approx(0.1994 + 2 * 0.0594)
    assert found["next"].startswith("the workers' start-up was paid once (the first epoch's first batch waited "
                                    "200.0 ms, the later ones 60.0 ms: workers kept across epochs"), found["next"]


def test_the_input_check_that_found_nothing_is_listed_as_looked_for():
    """3 epochs whose first batches waited 0.6 ms, the others 0.4 / 0.6 ms (no excess beyond the
    noise): 31.8 ms waited over 63 batches of 661.8 ms (4.8 % of the run), no finding; the report
    lists the check, and a steady wait under 5 % of the run, 0.05 × 661.8 / 63 = 0.53 ms a batch,
    would go unsaid (its noise, 3 standard errors, is under 0.1 ms). Where it found the wait (200
    ms starts), the check is not listed."""
    report = gnnmon.Report(epochs([0.0006, 0.0006, 0.0006]))
    assert [f for f in report.diagnosis() if f["kind"] == "input-bound"] == []
    (check,) = [c for c in report.looked_for() if c.get("check") == "input"]
    assert check == {"label": "step", "check": "input", "batches": 63, "wait_s": pytest.approx(0.0318 / 63),
                     "share": pytest.approx(31.8 / 661.8), "unsaid_s": pytest.approx(0.05 * 0.6618 / 63)}
    assert ("Looked for, not found: no wait for data in step beyond its noise: 0.5 ms a batch over 63 batches (5 % of "
            "the measured time); a steady one under 0.5 ms a batch would go unsaid") in report.markdown()
    assert not [c for c in gnnmon.Report(epochs([0.2, 0.2, 0.2])).looked_for() if c.get("check") == "input"]


SLEEP = 0.100
"""The live loader's planted sleep per batch (one item a batch), s."""


class Sleeping(torch.utils.data.Dataset):
    """40 items, each read in ``SLEEP`` s of sleep (a disk read): its worker holds no core meanwhile."""

    def __len__(self) -> int:
        return 40

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(SLEEP)
        return torch.zeros(1)


def test_live_a_loader_whose_workers_sleep_is_told_that_more_workers_overlap_the_wait(tmp_path):
    """2 workers sleep 100 ms a batch (50 ms a batch between them) against 4 ms steps of CPU work,
    the load sampled every 0.1 s: the loop waits most of each 50 ms, the workers computing nearly
    nothing (a batch's hand-over, ~2 ms of CPU: 4 % of a core), under half of what a thread that
    could run got over that time even where a loaded host gives the step a third of its wall time
    (0.5 × 1/3 × 74 % = 12 %): the finding says the loader waits off the CPU. A worker's time a
    batch, as the finding reads it (workers × the loop's time a batch), is at least the planted 100
    ms less what the rows leave out between batches (the loop's span less its calls and waits, ×
    workers / batches): 40 batches need 20 sleeps of 100 ms from each worker."""
    loader = torch.utils.data.DataLoader(Sleeping(), batch_size=1, num_workers=2)

    @gnnmon.cuda_timed
    def step(batch: torch.Tensor) -> None:
        end = time.thread_time() + 0.004
        while time.thread_time() < end:
            pass

    with gnnmon.collect(tmp_path / "run.jsonl", sample=0.1) as run:
        for batch in gnnmon.watch_loader(loader):
            step(batch)
    report = run.report()
    found = [f for f in report.diagnosis() if f["kind"] == "input-bound"]
    if not found:
        pytest.skip(f"the host held the steps as long as the loader's pace: no wait to judge ({report.diagnosis()})")
    (found,) = found
    part = report.table.parts["step"]
    share = float(np.median(part.numbers("cpu_s")) / np.median(part.numbers("wall_s")))
    if share < 1 / 3:  # the margin above holds down to a third: a host this loaded may starve the workers too
        pytest.skip(f"the host gave the step {share:.0%} of its wall time (under a third): the workers' share "
                    "cannot tell their sleep from a wait for a core here")
    assert found["next"].startswith("the loader waits off the CPU (I/O, a sleep, a lock), not for the cores"), found
    per_batch = {e["figure"]: e["value"] for e in found["evidence"]}["loader time per batch"]
    start, end, wall, wait = (part.numbers(f) for f in ("t_start_ns", "t_end_ns", "wall_s", "data_wait_s"))
    left_out = (end[-1] - start[0]) / 1e9 + wait[0] - float(np.sum(wall + wait))
    assert per_batch >= SLEEP - 2 * left_out / part.n, (per_batch, left_out)

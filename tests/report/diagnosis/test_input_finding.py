"""The input-bound finding as its user reads it (planted in rows, every figure a constant of the
plant): what the wait was made of (the loader's parts, the rest, the copy, the nodes per hop),
the evidence behind each figure, and the one lever its next step names — pyg-lib for gnnmon's
fallback sampler, pinned memory for a batch that is mostly its copy, more workers only where cores
stood idle (as many as they allow, at most 4 more), else less work per batch in the part that made
most of it. The sentences are compared whole: a figure, a unit or a lever said wrongly is a wrong
answer to the user."""

from __future__ import annotations

import pytest

import gnnmon

RUN = " — at most {wait} a batch to win ({share} % of the run): data_wait_s in the next run says how much was"
"""How every next step ends: the wait per batch the plant made, and its share of the run's time."""

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


def test_feature_gathering_on_full_cores_is_told_to_keep_the_features_on_the_device():
    """Gathering 18 ms of a 30 ms wait (sampling 10, collation 2: 30 ms made, the wait itself, so
    no rest); no workers, and 90 % of one core idle of 2: not a core for a worker."""
    rows = planted(40, 0.030, 0.010, data_sample_s=0.010, data_gather_s=0.018, data_transform_s=0.002,
                   data_workers=0, idle_cpu_pct=90.0, others_cpu_pct=0.0)
    found = input_bound(rows, cores=2)
    assert found["words"] == (
        "step waited 30.0 ms per batch for its data against 10.0 ms per step (75 % of its loop); of it sampling "
        "10.0 ms, feature gathering 18.0 ms, transform/collation 2.0 ms; num_workers=0 on 2 core(s)")
    assert found["next"] == ("the training process keeps the cores full (90 % of a core stood idle): more workers "
                             "cannot help here; less work per batch: keep the features where the step reads them (on "
                             "the device: a GPU feature store), or fewer sampled nodes"
                             + RUN.format(wait="30.0 ms", share=75))


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

"""A leak is growth that goes on: planted end-of-call memory across epochs, with noise drawn from a
known spread and batch shapes that vary within each epoch. A cache that fills in epoch 0 and stays,
a plateau (the issue's eight epochs of a GraphSAGE run), a fall, and two epochs of growth are not
called a leak; a planted leak is, at its slope, from the epoch it started."""

from __future__ import annotations

import numpy as np

import gnnmon

MiB = 2**20
STEPS = 40
PER_NODE = 1024  # bytes a call holds at its end per node of its batch


def rows(levels_mib: list[float], leak_mib: float = 0.0, leak_from: int = 0, fill_mib: float = 0.0,
         noise_mib: float = 2.0, seed: int = 0) -> list[dict]:
    """STEPS calls an epoch: memory at a call's end = the epoch's planted level + PER_NODE·nodes +
    ``leak_mib`` per epoch from epoch ``leak_from`` (growing call by call) + a cache of ``fill_mib``
    that fills over epoch 0's calls and stays, + normal noise of ``noise_mib``."""
    rng = np.random.default_rng(seed)
    out, t = [], 0
    for e, level in enumerate(levels_mib):
        for k in range(STEPS):
            tau = e + k / STEPS
            nodes = int(rng.integers(5_000, 15_000))
            held = level * MiB + PER_NODE * nodes + rng.normal(0, noise_mib * MiB)
            held += leak_mib * MiB * max(0.0, tau - leak_from)
            held += fill_mib * MiB * min(1.0, tau)
            out.append({"label": "step", "index": e * STEPS + k, "epoch": e, "num_nodes": nodes,
                        "t_start_ns": t, "t_end_ns": t + 10_000_000, "wall_s": 0.01, "mem_end_bytes": int(held)})
            t += 11_000_000
    return out


def kinds(found: list[dict]) -> dict[str, dict]:
    return {f["kind"]: f for f in found if f["kind"] in ("leak", "creep")}


def test_a_planted_leak_is_called_one_at_its_slope_from_its_first_epoch():
    found = kinds(gnnmon.Report(rows([500] * 6, leak_mib=16.4)).diagnosis())
    leak = found["leak"]
    low, high = leak["rate_interval"]
    rate = (low + high) / 2
    print(leak["words"])
    assert abs(rate / (16.4 * MiB) - 1) < 0.10 and low < 16.4 * MiB < high, leak["rate_interval"]
    assert leak["since_epoch"] == 0 and "from epoch 0 to the last" in leak["words"]


def test_a_cache_that_fills_in_epoch_0_and_stays_is_not_a_leak_and_does_not_hide_one():
    filled = kinds(gnnmon.Report(rows([500] * 6, fill_mib=200)).diagnosis())
    assert "leak" not in filled, filled["leak"]["words"]
    both = kinds(gnnmon.Report(rows([500] * 6, fill_mib=200, leak_mib=16.4)).diagnosis())
    low, high = both["leak"]["rate_interval"]
    assert abs((low + high) / 2 / (16.4 * MiB) - 1) < 0.10, both["leak"]["words"]
    assert both["leak"]["since_epoch"] == 1  # epoch 0 is the cache filling: the steady growth is from epoch 1


def test_a_leak_that_starts_late_says_where_it_started():
    leak = kinds(gnnmon.Report(rows([500] * 8, leak_mib=20, leak_from=3)).diagnosis())["leak"]
    # the fit's epoch: the first wholly on the slope at most one late
    assert leak["since_epoch"] in (3, 4), leak["words"]
    low, high = leak["rate_interval"]
    assert abs((low + high) / 2 / (20 * MiB) - 1) < 0.10


def test_a_plateau_is_not_a_leak():
    """Epoch levels of the issue's GraphSAGE run (num_workers=2): 641, 758, 804, 859, 898, 850, 850,
    821 MiB: growth that levelled off by epoch 4, then fell."""
    found = kinds(gnnmon.Report(rows([641, 758, 804, 859, 898, 850, 850, 821], noise_mib=8)).diagnosis())
    assert "leak" not in found, found["leak"]["words"]


def test_memory_that_falls_is_not_a_leak():
    found = kinds(gnnmon.Report(rows([639, 600])).diagnosis())
    assert not found, found


def test_two_epochs_of_growth_say_they_are_too_few_to_tell():
    found = kinds(gnnmon.Report(rows([500, 600])).diagnosis())
    assert "leak" not in found
    creep = found["creep"]
    assert "too few epochs to tell a leak" in creep["words"] and "4 epochs or more" in creep["next"], creep


def test_batches_that_grow_are_bigger_graphs():
    grown = rows([500] * 5)
    for r in grown:  # every epoch's batches twice the size of the one before... within-epoch spread kept
        r["num_nodes"] *= 2 ** r["epoch"]
        r["mem_end_bytes"] = int(500 * MiB + PER_NODE * r["num_nodes"])
    found = kinds(gnnmon.Report(grown).diagnosis())
    assert "leak" not in found and "explained by bigger graphs" in found["creep"]["words"], found


def shaped(epochs: int, within, noise_mib: float = 2.0, seed: int = 0, figure: str = "mem_end_bytes",
           leak_mib: float = 0.0) -> list[dict]:
    """STEPS calls an epoch at 500 MiB + ``within(k)`` MiB at the epoch's k-th call (a shape repeated
    every epoch) + ``leak_mib`` per epoch from epoch 0, call by call, + normal noise; no batch shapes."""
    rng = np.random.default_rng(seed)
    out, t = [], 0
    for e in range(epochs):
        for k in range(STEPS):
            held = (500 + within(e, k) + leak_mib * (e + k / STEPS)) * MiB + rng.normal(0, noise_mib * MiB)
            out.append({"label": "step", "index": e * STEPS + k, "epoch": e, "t_start_ns": t,
                        "t_end_ns": t + 10_000_000, "wall_s": 0.01, figure: int(held)})
            t += 11_000_000
    return out


def test_a_sawtooth_that_falls_back_every_epoch_is_not_a_leak():
    """+60 MiB ramped within each epoch, freed at its end (the issue's planted run, which read
    "leak 3.61 MiB per epoch" at 6 and 8 epochs)."""
    for epochs in (6, 8, 10):
        found = kinds(gnnmon.Report(shaped(epochs, lambda e, k: 60 * k / STEPS)).diagnosis())
        assert "leak" not in found, (epochs, found["leak"]["words"])


def test_workers_forked_anew_each_epoch_are_not_a_leak():
    """The workers' RSS climbs 300 → 500 MiB within each epoch and starts again at the next."""
    for epochs in (4, 6, 8):
        rows_ = shaped(epochs, lambda e, k: -200 + 200 * k / STEPS, figure="workers_rss_bytes")
        found = kinds(gnnmon.Report(rows_).diagnosis())
        assert "leak" not in found, (epochs, found["leak"]["words"])


def test_one_step_up_then_flat_is_not_a_leak():
    """64 MiB allocated once, mid epoch 0, and held: the issue's run read "18 MiB per epoch"."""
    found = kinds(gnnmon.Report(shaped(4, lambda e, k: 64 if (e, k) >= (0, STEPS // 2) else 0)).diagnosis())
    assert "leak" not in found, found["leak"]["words"]


def test_a_leak_on_the_hosts_rss_is_bounded_with_its_resolution_and_its_start_is_right():
    """38.1 MiB per epoch from epoch 0 on a CPU step's RSS (the issue's real leak read 41.8 with an
    interval that missed it, "from epoch 2"): Theil-Sen's interval, widened by the host's
    resolution on the recording machine (2 CPUs: 1.75 MiB), holds the planted rate."""
    rows_ = shaped(8, lambda e, k: 0.0, leak_mib=38.1)
    for r in rows_:
        r["device"] = "cpu"
    report = gnnmon.Report(rows_, manifest={"devices": {"cpu_count": 2, "cpu_usable": 2}})
    leak = kinds(report.diagnosis())["leak"]
    low, high = leak["rate_interval"]
    assert low < 38.1 * MiB < high and leak["since_epoch"] == 0, leak["words"]


def test_no_leak_says_what_could_hide_and_leaks_that_large_are_found():
    """A run with no leak states the largest one that would go unsaid (said 19 times in 20: here the
    least worth saying, 5 % of 500 MiB over 7 epochs, beyond its noise); planted at that rate (40
    seeds) a leak is found in at least 34 (under the stated 95 %, a count of 33 or fewer has a
    chance of 1.4 %), at 3x in all 40, each with an interval that holds the planted rate and the
    right first epoch."""
    quiet = gnnmon.Report(shaped(8, lambda e, k: 0.0))
    assert not kinds(quiet.diagnosis())
    (said,) = quiet.looked_for()
    bound = said["unsaid_bytes_per_epoch"]
    assert said["epochs"] == 8 and 0 < said["hidden_bytes_per_epoch"] < 25 * MiB / 7 < bound < 5 * MiB, said
    assert "no leak in mem_end_bytes of step over 8 epochs: one under" in quiet.markdown()
    for times, least in ((1, 34), (3, 40)):
        found = covered = 0
        for seed in range(1, 41):
            leak = kinds(gnnmon.Report(shaped(8, lambda e, k: 0.0, seed=seed, leak_mib=times * bound / MiB))
                         .diagnosis()).get("leak")
            if leak:
                found += 1
                low, high = leak["rate_interval"]
                covered += low < times * bound < high and leak["since_epoch"] == 0
        assert found >= least and covered >= found - 2, (times, found, covered)

"""The leak finding's parts on planted epoch levels (``gnnmon/report/diagnosis/creep.py``): end-of-call
memory rows whose every term is chosen (each epoch's level, bytes per node and per edge of the
batch, a ramp within each epoch, a wobble of chosen spread), so each epoch's level, the shapes'
coefficients, the noise, where growth starts and the findings' words and figures are known before
the code reads them. The statistics (Kendall's tau, Theil-Sen, the quadratic term's t test, the
hidden bound) are checked against scipy and numpy computed here from the same levels."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

import gnnmon
from gnnmon.data.table import Table
from gnnmon.report.diagnosis import creep
from gnnmon.report.loops import WARMUP, Loop
from gnnmon.report.memory.model import format_bytes, host_resolution

MiB = 2**20
STEPS = 40
"""Calls an epoch: a multiple of 4, so the wobble's pattern fills every epoch."""
PER_NODE = 1024
PER_EDGE = 256
HOST = host_resolution(2, 2)
"""What the host's RSS cannot resolve on a 2-CPU machine (1.75 MiB): its levels' noise is at least
half of it, and a leak's interval is widened by it over the epochs."""
MANIFEST = {"devices": {"cpu_count": 2, "cpu_usable": 2}}
WOBBLE = (1, -1, -1, 1)
"""A call's wobble, in units of its spread, by its place in the epoch modulo 4: its sum and its trend
over every four calls are 0, so no fit within an epoch moves with it, and a trimmed mean cuts as many
calls above as below."""
OTHER = (1, -3, 3, -1)
"""A second pattern, apart from the wobble's (their products sum to 0 over four calls), with no sum
and no trend either: a shape varying so within epochs is told from one varying as the wobble."""
LEAK_NEXT = ("look for what outlives a step: a list or dict the loop appends tensors to (loss instead of loss.item()), "
             "a cache keyed by batch, hooks that keep their inputs")


def plant(levels: list[float], *, nodes=None, edges=None, ramp: float = 0.0, wobble: float = 0.0,
          figure: str = "mem_end_bytes", device: str | None = None, epochs: list[float] | None = None,
          calls: int = STEPS, per_node: float = PER_NODE, per_edge: float = PER_EDGE) -> list[dict]:
    """``calls`` calls an epoch, after the run's :data:`WARMUP` (their indexes start there): memory at
    a call's end = the epoch's level (bytes) + ``per_node``·``nodes(e, k)`` + ``per_edge``·``edges(e, k)`` +
    ``ramp``·k/calls (allocated call by call within the epoch, freed at its end) + the wobble of
    spread ``wobble`` (bytes); ``epochs``: the epochs' numbers (0, 1, ... unless given)."""
    out, t = [], 0
    for e, level in enumerate(levels):
        for k in range(calls):
            held = level + ramp * k / calls + wobble * WOBBLE[k % 4]
            row = {"label": "step", "index": WARMUP + len(out), "epoch": e if epochs is None else epochs[e],
                   "t_start_ns": t, "t_end_ns": t + 10_000_000, "wall_s": 0.01}
            if nodes is not None:
                row["num_nodes"] = nodes(e, k)
                held += per_node * row["num_nodes"]
            if edges is not None:
                row["num_edges"] = edges(e, k)
                held += per_edge * row["num_edges"]
            if device is not None:
                row["device"] = device
            row[figure] = float(held)
            out.append(row)
            t += 11_000_000
    return out


def loop_of(rows: list[dict]) -> Loop:
    (label,) = {r["label"] for r in rows}
    return Loop(label, Table(rows).parts[label])


def scattered(e: int, k: int, seed: int = 0) -> int:
    """A batch's nodes: 5,000 to 15,000, drawn (seeded) anew for every call."""
    return int(np.random.default_rng((seed, e, k)).integers(5_000, 15_000))


def robust_spread(values: np.ndarray) -> float:
    return 1.4826 * float(np.median(np.abs(values - np.median(values))))


def growth(found: list[dict]) -> list[dict]:
    return [f for f in found if f["kind"] in ("leak", "creep")]


def evidence(figure, value, unit, where) -> dict:
    return {"figure": figure, "value": value, "unit": unit, "where": where}


# Levels: each epoch's level, the shapes' coefficients, the noise


def test_each_epochs_level_has_the_shapes_and_the_ramp_taken_out_and_is_read_at_its_centre():
    """Levels 500, 510, 505, 520, 515 MiB, 1 KiB a node and 256 B an edge of batches drawn anew
    each call, and 30 MiB allocated over each epoch and freed at its end: the fit within epochs gives
    the planted bytes per node and per edge, and each level is the planted one plus the ramp at the
    epoch's centre (call 19.5 of 40)."""
    planted = [500 * MiB, 510 * MiB, 505 * MiB, 520 * MiB, 515 * MiB]
    rows = plant(planted, nodes=scattered, edges=lambda e, k: 3 * scattered(e, k) + (k * 7919) % 5000, ramp=30 * MiB)
    lv = creep.Levels(loop_of(rows), "mem_end_bytes", 0.0)
    assert lv.terms == ["num_nodes", "num_edges"] and lv.together == []
    assert lv.coefficients == pytest.approx([PER_NODE, PER_EDGE], abs=1e-6)
    centre = (STEPS - 1) / (2 * STEPS)
    assert lv.levels == pytest.approx(np.array(planted) + 30 * MiB * centre, abs=1e-3)
    assert list(lv.epochs) == [0, 1, 2, 3, 4] and lv.calls == 5 * STEPS and lv.figure == "mem_end_bytes"
    first = [r for r in rows if r["epoch"] == 0]
    last = [r for r in rows if r["epoch"] == 4]
    def held_by_shapes(calls: list[dict]) -> float:
        return PER_NODE * np.mean([r["num_nodes"] for r in calls]) + PER_EDGE * np.mean([r["num_edges"] for r in calls])
    assert lv.explained == pytest.approx(held_by_shapes(last) - held_by_shapes(first), abs=1e-2)
    assert lv.first == np.median([r["mem_end_bytes"] for r in first])
    assert lv.last == np.median([r["mem_end_bytes"] for r in last])
    # calls alike within epochs (a sampled figure): the noise is the levels' steps' robust spread / √2
    assert lv.noise == pytest.approx(robust_spread(np.diff(planted)) / math.sqrt(2), rel=1e-9)


def test_the_runs_warm_up_calls_are_left_out_and_their_epoch_read_at_its_centre():
    """Epoch 0 has 42 calls, the run's first WARMUP of them (index 0 and 1) 2 GiB higher (the
    allocator's warm-up); 30 MiB is allocated over each epoch, call by call: neither the fit nor the
    calls counted see the warm-up, and epoch 0's level is still read at the centre of all its calls
    (call 20.5 of 42), the others' at call 19.5 of 40."""
    planted = [500 * MiB, 520 * MiB, 510 * MiB, 530 * MiB]
    ramp = 30 * MiB
    first = plant(planted[:1], nodes=scattered, ramp=ramp, calls=STEPS + WARMUP)
    for r in first:
        r["index"] -= WARMUP
        r["mem_end_bytes"] += 2048 * MiB if r["index"] < WARMUP else 0
    rest = plant(planted[1:], nodes=scattered, ramp=ramp, epochs=[1, 2, 3])
    for r in rest:
        r["index"] += STEPS
    lv = creep.Levels(loop_of(first + rest), "mem_end_bytes", 0.0)
    assert lv.coefficients == pytest.approx([PER_NODE], abs=1e-6) and lv.calls == 4 * STEPS
    centres = [(STEPS + WARMUP - 1) / (2 * (STEPS + WARMUP))] + [(STEPS - 1) / (2 * STEPS)] * 3
    assert lv.levels == pytest.approx(np.array(planted) + ramp * np.array(centres), abs=1e-3)
    assert lv.first == np.median([r["mem_end_bytes"] for r in first[WARMUP:]])


def test_calls_without_the_figure_an_epoch_or_a_shape_are_left_out():
    """Calls before the first epoch mark, calls that recorded no memory and calls whose batch has no
    shape hold 1 GiB more: the levels and the calls counted are the planted ones'."""
    planted = [500 * MiB, 520 * MiB, 510 * MiB, 530 * MiB]
    rows = plant(planted, nodes=scattered)
    odd = [{k: v for k, v in dict(rows[i], mem_end_bytes=1024 * MiB).items() if k != drop}
           for i, drop in ((3, "epoch"), (50, "num_nodes"), (90, "mem_end_bytes"))]
    lv = creep.Levels(loop_of(rows + odd), "mem_end_bytes", 0.0)
    assert lv.calls == 4 * STEPS and lv.levels == pytest.approx(planted, abs=1e-3)
    assert lv.coefficients == pytest.approx([PER_NODE], abs=1e-6)


def test_a_spike_in_a_few_calls_does_not_move_the_level():
    """Two calls of each epoch (the 6th and the 6th from the end: no trend within the epoch) hold
    1 GiB more: the level is the 10 %-trimmed mean, the planted level, where the mean would move by
    51 MiB."""
    planted = [500 * MiB, 520 * MiB, 510 * MiB, 530 * MiB]
    rows = plant(planted)
    for r in rows:
        if (r["index"] - WARMUP) % STEPS in (5, STEPS - 6):
            r["mem_end_bytes"] += 1024 * MiB
    lv = creep.Levels(loop_of(rows), "mem_end_bytes", 0.0)
    assert lv.levels == pytest.approx(planted, abs=1e-3)


def test_the_noise_is_the_calls_wobble_over_their_number_with_the_hosts_resolution():
    """Flat levels, each call wobbling ±1 MiB: the noise of a level is TRIMMED_SE × the robust spread
    of neighbouring calls' differences / √2 / √calls; on the host's RSS, combined with half its
    resolution."""
    rows = plant([500 * MiB] * 5, wobble=MiB)
    pattern = np.array([WOBBLE[k % 4] * MiB for k in range(STEPS)], dtype=float)
    own = creep.TRIMMED_SE * robust_spread(np.diff(pattern)) / math.sqrt(2) / math.sqrt(STEPS)
    assert own == pytest.approx(creep.TRIMMED_SE * 1.4826 * 2 * MiB / math.sqrt(2 * STEPS))
    device = creep.Levels(loop_of(rows), "mem_end_bytes", 0.0)
    assert device.noise == pytest.approx(own, rel=1e-9) and device.levels == pytest.approx([500 * MiB] * 5, abs=1e-3)
    host = creep.Levels(loop_of(rows), "mem_end_bytes", HOST)
    assert host.noise == pytest.approx(math.hypot(own, HOST / 2), rel=1e-9) and host.resolution == HOST


def test_three_calls_an_epoch_give_their_own_noise():
    """Epochs of three calls, wobbling 1 MiB × (1, -2, 1) (no sum, no trend): each epoch's noise is
    read from its two differences (±3 MiB)."""
    rows = plant([500 * MiB] * 5, calls=3)
    for r in rows:
        r["mem_end_bytes"] += MiB * (1, -2, 1)[(r["index"] - WARMUP) % 3]
    lv = creep.Levels(loop_of(rows), "mem_end_bytes", 0.0)
    expected = creep.TRIMMED_SE * robust_spread(np.array([-3.0, 3.0]) * MiB) / math.sqrt(2) / math.sqrt(3)
    assert lv.noise == pytest.approx(expected, rel=1e-9) and lv.levels == pytest.approx([500 * MiB] * 5, abs=1e-3)


def test_one_call_an_epoch_is_its_level_and_the_levels_steps_its_noise():
    """An evaluation called once an epoch (after the run's warm-up calls), 16 MiB more each epoch
    with a jitter of up to 1 MiB: each level is its call, nothing within an epoch to fit, the noise
    is the steps' robust spread / √2, and the leak is said; on an exact line, the noise is none; with
    the warm-up calls marked in epoch 0, its level is its one steady call."""
    jitter = [0, 1, -1, 0.5, -0.5, 0, 1, -1]
    planted = [500 * MiB + 16 * MiB * e + j * MiB for e, j in enumerate(jitter)]
    rows = plant(planted, calls=1, device="cuda:0")
    lv = creep.Levels(loop_of(rows), "mem_end_bytes", 0.0)
    assert list(lv.levels) == planted and lv.terms == lv.together == lv.coefficients == []
    assert lv.noise == pytest.approx(robust_spread(np.diff(planted)) / math.sqrt(2), rel=1e-9)
    (leak,) = said(rows)
    assert leak["kind"] == "leak" and leak["since_epoch"] == 0
    line = creep.Levels(loop_of(plant([500 * MiB + 16 * MiB * e for e in range(8)], calls=1)), "mem_end_bytes", 0.0)
    assert line.noise == 0.0
    # the run's warm-up calls marked in epoch 0 (2 GiB higher): its level is still its one steady call
    warm = [dict(rows[0], index=i, mem_end_bytes=2048.0 * MiB) for i in range(WARMUP)]
    assert creep.Levels(loop_of(warm + rows), "mem_end_bytes", 0.0).levels == pytest.approx(planted, abs=1e-6)
    # a full batch that grows each epoch (a graph that grows) cannot vary within one: said to have
    # grown with time, not fitted
    grown = creep.Levels(loop_of(plant(planted, calls=1, nodes=lambda e, k: 10_000 + 500 * e)), "mem_end_bytes", 0.0)
    assert grown.together == ["num_nodes"] and grown.terms == []


def test_a_ramp_within_epochs_is_not_noise():
    """60 MiB allocated over each epoch and freed at its end (a sawtooth): its calls' differences are
    alike, so the levels' noise is the wobble's alone."""
    rows = plant([500 * MiB] * 5, wobble=MiB, ramp=60 * MiB)
    flat = creep.Levels(loop_of(plant([500 * MiB] * 5, wobble=MiB)), "mem_end_bytes", 0.0)
    lv = creep.Levels(loop_of(rows), "mem_end_bytes", 0.0)
    assert lv.noise == pytest.approx(flat.noise, rel=1e-6)


def test_levels_steps_make_the_noise_only_from_three_steps():
    """Three epochs alike within (no wobble) at 500, 510 and 505 MiB: two steps are too few to
    judge their scatter, so no noise; a fourth epoch at 520 MiB gives it."""
    three = creep.Levels(loop_of(plant([500 * MiB, 510 * MiB, 505 * MiB])), "mem_end_bytes", 0.0)
    assert three.noise < 1e-3
    four = creep.Levels(loop_of(plant([500 * MiB, 510 * MiB, 505 * MiB, 520 * MiB])), "mem_end_bytes", 0.0)
    assert four.noise == pytest.approx(robust_spread(np.array([10, -5, 15]) * MiB) / math.sqrt(2), rel=1e-9)


def test_which_shapes_are_fitted():
    """A shape is fitted where it varies within epochs: not where it takes under 3 values (a constant
    or two sizes), and where over 0.95² of its variance is between epochs it is said to have grown
    with time instead. num_nodes: epoch means 10,000 apart, 1,000 × OTHER within (2.5 % of its
    variance within: grown together); num_edges: epoch means 20,000 apart, ±1,000 within (together too) or
    ±10,500 within (a share of 0.12 within, over 1 - 0.95² = 0.0975: fitted, at 256 B an edge, and 0 B
    an edge of the previous call's batch). The nodes hold no memory here: the memory of a shape that is
    not fitted stays in the calls, and its wobble within epochs (OTHER) is not apart from the previous
    call's edges (WOBBLE one call on, and the epoch's first call holding the last epoch's edges)."""
    for within, fitted in ((1_000, False), (10_500, True)):
        rows = plant([500 * MiB] * 5, nodes=lambda e, k: 10_000 * (e + 1) + 1_000 * OTHER[k % 4],
                     edges=lambda e, k, w=within: 20_000 * (e + 1) + w * WOBBLE[k % 4], per_node=0)
        edges = np.array([r["num_edges"] for r in rows], dtype=float)
        share = within ** 2 / np.var(edges)
        assert bool(share > 1 - creep.TOGETHER ** 2) is fitted and 0.001 < share < 0.13, share
        lv = creep.Levels(loop_of(rows), "mem_end_bytes", 0.0)
        assert lv.together == (["num_nodes"] if fitted else ["num_nodes", "num_edges"])
        assert lv.terms == (["num_edges"] if fitted else [])
        assert lv.coefficients == pytest.approx([PER_EDGE] if fitted else [], abs=1e-6)
        assert lv.held == pytest.approx([0.0] if fitted else [], abs=1e-6)
    # three sizes are fitted however little they differ (a node either way)
    for values, fitted in (([7_000, 9_000], False), ([7_000, 8_000, 9_000], True), ([1_000, 1_001, 1_002], True)):
        rows = plant([500 * MiB] * 4, nodes=lambda e, k, v=values: v[k % len(v)])
        lv = creep.Levels(loop_of(rows), "mem_end_bytes", 0.0)
        assert lv.terms == (["num_nodes"] if fitted else []) and lv.together == [], values
        assert lv.coefficients == pytest.approx([PER_NODE] if fitted else [], abs=1e-6)
        assert lv.levels == pytest.approx([500 * MiB + (PER_NODE * np.mean(values) if not fitted else 0)] * 4, abs=1e-3)
    # a constant shape is not fitted, and the edges after it are judged still
    lv = creep.Levels(loop_of(plant([500 * MiB] * 4, nodes=lambda e, k: 7_000, edges=scattered)), "mem_end_bytes", 0.0)
    assert lv.terms == ["num_edges"] and lv.coefficients == pytest.approx([PER_EDGE], abs=1e-6)


# Where growth starts


def line_misfit(levels: np.ndarray, k: int) -> float:
    """The squared misfit of ``levels`` held flat before ``k`` and on their least-squares line from it."""
    before, after = levels[:k], levels[k:]
    out = float(np.sum((before - np.mean(before)) ** 2)) if k else 0.0
    x = np.arange(after.size)
    return out + float(np.sum((after - np.polyval(np.polyfit(x, after, 1), x)) ** 2))


def test_growth_starts_at_the_earliest_split_within_the_noise_of_the_best():
    """Four flat epochs, then 20 MiB more an epoch: growth starts at epoch 3 (the line's first point)
    where the levels' noise is next to none (a resolution of 1 KiB); where the resolution makes 3 ×
    their noise cover the misfit of starting at epoch 2 (and not at 1), it starts at 2."""
    planted = np.array([500.0] * 4 + [520.0, 540.0, 560.0, 580.0]) * MiB
    rows = plant(list(planted))
    assert creep.Levels(loop_of(rows), "mem_end_bytes", 1024.0).start() == 3
    at_2, at_1 = line_misfit(planted, 2), line_misfit(planted, 1)
    resolution = 2 * math.sqrt(at_2) / 3 * 1.01  # noise = resolution / 2: 3 × it just over the misfit at 2
    assert creep.NOISE_K ** 2 * (resolution / 2) ** 2 < at_1
    assert creep.Levels(loop_of(rows), "mem_end_bytes", resolution).start() == 2
    assert creep.Levels(loop_of(rows), "mem_end_bytes", 100 * MiB).start() == 0  # all within the noise


def test_growth_from_the_first_epoch_starts_there_however_small_the_noise():
    """A leak of 16 MiB an epoch from epoch 0, its levels resolved to a tenth of a byte: no flat part,
    so nothing to misfit before it; and no warning from the empty flat part on the way."""
    rows = plant([500 * MiB + 16 * MiB * e for e in range(6)], device="cuda:0")
    lv = creep.Levels(loop_of(rows), "mem_end_bytes", 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lv.start() == 0


def test_three_levels_start_at_the_first():
    """Flat, flat, +40 MiB: with three levels no split leaves three after it but the first."""
    assert creep.Levels(loop_of(plant([500 * MiB, 500 * MiB, 540 * MiB])), "mem_end_bytes", 1024.0).start() == 0


def test_growth_starts_where_three_levels_or_more_are_left_for_its_line():
    """Five flat epochs, then +20 and +60 MiB: two levels always lie on a line, so the split is
    chosen among those that leave three or more after it."""
    planted = np.array([500.0] * 5 + [520.0, 560.0]) * MiB
    lv = creep.Levels(loop_of(plant(list(planted))), "mem_end_bytes", 0.0)
    misfits = [line_misfit(planted, k) for k in range(planted.size - 2)]
    assert lv.start() == int(np.argmin(misfits)) <= planted.size - 3


# The statistics, against scipy computed here


def quadratic_p(levels: np.ndarray, noise: float) -> float:
    """The one-sided p-value of the quadratic term of ``levels`` against epoch (Student's t, its error
    from the scatter about the curve or ``noise``, whichever is wider)."""
    n = levels.size
    x = np.arange(n) - (n - 1) / 2
    coef, unscaled = np.polyfit(x, levels, 2, cov="unscaled")
    scatter = float(np.sum((levels - np.polyval(coef, x)) ** 2)) / (n - 3)
    return float(stats.t.cdf(coef[0] / math.sqrt(max(scatter, noise ** 2) * unscaled[0, 0]), n - 3))


def test_levelling_off_is_a_quadratic_term_significantly_below_zero():
    e = np.arange(8, dtype=float)
    rises_and_levels = 500 + 100 * np.sqrt(e) + np.array([0.3, -0.2, 0.1, -0.4, 0.2, 0.0, -0.1, 0.3])
    straight = 500 + 10 * e + np.array([0.5, -1.0, 1.5, -0.5, 1.0, -1.5, 0.5, -0.5])
    speeds_up = 500 + e ** 2 + np.array([0.5, -1.0, 1.5, -0.5, 1.0, -1.5, 0.5, -0.5])
    assert quadratic_p(rises_and_levels, 0.0) < creep.P_LEVELS_OFF and creep.levelling_off(rises_and_levels)
    assert quadratic_p(straight, 0.0) > creep.P_LEVELS_OFF and not creep.levelling_off(straight)
    assert not creep.levelling_off(speeds_up)
    # the same curve within a noise of 20 (MiB) is not significant: the levels' own scatter is narrower
    assert quadratic_p(rises_and_levels, 20.0) > creep.P_LEVELS_OFF and not creep.levelling_off(rises_and_levels, 20.0)
    # at the edge: the noise at which its p-value is 0.01 (found here by bisection)
    low, high = 0.0, 20.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if quadratic_p(rises_and_levels, mid) < creep.P_LEVELS_OFF else (low, mid)
    assert creep.levelling_off(rises_and_levels, low * 0.999)
    assert not creep.levelling_off(rises_and_levels, high * 1.001)
    # four levels are the fewest with a scatter about a curve: three that level off are not judged
    four = np.array([0.0, 60, 100, 120.01])
    assert quadratic_p(four, 0.0) < creep.P_LEVELS_OFF and creep.levelling_off(four)
    assert not creep.levelling_off(four[1:])
    # levels exactly on a curve that levels off (no scatter, no noise), and levels that did not move:
    # judged by the curve's sign alone, with no division by their naught scatter
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert creep.levelling_off(np.array([0.0, 6.5, 12.0, 16.5]))
        assert not creep.levelling_off(np.zeros(4))


def test_trend_p_is_kendalls_one_sided_p_value():
    for levels in ([1.0, 2, 3], [3.0, 1, 2, 5, 4], [1.0, 3, 2, 5, 4, 7, 6, 8], [8.0, 6, 7, 5, 4]):
        expected = stats.kendalltau(np.arange(len(levels)), levels, alternative="greater").pvalue
        assert creep.trend_p(np.array(levels)) == pytest.approx(expected, rel=1e-12)
    assert creep.trend_p(np.array([1.0, 2, 3])) == pytest.approx(1 / 6)  # 1 ordering of 6 as far up
    assert creep.trend_p(np.array([1.0, 2])) == 1.0 and creep.trend_p(np.array([5.0] * 6)) == 1.0


def test_rate_is_theil_sens_slope_with_its_interval_widened_by_the_resolution():
    levels = np.array([500.0, 517, 529, 551, 563, 580, 598]) * MiB
    slope, _, low, high = stats.theilslopes(levels, np.arange(7.0), alpha=0.95)
    assert creep.rate(levels, 0.0) == pytest.approx((slope, low, high), rel=1e-12)
    assert creep.rate(levels, HOST) == pytest.approx((slope, low - HOST / 6, high + HOST / 6), rel=1e-12)
    # two levels: one step, which the resolution tilts by all of itself
    two = np.array([500.0, 520.0]) * MiB
    assert creep.rate(two, HOST) == pytest.approx((20 * MiB, 20 * MiB - HOST, 20 * MiB + HOST))


def test_hidden_is_the_slope_t_test_bound_and_the_least_worth_saying():
    """Flat levels on the host's RSS, each call wobbling ±2 MiB: what the noise could hide is (t + z)
    standard errors of the slope, from the levels' noise (wider than their scatter about a line,
    here none), plus the resolution's tilt; what goes unsaid is at least 5 % of the first epoch's level
    over the run plus z standard errors."""
    cases = (([500] * 8, 2 * MiB, False), ([40] * 5, 2 * MiB, False), ([500, 504, 499, 505, 498], 0.0, False),
             ([500, 512, 498, 509, 503, 515], 0.0, True))  # steps' spread narrow: scatter about a line the wider
    for levels_mib, wobble, scattered_wider in cases:
        lv = creep.Levels(loop_of(plant([m * MiB for m in levels_mib], wobble=wobble)), "mem_end_bytes", HOST)
        n = len(levels_mib)
        x = np.arange(n, dtype=float)
        scatter = math.sqrt(np.sum((lv.levels - np.polyval(np.polyfit(x, lv.levels, 1), x)) ** 2) / (n - 2))
        se = max(scatter, lv.noise) / math.sqrt(np.sum((x - x.mean()) ** 2))
        z = stats.norm.ppf(0.95)
        noise = (stats.t.ppf(0.95, n - 2) + z) * se + HOST / (n - 1)
        unsaid = max(noise, 0.05 * levels_mib[0] * MiB / (n - 1) + z * se)
        assert creep.hidden(lv) == pytest.approx((noise, unsaid), rel=1e-9), levels_mib
        assert bool(scatter > lv.noise) is scattered_wider, (scatter, lv.noise)
    three = creep.Levels(loop_of(plant([500 * MiB] * 3, wobble=MiB)), "mem_end_bytes", HOST)
    assert creep.hidden(three) is not None
    two = creep.Levels(loop_of(plant([500 * MiB] * 2, wobble=MiB)), "mem_end_bytes", HOST)
    assert creep.hidden(two) is None


# The findings, word for word


def said(report_or_rows, manifest=None) -> list[dict]:
    report = report_or_rows if isinstance(report_or_rows, gnnmon.Report) else gnnmon.Report(report_or_rows,
                                                                                              manifest=manifest)
    return growth(report.diagnosis())


def check(found: dict, expected: dict) -> None:
    """``found`` holds ``expected``: strings and lists of evidence exactly, numbers to 1e-9."""
    assert set(found) == set(expected), set(found) ^ set(expected)
    for key, want in expected.items():
        if key == "evidence":
            assert [(e["figure"], e["unit"], e["where"]) for e in found[key]] == [
                (e["figure"], e["unit"], e["where"]) for e in want]
            assert [e["value"] for e in found[key]] == pytest.approx([e["value"] for e in want], rel=1e-9)
        elif isinstance(want, (float, tuple)):
            assert found[key] == pytest.approx(want, rel=1e-9), key
        else:
            assert found[key] == want, key


def test_a_leak_on_the_hosts_rss_is_said_at_its_rate_with_the_resolution_in_its_interval():
    """A CPU step's memory (the host's RSS) 16 MiB higher each epoch from 500 MiB, 6 epochs: Theil-Sen's
    slope is the planted rate, every pair of levels agrees on it, so Sen's interval is the rate alone,
    widened by the resolution (1.75 MiB) over the 5 steps."""
    r = 16 * MiB
    rows = plant([500 * MiB + r * e for e in range(6)], device="cpu")
    (leak,) = said(rows, MANIFEST)
    last = 500 * MiB + 5 * r
    p = stats.kendalltau(range(6), range(6), alternative="greater").pvalue
    check(leak, {
        "kind": "leak", "label": "step", "share": 5 * r / last, "of": "memory", "at_stake": 5 * r, "unit": "bytes",
        "words": f"a leak: mem_end_bytes of step grew 16 MiB per epoch (95 % interval {format_bytes(r - HOST / 5)} to "
                 f"{format_bytes(r + HOST / 5)}) from epoch 0 to the last, that the batches' shapes do not explain",
        "evidence": [evidence("growth not explained by shapes", r, "bytes/epoch",
                              f"Theil-Sen over the levels of epochs 0 to the last (6 epochs, {6 * STEPS} calls; "
                              f"Mann-Kendall p = {p:.2g})"),
                     evidence("mem_end_bytes", last, "bytes", "end of step's calls, last epoch's median")],
        "next": LEAK_NEXT, "since_epoch": 0, "rate_interval": (r - HOST / 5, r + HOST / 5)})
    assert "Mann-Kendall p = 0.0014)" in leak["evidence"][0]["where"]


def test_a_leak_from_a_later_epoch_beside_bigger_graphs_says_both():
    """Epochs numbered 1 to 8; 500 MiB until epoch 4, then 20 MiB more an epoch; batches 8,000 nodes
    larger each epoch (varying ±20,000 within one, so their bytes are told apart): the leak is said
    from epoch 4, at 20 MiB per epoch, and the bigger graphs' share (the planted 1 KiB a node times
    the growth of the batches' mean) beside it."""
    r = 20 * MiB
    rows = plant([500 * MiB + r * max(0, e - 3) for e in range(8)], nodes=lambda e, k: 8_000 * e + 4 * scattered(e, k),
                 epochs=list(range(1, 9)), device="cpu")
    (leak,) = said(rows, MANIFEST)
    mean_nodes = [np.mean([x["num_nodes"] for x in rows if x["epoch"] == e]) for e in (1, 8)]
    explained = PER_NODE * (mean_nodes[1] - mean_nodes[0])
    last = float(np.median([x["mem_end_bytes"] for x in rows if x["epoch"] == 8]))
    assert explained >= 0.05 * last  # enough to be said beside the leak
    p = stats.kendalltau(range(5), range(5), alternative="greater").pvalue
    check(leak, {
        "kind": "leak", "label": "step", "share": 4 * r / last, "of": "memory", "at_stake": 4 * r, "unit": "bytes",
        "words": f"a leak: mem_end_bytes of step grew 20 MiB per epoch (95 % interval {format_bytes(r - HOST / 4)} to "
                 f"{format_bytes(r + HOST / 4)}) from epoch 4 to the last, that the batches' shapes do not explain "
                 f"({format_bytes(explained)} more came with bigger graphs)",
        "evidence": [evidence("growth not explained by shapes", r, "bytes/epoch",
                              f"Theil-Sen over the levels of epochs 4 to the last (5 epochs, {8 * STEPS} calls; "
                              f"Mann-Kendall p = {p:.2g})"),
                     evidence("mem_end_bytes", last, "bytes", "end of step's calls, last epoch's median"),
                     evidence("growth explained by shapes", explained, "bytes",
                              "num_nodes between the first and the last epoch (coefficients fitted within epochs)")],
        "next": LEAK_NEXT, "since_epoch": 4, "rate_interval": (r - HOST / 4, r + HOST / 4)})


def test_a_leak_names_the_epoch_it_started_at_as_marked():
    """Epochs marked every half epoch (0, 0.5, ... 3.5), 500 MiB then 20 MiB more a mark: from the
    third mark it is epoch 1 (a whole one), from the fourth 1.5."""
    marks = [e / 2 for e in range(8)]
    for start, since, text in ((2, 1, "from epoch 1 to the last"), (3, 1.5, "from epoch 1.5 to the last")):
        rows = plant([500 * MiB + 20 * MiB * max(0, e - start) for e in range(8)], epochs=marks, device="cpu")
        (leak,) = said(rows, MANIFEST)
        assert leak["since_epoch"] == since and type(leak["since_epoch"]) is type(since) and text in leak["words"]
        assert f"over the levels of epochs {since} to the last ({8 - start} epochs" in leak["evidence"][0]["where"]


def test_a_leak_is_said_from_four_epochs():
    """Four epochs 16 MiB apart are a leak (Mann-Kendall's p is 1/24); three are too few to tell."""
    (four,) = said(plant([500 * MiB + 16 * MiB * e for e in range(4)], device="cpu"), MANIFEST)
    assert four["kind"] == "leak" and four["rate_interval"] == pytest.approx((16 * MiB - HOST / 3, 16 * MiB + HOST / 3))
    (three,) = said(plant([500 * MiB + 16 * MiB * e for e in range(3)], device="cpu"), MANIFEST)
    assert three["kind"] == "creep" and "too few epochs" in three["words"]


def test_a_leak_must_grow_five_percent_of_the_first_epoch_over_its_epochs():
    """From 100 MiB over 5 epochs, a leak of 1.25 MiB an epoch grows it by exactly 5 %: said; 1 KiB an
    epoch less: not said, and the figure is listed as looked for."""
    for r, leak in ((1.25 * MiB, True), (1.25 * MiB - 1024, False)):
        report = gnnmon.Report(plant([100 * MiB + r * e for e in range(5)], device="cpu"), manifest=MANIFEST)
        found = said(report)
        assert [f["kind"] for f in found] == (["leak"] if leak else []), (r, found)
        assert [c["figure"] for c in report.looked_for()] == ([] if leak else ["mem_end_bytes"])


def test_a_leak_must_have_an_interval_above_zero():
    """From 30 MiB over 5 epochs on the host's RSS, a rate of exactly the resolution's tilt (1.75 MiB /
    4) puts the interval's lower end at 0: not said; a byte an epoch more puts it at 1 B: said."""
    tilt = HOST / 4
    for r, leak in ((tilt, False), (tilt + 1, True)):
        found = said(plant([30 * MiB + r * e for e in range(5)], device="cpu"), MANIFEST)
        assert [f["kind"] for f in found] == (["leak"] if leak else []), (r, found)
        if leak:
            assert found[0]["rate_interval"][0] == 1.0


def test_too_few_epochs_of_growth_are_said_as_creep():
    """Three epochs at 500, 530 and 560 MiB on a GPU: 30 MiB an epoch, too few to tell a leak."""
    (found,) = said(plant([500 * MiB, 530 * MiB, 560 * MiB], device="cuda:0"))
    check(found, {
        "kind": "creep", "label": "step", "share": 60 / 560, "of": "memory", "at_stake": 60 * MiB, "unit": "bytes",
        "words": "mem_end_bytes of step grew 30 MiB per epoch over 3 epoch(s), more than its batches' shapes explain: "
                 "too few epochs to tell a leak from growth that levels off (the allocator's warm-up, a cache that "
                 "fills)",
        "evidence": [evidence("mem_end_bytes", 560 * MiB, "bytes", "end of step's calls, last epoch's median"),
                     evidence("growth not explained by shapes", 30 * MiB, "bytes/epoch",
                              "the last epoch's level less the first's, over 2 epoch(s)")],
        "next": "run 4 epochs or more (with run.mark('epoch', e)): a leak goes on growing in the later ones"})


def test_four_epochs_are_judged_for_a_leak_not_told_they_are_too_few():
    """500, 560, 540, 600 MiB: 100 MiB of growth with no trend over four epochs (Mann-Kendall's p is
    4/24): no leak, and four epochs are not too few to tell; the figure is listed as looked for."""
    report = gnnmon.Report(plant([500 * MiB, 560 * MiB, 540 * MiB, 600 * MiB], device="cuda:0", wobble=MiB))
    assert not said(report)
    assert [c["figure"] for c in report.looked_for()] == ["mem_end_bytes"]


def test_growth_from_the_second_of_four_epochs_is_too_short_for_a_leak():
    """500, 501, 520, 540 MiB: growth starts at epoch 1, and three levels of it cannot reach
    Mann-Kendall's p < 0.05 (at best 1/6): not a leak (over all four, from epoch 0, it would be)."""
    rows = plant([500 * MiB, 501 * MiB, 520 * MiB, 540 * MiB], device="cuda:0", wobble=MiB)
    lv = creep.Levels(loop_of(rows), "mem_end_bytes", 0.0)
    assert lv.start() == 1 and creep.trend_p(lv.levels[1:]) == pytest.approx(1 / 6)
    assert creep.trend_p(lv.levels) < creep.P_TREND and creep.rate(lv.levels, 0.0)[1] > 0
    assert "leak" not in [f["kind"] for f in said(rows)]


def test_too_few_epochs_say_growth_of_five_percent_beyond_the_noise():
    """Two epochs: 95 → 100 MiB on a GPU is 5 % of the last level (said), 95.5 → 100 is not; on the
    host's RSS, 40 → 44 MiB is over 3·√2 × half its resolution (3.7 MiB: said), 40 → 43 is not."""
    cases = (([95 * MiB, 100 * MiB], "cuda:0", True), ([95.5 * MiB, 100 * MiB], "cuda:0", False),
             ([40 * MiB, 44 * MiB], "cpu", True), ([40 * MiB, 43 * MiB], "cpu", False))
    assert creep.NOISE_K * math.sqrt(2) * HOST / 2 == pytest.approx(3.71 * MiB, rel=1e-3)
    for levels, device, creeps in cases:
        found = said(plant(levels, device=device), MANIFEST)
        assert [f["kind"] for f in found] == (["creep"] if creeps else []), (levels, device, found)
        if creeps:
            assert found[0]["words"].startswith(f"mem_end_bytes of step grew {format_bytes(levels[1] - levels[0])} per "
                                                "epoch over 2 epoch(s)")
            assert found[0]["evidence"][1]["value"] == levels[1] - levels[0]


def test_bigger_graphs_alone_are_said_as_such():
    """Flat levels of 500 MiB, batches 8,000 nodes and 20,000 edges larger each epoch (each varying
    widely within one): the growth is the planted 1 KiB a node and 256 B an edge times the batches'
    growth, and no leak."""
    rows = plant([500 * MiB] * 5, nodes=lambda e, k: 8_000 * e + 4 * scattered(e, k),
                 edges=lambda e, k: 20_000 * e + 8 * scattered(e, k, seed=1), device="cuda:0")
    (found,) = said(rows)
    explained = sum(per * (np.mean([x[shape] for x in rows if x["epoch"] == 4])
                           - np.mean([x[shape] for x in rows if x["epoch"] == 0]))
                    for shape, per in (("num_nodes", PER_NODE), ("num_edges", PER_EDGE)))
    last = float(np.median([x["mem_end_bytes"] for x in rows if x["epoch"] == 4]))
    check(found, {
        "kind": "creep", "label": "step", "share": explained / last, "of": "memory", "at_stake": explained,
        "unit": "bytes",
        "words": f"mem_end_bytes of step grew {format_bytes(explained)} between the first and the last epoch, "
                 "explained by bigger graphs; no leak beyond the noise",
        "evidence": [evidence("mem_end_bytes", last, "bytes", "end of step's calls, last epoch's median"),
                     evidence("growth explained by shapes", explained, "bytes", "num_nodes, num_edges between the "
                              "first and the last epoch (coefficients fitted within epochs)")],
        "next": "nothing leaks: larger batches need more memory (gnnmon forecast RUN --capacity ... says how large "
                "they may grow)"})


def test_batches_that_grew_with_the_epochs_alone_cannot_be_told_from_a_leak():
    """Batches of 10,000 nodes more each epoch, barely varying within one (1,000 × OTHER), 1 KiB a
    node: the 39.1 MiB growth is said as one a leak cannot be told from; where the memory did not
    grow with them (no bytes a node), nothing is said."""
    nodes = lambda e, k: 10_000 * (e + 1) + 1_000 * OTHER[k % 4]  # noqa: E731
    (found,) = said(plant([500 * MiB] * 5, nodes=nodes, device="cuda:0"))
    rise = PER_NODE * 40_000
    last = 500 * MiB + PER_NODE * 50_000
    check(found, {
        "kind": "creep", "label": "step", "share": rise / last, "of": "memory", "at_stake": rise, "unit": "bytes",
        "words": "mem_end_bytes of step grew 39.1 MiB over 5 epochs while its batches (num_nodes) grew with it, barely "
                 "varying within an epoch: a leak cannot be told from bigger graphs",
        "evidence": [evidence("mem_end_bytes", last, "bytes", "end of step's calls, last epoch's median")],
        "next": "vary the batch sizes within an epoch (or run an epoch at a fixed size) to tell them apart"})
    assert not said(plant([500 * MiB] * 5, nodes=nodes, device="cuda:0", per_node=0))


def test_batches_that_grew_with_the_epochs_beside_fitted_ones_are_still_told():
    """Batches of 10,000 nodes more each epoch, alike within one, at 1 KiB a node (39.1 MiB that cannot
    be told from a leak), and edges 25,000 more each epoch varying widely within one (15,000 × WOBBLE)
    at 256 B an edge (fitted: 24.4 MiB explained): the nodes' growth is said, the edges' as its
    evidence. (Nodes that wobbled within epochs would leave that wobble's memory in the calls, unfitted,
    where the previous call's edges could take part of it.)"""
    rows = plant([500 * MiB] * 5, nodes=lambda e, k: 10_000 * (e + 1),
                 edges=lambda e, k: 20_000 + 25_000 * e + 15_000 * WOBBLE[k % 4], device="cuda:0")
    (found,) = said(rows)
    explained, rise = PER_EDGE * 100_000, PER_NODE * 40_000
    last = float(np.median([x["mem_end_bytes"] for x in rows if x["epoch"] == 4]))
    check(found, {
        "kind": "creep", "label": "step", "share": rise / last, "of": "memory", "at_stake": rise, "unit": "bytes",
        "words": "mem_end_bytes of step grew 39.1 MiB over 5 epochs while its batches (num_nodes) grew with it, barely "
                 "varying within an epoch: a leak cannot be told from bigger graphs",
        "evidence": [evidence("mem_end_bytes", last, "bytes", "end of step's calls, last epoch's median"),
                     evidence("growth explained by shapes", explained, "bytes",
                              "num_edges between the first and the last epoch (coefficients fitted within epochs)")],
        "next": "vary the batch sizes within an epoch (or run an epoch at a fixed size) to tell them apart"})
    # the nodes' growth is said though under 5 % of the memory held once the edges' is taken from it
    assert rise - explained < 0.05 * last < rise


def test_batches_that_grew_with_the_epochs_are_said_from_five_percent():
    """Batches of 5,120 nodes in epoch 0, 1,280 more each epoch (100 × OTHER within one), 1 KiB a node,
    on 90 MiB: the last epoch holds 100 MiB and the growth is 5 MiB, 5 % of it: said (with edges that
    grew with them too, both named); 1 KiB more held throughout puts it under 5 %: not said."""
    nodes = lambda e, k: 5_120 + 1_280 * e + 100 * OTHER[k % 4]  # noqa: E731
    edges = lambda e, k: 10_000 * (e + 1) + 500 * WOBBLE[k % 4]  # noqa: E731
    (found,) = said(plant([90 * MiB] * 5, nodes=nodes, device="cuda:0"))
    assert found["at_stake"] == 5 * MiB and found["evidence"][0]["value"] == 100 * MiB
    assert found["words"].startswith("mem_end_bytes of step grew 5 MiB over 5 epochs while its batches (num_nodes) ")
    (both,) = said(plant([90 * MiB] * 5, nodes=nodes, edges=edges, per_edge=0, device="cuda:0"))
    assert "while its batches (num_nodes, num_edges) grew with it" in both["words"]
    assert not said(plant([90 * MiB + 1024] * 5, nodes=nodes, device="cuda:0"))


def test_a_leak_that_slows_within_the_levels_noise_is_still_one():
    """20 MiB more in epoch 1, 0.5 MiB less each epoch after (13 MiB by epoch 7), each call wobbling
    ±2 MiB: the slowing is within the levels' noise, so the growth goes on: a leak."""
    rows = plant([500 * MiB + (20 * e - 0.5 * e * e) * MiB for e in range(8)], device="cuda:0", wobble=2 * MiB)
    lv = creep.Levels(loop_of(rows), "mem_end_bytes", 0.0)
    assert quadratic_p(lv.levels, lv.noise) > creep.P_LEVELS_OFF
    (leak,) = said(rows)
    assert leak["kind"] == "leak" and leak["since_epoch"] == 0


def test_memory_held_is_anything_over_nothing():
    """Workers whose RSS reads 0 hold nothing: no finding; from 0 to a byte, growth is growth."""
    base = plant([500 * MiB] * 2, device="cuda:0")
    assert not said(merged(base, plant([0, 0], figure="workers_rss_bytes")))
    (found,) = said(merged(base, plant([0, 1], figure="workers_rss_bytes")))
    assert found["words"].startswith("workers_rss_bytes of step grew 1 B per epoch over 2 epoch(s)")


# Which figures, on which machine, and what was looked for


def merged(*plants: list[dict]) -> list[dict]:
    """Rows holding every figure of the plants (made alike but for their figure)."""
    return [{k: v for r in same for k, v in r.items()} for same in zip(*plants, strict=True)]


def test_the_figures_are_the_end_of_call_ones_the_hosts_rss_said_once():
    same = merged(plant([500 * MiB] * 4), plant([500 * MiB] * 4, figure="rss_end_bytes"))
    missing = [{k: v for k, v in r.items() if k not in ("mem_end_bytes", "rss_end_bytes")} for r in same[:3]]
    assert creep.figures(loop_of(missing + same)) == ["mem_end_bytes"]  # a CPU step: its memory is its RSS
    apart = merged(plant([500 * MiB] * 4), plant([300 * MiB] * 4, figure="rss_end_bytes"),
                   plant([200 * MiB] * 4, figure="workers_rss_bytes"))
    assert creep.figures(loop_of(apart)) == ["mem_end_bytes", "rss_end_bytes", "workers_rss_bytes"]
    assert creep.figures(loop_of(plant([300 * MiB] * 4, figure="rss_end_bytes"))) == ["rss_end_bytes"]
    assert creep.figures(loop_of(plant([300 * MiB] * 4, figure="wall_s"))) == []


def test_looked_for_says_what_could_hide_in_each_figure_at_its_resolution():
    """Flat levels, each call wobbling ±2 MiB: the device's memory (a GPU's count, exact), the host's
    RSS (its resolution) and no workers (their RSS reads 0: not listed); each with the bounds of
    :func:`creep.hidden` over its levels, and no levelling off."""
    rows = merged(plant([500 * MiB] * 5, wobble=2 * MiB, device="cuda:0"),
                  plant([300 * MiB] * 5, wobble=2 * MiB, figure="rss_end_bytes"),
                  plant([0] * 5, figure="workers_rss_bytes"))
    loop = loop_of(rows)
    assert not creep.creep(loop, HOST)
    out = creep.looked_for(loop, HOST)
    expected = []
    for figure, resolution in (("mem_end_bytes", 0.0), ("rss_end_bytes", HOST)):
        noise, unsaid = creep.hidden(creep.Levels(loop, figure, resolution))
        expected.append({"label": "step", "figure": figure, "epochs": 5, "hidden_bytes_per_epoch": noise,
                         "unsaid_bytes_per_epoch": unsaid, "levelled_off_bytes": None})
    assert out == expected
    assert out[1]["hidden_bytes_per_epoch"] > out[0]["hidden_bytes_per_epoch"]  # the resolution's tilt is in it
    assert gnnmon.Report(rows, manifest=MANIFEST).looked_for() == expected


def test_the_hosts_resolution_is_a_cpu_steps_alone():
    """The same flat rows on a CPU step (its memory is the host's RSS: the resolution's tilt is in what
    could hide), on a GPU, on both and with no device recorded (a device's exact count)."""
    def bound(device, resolution):
        rows = plant([500 * MiB] * 5, wobble=2 * MiB)
        for i, r in enumerate(rows):
            if device is not None:
                r["device"] = device[i % len(device)]
        loop = loop_of(rows)
        (out,) = creep.looked_for(loop, HOST)
        assert out["hidden_bytes_per_epoch"] == creep.hidden(creep.Levels(loop, "mem_end_bytes", resolution))[0]
        return out["hidden_bytes_per_epoch"]
    assert bound(["cpu"], HOST) > bound(["cuda:0"], 0.0) + HOST / 4
    bound(["cpu", "cuda:0"], 0.0)
    bound(None, 0.0)


def test_growth_that_levels_off_is_looked_for_and_says_how_much_it_rose():
    """Levels that rise 100 MiB in epoch 1 and half as much in each epoch after, 10 epochs (a cache
    that fills): no leak, and the figure is listed as having risen by the planted 199.6 MiB, then
    levelled off."""
    planted = [500 * MiB + 200 * MiB * (1 - 2.0 ** -e) for e in range(10)]
    rows = plant(planted, device="cuda:0")
    assert not said(rows)
    (out,) = creep.looked_for(loop_of(rows), 0.0)
    assert out["levelled_off_bytes"] == pytest.approx(planted[-1] - planted[0], rel=1e-9)


def test_looked_for_leaves_out_what_was_said_and_runs_too_short():
    leak = merged(plant([500 * MiB + 16 * MiB * e for e in range(5)], device="cuda:0", wobble=MiB),
                  plant([300 * MiB] * 5, figure="rss_end_bytes", wobble=MiB))
    assert [c["figure"] for c in creep.looked_for(loop_of(leak), HOST)] == ["rss_end_bytes"]
    assert creep.looked_for(loop_of(plant([500 * MiB] * 3, wobble=MiB)), HOST) == []
    unmarked = [{k: v for k, v in r.items() if k != "epoch"} for r in plant([500 * MiB] * 5, wobble=MiB)]
    assert creep.looked_for(loop_of(unmarked), HOST) == [] and creep.creep(loop_of(unmarked), HOST) == []


def test_calls_that_mark_no_epochs_say_no_leak_was_judged():
    """A newcomer's `gnnmon run` leaked 1 MiB a step, its calls marking no epochs: the leak check
    did not run, and the report said nothing of it. Unmarked calls with memory say so ("Not looked
    for"), with the planted calls' count; marked ones, or calls without memory, do not."""
    leak = plant([500 * MiB + 16 * MiB * e for e in range(5)], device="cuda:0", wobble=MiB)
    unmarked = [{k: v for k, v in r.items() if k != "epoch"} for r in leak]
    assert creep.unmarked(loop_of(unmarked)) == {"label": "step", "figures": ["mem_end_bytes"], "calls": 5 * STEPS}
    assert "Not looked for: no leak judged in step's mem_end_bytes: its " + str(5 * STEPS) + " calls mark no epochs" \
        in gnnmon.Report(unmarked).markdown()
    assert creep.unmarked(loop_of(leak)) is None and "Not looked for" not in gnnmon.Report(leak).markdown()
    bare = [{k: v for k, v in r.items() if k not in ("epoch", "mem_end_bytes")} for r in leak]
    assert creep.unmarked(loop_of(bare)) is None


def test_growth_is_judged_from_two_marked_epochs_on():
    """One epoch (whatever its ramp) says nothing; calls before the first mark are left out of a run
    whose marked epochs grow."""
    assert creep.creep(loop_of(plant([500 * MiB], ramp=300 * MiB, device="cuda:0")), 0.0) == []
    rows = plant([500 * MiB, 530 * MiB, 560 * MiB], device="cuda:0")
    for r in rows[:10]:
        del r["epoch"]
    (found,) = creep.creep(loop_of(rows), 0.0)
    assert found["kind"] == "creep" and found["at_stake"] == pytest.approx(60 * MiB)


def test_a_leak_on_a_gpu_is_not_widened_by_the_hosts_resolution():
    """A GPU's allocator counts its bytes exactly: a leak of 16 MiB an epoch on a cuda step (each call
    wobbling ±1 MiB), in a run recorded on a 2-CPU host, has the interval Theil-Sen gives its levels:
    all their pairs agree on 16 MiB."""
    rows = plant([500 * MiB + 16 * MiB * e for e in range(6)], device="cuda:0", wobble=MiB)
    (leak,) = said(rows, MANIFEST)
    assert leak["kind"] == "leak" and leak["rate_interval"] == pytest.approx((16 * MiB, 16 * MiB), rel=1e-9)


def test_without_a_resolution_none_is_assumed():
    rows = plant([500 * MiB + 16 * MiB * e for e in range(6)], device="cpu", wobble=MiB)
    (leak,) = creep.creep(loop_of(rows))
    assert leak["rate_interval"] == pytest.approx((16 * MiB, 16 * MiB), rel=1e-9)
    flat = loop_of(plant([500 * MiB] * 5, device="cpu", wobble=MiB))
    (out,) = creep.looked_for(flat)
    assert out["hidden_bytes_per_epoch"] == creep.hidden(creep.Levels(flat, "mem_end_bytes", 0.0))[0]


def test_a_cpu_device_numbered_is_the_host():
    """``cpu:0`` is the host's CPU as ``cpu`` is: its memory is the host's RSS, with its resolution;
    so is a label one of whose calls was measured on no device (it did not start: device None)."""
    loop = loop_of(plant([500 * MiB] * 5, device="cpu:0", wobble=MiB))
    (out,) = creep.looked_for(loop, HOST)
    assert out["hidden_bytes_per_epoch"] == creep.hidden(creep.Levels(loop, "mem_end_bytes", HOST))[0]
    rows = plant([500 * MiB] * 5, device="cpu", wobble=MiB)
    rows[7]["device"] = None
    loop = loop_of(rows)
    (out,) = creep.looked_for(loop, HOST)
    assert out["hidden_bytes_per_epoch"] == creep.hidden(creep.Levels(loop, "mem_end_bytes", HOST))[0]
    assert out["hidden_bytes_per_epoch"] != creep.hidden(creep.Levels(loop, "mem_end_bytes", 0.0))[0]


def test_a_rise_is_said_to_level_off_only_where_it_trends_and_curves_beyond_the_noise():
    """10 MiB that fills over 8 epochs (half as much each epoch): beside a wobble of ±2 MiB a call it
    rose and levelled off; beside ±4 MiB its curve is within the levels' noise (said as risen, not
    levelled); memory that rose 100 MiB, held it and fell back curves but has no trend; a leak too small to say (1 KiB
    under 5 % of the first level over the run) trends without levelling off."""
    filling = [500 * MiB + 10 * MiB * (1 - 2.0 ** -e) for e in range(8)]
    for wobble, levelled in ((2 * MiB, True), (4 * MiB, False)):
        loop = loop_of(plant(filling, wobble=wobble, device="cuda:0"))
        lv = creep.Levels(loop, "mem_end_bytes", 0.0)
        assert (quadratic_p(lv.levels, lv.noise) < creep.P_LEVELS_OFF) is levelled
        assert quadratic_p(lv.levels, 0.0) < creep.P_LEVELS_OFF and creep.trend_p(lv.levels) < creep.P_TREND
        (out,) = creep.looked_for(loop, 0.0)
        assert out["levelled_off_bytes"] == (pytest.approx(lv.levels[-1] - lv.levels[0]) if levelled else None)
    hill = loop_of(plant([500 * MiB] + [600 * MiB] * 6 + [500 * MiB], wobble=MiB, device="cuda:0"))
    lv = creep.Levels(hill, "mem_end_bytes", 0.0)
    assert creep.levelling_off(lv.levels, lv.noise) and creep.trend_p(lv.levels) > creep.P_TREND
    assert creep.looked_for(hill, 0.0)[0]["levelled_off_bytes"] is None
    small = loop_of(plant([100 * MiB + (1.25 * MiB - 1024) * e for e in range(5)], device="cpu"))
    (out,) = creep.looked_for(small, HOST)
    assert out["levelled_off_bytes"] is None


def test_looked_for_takes_four_epochs_and_any_memory_held():
    """Four flat epochs are enough to look in; workers whose RSS reads 0 hold nothing to look for,
    those that hold a byte do."""
    for held, figures in ((0, ["mem_end_bytes"]), (1, ["mem_end_bytes", "workers_rss_bytes"])):
        rows = merged(plant([500 * MiB] * 4, wobble=MiB), plant([held] * 4, figure="workers_rss_bytes"))
        assert [c["figure"] for c in creep.looked_for(loop_of(rows), 0.0)] == figures


def test_epochs_of_warm_up_calls_alone_have_no_level_and_nothing_breaks():
    """Full-batch training: one call an epoch, the first two of the run its warm-up: those epochs
    have no steady call, so no level; the other eight are flat: no finding, and the report reads."""
    rows = [{"label": "step", "index": e, "epoch": e, "t_start_ns": e * 11_000_000,
             "t_end_ns": e * 11_000_000 + 10_000_000, "wall_s": 0.01, "device": "cuda:0",
             "mem_end_bytes": 500 * MiB} for e in range(10)]
    report = gnnmon.Report(rows)
    assert not [f for f in report.diagnosis() if f["kind"] in ("leak", "creep")]
    (said,) = report.looked_for()
    assert said["epochs"] == 8 and "### Diagnosis" in report.markdown()


def test_growth_a_fitted_shape_explains_is_bigger_graphs_whatever_else_grew_with_the_epochs():
    """Memory holds 256 B an edge (edges vary within each epoch: fitted) and nothing a node, though
    the nodes grew epoch by epoch without varying much within one: the growth is bigger graphs, said
    with the bytes the edges explain, not "grew 0 B ... cannot be told"."""
    wobble = (1, -3, 3, -1)
    rows, i = [], 2
    for e in range(5):
        for k in range(40):
            nodes = 10_000 * (e + 1) + 1_000 * wobble[k % 4]
            edges = 50_000 * e + 25 * (5_000 + (7919 * (40 * e + k)) % 10_000)
            rows.append({"label": "step", "index": i, "epoch": e, "t_start_ns": i * 11_000_000,
                         "t_end_ns": i * 11_000_000 + 10_000_000, "wall_s": 0.01, "device": "cuda:0",
                         "num_nodes": nodes, "num_edges": edges, "mem_end_bytes": 500 * MiB + 256 * edges})
            i += 1
    found = [f for f in gnnmon.Report(rows).diagnosis() if f["kind"] in ("leak", "creep")]
    (creep,) = found
    first = [r["num_edges"] for r in rows if r["epoch"] == 0]
    last = [r["num_edges"] for r in rows if r["epoch"] == 4]
    explained = 256 * (sum(last) / len(last) - sum(first) / len(first))
    assert "explained by bigger graphs" in creep["words"] and creep["at_stake"] == pytest.approx(explained, rel=1e-6)

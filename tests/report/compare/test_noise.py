"""The compare gate's noise model, on planted runs (step times drawn from a known spread: nothing
depends on the machine): identical runs whose speed drifts within each run are not called
regressions, and say inconclusive where their noise is wider than the limit; a planted +10 % on
quiet runs is caught; a phase that took one of two times a stretch at a time widens its own noise;
a difference in the machine's load between the runs is named."""

from __future__ import annotations

import math
import random

import gnnmon
from gnnmon.cli import INCONCLUSIVE, main
from gnnmon.data.table import Table
from gnnmon.report.compare.comparison import Comparison
from tests.report.diagnosis.planted import steps, write_run


def drifting(seed: int, swing: float, slower: float = 1.0, n: int = 200) -> list[dict]:
    """Planted calls (3 % noise a call) whose speed drifts through the run: every figure times
    ``1 + swing · sin(…)`` over half a period of random phase (a run faster or slower on the
    whole, as reruns on a busy VM are), the whole step times ``slower``."""
    rows = steps(n, seed=seed, slower={"forward": slower, "backward": slower, "optimizer": slower})
    phase = random.Random(seed + 1000).uniform(0, 2 * math.pi)
    for i, r in enumerate(rows):
        k = 1 + swing * math.sin(phase + math.pi * i / n)
        for key in [k for k in r if k.startswith("phase_")] + ["wall_s", "device_s"]:
            r[key] *= k
    return rows


def table(rows: list[dict]) -> Table:
    return gnnmon.Report(rows).table


def test_identical_runs_that_drift_are_not_regressions():
    """20 pairs of identical runs whose speed swings ±15 % within each (a busy VM's day): at most
    one is called a regression at 5 %; the rest pass or say inconclusive, with their noise."""
    regressed = unsure = 0
    for pair in range(20):
        c = Comparison(table(drifting(2 * pair, 0.15)), table(drifting(2 * pair + 1, 0.15)), max_slowdown=0.05)
        regressed += bool(c.regressions())
        unsure += bool(c.inconclusive())
    assert regressed <= 1 and regressed + unsure == 20, (regressed, unsure)


def test_identical_quiet_runs_pass():
    """The same 20 pairs without the drift: no regression and, their noise under the limit, a pass."""
    verdicts = [Comparison(table(drifting(2 * pair, 0.0)), table(drifting(2 * pair + 1, 0.0)), max_slowdown=0.05)
                for pair in range(20)]
    assert sum(bool(c.regressions()) for c in verdicts) <= 1
    assert sum(bool(c.inconclusive()) for c in verdicts) <= 1


def test_a_planted_10_percent_slowdown_on_quiet_runs_is_caught():
    caught = 0
    for pair in range(10):
        c = Comparison(table(drifting(2 * pair, 0.0)), table(drifting(2 * pair + 1, 0.0, slower=1.10)),
                       max_slowdown=0.05)
        caught += any(ln["phase"] is None for ln in c.regressions())
        assert not c.inconclusive()  # 3 % a call over 200 calls: the noise is well under 5 %
    assert caught >= 9, caught


def test_a_slowdown_hidden_in_wide_noise_is_never_a_pass(tmp_path, capsys):
    """+10 % under a ±30 % drift: the gate cannot tell, and says so with its own exit status."""
    base = write_run(tmp_path / "base.jsonl", drifting(1, 0.30))
    new = write_run(tmp_path / "new.jsonl", drifting(2, 0.30, slower=1.10))
    code = main(["compare", str(base), str(new), "--max-slowdown", "5%"])
    out, err = capsys.readouterr()
    assert code in (1, INCONCLUSIVE), (code, err)
    if code == INCONCLUSIVE:
        assert "gnnmon: inconclusive: train_step:" in err and "is wider than the limit" in err
        assert "**Inconclusive**" in out and "noise ±" in out


def test_a_phase_that_takes_one_of_two_times_a_stretch_at_a_time_widens_its_noise():
    """The optimizer phase at 0.7 or 4.6 ms, the mode changing every 25 calls (as a user's
    GraphSAGE loop showed from run to run): its standard error comes from its stretches."""
    def bimodal(seed: int) -> list[dict]:
        rows = steps(seed=seed)
        for i, r in enumerate(rows):
            r["phase_optimizer_s"] = (0.7e-3 if (i // 25 + seed) % 2 else 4.6e-3) * random.Random(i).gauss(1, 0.03)
        return rows

    c = Comparison(table(bimodal(0)), table(bimodal(1)), max_slowdown=0.05)
    assert not [ln for ln in c.regressions() if ln["phase"] == "optimizer"], c.regressions()


def test_a_difference_in_the_machines_load_is_named_beside_the_verdict():
    base, new = steps(seed=1), steps(seed=2)
    for r in base:
        r["others_cpu_pct"], r["idle_cpu_pct"] = 101.0, 0.0
    for r in new:
        r["others_cpu_pct"], r["idle_cpu_pct"] = 3.0, 150.0
    c = Comparison(table(base), table(new), max_slowdown=0.05)
    (note,) = [n for n in c.notes if "load differed" in n]
    assert "101 % of a core on BASE's cores and 3 % on NEW's" in note
    assert f"note: {note}" in c.markdown()
    same = Comparison(table(base), table(base), max_slowdown=0.05)
    assert not [n for n in same.notes if "load differed" in n]


def offset(seed: int, spread: float, slower: float = 1.0) -> list[dict]:
    """A steady run (3 % a call) at a level of its own: every time times a factor drawn once for the
    run from N(1, ``spread``), as reruns on a busy VM land (±20 % between identical runs), and ``slower``."""
    factor = random.Random(seed + 500).gauss(1.0, spread) * slower
    rows = steps(seed=seed)
    for r in rows:
        for key in [k for k in r if k.startswith("phase_")] + ["wall_s", "device_s"]:
            r[key] *= factor
    return rows


def test_several_runs_a_side_carry_the_spread_between_reruns(tmp_path, capsys):
    """Runs steady within themselves but 10 % apart from rerun to rerun: one against one, the gate
    cannot see that spread and often fails identical code; three a side, it says so and fails none
    of 10 identical trios; a planted +10 % on runs 1 % apart is caught in 9 of 10 or more."""
    alone = sum(bool(Comparison(table(offset(2 * k, 0.10)), table(offset(2 * k + 1, 0.10)),
                                max_slowdown=0.05).regressions()) for k in range(10))
    trios = [Comparison.of_runs([table(offset(6 * k + i, 0.10)) for i in range(3)],
                                [table(offset(6 * k + 3 + i, 0.10)) for i in range(3)], max_slowdown=0.05)
             for k in range(10)]
    assert alone >= 3 and sum(bool(c.regressions()) for c in trios) <= 1, alone
    caught = sum(any(ln["phase"] is None for ln in Comparison.of_runs(
        [table(offset(6 * k + i, 0.01)) for i in range(3)],
        [table(offset(6 * k + 3 + i, 0.01, slower=1.10)) for i in range(3)], max_slowdown=0.05).regressions())
        for k in range(10))
    assert caught >= 9, caught
    # the command line: BASE... -- NEW...
    paths = [write_run(tmp_path / f"run{i}.jsonl", offset(i, 0.01, slower=1.10 if i >= 3 else 1.0)) for i in range(6)]
    code = main(["compare", *map(str, paths[:3]), "--", *map(str, paths[3:]), "--max-slowdown", "5%"])
    out, err = capsys.readouterr()
    assert code == 1 and "## gnnmon compare: BASE (3 runs) → NEW (3 runs)" in out, (code, err)
    assert main(["compare", *map(str, paths[:3])]) == 2
    assert "compare takes BASE NEW, or BASE... -- NEW..." in capsys.readouterr().err

"""The time findings (:mod:`gnnmon.report.diagnosis.time_findings`) read from planted rows: calls of
known seconds (a steady level of 125 ms, binary-exact like every planted figure here, so each
figure the words print is exact to the digit), compile records, CPU times and the sampled load of
known values. Each finding is asserted whole (its words, evidence and next step) against what the
plant and the module's documented rules give: a recompilation is a call that recompiled (after the
label's first compilation), warm-up is the first calls' and a clearly slower first epoch's excess,
a busy machine is calls on crowded cores or calls that waited rather than computed, and slow steps
are the spikes nothing recorded explains; nothing is said within the steps' own noise (NOISE_K
spreads over the calls concerned) or under its share of the run."""

from __future__ import annotations

import numpy as np
import pytest

import gnnmon
from gnnmon.data.table import Table
from gnnmon.report import busy as machine
from gnnmon.report.diagnosis import machine_findings as mf
from gnnmon.report.diagnosis import time_findings as tf
from gnnmon.report.loops import Loop
from gnnmon.report.stats import spread

LEVEL = 0.125
"""A steady call's seconds."""

RECOMPILE_NEXT = ("give the batches a few fixed shapes (pad to buckets), or compile with dynamic=True (or "
                  "torch._dynamo.mark_dynamic on the node dimension) so one graph serves every shape")
WARMUP_NEXT = ("nothing to fix in the loop: first calls fill caches (allocator, kernels, compiled graphs, a "
               "dataset's first pass); time after them (the report's statistics leave the first 2 out)")
NOT_SAMPLED = ("; the load beside the run was not sampled and torch's threads' CPU time cannot show a wait, so a "
               "busy machine would read the same (collect(sample=0.5), or torch on one thread, tells them apart)")
BUSY_NEXT = ("not the job's cost: run where these cores are free (pin the job to cores nothing else uses: taskset -c, "
             "os.sched_setaffinity), and compare timings from a quiet run")
WAITED_NEXT = ("collect(sample=0.5) samples the load beside the run and collect(sched=True) the thread's run-queue "
               "time: either tells a busy machine (free cores, a quiet run to compare) from the step's own wait (find "
               "the call it blocks in: py-spy dump --pid PID while it waits)")
OWN_WAIT_NEXT = ("the step's own wait, the job's cost: find the call it blocks in (py-spy dump --pid PID while it "
                 "waits, or torch.profiler's CPU trace); a wait for the next batch is watch_loader's data_wait_s")
UNRECORDED = "neither the machine's load nor the thread's run queue was recorded"


def row(i: int, wall: float, **fields) -> dict:
    return {"label": "step", "index": i, "wall_s": wall, **fields}


def loop_of(rows: list[dict]) -> Loop:
    return Loop("step", Table(rows).parts["step"])


def found(kind: str, at_stake: float, total: float, words: str, evidence: list[dict], next_step: str) -> dict:
    """The finding the plant should give, as :func:`gnnmon.report.loops.finding` lays it out."""
    return {"kind": kind, "label": "step", "share": at_stake / total, "of": "time", "at_stake": at_stake, "unit": "s",
            "words": words, "evidence": evidence, "next": next_step}


def proof(figure: str, value: float, unit: str, where: str) -> dict:
    return {"figure": figure, "value": value, "unit": unit, "where": where}


# recompilation


def compiled_rows() -> list[dict]:
    """20 calls at LEVEL with compile records: call 0 compiles first (500 ms, the label's warm-up),
    call 3 compiles another graph for the first time (125 ms, no recompilation in Dynamo's records);
    calls 8 (250 ms over, 250 ms compiling, 200 nodes), 14 (125 ms over, 125 ms compiling, two
    recompilations, 300 nodes) and 17 (125 ms over, 0 s compiling recorded, no node count)
    recompile."""
    rows = [row(i, LEVEL, compile_frames=0, compile_recompiles=0, compile_s=0.0, num_nodes=100) for i in range(20)]
    rows[0].update(wall_s=LEVEL + 0.5, compile_frames=1, compile_s=0.5)
    rows[3].update(wall_s=LEVEL + 0.125, compile_frames=1, compile_s=0.125)
    rows[8].update(wall_s=LEVEL + 0.25, compile_frames=1, compile_recompiles=1, compile_s=0.25, num_nodes=200)
    rows[14].update(wall_s=LEVEL + 0.125, compile_frames=2, compile_recompiles=2, compile_s=0.125, num_nodes=300)
    rows[17].update(wall_s=LEVEL + 0.125, compile_frames=1, compile_recompiles=1, compile_s=0.0)
    del rows[17]["num_nodes"]
    return rows


def test_recompilation_is_the_compiling_recorded_in_the_calls_that_recompiled():
    """Three calls recompiled (four recompilations), 375 ms compiling as recorded (the first
    compilation's 500 ms is warm-up, call 3's first compilation of another graph is no
    recompilation; call 17's 0 s is its record, not its excess); two distinct batch sizes among
    them (call 17 has none)."""
    total = 20 * LEVEL + 1.125
    rows = compiled_rows()
    assert tf.recompilation(loop_of(rows), total) == found(
        "recompilation", 0.375, total,
        "3 call(s) of step recompiled, 375.0 ms compiling, at 2 distinct batch size(s) (num_nodes)",
        [proof("compile_recompiles", 4.0, "count", "@track_compile (torch._dynamo's records), in 3 call(s)"),
         proof("compile_s", 0.375, "s", "@track_compile: compiling in those calls, the backward's included")],
        RECOMPILE_NEXT)


def test_without_compile_records_every_compilation_after_the_first_is_a_recompilation_at_its_excess():
    """No ``compile_recompiles`` and no compiling time in the recompiled calls (0 recorded): calls
    8, 14 and 17 compiled after call 0, at their excess over the level (250, 125 and 0 ms: call 17
    was quicker than the level, which is no negative cost); no batch sizes, none said."""
    rows = compiled_rows()
    rows[3].update(wall_s=LEVEL, compile_frames=0, compile_s=0.0)
    for r in rows:
        del r["compile_recompiles"]
        r.pop("num_nodes", None)
        r["compile_frames"] = min(r["compile_frames"], 1)
    rows[8]["compile_s"] = rows[14]["compile_s"] = 0.0
    rows[17]["wall_s"] = LEVEL / 2
    total = 20 * LEVEL + 0.875 - LEVEL / 2
    assert tf.recompilation(loop_of(rows), total) == found(
        "recompilation", 0.375, total, "3 call(s) of step recompiled, 375.0 ms compiling",
        [proof("compile_recompiles", 0.0, "count", "@track_compile (torch._dynamo's records), in 3 call(s)"),
         proof("compile_s", 0.375, "s", "@track_compile: compiling in those calls, the backward's included")],
        RECOMPILE_NEXT)


def test_no_recompilation_is_said_without_compile_frames_or_after_one_compilation_only():
    rows = compiled_rows()
    for r in rows:
        del r["compile_frames"]
    assert tf.recompilation(loop_of(rows), 20 * LEVEL + 1.125) is None  # no @track_compile frames recorded
    rows = compiled_rows()
    for r in rows[1:]:
        r.update(compile_frames=0, compile_recompiles=0, compile_s=0.0)
    assert tf.recompilation(loop_of(rows), 20 * LEVEL + 0.5) is None  # the first compilation only
    for r in rows:
        del r["compile_recompiles"]
    assert tf.recompilation(loop_of(rows), 20 * LEVEL + 0.5) is None


def test_a_recompilation_within_the_steps_noise_or_under_its_share_is_not_said():
    """The steady calls that did not recompile take 62.5 ms (nine) or 187.5 ms (six): with the three
    that did, level 125 ms and a spread of 1.4826 x 62.5 ms, and 3 spreads over the 3 calls that
    recompiled is 3 x 92.7 ms x √3 = 481.5 ms: 375 ms compiling is within it, 500 ms beyond it. A
    cost of 375 ms in a run of 8 s is 4.7 %, under the 5 % a finding must hold."""
    rows = compiled_rows()
    quiet = [r for r in rows[2:] if not r["compile_recompiles"]]
    for k, r in enumerate(quiet):
        r["wall_s"] = 0.0625 if k % 5 % 2 == 0 else 0.1875
    steady = [r["wall_s"] for r in rows[2:]]
    assert np.median(steady) == LEVEL and spread(steady) == 1.4826 * 0.0625  # what was planted
    total = sum(r["wall_s"] for r in rows)
    assert tf.recompilation(loop_of(rows), total) is None
    rows[17]["compile_s"] = 0.125  # 500 ms compiling in all
    again = tf.recompilation(loop_of(rows), total)
    assert again is not None and again["at_stake"] == 0.5 and again["words"].startswith("3 call(s) of step recompiled")
    assert tf.recompilation(loop_of(compiled_rows()), 8.0) is None


# warm-up


def first_calls(n: int = 20, **fields) -> list[dict]:
    """``n`` calls at LEVEL but the first two: 500 and 250 ms over it."""
    rows = [row(i, LEVEL, **fields) for i in range(n)]
    rows[0]["wall_s"], rows[1]["wall_s"] = LEVEL + 0.5, LEVEL + 0.25
    return rows


def warm(words: str, at_stake: float, total: float, m: int) -> dict:
    return found("warm-up", at_stake, total, words,
                 [proof("wall_s/device_s", at_stake, "s", f"the excess of those {m} call(s) over the steady level")],
                 WARMUP_NEXT)


def test_warm_up_is_the_first_calls_excess_and_says_when_a_busy_machine_would_read_the_same():
    """The first two calls took 1 s against 125 ms a call: 750 ms of warm-up; with neither the load
    sampled nor torch on one thread the rows cannot tell warm-up from a wait, and it says so; with
    either, it does not."""
    total = 20 * LEVEL + 0.75
    words = "the first 2 call(s) of step took 1.00 s against 125.0 ms per call after them"
    assert tf.warm_up(loop_of(first_calls()), total) == warm(words + NOT_SAMPLED, 0.75, total, 2)
    sampled = first_calls(others_cpu_pct=0.0, idle_cpu_pct=50.0)
    assert tf.warm_up(loop_of(sampled), total) == warm(words, 0.75, total, 2)
    computing = first_calls()
    for r in computing:
        r["cpu_s"] = r["wall_s"]  # the first calls computed all their time: not a wait
    assert tf.warm_up(loop_of(computing), total, one_thread=True) == warm(words, 0.75, total, 2)
    assert tf.warm_up(loop_of(computing), total) == warm(words + NOT_SAMPLED, 0.75, total, 2)


def test_a_first_calls_collections_are_the_collectors_not_warm_up_too():
    """The first two calls' 500 and 250 ms over the level: with 125 ms of collections in the first,
    warm-up holds 625 ms and says the rest is the GC finding's; with collections as long as each
    excess (or longer), no warm-up is left. A slow first epoch whose calls collected for their whole
    excess is not warm-up either. The diagnosis then never counts those seconds twice."""
    total = 20 * LEVEL + 0.75
    words = ("the first 2 call(s) of step took 1.00 s against 125.0 ms per call after them; 125.0 ms of that excess "
             "was garbage collection, counted there, not here")
    rows = first_calls(others_cpu_pct=0.0, idle_cpu_pct=50.0)
    rows[0]["gc_pause_s"] = 0.125
    assert tf.warm_up(loop_of(rows), total) == warm(words, 0.625, total, 2)
    rows[0]["gc_pause_s"], rows[1]["gc_pause_s"] = 0.5, 0.375  # the second collected past its excess
    assert tf.warm_up(loop_of(rows), total) is None
    epochs = [row(i, LEVEL if i >= 10 else 2 * LEVEL, epoch=i // 10, others_cpu_pct=0.0, idle_cpu_pct=50.0,
                  gc_pause_s=0.0 if i >= 10 else LEVEL) for i in range(40)]
    assert tf.warm_up(loop_of(epochs), 40 * LEVEL + 10 * LEVEL) is None
    for r in rows:
        r.update(t_start_ns=r["index"] * 10**9, t_end_ns=r["index"] * 10**9 + int(r["wall_s"] * 1e9),
                 gc_collections=1 if r.get("gc_pause_s") else 0)
    report = gnnmon.Report(rows)
    found = {f["kind"]: f for f in report.diagnosis()}
    assert "warm-up" not in found and found["garbage collection"]["at_stake"] == pytest.approx(0.875), found
    assert [(s["index"], s["cause"]) for s in report.spikes()] == [(0, "gc"), (1, "gc")]  # the spikes say the same


def test_warm_up_is_said_from_a_tenth_of_the_run():
    """750 ms of warm-up in a run of 10 s is 7.5 %: over the 5 % of other findings, under warm-up's 10 %."""
    assert tf.warm_up(loop_of(first_calls()), 10.0) is None
    assert tf.warm_up(loop_of(first_calls()), 7.5) is not None  # exactly 10 %


def test_a_short_loop_s_warm_up_is_fewer_than_half_its_calls():
    """Four calls: only the first is warm-up (fewer than half of them); five: the first two."""
    rows = [row(0, LEVEL + 0.5), row(1, LEVEL + 0.25), row(2, LEVEL), row(3, LEVEL)]
    total = 4 * LEVEL + 0.75
    assert tf.warm_up(loop_of(rows), total) == warm(
        "the first 1 call(s) of step took 625.0 ms against 125.0 ms per call after them" + NOT_SAMPLED,
        0.5, total, 1)
    rows.append(row(4, LEVEL))
    total += LEVEL
    assert tf.warm_up(loop_of(rows), total) == warm(
        "the first 2 call(s) of step took 1.00 s against 125.0 ms per call after them" + NOT_SAMPLED,
        0.75, total, 2)
    assert tf.warm_up(loop_of(rows[:2]), 0.875) is None  # two calls: none is warm-up


def epoch_rows(first_epoch: list[float], later: list[float]) -> list[dict]:
    """Two compiling calls (500 ms over LEVEL), then ``first_epoch``'s calls, all epoch 0; then
    ``later``'s, epoch 1."""
    walls = [LEVEL + 0.5, LEVEL + 0.5, *first_epoch]
    return ([row(i, w, epoch=0) for i, w in enumerate(walls)]
            + [row(len(walls) + i, w, epoch=1) for i, w in enumerate(later)])


def test_a_clearly_slower_first_epoch_is_warm_up_at_its_excess_over_the_later_epochs():
    """The first epoch's 8 steady calls: seven at 250 ms, one at 62.5 ms (no negative excess),
    against 125 ms later: 875 ms over the later level, beside the first two calls' 1 s."""
    rows = epoch_rows([0.25] * 7 + [LEVEL / 2], [LEVEL] * 20)
    total = sum(r["wall_s"] for r in rows)
    assert tf.warm_up(loop_of(rows), total) == warm(
        "the first 2 call(s) of step took 1.25 s against 125.0 ms per call after them; its first epoch's calls took "
        "250.0 ms (median) against 125.0 ms later" + NOT_SAMPLED, 1.875, total, 10)
    # 62.5 ms of collection in each of the epoch's seven slow calls and 125 ms in the first call: the
    # GC finding's 0.5625 s, left out and said (the epoch's part added to the first calls')
    for r in rows:
        if r["wall_s"] == 0.25 and r["index"] >= 2:
            r["gc_pause_s"] = 0.0625
    rows[0]["gc_pause_s"] = 0.125
    assert tf.warm_up(loop_of(rows), total) == warm(
        "the first 2 call(s) of step took 1.25 s against 125.0 ms per call after them; its first epoch's calls took "
        "250.0 ms (median) against 125.0 ms later; 562.5 ms of that excess was garbage collection, counted there, "
        "not here" + NOT_SAMPLED, 1.875 - 0.5625, total, 10)


def test_a_first_epoch_of_half_the_calls_is_not_warm_up():
    """10 steady calls of 20 in the first epoch (half the loop, not fewer than half), twice as slow as
    the later ones: only the first two calls are said; 9 of 19 (fewer than half) are."""
    rows = epoch_rows([0.25] * 10, [LEVEL] * 8)
    total = sum(r["wall_s"] for r in rows)
    f = tf.warm_up(loop_of(rows), total)
    assert f == warm("the first 2 call(s) of step took 1.25 s against 250.0 ms per call after them" + NOT_SAMPLED,
                     0.75, total, 2)
    rows = epoch_rows([0.25] * 9, [LEVEL] * 8)
    total = sum(r["wall_s"] for r in rows)
    assert tf.warm_up(loop_of(rows), total) == warm(
        "the first 2 call(s) of step took 1.25 s against 250.0 ms per call after them; its first epoch's calls took "
        "250.0 ms (median) against 125.0 ms later" + NOT_SAMPLED, 0.75 + 9 * 0.125, total, 11)


def test_a_first_epoch_is_slower_when_over_1_2_times_the_later_level():
    """150 ms against 125 ms is 1.2 times (not over it): not said; 156.25 ms is 1.25 times: said."""
    rows = epoch_rows([0.15] * 8, [LEVEL] * 20)
    total = sum(r["wall_s"] for r in rows)
    assert "first epoch" not in tf.warm_up(loop_of(rows), total)["words"]
    rows = epoch_rows([0.15625] * 8, [LEVEL] * 20)
    total = sum(r["wall_s"] for r in rows)
    assert tf.warm_up(loop_of(rows), total) == warm(
        "the first 2 call(s) of step took 1.25 s against 125.0 ms per call after them; its first epoch's calls took "
        "156.2 ms (median) against 125.0 ms later" + NOT_SAMPLED, 1.0 + 8 * 0.03125, total, 10)


def test_a_first_epoch_within_the_steps_noise_is_not_warm_up():
    """The later calls cycle 62.5, 125 and 187.5 ms: level 125 ms and a spread of 1.4826 x 62.5 ms,
    so 3 spreads put the bar at 403 ms; a first epoch at 156.25 ms (1.25 times the later level) is
    within it, one at 500 ms beyond it."""
    later = [(0.0625, LEVEL, 0.1875)[i % 3] for i in range(60)]
    rows = epoch_rows([0.15625] * 8, later)
    total = sum(r["wall_s"] for r in rows)
    lp = loop_of(rows)
    assert lp.level == LEVEL and lp.noise == spread(later)  # the plant's: the first epoch moves neither
    assert tf.warm_up(lp, total) == warm(
        "the first 2 call(s) of step took 1.25 s against 125.0 ms per call after them" + NOT_SAMPLED, 1.0, total, 2)
    rows = epoch_rows([0.5] * 8, later)
    total = sum(r["wall_s"] for r in rows)
    assert tf.warm_up(loop_of(rows), total) == warm(
        "the first 2 call(s) of step took 1.25 s against 125.0 ms per call after them; its first epoch's calls took "
        "500.0 ms (median) against 125.0 ms later" + NOT_SAMPLED, 1.0 + 8 * 0.375, total, 10)


def test_calls_without_an_epoch_are_not_a_later_epoch():
    """One epoch of slow calls (250 ms), then calls at 125 ms with no epoch recorded: no epoch is
    later than the first, so only the first calls are warm-up."""
    rows = epoch_rows([0.25] * 8, [])
    rows += [row(len(rows) + i, LEVEL) for i in range(30)]
    total = sum(r["wall_s"] for r in rows)
    assert tf.warm_up(loop_of(rows), total) == warm(
        "the first 2 call(s) of step took 1.25 s against 125.0 ms per call after them" + NOT_SAMPLED, 1.0, total, 2)


def test_crowded_calls_are_never_warm_up():
    """The load sampled: the first two calls ran on full cores (others took 100 % of a core, no idle
    left) and are the machine's; the rest of the first epoch (250 ms, on quiet cores) is warm-up
    alone; crowded calls in it would not count toward its level."""
    rows = epoch_rows([0.25] * 8, [LEVEL] * 20)
    for r in rows:
        r["others_cpu_pct"], r["idle_cpu_pct"] = (100.0, 0.0) if r["index"] < 2 else (0.0, 50.0)
    total = sum(r["wall_s"] for r in rows)
    assert tf.warm_up(loop_of(rows), total) == warm(
        "its first epoch's calls took 250.0 ms (median) against 125.0 ms later", 1.0, total, 8)
    for r in rows[2:4]:  # two of the first epoch's calls crowded too, at 500 ms
        r.update(wall_s=0.5, others_cpu_pct=100.0, idle_cpu_pct=0.0)
    total = sum(r["wall_s"] for r in rows)
    assert tf.warm_up(loop_of(rows), total) == warm(
        "its first epoch's calls took 250.0 ms (median) against 125.0 ms later", 0.75, total, 6)
    for r in rows[:2]:
        r.update(others_cpu_pct=0.0, idle_cpu_pct=50.0)  # the first two quiet again: theirs too
    assert tf.warm_up(loop_of(rows), total)["words"].startswith(
        "the first 2 call(s) of step took 1.25 s against 125.0 ms per call after them; its first epoch's")


# a busy machine, sampled


def sampled_rows(quiet: int, crowded: int, wall: float = 0.25) -> list[dict]:
    """Two warm-up calls and ``quiet`` calls at LEVEL while others took 40 % of a core with 60 % idle;
    then ``crowded`` calls of ``wall`` while others took 75 or 87.5 % (alternately: 81.25 % on
    average, 35 or 47.5 % over their usual 40 %: in calls of 250 ms, 103.125 ms of CPU more a call
    on average) with 10 or 20 % idle."""
    rows = [row(i, LEVEL, others_cpu_pct=40.0, idle_cpu_pct=60.0) for i in range(2 + quiet)]
    rows += [row(2 + quiet + j, wall, others_cpu_pct=(75.0, 87.5)[j % 2], idle_cpu_pct=(10.0, 20.0)[j % 2])
             for j in range(crowded)]
    return rows


def busy(m: int, at_stake: float, total: float) -> dict:
    return found(
        "busy machine", at_stake, total,
        f"{m} call(s) of step ran on full cores while other processes took 81 % of a core on them (usually 40 %), "
        f"103.1 ms of CPU more per call: 250.0 ms (median, longest 250.0 ms) against 125.0 ms otherwise, "
        f"{tf.ms(at_stake)} over it in all",
        [proof("others_cpu_pct", 81.25, "%", f"sampled (psutil, the cores this process may run on), mean over {m} "
               "call(s); usually 40 % (median over the steady calls)"),
         proof("others' extra CPU per call", 0.103125, "s", "(others_cpu_pct - usual) x the call's time, mean over "
               "those calls"),
         proof("idle_cpu_pct", 15.0, "%", "sampled, those calls")],
        BUSY_NEXT)


def test_calls_on_crowded_cores_are_a_busy_machine_at_their_excess_over_the_quiet_calls():
    """10 calls of 250 ms on full cores, others taking 81 % of a core (against their usual 40 %),
    beside 18 quiet steady calls of 125 ms: 1.25 s over the quiet level."""
    rows = sampled_rows(18, 10)
    total = 30 * LEVEL + 1.25
    assert mf.busy_machine(loop_of(rows), total) == busy(10, 1.25, total)


def test_a_busy_machine_needs_five_quiet_steady_calls_to_compare_with():
    """Five quiet calls, or four and a call of 250 ms whose process computed 31.25 ms with no load
    sample of its own (the first window's): it waited, but not where the load was sampled
    (busy.own_waits), so it is not the off-CPU wait's and is the fifth the crowded calls are held
    against (their level, 125 ms, the median of the five)."""
    rows = sampled_rows(5, 4)
    total = 11 * LEVEL + 0.5
    assert mf.busy_machine(loop_of(rows), total) == busy(4, 0.5, total)
    assert mf.busy_machine(loop_of(sampled_rows(4, 3)), 9 * LEVEL + 0.375) is None
    assert mf.busy_machine(loop_of(sampled_rows(18, 0)), 20 * LEVEL) is None  # nothing crowded
    rows = [{**r, "cpu_s": 0.03125} for r in sampled_rows(4, 2)] + [row(8, 0.25, cpu_s=0.03125)]
    total = 6 * LEVEL + 3 * 0.25
    assert mf.busy_machine(loop_of(rows), total) == busy(2, 0.25, total)
    assert mf.busy_machine(loop_of(rows[:-1]), total - 0.25) is None  # four


def test_crowded_calls_within_the_quiet_calls_noise_are_not_a_busy_machine():
    """The quiet calls alternate 187.5 and 62.5 ms: level 125 ms, spread 1.4826 x 62.5 ms, 3 spreads
    278 ms. 16 calls on full cores at 375 ms (250 ms over) are within it, though their 4 s is far
    beyond 3 spreads over 16 calls (1.1 s); at 500 ms (375 over) they are beyond it."""
    def rows_at(wall: float) -> list[dict]:
        rows = [row(i, (0.1875, 0.0625)[i % 2], others_cpu_pct=0.0, idle_cpu_pct=60.0) for i in range(42)]
        return rows + [row(42 + j, wall, others_cpu_pct=100.0, idle_cpu_pct=0.0) for j in range(16)]

    quiet = [r["wall_s"] for r in rows_at(0.375)[2:42]]
    assert np.median(quiet) == LEVEL and 3 * spread(quiet) < 0.25 + 0.03  # 278 ms: within 250 + 30
    rows = rows_at(0.375)
    assert mf.busy_machine(loop_of(rows), sum(r["wall_s"] for r in rows)) is None
    rows = rows_at(0.5)
    total = sum(r["wall_s"] for r in rows)
    assert mf.busy_machine(loop_of(rows), total) == found(
        "busy machine", 16 * 0.375, total,
        "16 call(s) of step ran on full cores while other processes took 100 % of a core on them (usually 0 %), "
        "500.0 ms of CPU more per call: 500.0 ms (median, longest 500.0 ms) against 125.0 ms otherwise, 6.00 s over "
        "it in all",
        [proof("others_cpu_pct", 100.0, "%", "sampled (psutil, the cores this process may run on), mean over 16 "
               "call(s); usually 0 % (median over the steady calls)"),
         proof("others' extra CPU per call", 0.5, "s", "(others_cpu_pct - usual) x the call's time, mean over those "
               "calls"),
         proof("idle_cpu_pct", 0.0, "%", "sampled, those calls")],
        BUSY_NEXT)
    assert mf.busy_machine(loop_of(rows), 200.0) is None  # 6 s of a 200 s run: under 5 %
    timed = [dict(r, thread_cpu_s=0.0625) for r in rows_at(0.5)]  # sampled, the calls' own work known:
    assert mf.off_cpu_wait(loop_of(timed), total, one_thread=True) is None  # the load names the machine's, no wait
    rows = rows_at(LEVEL + 3 * spread(quiet))  # exactly 3 spreads over: not beyond them
    assert mf.busy_machine(loop_of(rows), sum(r["wall_s"] for r in rows)) is None


# a busy machine, not sampled: calls that waited


def waiting_rows(cpu_field: str = "thread_cpu_s", quiet_cpu: float = 0.0625, slow_cpu: float = 0.078125,
                 quiet: int = 18, slow: int = 10, **extra) -> list[dict]:
    """Two warm-up and ``quiet`` calls at LEVEL computing ``quiet_cpu``, then ``slow`` calls of 375 ms
    computing ``slow_cpu``."""
    rows = [row(i, LEVEL, **{cpu_field: quiet_cpu}, **extra) for i in range(2 + quiet)]
    return rows + [row(2 + quiet + j, 0.375, **{cpu_field: slow_cpu}, **extra) for j in range(slow)]


def waited(m: int, at_stake: float, total: float, cpu_field: str, cpu: float, cpu_text: str, level_text: str,
           whose: str, why: str = UNRECORDED) -> dict:
    """The off-CPU wait the rows cannot pin on the machine or the step (``why``)."""
    return found(
        "off-CPU wait", at_stake, total,
        f"{m} call(s) of step took 375.0 ms (median) against 125.0 ms otherwise, and their CPU time ({cpu_text} a call "
        f"against {level_text}) accounts for at most half of each one's excess: {tf.ms(at_stake)} off the CPU: waiting "
        f"for a core (other processes' load) or on I/O, a lock or a sleep in the step, not warm-up; which, the rows "
        f"cannot say ({why})",
        [proof(cpu_field, cpu, "s", f"the {whose}'s CPU time, median of those {m} call(s); {level_text} in the others"),
         proof("wall_s/device_s", 0.375, "s", f"median of those {m} call(s)")],
        WAITED_NEXT)


def test_calls_that_waited_rather_than_computed_are_an_off_cpu_wait_on_one_thread():
    """Torch on one thread: 10 calls took 250 ms over the level while their thread computed 15.625 ms
    more than usual (62.5 ms): 234.375 ms each waited, 2.34375 s in all. The thread's CPU time is read
    before the process's (which here grew with the wall time)."""
    total = 30 * LEVEL + 2.5
    expected = waited(10, 2.34375, total, "thread_cpu_s", 0.078125, "78.1 ms", "62.5 ms", "thread")
    assert expected["words"].endswith("accounts for at most half of each one's excess: 2.34 s off the CPU: waiting "
                                      "for a core (other processes' load) or on I/O, a lock or a sleep in the step, "
                                      f"not warm-up; which, the rows cannot say ({UNRECORDED})")
    rows = waiting_rows()
    for r in rows:
        r["cpu_s"] = r["wall_s"]
    assert mf.off_cpu_wait(loop_of(rows), total, one_thread=True) == expected
    assert mf.off_cpu_wait(loop_of(waiting_rows("cpu_s")), total, one_thread=True) == waited(
        10, 2.34375, total, "cpu_s", 0.078125, "78.1 ms", "62.5 ms", "process")
    assert mf.off_cpu_wait(loop_of(waiting_rows(others_cpu_pct=0.0)), total, one_thread=True) == expected  # no idle
    assert mf.off_cpu_wait(loop_of(waiting_rows(idle_cpu_pct=50.0)), total, one_thread=True) == expected  # no others
    # the load sampled, the cores half idle and other processes taking nothing: the machine did not
    # make them wait, and the wait is the step's own
    sampled = mf.off_cpu_wait(loop_of(waiting_rows(others_cpu_pct=0.0, idle_cpu_pct=50.0)), total, one_thread=True)
    head = expected["words"].split(": waiting for a core")[0]
    assert sampled == dict(expected, words=(
        f"{head}; the machine's sampled load does not account for it (its cores had time to spare, or other processes "
        "took less than half of it beyond their usual CPU): the thread gave the CPU up, on I/O, a lock (the GIL: "
        "another thread of the process) or a sleep in the step, not warm-up"), next=OWN_WAIT_NEXT)
    # on several threads (CPU time inflated by spinning) a call waited only where it computed under
    # half its time: 187.5 ms of 375 is half, though on one thread 125 ms of its excess (half) waited
    assert mf.off_cpu_wait(loop_of(waiting_rows("cpu_s", slow_cpu=0.1875)), total) is None
    assert mf.off_cpu_wait(loop_of(waiting_rows("cpu_s", slow_cpu=0.1875)), total, one_thread=True) == waited(
        10, 1.25, total, "cpu_s", 0.1875, "187.5 ms", "62.5 ms", "process")


def test_on_sampled_full_cores_the_threads_run_queue_still_tells_a_busy_machine_from_a_sleep():
    """The load sampled, full cores the whole run (0 % idle), one core's worth of other processes
    during the slow calls (100 % of a core against their usual 0 %): during each 375 ms slow call
    the rise took 375 ms of CPU, more than its 250 ms excess, so by the sampled rule alone its cores
    were crowded.
    Yet a sleeping call leaves its core to them as well: with the thread's run queue recorded, a
    call whose thread queued no more than the usual one (0 s) gave the CPU up, the step's own wait
    (a sleep planted in a step on a busy machine was called a busy machine, "not the job's cost"),
    and one that queued half its excess (125 ms of 250) waited for a core: a busy machine. Without
    the run queue the sampled rule stands. The spikes name the same calls."""
    from gnnmon.report.analysis import spikes

    total = 30 * LEVEL + 2.5

    def loaded(queued: float | None) -> list[dict]:
        rows = waiting_rows(others_cpu_pct=100.0, idle_cpu_pct=0.0)
        for r in rows:
            r["others_cpu_pct"] = 100.0 if r["wall_s"] > LEVEL else 0.0
        if queued is not None:
            for r in rows:
                r["thread_queued_s"] = queued if r["wall_s"] > LEVEL else 0.0
        return rows

    slept = loop_of(loaded(0.0))
    assert mf.busy_machine(slept, total, one_thread=True) is None
    own = mf.off_cpu_wait(slept, total, one_thread=True)
    assert own is not None and own["kind"] == "off-CPU wait" and own["next"] == OWN_WAIT_NEXT, own
    assert own["at_stake"] == 10 * 0.234375 and own["words"].endswith(
        "of which waiting for a core holds only 0.0 ms: the thread gave the CPU up, on I/O, a lock (the GIL: another "
        "thread of the process) or a sleep in the step, not warm-up"), own
    assert [s["cause"] for s in spikes(loaded(0.0), one_thread=True)] == ["off-CPU wait"] * 10
    queued = loop_of(loaded(0.125))
    machine = mf.busy_machine(queued, total, one_thread=True)
    assert machine is not None and machine["kind"] == "busy machine" and machine["words"].startswith(
        "10 call(s) of step ran on full cores while other processes took 100 % of a core on them (usually 0 %)"), (
        machine)
    assert mf.off_cpu_wait(queued, total, one_thread=True) is None
    assert [s["cause"] for s in spikes(loaded(0.125), one_thread=True)] == ["busy machine"] * 10
    just_under = loop_of(loaded(0.125 - 2**-20))  # under half of the excess: not the machine's
    assert mf.busy_machine(just_under, total, one_thread=True) is None
    unrecorded = loop_of(loaded(None))
    assert mf.busy_machine(unrecorded, total, one_thread=True)["words"].startswith("10 call(s) of step ran on full")
    assert mf.off_cpu_wait(unrecorded, total, one_thread=True) is None


def test_sampled_waits_are_counted_once_and_the_run_queue_is_read_only_for_one_thread():
    """Four plants around the sampled rule (a review's counter-examples). (1) The first two calls
    waited 875 ms each off the CPU (50 ms of CPU against 100 ms), cores half idle: an off-CPU wait of
    1.75 s, and no warm-up (each call's excess is one finding's). (2) Torch on several threads: the
    one thread's run queue is not the step's, so calls on full cores whose others took all their
    excess stay a busy machine. (3) The busy machine's level leaves out the calls that are the
    off-CPU wait's: 8 calls queued 150 ms on full cores over 22 quiet ones (100-150 ms) are a busy
    machine beside 10 sleeps of 600 ms. (4) Slow calls with no load sample of their own are not
    said to be the sampled load's: neither finding takes them."""
    first = [row(i, 1.0 if i < 2 else LEVEL, cpu_s=0.05 if i < 2 else 0.1, others_cpu_pct=0.0, idle_cpu_pct=50.0)
             for i in range(30)]
    lp = loop_of(first)
    assert tf.warm_up(lp, lp.total, one_thread=True) is None
    assert mf.off_cpu_wait(lp, lp.total, one_thread=True)["at_stake"] == 2 * (1.0 - LEVEL)

    crowded = [row(i, 0.375 if i >= 20 else LEVEL, cpu_s=0.05 if i >= 20 else 0.1, others_cpu_pct=100.0 * (i >= 20),
                   idle_cpu_pct=0.0, thread_queued_s=0.0) for i in range(30)]
    lp = loop_of(crowded)
    assert mf.busy_machine(lp, lp.total)["words"].startswith("10 call(s) of step ran on full cores")
    assert mf.off_cpu_wait(lp, lp.total) is None

    quiet = [0.100 + 0.05 * ((i * 7) % 22) / 21 for i in range(22)]
    mixed = ([row(i, t, thread_cpu_s=0.06, others_cpu_pct=20.0, idle_cpu_pct=80.0, thread_queued_s=0.0)
              for i, t in enumerate(quiet)]
             + [row(22 + i, 0.6, thread_cpu_s=0.06, others_cpu_pct=100.0, idle_cpu_pct=0.0, thread_queued_s=0.0)
                for i in range(10)]
             + [row(32 + i, 0.25, thread_cpu_s=0.06, others_cpu_pct=100.0, idle_cpu_pct=0.0, thread_queued_s=0.15)
                for i in range(8)])
    lp = loop_of(mixed)
    level = float(np.median(quiet[2:]))
    said = mf.busy_machine(lp, lp.total, one_thread=True)
    assert said is not None and f"250.0 ms (median, longest 250.0 ms) against {tf.ms(level)} otherwise" in said["words"]
    assert mf.off_cpu_wait(lp, lp.total, one_thread=True)["words"].startswith("10 call(s) of step took 600.0 ms")
    for r in mixed:  # the queued calls spent 125 ms of their excess in phase fetch, the others none
        r["phase_fetch_s"] = 0.125 if r["wall_s"] == 0.25 else 0.0
    said = mf.busy_machine(loop_of(mixed), lp.total, one_thread=True)
    assert said["words"].endswith("; phase fetch took 125.0 ms more of it (median 125.0 ms against 0.0 ms)"), said

    unsampled = [row(i, LEVEL, cpu_s=0.1, others_cpu_pct=100.0, idle_cpu_pct=0.0) for i in range(25)]
    unsampled += [row(25 + i, 0.375, cpu_s=0.05) for i in range(5)]  # the load not sampled for these
    lp = loop_of(unsampled)
    assert not machine.own_waits(lp, machine.load(lp), True).any()
    assert mf.off_cpu_wait(lp, lp.total, one_thread=True) is None and mf.busy_machine(lp, lp.total, True) is None


def test_an_off_cpu_wait_names_the_phase_that_holds_it():
    """The 10 slow calls waited 234.375 ms beyond their work; each ran phase io for 250 ms (its whole
    excess), which the quiet calls ran for 2**-6 s or not at all (median 0 s, where every third runs
    it): the finding says phase io took 250 ms more (the medians'), with its evidence. A phase that
    grew by under half the excess (124 ms of 250) is not named, nor one that did not grow."""
    total = 30 * LEVEL + 2.5

    def with_io(slow_io: float) -> list[dict]:
        rows = waiting_rows()
        for i, r in enumerate(rows):
            if r["wall_s"] > LEVEL:
                r["phase_io_s"] = slow_io
                r["phase_forward_s"] = 0.0625
            else:
                r["phase_forward_s"] = 0.0625
                if i % 3 == 0:
                    r["phase_io_s"] = 2**-6
        return rows

    said = mf.off_cpu_wait(loop_of(with_io(0.25)), total, one_thread=True)
    assert "off the CPU; phase io took 250.0 ms more of it (median 250.0 ms against 0.0 ms): waiting " \
           "for a core" in said["words"], said["words"]
    assert said["evidence"][-1] == proof("phase_io_s", 0.25, "s", "median of those 10 call(s); 0.0 ms in the others")
    assert mf.part_holding(loop_of(with_io(0.25)), *_slow_and_quiet(with_io(0.25))) == ("phase", "io", 0.25, 0.0)
    assert mf.part_holding(loop_of(with_io(0.124)), *_slow_and_quiet(with_io(0.124))) is None
    assert "phase" not in mf.off_cpu_wait(loop_of(with_io(0.124)), total, one_thread=True)["words"]
    half = with_io(0.125)  # half the excess: held
    assert mf.part_holding(loop_of(half), *_slow_and_quiet(half)) == ("phase", "io", 0.125, 0.0)


def test_the_phase_named_is_the_one_that_grew_most_not_one_that_grew_more_than_its_usual():
    """Phase io (recorded first) grew by 250 ms from 0 s; phase forward by 62.5 ms from 62.5 ms: io
    holds the wait, though forward grew by more than io's usual time (0 s). Where forward grew by
    125 ms (half the 250 ms excess: it holds the wait too), io, which grew more, is named, not
    forward, whose usual time is the longer. Calls no slower than the others (the quiet calls
    against themselves) hold no wait: no phase is named, though each grew by half of nothing."""
    rows = waiting_rows()
    for r in rows:
        slow = r["wall_s"] > LEVEL
        r["phase_io_s"] = 0.25 if slow else 0.0
        r["phase_forward_s"] = 0.125 if slow else 0.0625
    assert mf.part_holding(loop_of(rows), *_slow_and_quiet(rows)) == ("phase", "io", 0.25, 0.0)
    for r in rows:
        if r["wall_s"] > LEVEL:
            r["phase_forward_s"] = 0.1875
    assert mf.part_holding(loop_of(rows), *_slow_and_quiet(rows)) == ("phase", "io", 0.25, 0.0)
    quiet = _slow_and_quiet(rows)[1]
    assert mf.part_holding(loop_of(rows), quiet, quiet) is None


def test_the_phase_named_is_the_innermost_that_holds_the_wait():
    """Phase read runs inside phase load (the row says ``phase_read_in = "load"``, recorded first):
    where read grew by the whole 250 ms excess, load (which holds it) grew as much, and read is
    named; where read grew by 62.5 ms (under half the excess) and load by 250 ms, load is. Not
    nested (no ``phase_read_in``, or one with no phase in it), the two tie and the first, load, is."""
    def nested(read: float) -> list[dict]:
        rows = waiting_rows()
        for r in rows:
            slow = r["wall_s"] > LEVEL
            r["phase_read_in"] = "load"
            r["phase_load_s"] = 0.25 + 2**-6 if slow else 2**-6
            r["phase_read_s"] = read if slow else 0.0
        return rows

    assert mf.part_holding(loop_of(nested(0.25)), *_slow_and_quiet(nested(0.25))) == ("phase", "read", 0.25, 0.0)
    assert mf.part_holding(loop_of(nested(0.0625)), *_slow_and_quiet(nested(0.0625))) == ("phase", "load", 0.25, 2**-6)
    unnested = nested(0.25)
    for r in unnested:
        del r["phase_read_in"]
    assert mf.part_holding(loop_of(unnested), *_slow_and_quiet(unnested))[1] == "load"  # a tie: the first
    for r in unnested:
        r["phase_read_in"] = None  # a file's empty cell: the column is there, naming no phase
    assert mf.part_holding(loop_of(unnested), *_slow_and_quiet(unnested))[1] == "load"


def test_the_calls_an_off_cpu_wait_is_held_against_are_neither_its_own_nor_the_crowded_ones():
    """The load sampled: 10 calls of 375 ms slept (their thread computed 78.125 ms, their cores half
    idle, others taking nothing); 4 calls of 375 ms computed their excess (312.5 ms of CPU) on
    crowded cores (100 % of a core to others, none idle): they computed, so they are not the
    machine's (busy.computed) nor waits, and they are among the calls held against with the 18
    quiet steady calls, which alternately computed 62.5 and 70.3125 ms: their median, 70.3125 ms,
    is the CPU time the sleeping calls' is held against (without the computing calls it would be
    66.40625 ms). Each sleeping call waited 250 ms less the 7.8125 ms its CPU time grew by over
    the steady calls' median (70.3125 ms): 2.421875 s in all. With the run queue recorded and no
    thread ever queued, the same."""
    rows = waiting_rows(others_cpu_pct=0.0, idle_cpu_pct=50.0)
    for r in rows[1:20:2]:
        r["thread_cpu_s"] = 0.0703125
    rows += [row(30 + j, 0.375, thread_cpu_s=0.3125, others_cpu_pct=100.0, idle_cpu_pct=0.0) for j in range(4)]
    total = 20 * LEVEL + 14 * 0.375
    assert mf.off_cpu_wait(loop_of(rows), total, one_thread=True) == found(
        "off-CPU wait", 2.421875, total,
        "10 call(s) of step took 375.0 ms (median) against 125.0 ms otherwise, and their CPU time (78.1 ms a call "
        "against 70.3 ms) accounts for at most half of each one's excess: 2.42 s off the CPU; the machine's sampled "
        "load does not account for it (its cores had time to spare, or other processes took less than half of it "
        "beyond their usual CPU): the thread gave the CPU up, on I/O, a lock (the GIL: another thread of the "
        "process) or a sleep in the step, not warm-up",
        [proof("thread_cpu_s", 0.078125, "s", "the thread's CPU time, median of those 10 call(s); 70.3 ms in the "
               "others"),
         proof("wall_s/device_s", 0.375, "s", "median of those 10 call(s)")],
        OWN_WAIT_NEXT)
    for r in rows:
        r["thread_queued_s"] = 0.0
    assert mf.off_cpu_wait(loop_of(rows), total, one_thread=True) == found(
        "off-CPU wait", 2.421875, total,
        "10 call(s) of step took 375.0 ms (median) against 125.0 ms otherwise, and their CPU time (78.1 ms a call "
        "against 70.3 ms) accounts for at most half of each one's excess: 2.42 s off the CPU, of which waiting for a "
        "core holds only 0.0 ms: the thread gave the CPU up, on I/O, a lock (the GIL: another thread of the process) "
        "or a sleep in the step, not warm-up",
        [proof("thread_cpu_s", 0.078125, "s", "the thread's CPU time, median of those 10 call(s); 70.3 ms in the "
               "others"),
         proof("wall_s/device_s", 0.375, "s", "median of those 10 call(s)"),
         proof("thread_queued_s", 0.0, "s", "the thread's run-queue time beyond the usual call's, summed over "
               "those 10 call(s) (the scheduler's count: collect(sched=True))")],
        OWN_WAIT_NEXT)


def test_on_several_threads_a_sampled_off_cpu_wait_says_how_little_of_it_the_thread_queued():
    """Torch on several threads, the load sampled (cores half idle, others taking nothing) and the
    run queue recorded: 10 calls of 375 ms computed 125 ms (250 ms in a quiet call): each waited
    125 ms, 1.25 s in all, and its thread queued 31.25 ms more than the usual call (under half):
    the finding says the 312.5 ms it queued in all, in its words and its evidence."""
    rows = waiting_rows("cpu_s", quiet_cpu=0.25, slow_cpu=0.125, others_cpu_pct=0.0, idle_cpu_pct=50.0)
    for r in rows:
        r["thread_queued_s"] = 2**-5 if r["wall_s"] > LEVEL else 0.0
    total = 30 * LEVEL + 2.5
    assert mf.off_cpu_wait(loop_of(rows), total) == found(
        "off-CPU wait", 1.25, total,
        "10 call(s) of step took 375.0 ms (median) against 125.0 ms otherwise, and their CPU time (125.0 ms a call "
        "against 250.0 ms) accounts for at most half of each one's excess: 1.25 s off the CPU; the machine's sampled "
        "load does not account for it (its cores had time to spare, or other processes took less than half of it "
        "beyond their usual CPU, and waiting for a core holds only 312.5 ms of it): the thread gave the CPU up, on "
        "I/O, a lock (the GIL: another thread of the process) or a sleep in the step, not warm-up",
        [proof("cpu_s", 0.125, "s", "the process's CPU time, median of those 10 call(s); 250.0 ms in the others"),
         proof("wall_s/device_s", 0.375, "s", "median of those 10 call(s)"),
         proof("thread_queued_s", 0.3125, "s", "the thread's run-queue time beyond the usual call's, summed over "
               "those 10 call(s) (the scheduler's count: collect(sched=True))")],
        OWN_WAIT_NEXT)


def test_sampled_a_call_that_queued_is_the_machines_only_on_crowded_cores():
    """The load sampled, the cores half idle and other processes taking nothing: the 10 slow calls'
    threads queued 125 ms more than the usual call, half their excess, yet their cores were not
    crowded, so the sampled rule names none of them the machine's (the queue only narrows it)."""
    rows = waiting_rows(others_cpu_pct=0.0, idle_cpu_pct=50.0)
    for r in rows:
        r["thread_queued_s"] = 0.125 if r["wall_s"] > LEVEL else 0.0
    lp = loop_of(rows)
    assert machine.machine_calls(lp, machine.load(lp), True).tolist() == [False] * 30


def test_a_sampled_busy_machine_names_the_phase_that_took_its_excess():
    """One core's worth of other processes during the slow calls (100 % of a core against their
    usual 0 %, 0 % idle throughout), the run queue not recorded: the 10 slow calls are the
    machine's. Each ran phase io for 250 ms (its whole excess), which the quiet calls never ran
    (0 s): the finding says phase io took 250 ms more of it, with its evidence last."""
    rows = waiting_rows(others_cpu_pct=100.0, idle_cpu_pct=0.0)
    for r in rows:
        r["phase_io_s"] = 0.25 if r["wall_s"] > LEVEL else 0.0
        r["others_cpu_pct"] = 100.0 if r["wall_s"] > LEVEL else 0.0
    said = mf.busy_machine(loop_of(rows), 30 * LEVEL + 2.5, one_thread=True)
    assert said is not None and said["words"] == (
        "10 call(s) of step ran on full cores while other processes took 100 % of a core on them (usually 0 %), "
        "375.0 ms of CPU more per call: 375.0 ms (median, longest 375.0 ms) against 125.0 ms otherwise, 2.50 s over "
        "it in all; phase io took 250.0 ms more of it (median 250.0 ms "
        "against 0.0 ms)"), said
    assert said["evidence"][-1] == proof("phase_io_s", 0.25, "s", "median of those 10 call(s); 0.0 ms in the others")
    assert len(said["evidence"]) == 4


def test_warm_up_leaves_the_sampled_waits_with_a_sample_of_their_own_to_the_off_cpu_wait():
    """The load sampled (cores half idle, others taking nothing), torch on one thread: the 10 slow
    calls waited 234.375 ms each, the step's own waits, which warm-up leaves to the off-CPU wait
    (busy.crowded_calls); the first two calls waited as long with no load sample of their own (the
    first window), which the sampled load does not judge: they stay warm-up's."""
    rows = waiting_rows(others_cpu_pct=0.0, idle_cpu_pct=50.0)
    for r in rows[:2]:
        r.update(wall_s=0.375, thread_cpu_s=0.078125)
        del r["others_cpu_pct"], r["idle_cpu_pct"]
    assert machine.crowded_calls(loop_of(rows), one_thread=True).tolist() == [False] * 20 + [True] * 10


def _slow_and_quiet(rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """The slow steady calls and the quiet steady ones of ``rows`` (warm-up's two left out)."""
    t = np.array([r["wall_s"] for r in rows])
    steady = np.arange(t.size) >= 2
    return steady & (t > LEVEL), steady & (t <= LEVEL)


def test_the_threads_run_queue_tells_a_busy_machine_from_the_steps_own_wait():
    """collect(sched=True): the 10 slow calls each waited 234.375 ms beyond their work (one thread).
    Their thread waited on the run queue (a core) 117.1875 ms more than the usual call: exactly half:
    a busy machine; 2**-20 s less: under half, the thread gave the CPU up (I/O, a lock, a sleep): the
    step's own wait. On several threads the thread's queue under half cannot rule out torch's other
    threads' waiting for a core: unknown."""
    total = 30 * LEVEL + 2.5
    head = ("10 call(s) of step took 375.0 ms (median) against 125.0 ms otherwise, and their CPU time (78.1 ms a call "
            "against 62.5 ms) accounts for at most half of each one's excess: 2.34 s off the CPU")

    def with_queue(slow: float) -> list[dict]:
        rows = waiting_rows()
        for r in rows:
            r["thread_queued_s"] = slow if r["wall_s"] > LEVEL else 0.0
        return rows

    def cpu_and_queue(queued: float) -> list[dict]:
        return [proof("thread_cpu_s", 0.078125, "s", "the thread's CPU time, median of those 10 call(s); 62.5 ms in "
                      "the others"),
                proof("wall_s/device_s", 0.375, "s", "median of those 10 call(s)"),
                proof("thread_queued_s", queued, "s", "the thread's run-queue time beyond the usual call's, summed "
                      "over those 10 call(s) (the scheduler's count: collect(sched=True))")]

    half = 0.1171875
    assert mf.busy_machine(loop_of(with_queue(half)), total, one_thread=True) == found(
        "busy machine", 2.34375, total,
        f"{head}, 1.17 s of it waiting for a core while the thread could run (other processes' load), not warm-up",
        cpu_and_queue(10 * half), BUSY_NEXT)
    assert mf.off_cpu_wait(loop_of(with_queue(half)), total, one_thread=True) is None  # each call is one's
    under = half - 2**-20
    assert mf.busy_machine(loop_of(with_queue(under)), total, one_thread=True) is None
    assert mf.off_cpu_wait(loop_of(with_queue(under)), total, one_thread=True) == found(
        "off-CPU wait", 2.34375, total,
        f"{head}, of which waiting for a core holds only {tf.ms(10 * under)}: the thread gave the CPU up, on I/O, a "
        "lock (the GIL: another thread of the process) or a sleep in the step, not warm-up",
        cpu_and_queue(10 * under), OWN_WAIT_NEXT)
    from gnnmon.report.analysis import spikes

    causes = {s["cause"]: s["detail"] for s in spikes(with_queue(half), one_thread=True)}
    assert list(causes) == ["busy machine"] and causes["busy machine"].endswith(
        "for a core (its thread's CPU time 78.1 ms; its thread's run queue 117.2 ms more)"), causes
    causes = {s["cause"]: s["detail"] for s in spikes(with_queue(under), one_thread=True)}
    assert list(causes) == ["off-CPU wait"] and "for I/O, a lock or a sleep" in causes["off-CPU wait"], causes
    # each call's cause its own: 4 slow calls queued a half of their wait, 6 under it: two findings, each its calls
    mixed = with_queue(half)
    for r in mixed[-6:]:
        r["thread_queued_s"] = under
    machine_part, wait_part = (mf.busy_machine(loop_of(mixed), total, one_thread=True),
                               mf.off_cpu_wait(loop_of(mixed), total, one_thread=True))
    assert machine_part is not None and wait_part is not None
    assert machine_part["words"].startswith("4 call(s)") and machine_part["at_stake"] == 4 * 0.234375
    assert wait_part["words"].startswith("6 call(s)") and wait_part["at_stake"] == 6 * 0.234375
    assert [s["cause"] for s in spikes(mixed, one_thread=True)] == ["busy machine"] * 4 + ["off-CPU wait"] * 6
    # several threads: the process computed under half of each slow call (cpu_s), the thread's queue under half
    rows = waiting_rows("cpu_s", quiet_cpu=0.25, slow_cpu=0.125)
    for r in rows:
        r["thread_queued_s"] = 0.0
    assert mf.off_cpu_wait(loop_of(rows), total)["words"].endswith(  # type: ignore[index]
        "which, the rows cannot say (its thread's run-queue time holds only 0.0 ms of it, torch's other threads' is "
        "not recorded)")
    causes = {s["cause"]: s["detail"] for s in spikes(rows)}
    assert list(causes) == ["off-CPU wait"] and "for a core, I/O, a lock or a sleep" in causes["off-CPU wait"], causes
    # the same calls queued all their wait, half of them computing 156.25 ms: a busy machine, of the 5 known
    # to have waited on several threads (busy_machine's default); held as one thread's work, all 10 waited
    for r in rows:
        r["thread_queued_s"] = 0.25 if r["wall_s"] > LEVEL else 0.0
    for r in rows[-10::2]:
        r["cpu_s"] = 0.15625  # over half of 375 ms less the level: not known to have waited on several threads
    several, one = mf.busy_machine(loop_of(rows), total), mf.busy_machine(loop_of(rows), total, one_thread=True)
    assert several is not None and several["words"].startswith("5 call(s)"), several
    assert one is not None and one["words"].startswith("10 call(s)"), one


def test_calls_that_computed_under_half_their_time_on_several_threads_waited_at_least_the_rest():
    """Torch on several threads, two computing through each quiet call (250 ms of CPU in 125 ms); 10
    calls of 375 ms computed under half of it, 125 or 156.25 ms (alternately): they waited at least
    their time less their CPU time and less the level (all a quiet call could itself have waited),
    capped at their excess: 125 and 93.75 ms. Only the first are half their 250 ms excess: 5 calls,
    625 ms in all."""
    rows = waiting_rows("cpu_s", quiet_cpu=0.25, slow_cpu=0.125)
    for r in rows[-10::2]:
        r["cpu_s"] = 0.15625
    total = 30 * LEVEL + 2.5
    assert mf.off_cpu_wait(loop_of(rows), total) == waited(5, 0.625, total, "cpu_s", 0.125, "125.0 ms",
                                                           "250.0 ms", "process")


def test_on_a_loaded_machine_where_every_call_waits_half_its_time_a_longer_call_that_computed_longer_did_not_wait():
    """Torch on several threads on a loaded machine: every quiet call computes half its time (62.5
    ms of CPU in 125 ms); 10 calls of 1 s compute 492.2 ms, just under half theirs. Each had no
    thread running for 507.8 ms, but a quiet call may itself have waited its whole 125 ms: at least
    382.8 ms more, under half the 875 ms excess. Their CPU time grew eightfold with their time: no
    busy machine (their wall time less their CPU time alone, 507.8 ms, would have said one)."""
    rows = [row(i, LEVEL, cpu_s=0.0625) for i in range(20)] + [row(20 + j, 1.0, cpu_s=0.4921875) for j in range(10)]
    lp = loop_of(rows)
    assert machine.off_cpu(lp, False).tolist() == [0.0] * 20 + [0.3828125] * 10
    assert not machine.crowded_calls(lp).any()
    assert mf.off_cpu_wait(lp, 20 * LEVEL + 10.0) is None


def test_calls_that_waited_need_five_quiet_calls_beside_them_and_a_cpu_time():
    total = 9 * LEVEL + 4 * 0.25
    assert mf.off_cpu_wait(loop_of(waiting_rows(quiet=5, slow=4)), total, one_thread=True) == waited(
        4, 4 * 0.234375, total, "thread_cpu_s", 0.078125, "78.1 ms", "62.5 ms", "thread")
    assert mf.off_cpu_wait(loop_of(waiting_rows(quiet=4, slow=3)), total, one_thread=True) is None
    rows = waiting_rows()
    for r in rows:
        del r["thread_cpu_s"]
    assert mf.off_cpu_wait(loop_of(rows), 30 * LEVEL + 2.5, one_thread=True) is None  # no CPU time: cannot tell
    assert mf.off_cpu_wait(loop_of(waiting_rows(slow_cpu=0.0625 + 0.25)), 30 * LEVEL + 2.5, one_thread=True) is None


def test_a_call_waited_when_what_its_work_does_not_explain_is_half_its_excess_or_more():
    """250 ms over the level, its thread computing 125 ms more than usual: 125 ms waited, exactly
    half: waited; 125.0000x ms more computed: it computed."""
    rows = waiting_rows(slow_cpu=0.0625 + 0.125)
    total = 30 * LEVEL + 2.5
    assert mf.off_cpu_wait(loop_of(rows), total, one_thread=True) == waited(
        10, 1.25, total, "thread_cpu_s", 0.1875, "187.5 ms", "62.5 ms", "thread")
    assert mf.off_cpu_wait(loop_of(waiting_rows(slow_cpu=0.0625 + 0.126)), total, one_thread=True) is None


def test_a_call_that_compiled_did_not_wait_for_a_core():
    """Three of the slow calls compiled (their compile's workers are other processes): they are not counted."""
    rows = waiting_rows()
    for r in rows[-3:]:
        r["compile_frames"] = 1
    total = 30 * LEVEL + 2.5
    assert mf.off_cpu_wait(loop_of(rows), total, one_thread=True) == waited(
        7, 7 * 0.234375, total, "thread_cpu_s", 0.078125, "78.1 ms", "62.5 ms", "thread")


def test_calls_that_waited_within_the_steps_noise_are_not_a_busy_machine():
    """The quiet calls alternate 62.5 and 187.5 ms (spread 1.4826 x 62.5 ms, 3 spreads 278 ms); slow
    calls of 375 ms (250 over) that computed no more waited 250 ms each: within it, none said."""
    rows = waiting_rows()
    for r in rows[2:20]:
        r["wall_s"] = (0.0625, 0.1875)[r["index"] % 2]
    assert mf.off_cpu_wait(loop_of(rows), sum(r["wall_s"] for r in rows), one_thread=True) is None


def test_on_one_thread_first_calls_that_waited_are_the_machine_s_not_warm_up():
    """Torch on one thread, the load not sampled: the first two calls took 500 ms over the level and
    computed 250 ms more than the usual 62.5 ms (312.5 ms, half their time): half their excess
    waited, so they are the busy machine's (crowded), not warm-up. On several threads (whose CPU
    time spinning inflates) a call that computed half its time is not told to have waited: warm-up
    then, with its caveat."""
    rows = waiting_rows(quiet=18, slow=0)
    for r in rows[:2]:
        r.update(wall_s=LEVEL + 0.5, thread_cpu_s=0.3125)
    lp = loop_of(rows)
    assert machine.crowded_calls(lp, True).tolist() == [True, True] + [False] * 18
    assert tf.warm_up(lp, lp.total, one_thread=True) is None
    for r in rows:
        r["cpu_s"] = r.pop("thread_cpu_s")
    lp = loop_of(rows)
    assert machine.crowded_calls(lp, True).tolist() == [True, True] + [False] * 18
    assert machine.crowded_calls(lp).tolist() == [False] * 20  # several threads unless told
    assert machine.machine_calls(lp, None).tolist() == [False] * 20  # the load not sampled: the same
    assert tf.warm_up(lp, lp.total) == warm(
        "the first 2 call(s) of step took 1.25 s against 125.0 ms per call after them" + NOT_SAMPLED, 1.0, lp.total, 2)


def test_what_each_call_waited_is_its_excess_less_what_its_own_work_grew_by():
    """Torch on one thread; the usual work is the median over the steady calls (62.5 and 125 ms:
    93.75 ms, not the 1 s of the first two calls): a call with no CPU time recorded waited nothing
    that can be told; without any steady CPU time, no call's wait can be told."""
    walls = [1.0, 1.0, 0.125, 0.125, 0.125, 0.125, 0.5, 0.5, 0.0625]
    cpu = [1.0, 1.0, 0.0625, 0.0625, 0.125, 0.125, 0.125, None, 0.0625]
    rows = [row(i, w, **({"thread_cpu_s": c} if c is not None else {}))
            for i, (w, c) in enumerate(zip(walls, cpu, strict=True))]
    lp = loop_of(rows)
    assert lp.level == LEVEL
    assert machine.off_cpu(lp, True).tolist() == [0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                                             0.375 - 0.03125, 0.0, 0.0]
    for r in rows[2:]:
        r.pop("thread_cpu_s", None)
    assert machine.off_cpu(loop_of(rows), True).tolist() == [0.0] * 9
    del rows[0]["thread_cpu_s"], rows[1]["thread_cpu_s"]
    assert machine.off_cpu(loop_of(rows), True) is None
    assert machine.off_cpu(loop_of(rows), False) is None


def test_on_several_threads_a_call_waited_only_where_it_computed_under_half_its_time():
    """Each call 375 ms (250 over the 125 ms level) unless said: CPU 62.5 ms (waited its time less it
    and less the level, 187.5 ms), 156.25 ms (93.75 ms), 187.5 ms (exactly half: not plain), none
    recorded; a call at the level and one under it computing little waited nothing."""
    walls = [LEVEL, LEVEL, 0.375, 0.375, 0.375, 0.375, LEVEL, 0.0625, *[LEVEL] * 5]
    cpu = [0.25, 0.25, 0.0625, 0.15625, 0.1875, None, 0.03125, 0.015625, *[0.25] * 5]
    rows = [row(i, w, **({"cpu_s": c} if c is not None else {}))
            for i, (w, c) in enumerate(zip(walls, cpu, strict=True))]
    lp = loop_of(rows)
    assert lp.level == LEVEL
    assert machine.off_cpu(lp, False).tolist() == [0.0, 0.0, 0.1875, 0.09375, 0.0, 0.0, 0.0, 0.0, *[0.0] * 5]
    assert machine.work(lp, False) is None
    assert machine.work(lp, True) is not None and np.isnan(machine.work(lp, True)[5])


# slow steps


def spike(label: str, cause: str, excess: float, detail: str, computed: bool | None = None) -> dict:
    return {"label": label, "index": 0, "cause": cause, "excess_s": excess, "computed": computed, "detail": detail}


SPIKES = [spike("step", "unexplained", 0.25, "waiting, not computing: 10.0 ms of CPU time in 375.0 ms", False),
          spike("step", "unexplained", 0.25, "computing: 370.0 ms of CPU time in 375.0 ms", True),
          spike("step", "unexplained", 0.125, "no GC pause, compile, batch shape or warm-up; sample= or energy= "
                                              "records whether it waited or computed"),
          spike("step", "busy machine", 1.0, "other processes took ..."),
          spike("other", "unexplained", 1.0, "waiting, not computing: 1.0 ms of CPU time in 1000.0 ms", False)]


def test_slow_steps_are_this_label_s_spikes_nothing_explains():
    """Three unexplained spikes of step (625 ms over its level, one waiting); a busy machine's spike
    and another label's are not its. Unsampled, the next step is to sample the load; sampled, to
    record the scheduler's counters."""
    rows = [row(i, LEVEL) for i in range(20)]
    total = 5.0
    words = "3 call(s) of step were slow with no recorded cause, 625.0 ms over its level"
    evidence = [proof("excess_s", 0.625, "s", "report.spikes(): cause unexplained")]
    assert tf.slow_steps(loop_of(rows), SPIKES, total) == found(
        "slow steps", 0.625, total, words + "; in 1 of them the process waited rather than computed", evidence,
        "collect(sample=0.5) records the machine's load beside the run (a busy machine is then named)")
    sampled = [row(i, LEVEL, others_cpu_pct=10.0, idle_cpu_pct=80.0) for i in range(20)]
    assert tf.slow_steps(loop_of(sampled), SPIKES[1:], total) == found(
        "slow steps", 0.375, total, "2 call(s) of step were slow with no recorded cause, 375.0 ms over its level",
        [proof("excess_s", 0.375, "s", "report.spikes(): cause unexplained")],
        "collect(sched=True) records the thread's scheduler counters (preempted or waiting)")


def test_slow_steps_within_the_steps_noise_or_under_their_share_are_not_said():
    """Calls alternating 62.5 and 187.5 ms: a spread of 1.4826 x 62.5 ms; 3 spreads over 3 spikes,
    481.5 ms: 625 ms is beyond it, 375 ms within; over 2 spikes, 393 ms: 500 ms is beyond it. 625 ms
    of a 20 s run is 3 %."""
    rows = [row(i, (0.0625, 0.1875)[i % 2]) for i in range(20)]
    assert tf.slow_steps(loop_of(rows), SPIKES, 5.0)["at_stake"] == 0.625
    assert tf.slow_steps(loop_of(rows), SPIKES[:2], 5.0)["at_stake"] == 0.5
    quieter = [dict(s, excess_s=0.125) for s in SPIKES[:3]]
    assert tf.slow_steps(loop_of(rows), quieter, 5.0) is None
    assert tf.slow_steps(loop_of(rows), SPIKES, 20.0) is None
    assert tf.slow_steps(loop_of(rows), SPIKES[3:], 5.0) is None


@pytest.mark.parametrize("one_thread", [False, True])
def test_no_time_finding_in_a_steady_loop(one_thread):
    rows = [row(i, LEVEL, cpu_s=LEVEL, compile_frames=0) for i in range(20)]
    lp = loop_of(rows)
    assert [tf.recompilation(lp, lp.total), tf.warm_up(lp, lp.total, one_thread),
            mf.busy_machine(lp, lp.total, one_thread), mf.off_cpu_wait(lp, lp.total, one_thread),
            tf.slow_steps(lp, [], lp.total)] == [None] * 5


def test_a_call_its_collections_explain_is_the_collectors_not_the_machines():
    """One thread; the quiet calls compute their 125 ms; three calls of 375 ms compute 62.5 ms (they
    waited 250 ms, all their excess). One collected for 125 ms (half its excess: the collector's),
    one for 124 ms (under half: the wait's), one not at all. report.spikes() says the same: gc, then
    off-CPU wait twice."""
    rows = [row(i, LEVEL, thread_cpu_s=LEVEL) for i in range(20)]
    rows += [row(20 + j, 0.375, thread_cpu_s=0.0625, gc_pause_s=pause, gc_collections=1 if pause else 0)
             for j, pause in enumerate((0.125, 0.124, 0.0))]
    assert machine.crowded_calls(loop_of(rows), True).tolist() == [False] * 20 + [False, True, True]
    from gnnmon.report.analysis import spikes

    assert [s["cause"] for s in spikes(rows, one_thread=True)] == ["gc", "off-CPU wait", "off-CPU wait"]
    # the finding counts the two the machine slowed, 250 ms each, not the collector's
    total = 20 * LEVEL + 3 * 0.375
    assert mf.off_cpu_wait(loop_of(rows), total, one_thread=True) == waited(
        2, 0.5, total, "thread_cpu_s", 0.0625, "62.5 ms", "125.0 ms", "thread")


def test_calls_that_compiled_on_crowded_cores_are_the_compiles_not_the_machines():
    """Sampled: the quiet calls' cores stood idle (others 0 %, 150 % idle); three calls of 1.125 s
    ran on full cores (10 % idle) while others took 180 % of a core, 2.025 s each, far over half
    their 1 s excess: the machine's, unless they compiled (the compile's workers are other
    processes): then recompilation's alone, and the spikes say recompile."""
    quiet = [row(i, LEVEL, others_cpu_pct=0.0, idle_cpu_pct=150.0) for i in range(20)]
    slow = [row(20 + j, 1.125, others_cpu_pct=180.0, idle_cpu_pct=10.0) for j in range(3)]
    assert machine.crowded_calls(loop_of(quiet + slow)).tolist() == [False] * 20 + [True] * 3
    compiled = [{**r, "compile_frames": 1, "compile_recompiles": 1, "compile_s": 0.75} for r in slow]
    rows = quiet + compiled
    assert not machine.crowded_calls(loop_of(rows)).any()
    assert mf.busy_machine(loop_of(rows), 20 * LEVEL + 3 * 1.125) is None
    from gnnmon.report.analysis import spikes

    assert [s["cause"] for s in spikes(rows)] == ["recompile"] * 3

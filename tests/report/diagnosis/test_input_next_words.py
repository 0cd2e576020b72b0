"""The input-bound finding's next steps, whole, from planted figures: the epoch-start advice
(``_start_next``: no workers, a start-up paid once, workers kept or not, not recorded whether), the
advice for a loader that waited off the CPU (``_overlap``: sampled or measured between steps, rows of
several batches) and the advice where nothing says whether the loader computes (``_not_recorded``)."""

from __future__ import annotations

import numpy as np
import pytest

from gnnmon.report.diagnosis.epoch_starts import EpochStarts
from gnnmon.report.diagnosis.input_evidence import Between, LoaderCpu
from gnnmon.report.diagnosis.input_finding import _input_next, _not_recorded, _overlap, _start_next

LIGHTER = "a lighter transform, or one done once (pre_transform) instead of per batch"

PAID = EpochStarts(np.array([0.5, 0.1, 0.2]), level=0.05, excess=0.65)
"""A start-up paid once: the first start 450 ms beyond the 50 ms level, the later ones 50 and 150 ms
(twice each under 450); their mean wait 150 ms (the second alone, 200)."""

EACH = EpochStarts(np.array([0.2, 0.2, 0.2]), level=0.05, excess=0.45)
"""The same 150 ms beyond the level at every start: not paid once."""

LATER = ("made only once {} epoch begins (a DataLoader prefetches within an epoch, not across): fewer, longer "
         "epochs, or a lighter batch")


def test_no_workers_set_the_loader_up_anew_each_epoch() -> None:
    assert _start_next(EACH, 0) == ("at each epoch's start the loader starts anew in the training process "
                                    "(iter(loader): a sampler's or a dataset's set-up each epoch): do that set-up once")


def test_a_start_up_paid_once_says_the_first_and_the_later_starts_mean() -> None:
    assert _start_next(PAID, 2) == (
        "the workers' start-up was paid once (the first epoch's first batch waited 500.0 ms, the later ones 150.0 ms: "
        "workers kept across epochs, persistent_workers=True); what is left is each epoch's first batch, "
        + LATER.format("the"))


@pytest.mark.parametrize("workers, persistent, said", [
    (1, 1.0, "the loader's workers are kept across epochs (persistent_workers=True), yet each epoch's first batch "
             "waits: it is " + LATER.format("that")),
    (1, 0.0, "the loader's workers start with each epoch (their start-up and first batches wait at its first batch): "
             "persistent_workers=True in the DataLoader keeps them across epochs"),
    (2, None, "the loader's workers start with each epoch (their start-up and first batches wait at its first "
              "batch): persistent_workers=True in the DataLoader keeps them across epochs (not recorded whether it "
              "was set; where it was, each epoch's first batch is still made only once that epoch begins)")])
def test_workers_started_each_epoch_say_whether_they_were_kept(workers, persistent, said) -> None:
    assert _start_next(EACH, workers, persistent) == said


SAMPLED = LoaderCpu(cpu_pct=10.0, wall_pct=60.0, runnable=0.5, per_batch=0.12, step=0.025)
"""A loader that used 10 % of a core while making batches 60 % of the time, a runnable thread getting
half a core; 120 ms of a worker's time a step (of 4 batches: 30 ms a batch) against 25 ms steps."""

MEASURED = LoaderCpu(cpu_pct=2.0, wall_pct=75.0, runnable=1.0, per_batch=0.03, step=0.01,
                     between=Between(gap=0.03, cpu=0.001, queued=0.002, gaps=39))


def test_a_loader_off_the_cpu_sampled_is_told_the_workers_for_a_batch_a_step() -> None:
    """5 workers make a batch of 120 ms each 25 ms step (⌈4.8⌉); 30 ms a batch over 4 a row."""
    assert _overlap(SAMPLED, 2, LIGHTER, per_row=4.0) == (
        "the loader waits off the CPU (I/O, a sleep, a lock), not for the cores: it used at most 10 % of a core while "
        "batches were being made 60 % of the time, under half what a thread that could run got (50 %); a waiting "
        "worker holds no core, so more workers overlap the wait even on full cores: num_workers=5 makes a batch a "
        "step at this pace (a batch took 30.0 ms of a worker's time, a step 25.0 ms); and " + LIGHTER)


def test_a_loader_off_the_cpu_measured_between_steps_says_its_time_off_the_cpu() -> None:
    """27 ms of the 30 ms gap off the CPU; 3 workers make a 30 ms batch a 10 ms step."""
    assert _overlap(MEASURED, 0, LIGHTER) == (
        "the loader waits off the CPU (I/O, a sleep, a lock), not for the cores: between steps the training thread, "
        "which makes the batches, was off the CPU 27.0 ms of 30.0 ms (measured), in next(); workers overlap it with "
        "the step even on full cores, a waiting one holding no core: num_workers=3 in the DataLoader, with "
        "persistent_workers=True (a batch took 30.0 ms of a worker's time, a step 10.0 ms); and " + LIGHTER)


@pytest.mark.parametrize("workers, said", [
    (None, "the loader (in the training process) on 1 core(s): if it computes, the cores are full and more workers "
           "cannot help; if it waits off the CPU (I/O, a sleep), more workers overlap the wait even on full cores; "),
    (2, "the 2 worker(s) on 1 core(s): if they compute, the cores are full and more workers cannot help; if they "
        "wait off the CPU (I/O, a sleep), more workers overlap the wait even on full cores; ")])
def test_not_recorded_whether_the_loader_computes_says_both(workers, said) -> None:
    assert _not_recorded(workers, 1, LIGHTER) == (
        said + "which, the run does not record: collect(sample=0.5) samples the CPU of the process and its workers "
        "(cpu_util_pct); less work per batch either way: " + LIGHTER)


def test_the_next_step_reads_one_batch_a_row_unless_told() -> None:
    """``_input_next`` without ``per_row``: the sampled off-CPU loader's 120 ms is one batch's."""
    assert "(a batch took 120.0 ms of a worker's time, a step 25.0 ms)" in _input_next({}, [], 2, None, 2, SAMPLED)


IDLE = ("the training process leaves 25 % of a core idle, under the 75 % a worker needs to make its batches at a "
        "useful pace beside the step: more workers cannot help here; less work per batch: ")
FULL = "the training process keeps the cores full ({}): more workers cannot help here; less work per batch: "
BUSY = ("the cores were full (24 % of a core stood idle), other processes taking 50 % of a core on them (the busy "
        "machine's, not the loader's): more workers would share those cores, not add to them; free the cores, or less "
        "work per batch: ")
PLAIN = "a lighter dataset __getitem__ or collation"


@pytest.mark.parametrize("room, others, said", [
    (0.25, None, IDLE + PLAIN),  # exactly busy.IDLE_FULL (25 %) idle: idle, not full
    (0.248, None, FULL.format("25 % of a core stood idle") + PLAIN),  # 24.8 % rounds to 25, yet full
    (0.244, None, FULL.format("24 % of a core stood idle") + PLAIN),
    (0.244, 50.0, BUSY + PLAIN),  # others exactly half a core: the busy machine's
    (0.244, 49.0, FULL.format("24 % of a core stood idle") + PLAIN)])
def test_idle_under_a_workers_share_is_idle_from_a_quarter_of_a_core_and_others_from_half(room, others, said) -> None:
    assert _input_next({}, [], 0, room, 2, None, others) == said


def test_no_load_sampled_and_no_core_spare_is_not_recorded() -> None:
    """1 core, the training process's: whether the loader computes is not recorded."""
    assert _input_next({}, [], None, None, 1) == _not_recorded(None, 1, PLAIN)
    assert _input_next({}, [], None, None, 1).endswith("less work per batch either way: " + PLAIN)


def test_an_off_cpu_loader_s_next_step_reads_its_rows_batches() -> None:
    """Rows of 4 batches: the sampled 120 ms a row is 30 ms a batch."""
    assert "(a batch took 30.0 ms of a worker's time, a step 25.0 ms)" in _input_next({}, [], 2, None, 2, SAMPLED,
                                                                                      per_row=4.0)

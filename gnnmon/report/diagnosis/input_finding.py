"""The diagnosis's ``input-bound`` finding: the loop's wait for its batches (``data_wait_s``) and
their copy to the device (``data_to_device_s``), timed by ``watch_loader`` or ``gnnmon run``, with
what made them (sampling, feature gathering, transform, per hop) where the loader is split; and the next step that
fits the run (workers where cores stood idle or where the loader waited off the CPU, the wait it can
win); the loader's CPU is read in :mod:`gnnmon.report.diagnosis.input_evidence`, the wait at epoch
starts in :mod:`gnnmon.report.diagnosis.epoch_starts`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from gnnmon.report.busy import IDLE_FULL
from gnnmon.report.diagnosis.epoch_starts import EpochStarts, FirstEpoch, epoch_starts, first_epoch
from gnnmon.report.diagnosis.gc_waits import gc_in_waits
from gnnmon.report.diagnosis.input_evidence import Between, LoaderCpu, loader_cpu
from gnnmon.report.loops import MIN_SHARE, NOISE_K, Loop, block_se, cost_beyond_noise, evidence, finding, ms
from gnnmon.report.stats import median

SPLIT = (("data_sample_s", "sampling"), ("data_gather_s", "feature gathering"),
         ("data_transform_s", "transform/collation"))
"""The parts of a neighbour loader's batch (``watch_loader``'s, or ``gnnmon run``'s by the same wrappers), in the
order they are made."""

COPY = "the copy to the device"
"""The batch's copy to the device (``data_to_device_s``, ``watch_loader(to=...)``): part of the
wait, after next(), timed for any loader (split or not)."""

TIMERS = {"run": "gnnmon run", "watched": "watch_loader", "mixed": "watch_loader and gnnmon run"}
"""What timed a loop's wait, by :func:`_timed_by`'s answer: ``gnnmon run``'s rows carry ``step_rule``,
``watch_loader``'s do not."""

PLAIN = "a plain DataLoader: its dataset's __getitem__ and collation (PyG's neighbour loaders are split)"

WORKER_CORE = 0.75
"""The share of a core that must stand idle (sampled ``idle_cpu_pct``) for a worker to be advised
on it: a worker given three quarters of a core or more makes its batches at three quarters of its
pace or better while the step runs; with less, it mostly takes turns with the training process.
Idle cores count as whole ones from this share up (1.8 cores idle: 2 workers; 0.98: 1)."""

PIN = ("pin_memory=True in the loader and watch_loader(loader, to=device): the copy is then queued non_blocking "
       "from pinned memory")


def input_bound(loop: Loop, total: float, cores: int | None = None,
                gc_events: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any] | None:
    """The loop's wait for data as a share of the measured time, split where the loader is; the next
    step fits the run: more workers only where the loader's (``data_workers``) and the training
    process leave idle cores among ``cores`` (the manifest's ``cpu_usable``) and the sampled
    ``idle_cpu_pct`` says they stood idle, and the gain stated as the wait it can win.

    Idle cores aside, more workers where the loader waited off the CPU (a sleep, I/O:
    :func:`~gnnmon.report.diagnosis.input_evidence.loader_cpu`), a waiting worker holding no core;
    "the cores are full" only where the sampled load says so.

    The wait is a finding where it is steady (a cost measured at each batch, held against its own
    spread) or, the epochs marked, where its excess at each epoch's first batch, where the
    loader's workers start, is beyond the other batches' noise, read against the longest-waiting
    turn where the workers take turns
    (:func:`~gnnmon.report.diagnosis.epoch_starts.epoch_starts`): a few long waits fail a
    per-batch test however large they are.

    Every figure is a mean over the same batches, those whose wait was timed (``data_wait_s``), a
    part counted 0 in those that lack it (as the loop's wait counts a missing copy), so that
    next()'s wait (the wait less the copy) and its rest (less the parts) hold figures of the same
    batches even where a part was timed on some of them only; a row's figures are summed over its
    batches (:func:`batches`), so each mean is their sum over the batches' count.

    Pinned memory is the lever only where the copy is most of the wait: more than the rest of it,
    next()'s whole wait (more than half). Pinning can win at most the copy; where next() took as
    long or longer, the loader's own lever (workers, less work per batch) can win more.

    The garbage collections between calls that fell inside a wait (``gc_events``, the run's gc
    log: :func:`~gnnmon.report.diagnosis.gc_waits.gc_in_waits`) are taken out of it first:
    the garbage-collection finding says them, and the words say how much of the wait they were."""
    if not loop.has("data_wait_s"):
        return None
    known = ~np.isnan(loop.column("data_wait_s"))
    n = int(known.sum())
    gc = gc_in_waits(loop, gc_events)
    waits = loop.wait[known] - gc[known]  # the loader's: the collector's pauses in it are the GC finding's
    cost = float(waits.sum())
    steady = cost_beyond_noise(waits, total)  # the wait's own spread, not the step's
    workers = loader_workers(loop)
    cold = first_epoch(loop, known, total, gc)
    starts, rest = epoch_starts(loop, known if cold is None else known & ~cold.rows, total, workers, gc)
    if not steady:
        if starts is None and cold is None:
            return None
        steady = cost_beyond_noise(rest, total)  # the other batches' wait: a finding on its own, or not said
        cost = ((starts.excess if starts is not None else 0.0) + (cold.excess if cold is not None else 0.0)
                + (float(rest.sum()) if steady else 0.0))
    taken = batches(loop)[known]
    m = max(float(taken.sum()), 1.0)  # the batches whose wait was timed
    per_row = m / n  # batches a row, on average: 1 but for gnnmon run's rows of several
    wait, step = float(waits.sum()) / m, float(loop.own[known].mean())
    timer = TIMERS[_timed_by(loop, known)]
    proof = [evidence("data_wait_s", float(loop.zeros("data_wait_s")[known].sum()) / m, "s",
                      f"{_watched(timer)}, mean of {m:.0f} batches")]
    collected = float(gc[known].sum())
    if collected >= MIN_SHARE * float(loop.wait[known].sum()) and collected > 0:  # as the words say it
        proof.append(evidence("gc events in the waits", collected, "s",
                              f"the gc log: collections between calls inside {np.count_nonzero(gc[known])} wait(s) "
                              "(each wait placed just before its call), taken out of the wait here"))
    parts = {}
    for field, name in (*SPLIT, ("data_to_device_s", COPY)):
        values = loop.column(field)[known]
        if not np.isnan(values).all():  # timed on some of these batches: 0 on the others
            parts[name] = float(np.nan_to_num(values, nan=0.0).sum()) / m
            proof.append(evidence(field, parts[name], "s", f"{timer}, mean per batch"
                                  + (" (in the loader's workers where it has them)" if name != COPY else "")))
    hops = _hops(loop)
    if hops:
        proof.append(evidence("data_hop_<k>_nodes", None, "nodes",
                              "num_sampled_nodes: " + " → ".join(f"{h:,.0f}" for h in hops)))
    room = _spare_cores(loop, cores)
    words = (f"{loop.label} waited {ms(wait)} per batch for its data against {ms(step)} per step "
             + ("" if per_row == 1 else f"of {per_row:.3g} batches ")
             + f"({100 * wait * m / max(loop.total, 1e-12):.0f} % of its loop)")
    if collected >= MIN_SHARE * float(loop.wait[known].sum()):
        share = 100 * collected / float(loop.wait[known].sum())
        words += (f", garbage collection aside ({ms(collected)} of the waits, {share:.0f} %, were collections: the "
                  f"garbage-collection finding's)")
    copy = parts.pop(COPY, None)  # parts: the loader's own, made in next()
    in_next = wait - (copy or 0.0)  # the wait holds the copy: the parts are next()'s
    made = sum(parts.values())
    if parts:
        words += "; of it " + ", ".join(f"{k} {ms(v)}" for k, v in parts.items())
        if copy is not None:
            words += f", {COPY} {ms(copy)}"
        if made < 0.9 * in_next and "sampling" in parts:
            words += f", the rest {ms(in_next - made)} (the sampler's input, collation)"
        elif made > 1.1 * in_next:
            words += " (made in the loader's workers, partly while the step ran)"
    else:
        words += f"; {PLAIN}" + (f", and {COPY} {ms(copy)}" if copy is not None else "")
    if workers is not None:
        words += f"; num_workers={workers}" + (f" on {cores} core(s)" if cores else "")
    if hops:
        words += "; nodes per hop " + " → ".join(f"{h:,.0f}" for h in hops)
    cpu = loader_cpu(loop, known, made * per_row, in_next * per_row, workers, room)  # read per row
    if cpu is not None and cpu.between is not None:
        words += _between_words(cpu.between)
        proof += _between_proof(cpu.between)
    elif cpu is not None:
        proof.append(evidence("loader CPU", cpu.cpu_pct, "%", "at most: cpu_util_pct (sampled, the process and its "
                              "workers) less cpu_s in the steps, % of one core over the loop"))
        proof.append(evidence("loader time per batch", cpu.per_batch / per_row, "s",
                              f"{'num_workers × the loop time per batch' if workers else 'the wait in next()'}: "
                              f"batches made {cpu.wall_pct:.0f} % of the loop's time at least"))
    next_step = (PIN if copy is not None and copy > in_next
                 else _input_next(parts, hops, workers, room, cores, cpu, _known_median(loop, "others_cpu_pct"),
                                  per_row))
    if starts is not None:
        words += _start_words(starts)
        proof.append(evidence("data_wait_s at epoch starts", float(starts.waits.mean()), "s",
                              f"{_watched(timer)}, each epoch's first batch, mean of {starts.waits.size}"))
        start_step = _start_next(starts, workers, _known_median(loop, "data_persistent"))
        next_step = start_step + ("; then " + next_step if steady else "")
    if cold is not None:
        words += _cold_words(cold, total, per_row)
        proof.append(evidence("data_wait_s in the first epoch", median(cold.waits) / per_row, "s",
                              f"{_watched(timer)}, median of the first epoch's {cold.waits.size} batches, against the "
                              f"later epochs' {ms(cold.level / per_row)}"))
        next_step = COLD + ("; then " + next_step if steady or starts is not None else "")
    fallback = "data_sampler" in loop.part.cols and "gnnmon" in loop.part.objects("data_sampler")
    if fallback and parts.get("sampling", 0.0) > 0:
        words += "; sampled by gnnmon's pure-PyTorch sampler (neither pyg-lib nor torch-sparse is installed)"
        next_step = (f"install pyg-lib, PyG's compiled sampler (pip install pyg-lib -f "
                     f"https://data.pyg.org/whl/torch-<version>+<cpu|cu12x>.html): gnnmon's fallback sampler took "
                     f"{ms(parts['sampling'])} of each wait, and PyG's loaders use pyg-lib once it is there; then "
                     + next_step)
    next_step += (f" — at most {ms(cost / m)} a batch to win ({100 * cost / max(total, 1e-12):.0f} % of the measured "
                  "time): data_wait_s in the next run says how much was")
    return finding("input-bound", loop.label, cost, total, words, proof, next_step)


def looked_for(loop: Loop, total: float, gc_events: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """The input check where it found nothing: ``{"label", "check": "input", "batches", "wait_s",
    "share", "unsaid_s"}`` for a loop whose wait was timed: its batches (:func:`batches`), its mean
    wait a batch, its share of ``total`` and the least steady wait a batch it would have said (5 % of
    the run, or 3 of its batch-means standard errors, whichever is more); the waits without the
    garbage collections in them (``gc_events``, as :func:`input_bound` reads them)."""
    gc_events = list(gc_events)  # read twice
    if not loop.has("data_wait_s") or input_bound(loop, total, gc_events=gc_events) is not None:
        return []
    known = ~np.isnan(loop.column("data_wait_s"))
    waits = loop.wait[known] - gc_in_waits(loop, gc_events)[known]
    m = max(float(batches(loop)[known].sum()), 1.0)
    per_row = m / waits.size  # a row's wait is its batches' (block_se's is a row's mean's)
    unsaid = max(MIN_SHARE * total / m, NOISE_K * block_se(waits) / per_row)
    return [{"label": loop.label, "check": "input", "batches": round(m), "wait_s": float(waits.sum()) / m,
             "share": float(waits.sum() / total) if total > 0 else 0.0, "unsaid_s": unsaid}]


def batches(loop: Loop) -> np.ndarray:
    """Per call, the batches its loader figures are summed over: ``batches`` where ``gnnmon run``
    counted them (a row of gradient accumulation takes several, its wait, loader times and nodes per
    hop summed over them; a row that took none, 0), else 1 (``watch_loader``'s row: one batch's)."""
    counted = loop.column("batches")
    return np.where(np.isnan(counted), 1.0, counted)


def _start_words(starts: EpochStarts) -> str:
    """The wait at epoch starts beyond the level, and which batches the level is read from."""
    each = ", ".join(f"{1e3 * w:,.0f}" for w in starts.waits)
    if starts.turn > 1:
        n = starts.turn
        beyond = (f"beyond the {ms(starts.level)} that every {_ordinal(n)} batch waited (the longest-waiting turn of "
                  f"the {n} workers)")
    else:
        beyond = f"beyond the other batches' {ms(starts.level)}"
    collected = (f", garbage collection aside: {ms(starts.collected)} of collections in them"
                 if starts.collected > 0 else "")
    return (f"; {ms(starts.excess)} of it at {starts.waits.size} epoch start(s) {beyond} (each epoch's first batch: "
            f"{each} ms{collected})")


COLD = ("the first epoch waited for data the later ones found ready (a cold cache, a first read from disk, a dataset "
        "built as it is read): paid once, it weighs less the more epochs a run has; to shrink it, read or process the "
        "data once before the loop (an in-memory dataset, a pre_transform, a warmed page cache), or workers that "
        "overlap the reads (num_workers with persistent_workers=True: a cache kept in the dataset lives in each "
        "worker's copy of it, and only persistent workers keep it across epochs)")
"""The next step for a wait that the first epoch holds (:func:`~gnnmon.report.diagnosis.epoch_starts.first_epoch`)."""


def _cold_words(cold: FirstEpoch, total: float, per_row: float = 1.0) -> str:
    """The first epoch's wait against the later epochs', per batch (``per_row``: batches a row), and
    its excess as a share of the measured ``total`` (s)."""
    return (f"; the first epoch's {cold.waits.size} batches waited {ms(median(cold.waits) / per_row)} each (median), "
            f"the later epochs' {ms(cold.level / per_row)}: {ms(cold.excess)} more in the first epoch "
            f"({100 * cold.excess / max(total, 1e-12):.0f} % of the measured time), as a cold cache or a first read "
            f"from disk waits")


def _ordinal(n: int) -> str:
    """``n`` as an ordinal: 2nd, 3rd, 4th, 11th, 21st."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _start_next(starts: EpochStarts, workers: int | None, persistent: float | None = None) -> str:
    """What to try for the wait at each epoch's first batch: the workers' start (kept across epochs
    by persistent_workers=True), or, paid once already, the first batch made after the epoch began."""
    if workers == 0:
        return ("at each epoch's start the loader starts anew in the training process (iter(loader): a sampler's or "
                "a dataset's set-up each epoch): do that set-up once")
    if starts.paid_once:
        later = float(np.mean(starts.waits[1:]))
        return (f"the workers' start-up was paid once (the first epoch's first batch waited "
                f"{ms(float(starts.waits[0]))}, the later ones {ms(later)}: workers kept across epochs, "
                f"persistent_workers=True); what is left is each epoch's first batch, made only once the epoch "
                f"begins (a DataLoader prefetches within an epoch, not across): fewer, longer epochs, or a lighter "
                f"batch")
    if persistent == 1:
        return ("the loader's workers are kept across epochs (persistent_workers=True), yet each epoch's first batch "
                "waits: it is made only once that epoch begins (a DataLoader prefetches within an epoch, not across): "
                "fewer, longer epochs, or a lighter batch")
    said = ("" if persistent == 0 else
            " (not recorded whether it was set; where it was, each epoch's first batch is still made only once that "
            "epoch begins)")
    return ("the loader's workers start with each epoch (their start-up and first batches wait at its first batch): "
            f"persistent_workers=True in the DataLoader keeps them across epochs{said}")


def _timed_by(loop: Loop, known: np.ndarray) -> str:
    """Which recorded the wait of the batches ``known``: ``run`` where every one's row carries
    ``step_rule`` (``gnnmon run``'s engine writes it on each row it makes), ``watched`` where none
    does (``watch_loader``), ``mixed`` otherwise."""
    engine = ~loop.part.nulls("step_rule")[loop.at][known]
    return "run" if engine.all() else "watched" if not engine.any() else "mixed"


def _watched(timer: str) -> str:
    """Where the loop's wait was timed, as the evidence says it (``timer``: :data:`TIMERS`' words)."""
    return f"the loop's next(), timed by {timer}"


def loader_workers(loop: Loop) -> int | None:
    """The watched loader's num_workers (its median over the loop's calls), None where not recorded."""
    workers = _known_median(loop, "data_workers")
    return None if workers is None else int(workers)


def _spare_cores(loop: Loop, cores: int | None) -> float | None:
    """Cores that stood idle beside the loop: the sampled ``idle_cpu_pct`` (median over its calls,
    % of one core), bounded by ``cores``; None where neither is known."""
    idle = _known_median(loop, "idle_cpu_pct")
    if idle is None:
        return None
    return min(idle / 100.0, float(cores)) if cores else idle / 100.0


def _known_median(loop: Loop, name: str) -> float | None:
    """The median of field ``name`` over the loop's calls that have it; None where none does."""
    values = loop.column(name)
    values = values[~np.isnan(values)]
    return median(values) if values.size else None


def _hops(loop: Loop) -> list[float]:
    """Nodes per hop a batch (hop 0: the seeds), over the calls that recorded them (a row's are its
    batches' sum: :func:`batches`)."""
    out = []
    k = 0
    taken = batches(loop)
    while loop.has(f"data_hop_{k}_nodes"):
        nodes = loop.column(f"data_hop_{k}_nodes")
        out.append(float(np.nansum(nodes)) / max(float(taken[~np.isnan(nodes)].sum()), 1.0))
        k += 1
    return out


def _input_next(parts: dict[str, float], hops: list[float], workers: int | None, room: float | None,
                cores: int | None, cpu: LoaderCpu | None = None, others: float | None = None,
                per_row: float = 1.0) -> str:
    """More workers where the loader waited off the CPU (``cpu``: a waiting worker holds no core,
    so they overlap the wait on full cores too); else only where cores stood idle (``room``, cores,
    sampled) beside the run, one a core counted from :data:`WORKER_CORE` of it idle, or, not
    sampled, as many as ``cores`` leave beside the training process. Where the sampled load says
    the cores were full, whose work filled them (``others``: other processes' CPU, % of a core,
    half a core or more theirs); where the load was not sampled and ``cores`` leave no worker a
    core, that whether the loader computes is not recorded. Less work per batch in the loader's
    largest part (``parts``: the loader's own, the copy aside), or, a plain loader's, in its
    dataset's __getitem__ or collation. ``per_row``: batches a step (``cpu``'s figures are a
    step's)."""
    lighter = _fix(max(parts, key=lambda k: parts[k]), hops) if parts else "a lighter dataset __getitem__ or collation"
    if cpu is not None and cpu.waited:
        return _overlap(cpu, workers or 0, lighter, per_row)
    if room is not None:
        why, add = f" ({room:.1f} core(s) stood idle beside the run)", idle_workers(room)
        full = f"{100 * room:.0f} % of a core stood idle"
    elif cores:
        add = cores - 1 - (workers or 0)  # one core for the training process
        why, full = f" ({cores} core(s), one for the training process)", f"{cores} core(s)"
    else:
        why, add, full = "", None, ""
    if add is not None and add < 1:
        if room is None:
            return _not_recorded(workers, cores, lighter)
        if 100 * room >= IDLE_FULL:  # idle, yet under a worker's share of a core
            who = (f"the {workers} worker(s) and the training process leave" if workers
                   else "the training process leaves")
            return (f"{who} {100 * room:.0f} % of a core idle, under the {100 * WORKER_CORE:.0f} % a worker needs to "
                    f"make its batches at a useful pace beside the step: more workers cannot help here; less work per "
                    f"batch: {lighter}")
        if others is not None and others >= 50:
            return (f"the cores were full ({full}), other processes taking {others:.0f} % of a core on them (the "
                    f"busy machine's, not the loader's): more workers would share those cores, not add to them; free "
                    f"the cores, or less work per batch: {lighter}")
        who = f"the {workers} worker(s) and the training process keep" if workers else "the training process keeps"
        return f"{who} the cores full ({full}): more workers cannot help here; less work per batch: {lighter}"
    add = min(add, 4) if add is not None else None
    if workers:
        n = f"={workers + add}" if add is not None else ""
        return f"more workers (num_workers{n}){why}, or less work per batch: {lighter}"
    n = f"={add}" if add is not None else "=N"
    return (f"num_workers{n} in the DataLoader{why}, with persistent_workers=True (workers kept across epochs) and "
            f"prefetch_factor: batches are then made while the step runs; and {lighter}")


def idle_workers(room: float) -> int:
    """Workers the idle cores ``room`` (sampled, cores) hold: one a whole core, a core counted from
    :data:`WORKER_CORE` of one idle."""
    return int(room + 1.0 - WORKER_CORE)


BETWEEN = "the training thread between steps, where it makes the batches (num_workers=0)"
"""Whose time ``before_thread_*`` measure where the loader has no workers."""


def _between_words(between: Between) -> str:
    """What the training thread did between steps (measured), for the finding's words."""
    return (f"; between steps the training thread, which makes the batches, computed {ms(between.cpu)}, waited "
            f"{ms(between.queued)} for a core and {ms(between.off)} off the CPU (of {ms(between.gap)}, mean of "
            f"{between.gaps} gaps: before_thread_*, measured)")


def _between_proof(between: Between) -> list[dict[str, Any]]:
    """The measured figures of the training thread between steps, as evidence."""
    n = f"mean of {between.gaps} (collect(sched=True), measured)"
    return [evidence("before_s", between.gap, "s", f"a step's end to the next one's start, {n}"),
            evidence("before_thread_cpu_s", between.cpu, "s", f"{BETWEEN}: its CPU time in that gap, {n}"),
            evidence("before_thread_queued_s", between.queued, "s", f"its wait for a core in that gap, {n}")]


def _overlap(cpu: LoaderCpu, workers: int, lighter: str, per_row: float = 1.0) -> str:
    """The next step for a loader that waited off the CPU: workers enough to make a batch a step
    (a step's batches, ``per_row`` of them: ``cpu``'s figures are a step's). Measured
    (``cpu.between``), the training thread's time off the CPU between steps is said; else the
    sampled CPU."""
    n = cpu.workers_for_a_batch_a_step(workers)
    if cpu.between is not None:
        b = cpu.between
        said = (f"the loader waits off the CPU (I/O, a sleep, a lock), not for the cores: between steps the training "
                f"thread, which makes the batches, was off the CPU {ms(b.off)} of {ms(b.gap)} (measured)")
    else:
        said = (f"the loader waits off the CPU (I/O, a sleep, a lock), not for the cores: it used at most "
                f"{cpu.cpu_pct:.0f} % of a core while batches were being made {cpu.wall_pct:.0f} % of the time, "
                f"under half what a thread that could run got ({100 * cpu.runnable:.0f} %)")
    pace = f"a batch took {ms(cpu.per_batch / per_row)} of a worker's time, a step {ms(cpu.step)}"
    if workers:
        return (f"{said}; a waiting worker holds no core, so more workers overlap the wait even on full cores: "
                f"num_workers={n} makes a batch a step at this pace ({pace}); and {lighter}")
    return (f"{said}, in next(); workers overlap it with the step even on full cores, a waiting one holding no core: "
            f"num_workers={n} in the DataLoader, with persistent_workers=True ({pace}); and {lighter}")


def _not_recorded(workers: int | None, cores: int | None, lighter: str) -> str:
    """The next step where ``cores`` leave no worker a core and nothing says whether the loader computes."""
    who, they, s = (f"the {workers} worker(s)", "they", "") if workers else ("the loader (in the training process)",
                                                                          "it", "s")
    return (f"{who} on {cores} core(s): if {they} compute{s}, the cores are full and more workers cannot help; if "
            f"{they} wait{s} off the CPU (I/O, a sleep), more workers overlap the wait even on full cores; which, "
            f"the run does not record: collect(sample=0.5) samples the CPU of the process and its workers "
            f"(cpu_util_pct); less work per batch either way: {lighter}")


def _fix(part: str, hops: list[float]) -> str:
    """Less work per batch in the loader's largest ``part``; for sampling, at the hop that samples
    the most nodes (``hops``: nodes per hop, hop 0 the seeds): the outer hops where the last does,
    else that hop's fanout (an outer hop that samples fewer, its neighbourhoods overlapping, is not
    where the nodes are). Hop k's nodes are sampled with PyG's ``num_neighbors[k - 1]``: it is named."""
    if part == "sampling":
        if len(hops) < 2:
            return "smaller fanouts in the outer hops"
        k = max(range(1, len(hops)), key=lambda i: (hops[i], i))  # the most nodes; the outer of a tie
        if k == len(hops) - 1:
            growth = hops[k] / max(hops[k - 1], 1)
            return (f"smaller fanouts in the outer hops (hop {k} has {growth:.1f}× hop {k - 1}'s nodes; its fanout is "
                    f"num_neighbors[{k - 1}])")
        return (f"a smaller fanout at hop {k} (num_neighbors[{k - 1}]), which samples the most nodes ({hops[k]:,.0f} a "
                f"batch; hop {len(hops) - 1}, {hops[-1]:,.0f})")
    if part == "feature gathering":
        return ("keep the features where the step reads them (on the device: a GPU feature store), "
                "or fewer sampled nodes")
    return "a lighter transform, or one done once (pre_transform) instead of per batch"

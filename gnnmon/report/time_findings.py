"""The diagnosis's findings about time: what took the loop's time that the step's own work did not.

Each reads a label's :class:`~gnnmon.report.loops.Loop` (its top-level calls) and returns a finding
(:func:`~gnnmon.report.loops.finding`) or None; a cost is said only beyond the run's own noise
(:func:`~gnnmon.report.loops.beyond_noise`):

* ``input-bound`` — the loop's wait for its batches (``data_wait_s``) and their copy to the device
  (``data_to_device_s``), timed by ``watch_loader``, with what made them (sampling, feature
  gathering, transform, per hop) where the loader is split;
* ``garbage collection`` — pauses inside the calls (``gc_pause_s``) and between them (the run's GC
  events outside any row);
* ``recompilation`` — compiling in calls that recompiled (``compile_recompiles``, ``compile_s`` of
  ``@track_compile``); a label's first compilation is its warm-up;
* ``warm-up`` — the first calls' excess over the steady level, and a first epoch clearly slower than
  the later ones; said from :data:`WARMUP_SHARE` of the run's time (a first call is expected to
  be slow);
* ``busy machine`` — calls on crowded cores (:mod:`gnnmon.report.busy`) against the other calls;
* ``slow steps`` — the spikes nothing recorded explains (``report.spikes()``'s ``unexplained``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnmon.report import busy
from gnnmon.report.loops import NOISE_K, WARMUP, Loop, beyond_noise, evidence, finding, median, ms, spread

WARMUP_SHARE = 0.10
"""The least share of the run's time warm-up must take to be said."""

SPLIT = (("data_sample_s", "sampling"), ("data_gather_s", "feature gathering"),
         ("data_transform_s", "transform/collation"))
"""The parts of a neighbour loader's batch (``watch_loader``), in the order they are made."""

WATCHED = "the loop's next(), timed by watch_loader"


def input_bound(loop: Loop, total: float, cores: int | None = None) -> dict[str, Any] | None:
    """The loop's wait for data as a share of the run's time, split where the loader is; the next
    step fits the run: more workers only where the loader's (``data_workers``) and the training
    process leave idle cores among ``cores`` (the manifest's ``cpu_usable``) and the sampled
    ``idle_cpu_pct`` says they stood idle, and the gain stated as the wait it can win."""
    if not loop.has("data_wait_s"):
        return None
    known = ~np.isnan(loop.column("data_wait_s"))
    n = int(known.sum())
    cost = float(loop.wait[known].sum())
    if not beyond_noise(cost, n, loop.noise, total):
        return None
    wait, step = cost / n, float(loop.t[known].mean())
    proof = [evidence("data_wait_s", float(loop.zeros("data_wait_s")[known].mean()), "s",
                      f"{WATCHED}, mean of {n} batches")]
    parts = {}
    for field, name in (*SPLIT, ("data_to_device_s", "the copy to the device")):
        if loop.has(field):
            parts[name] = float(np.nanmean(loop.column(field)))
            proof.append(evidence(field, parts[name], "s", "watch_loader, mean per batch"
                                  + (" (in the loader's workers where it has them)" if field != "data_to_device_s" else "")))
    hops = _hops(loop)
    if hops:
        proof.append(evidence("data_hop_<k>_nodes", None, "nodes", "num_sampled_nodes: " + " → ".join(f"{h:,.0f}" for h in hops)))
    room, workers = _spare_cores(loop, cores), _workers(loop)
    words = (f"{loop.label} waited {ms(wait)} per batch for its data against {ms(step)} per step "
             f"({100 * cost / max(loop.total, 1e-12):.0f} % of its loop)")
    made = sum(v for k, v in parts.items() if k != "the copy to the device")
    if parts:
        words += "; of it " + ", ".join(f"{k} {ms(v)}" for k, v in parts.items())
        if made < 0.9 * wait and "sampling" in parts:
            words += f", the rest {ms(wait - made - parts.get('the copy to the device', 0.0))} (the sampler's input, collation)"
        elif made > 1.1 * wait:
            words += " (made in the loader's workers, partly while the step ran)"
    else:
        words += "; a plain DataLoader: its dataset's __getitem__ and collation (PyG's neighbour loaders are split)"
    if workers is not None:
        words += f"; num_workers={workers}" + (f" on {cores} core(s)" if cores else "")
    if hops:
        words += "; nodes per hop " + " → ".join(f"{h:,.0f}" for h in hops)
    next_step = _input_next(parts, hops, workers, room, cores)
    next_step += (f" — at most {ms(wait)} a batch to win ({100 * cost / max(total, 1e-12):.0f} % of the run): "
                  "data_wait_s in the next run says how much was")
    return finding("input-bound", loop.label, cost, total, words, proof, next_step)


def _workers(loop: Loop) -> int | None:
    """The watched loader's num_workers (its median over the loop's calls), None where not recorded."""
    if not loop.has("data_workers"):
        return None
    return int(median(loop.column("data_workers")[~np.isnan(loop.column("data_workers"))]))


def _spare_cores(loop: Loop, cores: int | None) -> float | None:
    """Cores that stood idle beside the loop: the sampled ``idle_cpu_pct`` (median over its calls,
    % of one core), bounded by ``cores``; None where neither is known."""
    if loop.has("idle_cpu_pct"):
        idle = median(loop.column("idle_cpu_pct")[~np.isnan(loop.column("idle_cpu_pct"))]) / 100.0
        return min(idle, float(cores)) if cores else idle
    return None


def _hops(loop: Loop) -> list[float]:
    out = []
    k = 0
    while loop.has(f"data_hop_{k}_nodes"):
        out.append(float(np.nanmean(loop.column(f"data_hop_{k}_nodes"))))
        k += 1
    return out


def _input_next(parts: dict[str, float], hops: list[float], workers: int | None, room: float | None,
                cores: int | None) -> str:
    """More workers only where cores stood idle (``room``, cores, sampled) beside the run, or, not
    sampled, as many as ``cores`` leave beside the training process; where none are left, or the
    batch is mostly its copy, something else."""
    if parts and max(parts, key=lambda k: parts[k]) == "the copy to the device":
        return ("pin_memory=True in the loader and watch_loader(loader, to=device): the copy is then queued "
                "non_blocking from pinned memory")
    lighter = _fix(max(parts, key=lambda k: parts[k]), hops) if parts else "a lighter dataset __getitem__ or collation"
    if room is not None:
        why, add = f" ({room:.1f} core(s) stood idle beside the run)", int(room)
        full = f"{100 * room:.0f} % of a core stood idle"
    elif cores:
        add = cores - 1 - (workers or 0)  # one core for the training process
        why, full = f" ({cores} core(s), one for the training process)", f"{cores} core(s)"
    else:
        why, add, full = "", None, ""
    if add is not None and add < 1:
        who = f"the {workers} worker(s) and the training process" if workers else "the training process"
        return f"{who} keep the cores full ({full}): more workers cannot help here; less work per batch: {lighter}"
    add = min(add, 4) if add is not None else None
    if workers:
        n = f"={workers + add}" if add is not None else ""
        return f"more workers (num_workers{n}){why}, or less work per batch: {lighter}"
    n = f"={add}" if add is not None else "=N"
    return (f"num_workers{n} in the DataLoader{why}, with persistent_workers=True (workers kept across epochs) and "
            f"prefetch_factor: batches are then made while the step runs; and {lighter}")


def _fix(part: str, hops: list[float]) -> str:
    if part == "sampling":
        growth = f" (hop {len(hops) - 1} has {hops[-1] / max(hops[-2], 1):.1f}× hop {len(hops) - 2}'s nodes)" \
            if len(hops) >= 2 else ""
        return f"smaller fanouts in the outer hops{growth}"
    if part == "feature gathering":
        return "keep the features where the step reads them (on the device: a GPU feature store), or fewer sampled nodes"
    return "a lighter transform, or one done once (pre_transform) instead of per batch"


def recompilation(loop: Loop, total: float) -> dict[str, Any] | None:
    """Compiling in calls that recompiled (a label's first compilation is warm-up)."""
    if not loop.has("compile_frames"):
        return None
    frames = loop.zeros("compile_frames")
    compiled = frames > 0
    if loop.has("compile_recompiles"):
        again = loop.zeros("compile_recompiles") > 0
    else:  # no compilation records: every compilation after the first
        again = compiled & (np.cumsum(compiled) > 1)
    m = int(again.sum())
    if not m:
        return None
    seconds = loop.zeros("compile_s")[again]
    cost = float(seconds.sum()) if seconds.any() else float(np.maximum(loop.t[again] - loop.level, 0.0).sum())
    if not beyond_noise(cost, m, loop.noise, total):
        return None
    shapes = loop.column("num_nodes")[again]
    distinct = len(np.unique(shapes[~np.isnan(shapes)]))
    proof = [evidence("compile_recompiles", float(loop.zeros("compile_recompiles")[again].sum()), "count",
                      f"@track_compile (torch._dynamo's records), in {m} call(s)"),
             evidence("compile_s", cost, "s", "@track_compile: compiling in those calls, the backward's included")]
    words = f"{m} call(s) of {loop.label} recompiled, {ms(cost)} compiling"
    if distinct:
        words += f", at {distinct} distinct batch size(s) (num_nodes)"
    return finding("recompilation", loop.label, cost, total, words, proof,
                   "give the batches a few fixed shapes (pad to buckets), or compile with dynamic=True (or "
                   "torch._dynamo.mark_dynamic on the node dimension) so one graph serves every shape")


def crowded_calls(loop: Loop) -> np.ndarray:
    """Per call: slowed while other processes crowded the run's cores (:mod:`gnnmon.report.busy`);
    all False where the machine's load was not sampled. Such a call's excess is the busy
    machine's, never warm-up's: each call's time is shared out once."""
    if not loop.has("others_cpu_pct") or not loop.has("idle_cpu_pct"):
        return np.zeros(loop.t.size, dtype=bool)
    others, idle = loop.column("others_cpu_pct"), loop.column("idle_cpu_pct")
    usual = busy.usual_others_s(others[loop.steady], loop.t[loop.steady])
    return busy.crowded(others, idle, loop.t, loop.level, usual)


def warm_up(loop: Loop, total: float) -> dict[str, Any] | None:
    """The first calls' excess over the steady level, and a slow first epoch's: calls slow for
    reasons of their own (compiling, caches and the allocator filling), not crowded ones, and never
    most of the loop (at most its first :data:`~gnnmon.report.loops.WARMUP` calls, fewer than half
    of them; a first epoch of fewer than half of them)."""
    crowd = crowded_calls(loop)
    n = loop.t.size
    first = (loop.index < min(WARMUP, (n - 1) // 2)) & ~crowd
    cost = float(np.maximum(loop.t[first] - loop.level, 0.0).sum())
    m = int(first.sum())
    words = f"the first {m} call(s) of {loop.label} took {ms(float(loop.t[first].sum()))} against " \
            f"{ms(loop.level)} per call after them" if m else ""
    epochs = loop.column("epoch")
    known = ~np.isnan(epochs) & loop.steady & ~crowd
    values = np.unique(epochs[known])
    if values.size >= 2:
        in_first = known & (epochs == values[0])
        later = median(loop.t[known & (epochs != values[0])])
        level = median(loop.t[in_first])
        if 2 * int(in_first.sum()) < n and level > max(1.2 * later, later + NOISE_K * loop.noise):
            cost += float(np.maximum(loop.t[in_first] - later, 0.0).sum())
            m += int(in_first.sum())
            words += ("; " if words else "") + f"its first epoch's calls took {ms(level)} (median) against {ms(later)} later"
    if not m or not beyond_noise(cost, m, loop.noise, total, WARMUP_SHARE):
        return None
    return finding("warm-up", loop.label, cost, total, words,
                   [evidence("wall_s/device_s", cost, "s", f"the excess of those {m} call(s) over the steady level")],
                   "nothing to fix in the loop: first calls fill caches (allocator, kernels, compiled graphs, a "
                   "dataset's first pass); time after them (the report's statistics leave the first 2 out)")


def busy_machine(loop: Loop, total: float) -> dict[str, Any] | None:
    """Calls slowed while other processes crowded the run's cores (:mod:`gnnmon.report.busy`), the
    first calls among them (their excess is the machine's, not warm-up's)."""
    crowd = crowded_calls(loop)
    quiet = loop.steady & ~crowd
    m = int(crowd.sum())
    if not m or quiet.sum() < 5:
        return None
    others, idle = loop.column("others_cpu_pct"), loop.column("idle_cpu_pct")
    usual = busy.usual_others_s(others[loop.steady], loop.t[loop.steady])
    level, noise = median(loop.t[quiet]), spread(loop.t[quiet])
    cost = float(np.maximum(loop.t[crowd] - level, 0.0).sum())
    slowed = median(loop.t[crowd])
    if slowed <= level + NOISE_K * noise or not beyond_noise(cost, m, noise, total):
        return None
    took = float(np.mean(busy.others_s(others, loop.t)[crowd]))
    proof = [evidence("others_cpu_pct", float(np.mean(others[crowd])), "%", f"sampled (psutil, the cores this "
                      f"process may run on), mean over {m} call(s)"),
             evidence("others' CPU per call", took, "s", f"others_cpu_pct x the call's time, mean over those calls; "
                      f"usually {ms(usual)}"),
             evidence("idle_cpu_pct", float(np.mean(idle[crowd])), "%", "sampled, those calls")]
    words = (f"{m} call(s) of {loop.label} ran on full cores while other processes took {ms(took)} of CPU "
             f"on them per call (usually {ms(usual)}): {ms(slowed)} (median) against {ms(level)} otherwise")
    return finding("busy machine", loop.label, cost, total, words, proof,
                   "not the job's cost: run where these cores are free (pin the job to cores nothing else uses: "
                   "taskset -c, os.sched_setaffinity), and compare timings from a quiet run")


def slow_steps(loop: Loop, spikes: list[dict[str, Any]], total: float) -> dict[str, Any] | None:
    """The spikes of this label nothing recorded explains."""
    mine = [s for s in spikes if s["label"] == loop.label and s["cause"] == "unexplained"]
    cost = float(sum(s["excess_s"] for s in mine))
    if not mine or not beyond_noise(cost, len(mine), loop.noise, total):
        return None
    waiting = sum("waiting" in s["detail"] for s in mine)
    words = f"{len(mine)} call(s) of {loop.label} were slow with no recorded cause, {ms(cost)} over its level"
    if waiting:
        words += f"; in {waiting} of them the process waited rather than computed"
    sampled = loop.has("others_cpu_pct")
    return finding("slow steps", loop.label, cost, total, words,
                   [evidence("excess_s", cost, "s", "report.spikes(): cause unexplained")],
                   "collect(sched=True) records the thread's scheduler counters (preempted or waiting)" if sampled
                   else "collect(sample=0.5) records the machine's load beside the run (a busy machine is then named)")

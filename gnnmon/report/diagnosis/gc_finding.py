"""The garbage-collection finding: pauses of the collector inside calls and between them, and the
next step that is not taken yet (a frozen set-up is not told to freeze again; collections the
loop asked for are told apart from automatic ones)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from gnnmon.report.loops import Loop, beyond_noise, evidence, finding, ms
from gnnmon.report.stats import spread


def set_up_frozen(manifest: Mapping[str, Any]) -> bool:
    """Whether the run's set-up was frozen before it started: more objects frozen than the
    collector still tracked (the manifest's ``gc_frozen`` and ``gc_tracked``). A few hundred that a
    library froze at import are not a frozen set-up; a file without ``gc_tracked`` counts any."""
    frozen, tracked = manifest.get("gc_frozen") or 0, manifest.get("gc_tracked")
    return bool(frozen) and (tracked is None or frozen >= tracked)


def garbage_collection(loops: list[Loop], gc_events: Iterable[Mapping[str, Any]], total: float,
                       frozen: bool = False) -> dict[str, Any] | None:
    """Pauses of garbage collection, inside calls and between them. The next step is what is not
    done yet: ``freeze_gc()`` unless set-up was frozen (``frozen``: :func:`set_up_frozen`, or a
    ``freeze`` in the run), and where most of the pauses are collections the loop asked for
    (``collect_garbage()``, ``gc_paused``), fewer of those."""
    inside = sum(float(loop.zeros("gc_pause_s").sum()) for loop in loops)
    rows = sum(int(np.count_nonzero(loop.zeros("gc_pause_s"))) for loop in loops)
    gc_events = list(gc_events)  # read twice below
    between = [e for e in gc_events if not e.get("row")]
    outside = sum(float(e.get("duration_s") or 0.0) for e in between)
    cost = inside + outside
    main = max(loops, key=lambda loop: float(loop.zeros("gc_pause_s").sum()))
    clean = main.t - main.zeros("gc_pause_s")
    if not beyond_noise(cost, rows + len(between), spread(clean[main.steady]), total):
        return None
    collections = int(sum(loop.zeros("gc_collections").sum() for loop in loops))
    proof = [evidence("gc_pause_s", inside, "s", f"gc.callbacks: {collections:,} collection(s) in {rows} call(s)")
             ] if inside else []  # none inside a call (@gc_controlled): no line of zeros
    if between:
        reasons = sorted({str(e.get("reason")) for e in between})
        proof.append(evidence("gc events outside calls", outside, "s", f"gc.callbacks, {len(between)} collection(s) "
                              f"between calls ({', '.join(reasons)})"))
    words = f"garbage collection paused the loop {ms(cost)} in all"
    words += f": {ms(inside)} inside {rows} call(s)" if inside else ""
    words += f"{',' if inside else ':'} {ms(outside)} in {len(between)} collection(s) between calls" if between else ""
    automatic = inside >= outside
    frozen = frozen or any(e.get("reason") == "freeze" for e in gc_events)
    asked = sum(float(e.get("duration_s") or 0.0) for e in between
                if e.get("requested") and e.get("reason") != "freeze")
    if asked >= 0.5 * cost:
        words += f"; {ms(asked)} of it in the collections the loop asked for"
        next_step = ("fewer of the collections you ask for (collect_garbage() every few epochs, or of generation 0 "
                     "or 1)" + ("" if frozen else ", and gnnmon.freeze_gc() once set-up is done: each walks every "
                                "object set-up left alive"))
    elif frozen:
        next_step = ("@gc_controlled on the step with gnnmon.collect_garbage() between epochs (collections where you "
                     "choose); set-up is frozen already" if automatic else
                     "set-up is frozen already: what the collections between calls walk is the loop's own garbage "
                     "(fewer cycles: detach tensors kept in lists, drop references to graphs between steps)")
    else:
        next_step = ("gnnmon.freeze_gc() once set-up is done (what is alive then is never scanned again), and "
                     "@gc_controlled on the step with gnnmon.collect_garbage() between epochs (collections where you "
                     "choose)" if automatic else "gnnmon.freeze_gc() once set-up is done: each collection between "
                     "calls walks every object set-up left alive")
    label = main.label if len(loops) == 1 or automatic else None
    return finding("garbage collection", label, cost, total, words, proof, next_step)



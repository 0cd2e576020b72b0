"""What ``Report.compare(other)`` and ``gnnmon compare`` return: two sides of runs, their lines
(:mod:`gnnmon.report.compare.lines`) in scopes (``all``; for distributed jobs also ``rank <r>``),
each judged line's decision against the limits given (:mod:`gnnmon.report.compare.gate`), notes on
what the figures cannot show, and the comparison as markdown, plain data (JSON) or a page."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from gnnmon.data.result import RunResult
from gnnmon.data.table import Table
from gnnmon.report.compare.comparison_markdown import comparison_markdown, comparison_page, where
from gnnmon.report.compare.gate import (
    ALPHA,
    RERUN_SPREAD,
    Change,
    decision,
    log_spread,
    relative_spread,
    runs_to_decide,
    spread_text,
)
from gnnmon.report.compare.lines import (
    CPU_TIME,
    MIN_CHANGE,
    OWN_TIME,
    PROCESS_CPU,
    TIME,
    as_change,
    compare_sides,
    others_load,
    ranks_of,
)

LOAD_DIFFERS = 25.0
"""Other processes' CPU (% of one core) by which two sides' loads must differ to be named."""

LOAD_BUSY = 50.0
"""Other processes' CPU (% of one core) beside a side's runs from which its load is named: wall
time then holds waits for a core."""

RUNS_ADVISED = 5
"""Runs a side the docs advise for CI: at a 2 % spread between reruns they decide a 5 % limit
(identical code passes, +10 % regresses) in 95 % of comparisons (docs/diagnosis.md)."""

ONE_RUN_UNDECIDED = ("one run a side cannot decide it beside a busy machine: judged at the 16 % a rerun may land "
                     "under load (not a quiet machine's 3 %), the change is within its reach, and how far a rerun "
                     "lands under this load cannot be seen in one run")
"""Why a judged time line of one run a side is inconclusive where the sampled load is busy or differs
(:meth:`Comparison.decisions`): on this project's 2-core VM, 15 identical runs beside 104-158 % of a
core spread 3.21-5.07 ms a step in their thread CPU time (16 % a run), where the assumed 3 % was
measured on a quiet one (docs/diagnosis.md)."""

BUSY_RERUN_SPREAD = 0.16
"""The rerun spread (relative, a run) a time line of one run a side is judged against where the load
is busy or differs (:meth:`Comparison.load_unsettled`): the 16 % of :data:`ONE_RUN_UNDECIDED`'s 15
identical runs. A change beyond it still regresses (one run a side at a 5 % limit: a lower bound
over about +52 %); nearer, the line is inconclusive."""

ONE_RUN_STRETCHED = ("one run a side cannot decide it at that spread: record the machine's load (collect(sample=0.5)) "
                     f"and the step's run queue (collect(sched=True)), and give {RUNS_ADVISED} runs a side, run "
                     "alternately")
"""Why a judged time line of one run a side whose step time stretched beyond its process's CPU time
on one side (:func:`~gnnmon.report.compare.lines.wall_stretched`), the load not sampled, is
inconclusive where a busy machine's spread leaves it undecided."""

ONE_RUN_STRETCHED_CPU = ("its process's CPU time is under the limit, but the step's time stretched beyond it, and a "
                         "sleep, I/O or a lock the change added stretches it as a loaded machine does: "
                         + ONE_RUN_STRETCHED.replace("one run a side cannot decide it at that spread: ", ""))
"""Why such a line judged on its process's CPU time never passes: the CPU time may show a regression,
never rule one out (a wait the change added is not in it)."""

INCONCLUSIVE = 4
"""The exit status of a comparison the runs cannot decide (``gnnmon compare``; :meth:`Comparison.status`)."""

EXIT_OF = {"pass": 0, "regressed": 1, "inconclusive": INCONCLUSIVE}
"""Each verdict's exit status, as CI reads it."""

Side = RunResult | Table


def run_name(manifest: Mapping[str, Any] | None, default: str) -> str:
    """A run's file name (a job's path), else ``default``."""
    file = ((manifest or {}).get("distributed") or {}).get("job_path") or (manifest or {}).get("file")
    return os.path.basename(str(file)) if file else default


def _sides(side: Side | Sequence[Side]) -> list[Side]:
    runs = [side] if isinstance(side, (RunResult, Table)) else list(side)
    if not runs:
        raise ValueError("compare needs at least one run on each side")
    return runs


def _runs(runs: list[Side]) -> list[tuple[Table, dict[str, Any]]]:
    return [(r.table, dict(r.manifest or {})) if isinstance(r, RunResult) else (r, {}) for r in runs]


def _identity(table: Table, manifest: Mapping[str, Any]) -> Any:
    """What tells one run from another: its host, process, start and file as recorded (a copy of a
    run's file is the same run), else the table itself."""
    if manifest.get("start_ns") is not None:
        return tuple(manifest.get(k) for k in ("host", "pid", "start_ns", "file"))
    return id(table)


def _load(tables: Sequence[Table]) -> float | None:
    found = [x for x in map(others_load, tables) if x is not None]
    return sorted(found)[len(found) // 2] if found else None


class Comparison:
    """Two sides of runs (a run, or a list of reruns of the same code, each side) figure by figure.
    ``lines``: every figure of every label (and phase) in every scope, each with both sides'
    values, the relative ``change``, its one-sided bounds ``low``/``high``, the test, a ``verdict``
    (slower, faster, more, less, within noise, same, added, removed) and ``judged`` (``time``,
    ``memory`` or None); ``decisions()``: each judged line against its limit (pass, regressed,
    inconclusive, with the runs a side that would decide it); ``notes``: what the figures cannot
    show (the machine's load, one run a side). Limits are shares: 0.05 is 5 %."""

    def __init__(self, base: Side | Sequence[Side], new: Side | Sequence[Side], base_name: str = "BASE",
                 new_name: str = "NEW", *, max_slowdown: float | None = None, max_memory_growth: float | None = None,
                 rerun_spread: float = RERUN_SPREAD) -> None:
        given = _sides(base), _sides(new)
        bases, news = _runs(given[0]), _runs(given[1])
        if not rerun_spread >= 0:
            raise ValueError("rerun_spread is a share of a run's figure, 0 or more (0.03 is 3 %); "
                             f"got {rerun_spread!r}")
        self.runs = (len(bases), len(news))
        self.base_name = f"{base_name} ({len(bases)} runs)" if len(bases) > 1 else base_name
        self.new_name = f"{new_name} ({len(news)} runs)" if len(news) > 1 else new_name
        self.max_slowdown, self.max_memory_growth = max_slowdown, max_memory_growth
        self.rerun_spread = rerun_spread
        self.same = (sorted(map(repr, (_identity(*r) for r in bases)))
                     == sorted(map(repr, (_identity(*r) for r in news))))
        ta, tb = [t for t, _ in bases], [t for t, _ in news]
        single = all(isinstance(r, RunResult) and r.one_thread for r in (*given[0], *given[1]))
        self.lines = compare_sides("all", ta, tb, single, rerun_spread)
        self.notes: list[str] = []
        ra, rb = set().union(*map(ranks_of, ta)), set().union(*map(ranks_of, tb))
        if len(ra) > 1 or len(rb) > 1:
            for rank in sorted(ra & rb):
                self.lines += compare_sides(f"rank {rank}", [t.where("rank").get(rank, Table()) for t in ta],
                                            [t.where("rank").get(rank, Table()) for t in tb], single, rerun_spread)
            if ra != rb:
                self.notes.append(f"ranks differ: {self.base_name} has {len(ra)}, {self.new_name} {len(rb)}; compared "
                                  "rank by rank where both have it")
        self.loads = (_load(ta), _load(tb))
        self._stretched(single)
        self._notes(*self.loads, single)

    def _stretched(self, single: bool) -> None:
        """Where one run a side, the load not sampled, a judged step time stretched beyond its
        process's CPU time on one side (the line's ``stretch``, :func:`~gnnmon.report.compare.lines.wall_stretched`):
        a loaded machine's wait, or the step's own, which these runs cannot tell apart. The line is
        judged at :data:`BUSY_RERUN_SPREAD` (:meth:`decisions`), and where every run's torch ran on
        one thread on the host (``single``: the process's CPU time is then the step's work and
        gnnmon's beside it), on its process's CPU time instead: a machine's load stretched the
        newcomer's identical runs' wall 19.4 → 40.3 ms a step, their CPU 16.7 → 19.3 ms. The words
        go on the judged line (``stretched``)."""
        if self.runs != (1, 1) or self.same or any(x is not None for x in self.loads):
            return
        for ln in [ln for ln in self.lines if ln["judged"] == "time" and ln.get("stretch")]:
            sa, sb, p = ln["stretch"]
            name = self.base_name if sa < sb else self.new_name
            words = (f"the step's time stretched beyond its process's CPU time on {name} (the process computed "
                     f"{100 * sa:.0f} % → {100 * sb:.0f} % of it, the median call; Mann-Whitney p = {p:.2g}): a loaded "
                     "machine's wait or the step's own (a sleep, I/O, a lock), which one run a side without the load "
                     "sampled cannot tell apart; so judged")
            per = ln["figure"][len(TIME):]
            cpu = next((o for o in self.lines if single and o["scope"] == ln["scope"] and o["label"] == ln["label"]
                        and o["phase"] is None and o["figure"] == PROCESS_CPU + per and o["log"] is not None), None)
            if cpu is not None:
                ln["judged"], cpu["judged"] = None, "time"
                words += (f" on the process's CPU time (torch on one thread: the step's work; its time "
                          f"{100 * (ln['change'] or 0):+.1f} %)")
            words += f" at a busy machine's rerun spread, {spread_text(BUSY_RERUN_SPREAD)} a run"
            (cpu or ln)["stretched"] = words

    def _notes(self, la: float | None, lb: float | None, single: bool) -> None:
        if self.same:
            self.notes.append("the same run(s) on both sides: nothing changed")
        elif self.runs == (1, 1):
            held = [relative_spread(ln["spread"]) for ln in self.lines if ln["judged"] and ln["spread"]]
            wider = max(held, default=0.0)
            self.notes.append("one run a side: the spread between reruns cannot be seen, "
                              f"{100 * self.rerun_spread:g} % a run is assumed (--rerun-spread), or a run's own "
                              "drift where wider" + (f" (up to {spread_text(wider)} a run on the judged lines here)"
                                                     if wider > self.rerun_spread * (1 + 1e-9) else "")
                              + f"; give {RUNS_ADVISED} runs a side (BASE... -- NEW...) to measure it")
        judged = [ln for ln in self.lines if ln["judged"] == "time" and ln["scope"] == "all"]
        on_cpu = next(("; judged on the step's " + ("time less its wait for a core (its thread's run queue)"
                                                   if ln["figure"].startswith(OWN_TIME) else
                                                   "CPU time, which does not wait")
                       for ln in judged if ln["figure"].startswith((OWN_TIME, CPU_TIME))), None)
        cpu_seen = any(ln["figure"].startswith(CPU_TIME) for ln in self.lines)
        self.notes += self._load_notes(la, lb, single, on_cpu, cpu_seen)
        for ln in judged:
            self.notes += _off_cpu_notes(ln, self.lines)
            if ln["figure"].startswith(CPU_TIME) and any(
                    o["figure"].startswith(OWN_TIME) and o["label"] == ln["label"] and o["scope"] == ln["scope"]
                    for o in self.lines):
                self.notes.append(f"{where(ln)}: judged on its CPU time, which a sleep, I/O or a lock in the step "
                                  "does not move: not every run recorded its thread's run queue (collect(sched=True), "
                                  "on Linux) for its time less its wait for a core")
        threads = [ln for ln in self.lines if ln["figure"].startswith(CPU_TIME) and ln["phase"] is None]
        if threads and not single:
            self.notes.append("the steps' CPU time is shown, not judged: not every run's torch ran on one thread "
                              "(torch_threads as the run ended), and a multi-threaded step's thread CPU time is not "
                              "its work")

    def _load_notes(self, la: float | None, lb: float | None, single: bool, on_cpu: str | None,
                    cpu_seen: bool) -> list[str]:
        """What the machine's load beside each side's runs (other processes' CPU, % of one core, the
        median over the calls; None where no run of the side sampled it) says of the comparison: a
        side not sampled is said to be unknown, never read as an idle machine."""
        if la is not None and lb is not None and abs(la - lb) >= LOAD_DIFFERS:
            return [f"the machine's load differed: other processes took {la:.0f} % of a core on {self.base_name}'s "
                    f"cores and {lb:.0f} % on {self.new_name}'s (median over the calls, sampled): a change in time "
                    "may be the machine's, not the code's; run both sides alternately, under the same load"]
        known = [(name, pct) for name, pct in ((self.base_name, la), (self.new_name, lb)) if pct is not None]
        unknown = [name for name, pct in ((self.base_name, la), (self.new_name, lb)) if pct is None]
        if not known:
            if self.same:
                return []
            stretched = any(ln.get("stretched") for ln in self.lines)  # judged at a busy machine's spread instead
            quiet = (f"; one run a side assumes a quiet machine's rerun spread ({spread_text(self.rerun_spread)} "
                     "a run), which this cannot confirm") if self.runs == (1, 1) and not stretched else ""
            return ["the machine's load was not sampled beside either side's runs (no others_cpu_pct): whether it "
                    "was busy, or differed between the sides, cannot be judged, and a change in time may be the "
                    f"machine's, not the code's{quiet}; record it with collect(sample=0.5) or gnnmon run --sample 0.5 "
                    "(and the step's thread CPU and run queue: collect(sched=True), gnnmon run --sched)"]
        out = []
        if max(pct for _, pct in known) >= LOAD_BUSY:
            if on_cpu:
                remedy = on_cpu
            elif not single:
                remedy = ("; run torch on one thread (torch.set_num_threads(1))"
                          + ("" if cpu_seen else " and record collect(sched=True)")
                          + " to judge the step's time less its wait for a core")
            elif not cpu_seen:
                remedy = "; record collect(sched=True) to judge the step's time less its wait for a core"
            else:
                remedy = ("; every run's torch ran on one thread, but the step's CPU time is not judged: not every "
                          "run recorded it (collect(sched=True)), or the steps ran on an accelerator")
            out.append("a busy machine: other processes took "
                       + " and ".join(f"{pct:.0f} % " + ("beside " if k else "of a core beside ") + f"{name}'s"
                                      + ("" if k else " runs") for k, (name, pct) in enumerate(known))
                       + " (median over the calls, sampled), so " + ("that side's" if unknown else "the")
                       + " steps' time holds waits for a core" + remedy)
        if unknown:
            (name, pct), = known
            out.append(f"the machine's load was not sampled beside {unknown[0]}'s runs, only beside {name}'s "
                       f"({pct:.0f} % of a core): whether it differed between the sides cannot be judged, and a change "
                       "in time may be the machine's, not the code's; run both sides alternately, under the same "
                       "load, each sampling it (collect(sample=0.5))")
        return out

    def _limits(self, max_slowdown: float | None, max_memory_growth: float | None) -> tuple[float | None, float | None]:
        return (self.max_slowdown if max_slowdown is None else max_slowdown,
                self.max_memory_growth if max_memory_growth is None else max_memory_growth)

    def decisions(self, max_slowdown: float | None = None,
                  max_memory_growth: float | None = None) -> list[dict[str, Any]]:
        """Each judged line that has a limit (default: those given when made), with ``limit``, its
        ``decision`` (``pass``, ``regressed``, ``inconclusive``; the lines judged together correct
        the regression bound, :func:`~gnnmon.report.compare.gate.decision`), where inconclusive,
        ``runs_needed`` (None: more than 50 a side would not decide it), and ``busy_bounds`` (the
        one-sided bounds at :data:`BUSY_RERUN_SPREAD`, where a line of one run a side was judged
        there: a sampled busy load, :meth:`load_unsettled`, or a stretched step, :meth:`_stretched`;
        else None) with ``undecided`` saying why where that left it inconclusive."""
        slow, grow = self._limits(max_slowdown, max_memory_growth)
        limits = [(ln, slow if ln["judged"] == "time" else grow) for ln in self.lines if ln["judged"]]
        held = [(ln, limit, c) for ln, limit in limits if limit is not None and (c := as_change(ln)) is not None]
        unseen = self.load_unsettled()
        out = []
        for ln, limit, c in held:
            why = (unseen or (ONE_RUN_STRETCHED if ln.get("stretched") else None)
                   if not c.seen and ln["judged"] == "time" and not self.same else None)
            said = "pass" if self.same else decision(_busy(c) if why else c, limit, len(held))
            busy = [_busy(c).bound(ALPHA, upper=False), _busy(c).bound(ALPHA, upper=True)] if why else None
            if said == "pass" and ln.get("stretched") and ln["figure"].startswith(PROCESS_CPU):
                said = "inconclusive"  # the work may rule a regression in, never out: the wait may be the step's
                why = ONE_RUN_STRETCHED_CPU
            elif said != "inconclusive":
                why = None  # decided even at a busy machine's rerun spread
            needed = runs_to_decide(c, limit, len(held)) if said == "inconclusive" and not why else None
            test = ln["test"] if busy is None else (f"one run a side: a busy machine's rerun spread of "
                                                     f"{spread_text(BUSY_RERUN_SPREAD)} a run assumed (normal)")
            out.append({**ln, "limit": limit, "decision": said, "runs_needed": needed, "judged_lines": len(held),
                        "undecided": why, "busy_bounds": busy, "test": test})
        return out

    def load_unsettled(self) -> str | None:
        """Why a time line with one run a side (its rerun spread assumed, not seen) is judged at
        :data:`BUSY_RERUN_SPREAD`, and why it is inconclusive where that leaves it undecided: a side's
        sampled load busy (:data:`LOAD_BUSY`, % of one core) or the sides' loads apart by
        :data:`LOAD_DIFFERS` or more. The assumed spread is a quiet machine's; under load reruns of
        the same code land further apart, in CPU time too (:data:`ONE_RUN_UNDECIDED`), and one run a
        side cannot show how far. None where no sampled load says so (an unsampled load is noted)."""
        known = [x for x in self.loads if x is not None]
        busy = bool(known) and max(known) >= LOAD_BUSY
        differ = len(known) == 2 and abs(known[0] - known[1]) >= LOAD_DIFFERS
        if not (busy or differ):
            return None
        pcts = " and ".join(f"{x:.0f} %" for x in known)
        return (f"{ONE_RUN_UNDECIDED} (other processes took {pcts} of a core, sampled); "
                f"{RUNS_ADVISED} runs a side, run alternately, measure it")

    def other_changes(self) -> tuple[list[dict[str, Any]], int]:
        """The lines not judged that changed beyond the runs' noise, and how many lines were looked
        at (``m``): of the whole job's scope, each line with a change (times at the judged line's
        unit, per step or per 1,000 nodes and edges). Each line's bounds are Bonferroni-corrected
        for the ``m``: one-sided at :data:`~gnnmon.report.compare.gate.ALPHA` / m (``family_low``,
        ``family_high``), so that together they are a 90 % interval for all ``m`` and identical
        code lists a line in at most 10 % of comparisons however many lines there are (each line's
        own 90 % interval, shown in its table, would list one of 20 unchanged lines in 64 % of
        them). A line is listed where its corrected interval excludes no change and the change is
        at least :data:`~gnnmon.report.compare.lines.MIN_CHANGE`."""
        per = {ln["label"]: ln["figure"].split(" per ")[-1] for ln in self.lines
               if ln["judged"] == "time" and ln["scope"] == "all"}
        looked = [(ln, c) for ln in self.lines
                  if ln["scope"] == "all" and not ln["judged"]
                  and ln["verdict"] in ("slower", "faster", "more", "less", "within noise")
                  and (ln["unit"] != "s" or ln["figure"].endswith(per.get(ln["label"], "")))
                  and (c := as_change(ln)) is not None]
        m = len(looked)
        out = []
        for ln, c in looked:
            low, high = c.bound(ALPHA / m, upper=False), c.bound(ALPHA / m, upper=True)
            if (low > 0 or high < 0) and abs(c.relative) >= MIN_CHANGE:
                out.append({**ln, "family_low": low, "family_high": high, "looked_at": m})
        return out, m

    def regressions(self, max_slowdown: float | None = None,
                    max_memory_growth: float | None = None) -> list[dict[str, Any]]:
        """The judged lines whose lower bound is over their limit."""
        return [d for d in self.decisions(max_slowdown, max_memory_growth) if d["decision"] == "regressed"]

    def inconclusive(self, max_slowdown: float | None = None,
                     max_memory_growth: float | None = None) -> list[dict[str, Any]]:
        """The judged lines whose bounds straddle their limit: the runs cannot tell."""
        return [d for d in self.decisions(max_slowdown, max_memory_growth) if d["decision"] == "inconclusive"]

    def verdict(self, max_slowdown: float | None = None, max_memory_growth: float | None = None) -> str:
        """``regressed`` where a judged line regressed, else ``inconclusive`` where one is, else
        ``pass`` (``pass`` too where no limit was given: nothing was held to one)."""
        said = {d["decision"] for d in self.decisions(max_slowdown, max_memory_growth)}
        return "regressed" if "regressed" in said else "inconclusive" if "inconclusive" in said else "pass"

    def status(self, inconclusive: str = "status") -> int:
        """The exit status a CI job acts on: 0 passed, 1 regressed, :data:`INCONCLUSIVE` where the
        runs cannot decide — or, by ``inconclusive``, 0 (``"pass"``: an advisory gate) or 1
        (``"fail"``: a strict one)."""
        if inconclusive not in ("status", "pass", "fail"):
            raise ValueError(f"inconclusive must be 'status', 'pass' or 'fail', got {inconclusive!r}")
        said = self.verdict()
        if said == "inconclusive" and inconclusive != "status":
            return EXIT_OF["pass" if inconclusive == "pass" else "regressed"]
        return EXIT_OF[said]

    def to_dict(self) -> dict[str, Any]:
        """The comparison as plain data (what ``--format json`` prints)."""
        return {"base": self.base_name, "new": self.new_name, "runs": list(self.runs),
                "max_slowdown": self.max_slowdown, "max_memory_growth": self.max_memory_growth,
                "rerun_spread": self.rerun_spread, "verdict": self.verdict(), "notes": self.notes,
                "lines": self.lines, "decisions": self.decisions(),
                "other_changes": self.other_changes()[0]}

    def markdown(self) -> str:
        """The comparison as markdown: the verdict first, then one table per scope and label."""
        return comparison_markdown(self)

    def to_html(self, path: str | os.PathLike[str]) -> str:
        """Write the comparison as one self-contained page; says what was written."""
        page = comparison_page(self)
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
        return f"a comparison page ({len(page) / 1024:.0f} KiB)"

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        return f"<gnnmon Comparison: {self.base_name} vs {self.new_name}: {self.verdict()}>"


def _off_cpu_notes(judged: dict[str, Any], lines: Sequence[dict[str, Any]]) -> list[str]:
    """Where a judged line of the step's thread (its time less its wait for a core, or its CPU time)
    and the step's time (or its CPU time) disagree: which time off the CPU made the difference."""
    figure = judged["figure"]
    kind = next((k for k in (OWN_TIME, CPU_TIME) if figure.startswith(k)), None)
    if kind is None:
        return []
    per = figure[len(kind):]
    found = {w["figure"]: w for w in lines if w["scope"] == judged["scope"] and w["label"] == judged["label"]
             and w["phase"] is None and w["figure"] in (TIME + per, CPU_TIME + per)}
    wall, cpu = found.get(TIME + per), found.get(CPU_TIME + per)

    def said(ln: dict[str, Any]) -> str:
        return f"{ln['figure']} {100 * (ln['change'] or 0):+.1f} % ({ln['verdict']})"

    out = []
    if wall is not None and wall["change"] is not None and wall["verdict"] != judged["verdict"]:
        why = ("the wait for a core (its thread's run queue): the machine's, not the step's" if kind == OWN_TIME else
               "time off the CPU: a busy machine's, or the step's own waits (I/O, a lock, a sleep), which its "
               "thread's run queue tells apart (collect(sched=True), on Linux)")
        out.append(f"{where(judged)}: {said(wall)} but its {said(judged)}: the difference is {why}")
    if kind == OWN_TIME and cpu is not None and cpu["change"] is not None and cpu["verdict"] != judged["verdict"]:
        out.append(f"{where(judged)}: {said(judged)} but its {said(cpu)}: the difference is the step's own time off "
                   "the CPU, not a wait for a core (I/O, a lock or a sleep in the step)")
    return out


def _busy(c: Change) -> Change:
    """``c`` with its assumed rerun spread widened to :data:`BUSY_RERUN_SPREAD` (its error grows with
    it: one run a side, the error is the spread's alone)."""
    wide = log_spread(BUSY_RERUN_SPREAD)
    if c.seen or not 0 < c.spread < wide:
        return c
    return dataclasses.replace(c, spread=wide, se=c.se * wide / c.spread)

"""The report as markdown text: per-label tables, step analysis, GC, spikes, short steps, energy.

A renderer reads what a report computes (any object with the methods of :class:`Explained`; the
step analysis, dips and GC summary from :mod:`gnnmon.report.analysis` over its table) and returns
text; it computes nothing itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import compress, groupby
from typing import Any, Protocol

from gnnmon.data.result import RunResult
from gnnmon.data.table import Table
from gnnmon.fields import J_PER_KWH
from gnnmon.figures import (
    COUNT,
    ENERGY_FIELDS,
    MEM_END,
    MEM_PEAK,
    MEM_START,
    NANOSECONDS,
    RSS_END,
    RSS_PEAK,
    RSS_START,
    TEXT,
    unit_of,
)
from gnnmon.report.analysis import dips, gc_summary, step_analysis
from gnnmon.report.diagnosis.findings_markdown import diagnosis_lines, diagnosis_said
from gnnmon.report.escape import md
from gnnmon.report.run_notes import run_notes
from gnnmon.report.stats import STATS

MAX_TABLE = 20
"""Rows shown in the markdown spike and short-step tables (all are in ``spikes()`` /
:func:`~gnnmon.report.analysis.dips`)."""


class Explained(Protocol):
    """What the markdown renderer reads (:class:`gnnmon.report.Report` has all of it)."""

    table: Table
    manifest: dict[str, Any]
    gc_events: list[dict[str, Any]]
    result: RunResult

    def summary(self) -> dict[str, dict[str, dict[str, float]]]: ...

    def spikes(self, **options: Any) -> list[dict[str, Any]]: ...

    def energy(self) -> dict[str, Any]: ...

    def cross_rank(self) -> dict[str, Any]: ...

    def oom(self) -> list[dict[str, Any]]: ...

    def layers(self) -> list[dict[str, Any]]: ...

    def diagnosis(self) -> list[dict[str, Any]]: ...

    def looked_for(self) -> list[dict[str, Any]]: ...


MAX_FAILED = 10
"""Failed calls named in a label's section; ``report.failures()`` has them all."""


def phase_shares(share: dict[str, float], inside: dict[str, str]) -> str:
    """``forward 99.9 % (attn 66.4 %), residual 0.1 %``: each outer phase's share of the step with
    the phases run inside it (their shares of the step too) in parentheses."""
    def one(name: str) -> str:
        within = [child for child, parent in inside.items() if parent == name]
        text = f"{md(name)} {100 * share[name]:.1f} %"
        return text + (f" ({', '.join(one(child) for child in within)})" if within else "")

    return ", ".join(one(name) for name in share if name not in inside)


def header_lines(m: Mapping[str, Any]) -> list[str]:
    """The versions line a report starts with (nothing without a manifest)."""
    parts = [f"{name} {md(m[key])}" if name else md(m[key]) for name, key in (
        ("gnnmon", "gnnmon"), ("torch", "torch"), ("PyG", "torch_geometric"), ("host", "host"), ("", "start_time"))
        if m and m.get(key) is not None]
    return [" · ".join(parts), ""] if parts else []


DID_NOT_END = ("**Did not end: killed, or still being written.** This run's file has no end line: the "
               "process was killed (SIGKILL, an out-of-memory killer, a crash, a lost machine) or is still "
               "running. Its rows are those on disk; a kill loses at most the last flush interval's.")
"""What a report of a file without its end line says first."""


def ending_lines(result: Any) -> list[str]:
    """How the run ended, where that is news, before anything else: a file without an end line
    (:data:`DID_NOT_END`), a run a SIGTERM ended, one that went on after it (your handler), one
    Ctrl-C ended (KeyboardInterrupt), or one an exception raised through ``collect()`` ended."""
    if result is None:
        return []
    end = result.end
    if result.complete is False and result.path is not None:
        return [DID_NOT_END, ""]
    if not end:
        return []
    ended, signal = str(end.get("ended") or ""), end.get("signal")
    if ended.startswith("signal "):
        name = md(ended.split(" ", 1)[1])
        return [f"**Ended by {name}** (how Slurm, Kubernetes and `timeout` end a job): every row returned before "
                "it is here, and the process then ended by the signal.", ""]
    if signal:
        return [f"A {md(signal)} came during this run; your handler took it, and the run ended: {md(ended)}.", ""]
    how, _, raised = ended.partition(" ")
    if how in ("exception", "uncaught") and raised == "KeyboardInterrupt":
        return ["**Ended by Ctrl-C** (KeyboardInterrupt): every row returned before it is here; the call it came in "
                "did not return.", ""]
    if how in ("exception", "uncaught") and raised and raised not in ("SystemExit", "GeneratorExit"):
        return [f"**Ended by {md(raised)}**, raised through the run: every row returned before it is here.", ""]
    return []


def file_notes(end: Mapping[str, Any]) -> list[str]:
    """What the run's file says it is missing (lines a failed write lost), before anything else."""
    lost = end.get("lines_lost") if end else None
    if not lost:
        return []
    why = "; ".join(map(str, end.get("write_errors") or ())) or "write errors"
    return [f"**{lost} lines of this run were lost** when writing its file failed ({why}); the rows "
            "before and after them are whole.", ""]


def steps_lines(result: Any) -> list[str]:
    """How ``gnnmon run`` found the steps (the end line's ``steps``): the rule its rows were cut by,
    each fallback it used, and what it looked for where it found nothing (nothing for other runs)."""
    end = getattr(result, "end", None) or {}
    steps = end.get("steps")
    if not isinstance(steps, Mapping):
        return []
    looked = "; ".join(map(str, steps.get("looked_for") or ()))
    if not steps.get("rule"):
        return [f"**No step found** by `gnnmon run`: it looked for {md(looked)} on the script's thread and saw none; "
                "no row is made up.", ""]
    labels = ", ".join(f"{md(k)} {v}" for k, v in (steps.get("labels") or {}).items())
    said = list(steps.get("said") or ())
    text = (f"Steps found by `gnnmon run` ({labels}): {md(said[0])}" if said
            else f"Steps found by `gnnmon run` ({labels})")
    if len(said) > 1:
        text += "; also " + "; ".join(md(x) for x in said[1:])
    skipped = steps.get("updates_skipped")
    if skipped:
        text += f"; {skipped} update(s) skipped by AMP's scaler (inf or NaN gradients), each marked on its row"
    notes = [md(str(n)) for n in steps.get("notes") or ()]
    return [text + "." + "".join(f" {n}." for n in notes), ""]


def render_markdown(report: Explained, header: bool = True, diagnosis: bool = True) -> str:
    """The report as markdown: the diagnosis, one table of figures per label (bytes in MiB, seconds
    in ms), then the step analysis, GC, spikes and short steps where the rows have times, then
    energy (``header``: the versions line and the diagnosis first; ``diagnosis=False``: without it,
    for a page that shows it apart)."""
    lines: list[str] = ending_lines(report.result) + header_lines(report.manifest) if header else []
    if header:
        lines += file_notes(report.result.end) + steps_lines(report.result)
        lines += diagnosis_lines(**diagnosis_said(report)) if diagnosis and len(report.table) else []
    summary = report.summary()
    if not summary:
        return "\n".join(lines + ["(no rows recorded)"]) + "\n"
    for label, figures in summary.items():
        part = report.table.parts[label]
        errors = part.objects("error")
        raised = list(compress(range(len(errors)), errors))
        failed = list(zip(part.pick("index", raised), [errors[i] for i in raised], strict=True))
        lines.append(f"### {md(label)} — {part.n} call(s) on {_devices_said(part.objects('device'))}"
                     + (f", {len(failed)} raised" if failed else ""))
        lines.append("")
        if failed:
            shown = "; ".join(f"call {i}: {md(e)}" for i, e in failed[:MAX_FAILED])
            more = f"; and {len(failed) - MAX_FAILED} more (`report.failures()`)" if len(failed) > MAX_FAILED else ""
            whose = ("the figures are over the calls that returned" if len(failed) < part.n
                     else "no call returned: the figures are the failed calls'")
            lines += [f"Raised — {shown}{more}. {whose.capitalize()}.", ""]
        lines.append("| figure | unit | " + " | ".join(STATS) + " |")
        lines.append("| --- | --- | " + " | ".join("---:" for _ in STATS) + " |")
        repeated = _repeats(figures)
        for name, stats in figures.items():
            if name.startswith(("layer_", "oom_")) or name in repeated:  # in their sections; shown once
                continue
            unit, scale = _unit(name)
            cells = [str(stats["count"]), *_fmt_row([stats.get(s) for s in STATS[1:]], scale)]
            lines.append(f"| {md(name)} | {unit} | " + " | ".join(cells) + " |")
        distinct = [next(run) for _, run in groupby(part.objects("notes"), key=id)]  # rows share their notes
        notes = sorted({n for notes in distinct for n in (notes or ())})
        if repeated:
            notes.insert(0, f"{', '.join(repeated)} not shown: equal to "
                            f"{', '.join(dict(DUPLICATES)[r] for r in repeated)} "
                            "here (on the CPU the device's memory is the process's RSS, its time wall time)")
        if notes:
            lines.append("")
            lines.extend(f"- note: {md(n)}" for n in notes)
        lines.append("")
    lines.extend(run_notes_lines(run_notes(report.manifest, report.result.end, report.table)))
    lines.extend(oom_lines(report.oom()))
    lines.extend(layer_lines(report.layers()))
    lines.extend(_analysis_lines(report))
    lines.extend(cross_rank_lines(report.cross_rank()))
    lines.extend(energy_lines(report.energy()))
    return "\n".join(lines)


def _devices_said(devices: list[Any]) -> str:
    """Where a label's calls ran, in words: its devices, and the calls on none (a row whose device
    could not be measured, such as ``device='cuda'`` without CUDA, keeps ``device`` None: it ran
    on no device, never on one named "None")."""
    named = sorted({str(d) for d in devices if d is not None})
    nowhere = sum(d is None for d in devices)
    if not named:
        return "no device"
    said = ", ".join(map(md, named))
    return f"{said} ({nowhere} on no device)" if nowhere else said


def run_notes_lines(notes: list[str]) -> list[str]:
    """What the run says once of all its rows (:mod:`gnnmon.report.run_notes`), after the labels' tables."""
    if not notes:
        return []
    return ["### Notes on the whole run", "", *(f"- note: {md(n)}" for n in notes), ""]


def oom_lines(ooms: list[dict[str, Any]]) -> list[str]:
    """The out-of-memory section: each call that ran out, in words (nothing if none did)."""
    if not ooms:
        return []
    lines = [f"### Out of memory — {len(ooms)} call(s)", ""]
    lines += [f"- {md(e['words'])}" for e in ooms[:MAX_TABLE]]
    if len(ooms) > MAX_TABLE:
        lines.append(f"- … {len(ooms) - MAX_TABLE} more (report.oom() has them all)")
    return [*lines, ""]


LAYER_COLUMNS = (("forward_s", 1e3), ("backward_s", 1e3), ("peak_delta_bytes", 1 / 2**20),
                 ("backward_peak_delta_bytes", 1 / 2**20), ("saved_bytes", 1 / 2**20), ("message_bytes", 1 / 2**20),
                 ("output_bytes", 1 / 2**20))
"""The layer table's figures and their scales (ms, MiB), after its ``layer`` column (share between)."""


def layer_lines(layers: list[dict[str, Any]]) -> list[str]:
    """The per-layer section (``gnnmon.watch_layers``): a table per label, then the advice."""
    lines: list[str] = []
    by_label: dict[str, list[dict[str, Any]]] = {}
    for entry in layers:
        by_label.setdefault(entry["label"], []).append(entry)
    for label, entries in by_label.items():
        lines += [f"### Layers of {md(label)} — median of {entries[0]['rows']} watched step(s)", "",
                  "| layer | forward ms | backward ms | share | fwd peak MiB | bwd peak MiB | saved MiB "
                  "| messages MiB | output MiB |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        columns = [_fmt_row([e[f] for e in entries], scale) for f, scale in LAYER_COLUMNS]  # one format a column
        for i, e in enumerate(entries):
            share = "" if e["time_share"] is None else f"{e['time_share']:.0%}"
            cells = [columns[0][i], columns[1][i], share] + [c[i] for c in columns[2:]]
            lines.append(f"| {md(e['layer'])} | " + " | ".join(cells) + " |")
        advice = [a for e in entries for a in e["advice"]]
        lines += [""] + [f"- {md(a)}" for a in advice] + ([""] if advice else [])
    return lines


OUTSIDE_LINES = {
    "preempted": "Steps held up by a rank the OS descheduled (its thread preempted: a busy machine, not the "
                 "job; not counted above)",
    "collective": "Steps whose collective (the all-reduce, a broadcast) ended late on one rank (it waited no "
                  "more often than the others, only longer: a busy machine or a slow link, not the job; not "
                  "counted above)",
}
"""The cross-rank report's lists of steps held up by what is not the job's work, in words."""


def cross_rank_lines(job: Mapping[str, Any]) -> list[str]:
    """The cross-rank section of a distributed job (nothing for a single process)."""
    if not job:
        return []
    steps = job["steps"]
    lines = [f"### Across ranks — {len(job['per_rank'])} ranks, {len(steps)} matched step(s)", ""]
    offsets = job.get("clock_offsets_ns") or {}
    if offsets:
        lines += ["Clock offsets to rank 0: " + ", ".join(f"rank {k} {v / 1e6:+.3f} ms"
                                                       for k, v in sorted(offsets.items())), ""]
    if job["stragglers"]:
        lines += ["Stragglers (slowest in many steps):", ""]
        lines += [f"- rank {s['rank']}: slowest in {s['steps']} of {s['of']} steps, "
                  f"{s['delay_s'] * 1e3:.1f} ms held up in all, mostly {md(s['cause'])}" for s in job["stragglers"]]
        lines.append("")
    spikes = job["spikes"]
    if spikes:
        lines += [f"Steps one rank held up: {len(spikes)}", "",
                  "| label | index | slowest rank | delay ms | others waited ms | seen in | spread ms | cause |",
                  "| --- | ---: | ---: | ---: | ---: | --- | ---: | --- |"]
        for s in spikes[:MAX_TABLE]:
            lines.append(f"| {md(s['label'])} | {s['index']} | {s['slowest_rank']} | {s['delay_s'] * 1e3:.2f} | "
                         f"{s['waited_s'] * 1e3:.2f} | {md(s['via'])} | {s['spread_s'] * 1e3:.2f} | {md(s['cause'])} |")
        if len(spikes) > MAX_TABLE:
            lines.append(f"| … {len(spikes) - MAX_TABLE} more | | | | | | | |")
    else:
        lines.append("No step was held up by one rank.")
    for key, what in OUTSIDE_LINES.items():
        held = job.get(key) or []
        if held:
            worst = max(held, key=lambda s: s["delay_s"])
            lines += ["", f"{what}: {len(held)}, the longest {worst['delay_s'] * 1e3:.1f} ms "
                      f"(step {worst['index']} of {md(worst['label'])}, rank {worst['slowest_rank']})."]
    lines += ["", "Per rank:", "", "| rank | label | calls | median ms | total s |",
              "| ---: | --- | ---: | ---: | ---: |"]
    for rank, labels in job["per_rank"].items():
        lines += [f"| {rank} | {md(label)} | {v['count']} | {v['median_s'] * 1e3:.2f} | {v['total_s']:.3f} |"
                  for label, v in labels.items()]
    lines.append("")
    return lines


def _analysis_lines(report: Explained) -> list[str]:
    lines: list[str] = []
    steps = step_analysis(report.table)
    if any(info["rows"] >= 2 for info in steps.values()):
        left_out = sum(i.get("warmup_left_out", 0) for i in steps.values())
        which = "after the first 2 calls of each label, left out as warm-up" if left_out else "every call"
        lines += [f"### Step analysis ({which}; ms)", "",
                  "| label | rows | p50 | p90 | p99 | p50 no GC | p90 no GC | p99 no GC | GC share "
                  "| µs / node | ns / edge |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for label, i in steps.items():
            raw, clean = i["raw"], i["clean"]
            share = "–" if i["gc_share"] is None else f"{100 * i['gc_share']:.1f} %"
            node = "–" if i["per_node_s"] is None else f"{i['per_node_s'] * 1e6:.3f}"
            edge = "–" if i["per_edge_s"] is None else f"{i['per_edge_s'] * 1e9:.2f}"
            lines.append(
                f"| {md(label)} | {i['rows']} | " + " | ".join(
                    f"{d[q] * 1e3:.2f}" for d in (raw, clean) for q in ("p50", "p90", "p99"))
                + f" | {share} | {node} | {edge} |")
        lines.append("")
        shares = {label: i for label, i in steps.items() if "phase_share" in i}
        if shares:
            lines += ["Share of step time per phase (residual: what no phase covered; a phase run inside "
                      "another is shown within it, part of its share):", ""]
            for label, info in shares.items():
                lines.append(f"- {md(label)}: " + phase_shares(info["phase_share"], info.get("phase_in", {})))
            lines.append("")
    if report.gc_events:
        g = gc_summary(report.gc_events)
        gens = ", ".join(f"gen {gen}: {d['count']} ({d['pause_s'] * 1e3:.1f} ms, longest "
                         f"{d['max_s'] * 1e3:.1f} ms)" for gen, d in g["by_generation"].items()
                         if d["count"])
        reasons = ", ".join(f"{md(k)} {v}" for k, v in sorted(g["by_reason"].items(), key=lambda kv: str(kv[0])))
        lines += ["### Garbage collection", "",
                  f"{g['collections']} collection(s), {g['pause_total_s'] * 1e3:.1f} ms in all; "
                  f"{gens}. By reason: {reasons}; {g['in_rows']} inside a row.", ""]
    spikes = report.spikes()
    if any(info["rows"] >= 2 for info in steps.values()):
        lines += [f"### Spikes ({len(spikes)})", ""]
        if spikes:
            causes: dict[str, int] = {}
            for sp in spikes:
                causes[sp["cause"]] = causes.get(sp["cause"], 0) + 1
            lines += ["By cause: " + ", ".join(f"{md(c)} {n}" for c, n in sorted(causes.items()))
                      + (f"; the {MAX_TABLE} with the largest excess:" if len(spikes) > MAX_TABLE else ""),
                      ""]
            lines += ["| label | index | time ms | median ms | excess ms | cause | detail |",
                      "| --- | ---: | ---: | ---: | ---: | --- | --- |"]
            shown = sorted(spikes, key=lambda sp: -sp["excess_s"])[:MAX_TABLE]
            shown.sort(key=lambda sp: (sp["label"], sp["index"]))
            for sp in shown:
                lines.append(
                    f"| {md(sp['label'])} | {sp['index']} | {sp['time_s'] * 1e3:.2f} | "
                    f"{sp['median_s'] * 1e3:.2f} | {sp['excess_s'] * 1e3:.2f} | {md(sp['cause'])} | "
                    f"{md(sp['detail'])} |")
        else:
            lines.append("No row exceeded its label's threshold.")
        lines.append("")
        short = dips(report.table)
        if short:
            lines += [f"### Short steps ({len(short)})", "",
                      "| label | index | time ms | median ms | cause | detail |",
                      "| --- | ---: | ---: | ---: | --- | --- |"]
            lines += [f"| {md(d['label'])} | {d['index']} | {d['time_s'] * 1e3:.2f} | "
                      f"{d['median_s'] * 1e3:.2f} | {md(d['cause'])} | {md(d['detail'])} |"
                      for d in short[:MAX_TABLE]]
            if len(short) > MAX_TABLE:
                lines.append(f"| … {len(short) - MAX_TABLE} more | | | | | |")
            lines.append("")
    return lines


def energy_lines(summary: Mapping[str, Any]) -> list[str]:
    """The summary as markdown lines (J with kWh beside, each source named)."""
    if not summary:
        return []
    t = summary["total"]
    lines = ["### Energy (top-level rows)", "",
             "| figure | J | kWh | share | source |", "| --- | ---: | ---: | ---: | --- |"]
    for k in ENERGY_FIELDS:
        share = summary["share"][k]
        src = "; ".join(map(md, summary["sources"].get(k, []))) or "not available"
        j = t.get(k)
        lines.append(f"| {k} | {_j(j)} | {_kwh(j)} | "
                     f"{'–' if share is None or j is None else f'{100 * share:.1f} %'} | {src} |")
    lines.append(f"| total | {_j(t['energy_j'])} | {_kwh(t['energy_j'])} | | |")
    if "co2_kg" in t:
        lines.append(f"| co2_kg | {t['co2_kg'] * 1000:.4g} g | | | "
                     f"{'; '.join(map(md, summary['sources'].get('co2_kg', [])))} |")
    lines.append("")
    if summary["by_epoch"]:
        lines += ["| epoch | rows | J | kWh | graphs | J / graph |", "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for e, a in summary["by_epoch"].items():
            per = f"{a['j_per_graph']:.4g}" if "j_per_graph" in a else "–"
            lines.append(f"| {md(e)} | {a['rows']} | {_j(a['energy_j'])} | {_kwh(a['energy_j'])} | "
                         f"{a.get('graphs', '–')} | {per} |")
        lines.append("")
    balance = summary.get("balance")
    if balance:
        lines += ["| counter | rows | in rows J | between rows J | before/after J | counter delta J | step |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for key, b in balance.items():
            step = "–" if b.get("period_s") is None else f"{b['period_s'] * 1e3:.0f} ms"
            lines.append(f"| {md(key)} | {b['rows']} | {_j(b['rows_j'])} | {_j(b['gaps_j'])} | "
                         f"{_j(b['outside_j'])} | {_j(b['counter_j'])} | {step} |")
        lines.append("")
    return lines


def _j(v: float | None) -> str:
    return "–" if v is None else f"{v:.4g}"


def _kwh(v: float | None) -> str:
    return "–" if v is None else f"{v / J_PER_KWH:.3e}"


SHOWN: dict[str, tuple[str, float]] = {
    "cpu_util_pct": ("% (100 = one core)", 1.0),
    "util_samples": ("samples in the call", 1.0),
    "co2_kg": ("g", 1e3),
}
"""Fields whose column says more than their unit: what 100 % means, what is counted; emissions
per call in grams, not kilograms (a step's are a fraction of a gram)."""

DUPLICATES = ((RSS_START.name, MEM_START.name), (RSS_PEAK.name, MEM_PEAK.name), (RSS_END.name, MEM_END.name),
              ("device_s", "wall_s"))
"""(field, the one it repeats on the CPU): the first is left out of a label's table when its
figures equal the second's (the CPU's device memory is the process's RSS, its device time wall time)."""


def _unit(field: str) -> tuple[str, float]:
    """The unit a field's column shows (declared in :mod:`gnnmon.figures`: MiB, ms, W, J, %) and
    the factor from what is stored; counts and figures without a unit show none."""
    shown = SHOWN.get(field)
    if shown is not None:
        return shown
    unit = unit_of(field)
    if unit in (COUNT, TEXT, NANOSECONDS):
        return "", 1.0
    return unit.shown, unit.factor


def _repeats(figures: Mapping[str, Any]) -> list[str]:
    """The fields of a label's table that repeat another's figures (:data:`DUPLICATES`)."""
    return [a for a, b in DUPLICATES if a in figures and figures[a].get("count") and figures[a] == figures.get(b)]


def _fmt_row(values: list[float | None], scale: float) -> list[str]:
    """Numbers that sit side by side (a table's row, or a column) in one format: whole numbers if
    all are; else one decimal where they reach 1,000, three below, and below 1 as many as show
    the largest to two significant digits (a step's 0.00041 g of CO2 is not 0.000)."""
    xs = [None if v is None else v * scale for v in values]
    known = [x for x in xs if x is not None]
    if all(x == int(x) and abs(x) < 1e12 for x in known):
        return ["–" if x is None else f"{int(x):,d}" for x in xs]
    top = max(abs(x) for x in known)
    if top >= 1000:
        places = 1
    elif top >= 1 or top == 0:
        places = 3
    else:
        places = max(3, 1 - math.floor(math.log10(top)))
        if places > 9:  # beyond nine decimals, the exponent says it plainer
            return ["–" if x is None else f"{x:.3g}" for x in xs]
    return ["–" if x is None else f"{x:,.{places}f}" for x in xs]

"""A comparison in words: markdown (the verdict first, naming what regressed, then a table per scope
and label) and the same as one self-contained page."""

from __future__ import annotations

import html
from importlib import resources
from typing import Any, Protocol

from gnnmon.report import renderers  # the package: its page.css and page.js
from gnnmon.report.compare.gate import MAX_RUNS, relative_spread, spread_text
from gnnmon.report.compare.lines import MIN_CHANGE
from gnnmon.report.diagnosis.findings_markdown import value_text
from gnnmon.report.escape import no_surrogates
from gnnmon.report.md_html import markdown_html


class Compared(Protocol):
    """What the markdown and the page read (:class:`gnnmon.report.compare.comparison.Comparison` has it)."""

    base_name: str
    new_name: str
    max_slowdown: float | None
    max_memory_growth: float | None
    notes: list[str]
    lines: list[dict[str, Any]]

    def decisions(self) -> list[dict[str, Any]]: ...

    def verdict(self) -> str: ...

    def other_changes(self) -> tuple[list[dict[str, Any]], int]: ...


def where(ln: dict[str, Any]) -> str:
    """``step / phase forward`` (``[rank 1]`` outside the whole job's scope)."""
    what = ln["label"] + (f" / {ln['phase']}" if ln["phase"] == "data wait"
                          else f" / phase {ln['phase']}" if ln["phase"] else "")
    return what + (f" [{ln['scope']}]" if ln["scope"] != "all" else "")


def shown(value: float | None, unit: str) -> str:
    """A figure to 4 significant digits (times in ms), so that a 15 % change shows."""
    if value is None:
        return ""
    if unit == "s":
        return f"{value * 1e3:,.4g} ms"
    if unit == "bytes":
        return f"{value / 2**20:,.4g} MiB" if abs(value) >= 2**20 else f"{value:,.4g} B"
    return value_text(value, unit)


def change_text(change: float | None) -> str:
    if change is None:
        return ""
    return "new" if change == float("inf") else f"{100 * change:+.1f} %"


def bounds_text(ln: dict[str, Any]) -> str:
    """``-1.2 % … +3.4 %``: a line's one-sided bounds (its 90 % interval); empty without one."""
    if ln.get("low") is None:
        return ""
    return f"{change_text(ln['low'])} … {change_text(ln['high'])}"


def said(ln: dict[str, Any]) -> str:
    """``time per 1,000 nodes+edges +15.2 % (0.40 ms → 0.46 ms)``."""
    return (f"{ln['figure']} {change_text(ln['change'])} ({shown(ln['base'], ln['unit'])} → "
            f"{shown(ln['new'], ln['unit'])})")


def decided(d: dict[str, Any]) -> str:
    """A decision in words: the line, its bounds against its limit, and what would decide it."""
    text = f"{where(d)}: {said(d)}" + (f", {d['per_step']}" if d.get("per_step") else "")
    text += f"; bounds {bounds_text(d)} against the limit {100 * d['limit']:+g} %"
    if d.get("stretched"):
        text += f"; {d['stretched']}"
    if d.get("busy_bounds"):
        low, high = d["busy_bounds"]
        text += (" (" + ("" if d.get("stretched") else "at a busy machine's spread: ")
                 + f"bounds {bounds_text({'low': low, 'high': high})})")
    if d.get("undecided"):
        text += f": {d['undecided']}"
    elif d["decision"] == "inconclusive":
        spread = f"{spread_text(relative_spread(d['spread']))} a run, {'seen' if d['seen'] else 'assumed'}"
        text += (f": {d['runs_needed']} runs a side would decide it at the spread ({spread})" if d["runs_needed"]
                 else f": {MAX_RUNS} runs a side would not decide it at the spread ({spread})")
    return text


def limits(c: Compared) -> str:
    given = [f"slowdown {100 * c.max_slowdown:g} %" if c.max_slowdown is not None else "",
             f"memory growth {100 * c.max_memory_growth:g} %" if c.max_memory_growth is not None else ""]
    return ", ".join(g for g in given if g) or "none given"


HEADS = {"regressed": "**Regressed** beyond the limits", "inconclusive": "**Inconclusive**: the runs cannot tell "
         "whether the change is within the limits", "pass": "**Passed**: within the limits"}


def verdict_lines(c: Compared) -> list[str]:
    """The section a comparison opens with: the verdict, each judged line's decision, the test
    used, and the notes."""
    decisions = c.decisions()
    out = ["### Verdict", ""]
    if not decisions:
        out.append(f"No line judged (limits: {limits(c)}).")
    else:
        out += [f"{HEADS[c.verdict()]} ({limits(c)}):", ""]
        order = {"regressed": 0, "inconclusive": 1, "pass": 2}
        out += [f"- {d['decision']}: {decided(d)}" for d in sorted(decisions, key=lambda d: order[d["decision"]])]
        tests = sorted({d["test"] for d in decisions if d["test"]})
        out += ["", f"Judged on each run's median ({'; '.join(tests)}; on the logarithms): a line passes where the "
                f"upper one-sided 95 % bound of its change is under its limit, regresses where the lower one is over "
                f"it (corrected for the {decisions[0]['judged_lines']} line(s) judged), and is inconclusive otherwise."]
    moved, looked = c.other_changes()
    if moved:
        out += ["", f"Other changes beyond the runs' noise (shown, not judged; bounds corrected for the {looked} "
                f"line(s) looked at, Bonferroni: together a 90 % interval):", ""]
        out += [f"- {where(ln)}: {said(ln)}, {ln['verdict']} (bounds "
                f"{bounds_text({'low': ln['family_low'], 'high': ln['family_high']})})" for ln in moved]
    if c.notes:
        out.append("")
    out += [f"- note: {n}" for n in c.notes]
    return [*out, ""]


def comparison_markdown(c: Compared) -> str:
    """The comparison as markdown (see the module doc)."""
    out = [f"## gnnmon compare: {c.base_name} → {c.new_name}", "", *verdict_lines(c)]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for ln in c.lines:
        groups.setdefault((ln["scope"], ln["label"]), []).append(ln)
    for (scope, label), lines in groups.items():
        out += [f"### {label}" + (f" [{scope}]" if scope != "all" else ""), "",
                f"| phase | figure | {c.base_name} | {c.new_name} | change | 90 % interval | verdict |",
                "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
        for ln in lines:
            mark = " **(judged)**" if ln["judged"] else ""
            out.append(f"| {ln['phase'] or 'step'} | {ln['figure']}{mark} | {shown(ln['base'], ln['unit'])} | "
                       f"{shown(ln['new'], ln['unit'])} | {change_text(ln['change'])} | {bounds_text(ln)} | "
                       f"{ln['verdict']} |")
        out.append("")
    out.append("Each run's figure is the median of a label's calls after the first 2 (of a phase some of them did "
               "not run, its mean over all of them, 0 s where it did not run); a side's value is the geometric mean "
               "of its runs'. A change is called slower or faster (more or less) where its 90 % interval excludes no "
               f"change (0 %) and it is at least {100 * MIN_CHANGE:g} %. Each line's verdict is on its own interval, "
               "uncorrected for the many lines in these tables; the list of other changes above is corrected.")
    return no_surrogates("\n".join(out)) + "\n"


def comparison_page(c: Compared) -> str:
    """The comparison as one self-contained HTML page (no script; the report page's style)."""
    style = (resources.files(renderers) / "page.css").read_text("utf-8")
    title = f"gnnmon compare: {c.base_name} → {c.new_name}"
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>\n{markdown_html(comparison_markdown(c))}\n</body></html>\n")

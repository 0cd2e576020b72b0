"""A comparison in words: markdown (the verdict first, naming what regressed, then a table per scope
and label) and the same as one self-contained page."""

from __future__ import annotations

import html
from importlib import resources
from typing import Any, Protocol

from gnnmon.data.format import printable
from gnnmon.report import renderers  # the package: its page.css and page.js
from gnnmon.report.compare.lines import band
from gnnmon.report.diagnosis.text import value_text
from gnnmon.report.md_html import markdown_html


class Compared(Protocol):
    """What the text reads (:class:`gnnmon.report.compare.comparison.Comparison` has it)."""

    base_name: str
    new_name: str
    max_slowdown: float | None
    max_memory_growth: float | None
    notes: list[str]
    lines: list[dict[str, Any]]

    def regressions(self) -> list[dict[str, Any]]: ...

    def inconclusive(self) -> list[dict[str, Any]]: ...


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


def said(ln: dict[str, Any]) -> str:
    """``time per 1,000 nodes+edges +15.2 % (0.40 ms → 0.46 ms)``."""
    return (f"{ln['figure']} {change_text(ln['change'])} ({shown(ln['base'], ln['unit'])} → "
            f"{shown(ln['new'], ln['unit'])})")


def limits(c: Compared) -> str:
    given = [f"slowdown {100 * c.max_slowdown:g} %" if c.max_slowdown is not None else "",
             f"memory growth {100 * c.max_memory_growth:g} %" if c.max_memory_growth is not None else ""]
    return ", ".join(g for g in given if g) or "none given"


def verdict_lines(c: Compared) -> list[str]:
    """The section a comparison opens with: what regressed beyond the limits, or that nothing did,
    and the other changes beyond noise."""
    bad = c.regressions()
    out = ["### Verdict", ""]
    if bad:
        out += [f"**Regressed** beyond the limits ({limits(c)}):", ""]
        out += [f"- {where(ln)}: {said(ln)}" for ln in bad]
    else:
        unsure = c.inconclusive()
        if unsure:
            out += [f"**Inconclusive**: no regression beyond the limits ({limits(c)}), but the runs' noise is "
                    "wider than the limit where:", ""]
            out += [f"- {where(ln)}: {said(ln)}, noise ±{100 * (band(ln) or 0.0):.1f} %" for ln in unsure]
            out += ["", "Compare longer runs, or several runs a side, to narrow it."]
        else:
            out.append(f"No regression beyond the limits ({limits(c)}) and both runs' noise.")
    moved = [ln for ln in c.lines if ln["judged"] and ln["verdict"] in ("slower", "faster", "more", "less")
             and ln not in bad]
    if moved:
        out += ["", "Other judged changes beyond both runs' noise:", ""]
        out += [f"- {where(ln)}: {said(ln)}, {ln['verdict']}" for ln in moved]
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
                f"| phase | figure | {c.base_name} | {c.new_name} | change | verdict |",
                "| --- | --- | ---: | ---: | ---: | --- |"]
        for ln in lines:
            mark = " **(judged)**" if ln["judged"] else ""
            out.append(f"| {ln['phase'] or 'step'} | {ln['figure']}{mark} | {shown(ln['base'], ln['unit'])} | "
                       f"{shown(ln['new'], ln['unit'])} | {change_text(ln['change'])} | {ln['verdict']} |")
        out.append("")
    out.append("Times are medians over each label's calls after the first 2; a verdict is given only beyond 3 "
               "standard errors of both runs' figures; judged lines are held to the limits.")
    return printable("\n".join(out)) + "\n"


def comparison_page(c: Compared) -> str:
    """The comparison as one self-contained HTML page (no script; the report page's style)."""
    style = (resources.files(renderers) / "page.css").read_text("utf-8")
    title = f"gnnmon compare: {c.base_name} → {c.new_name}"
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>\n{markdown_html(comparison_markdown(c))}\n</body></html>\n")

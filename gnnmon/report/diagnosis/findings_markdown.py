"""The diagnosis in words: the markdown section a report opens with, and the same as an HTML
fragment for a page (:func:`diagnosis_html`: the report page's JSON carries the findings as
``diagnosis``, and a page may show this fragment first). Both read what they say from
:func:`diagnosis_said`, once per report."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from gnnmon.report.diagnosis.findings import Timed, unjudged, unmeasured
from gnnmon.report.diagnosis.machine_findings import MIN_CALLS
from gnnmon.report.escape import md
from gnnmon.report.loops import MIN_SHARE, WARMUP, ms
from gnnmon.report.memory.model import format_bytes

NOTHING = (f"Nothing stands out: no cause takes {100 * MIN_SHARE:.0f} % of the measured time or memory "
           "beyond the noise its own calls show.")
"""What a run with nothing to say says."""

OF = {"time": "of the measured time"}


class Judged(Timed, Protocol):
    """What the diagnosis in words reads (:class:`gnnmon.report.Report` has all of it)."""

    def diagnosis(self) -> list[dict[str, Any]]: ...

    def looked_for(self) -> list[dict[str, Any]]: ...


def diagnosis_said(report: Judged) -> dict[str, Any]:
    """Everything the diagnosis says of ``report``, for every surface that shows it (the keyword
    arguments of :func:`diagnosis_lines` and :func:`diagnosis_html`): ``findings``
    (``report.diagnosis()``), ``looked_for`` (``report.looked_for()``), ``between`` (the time
    between the measured calls, in seconds, or None: :func:`gnnmon.report.diagnosis.findings.unmeasured`)
    and ``unjudged`` (:func:`gnnmon.report.diagnosis.findings.unjudged`)."""
    return {"findings": report.diagnosis(), "looked_for": report.looked_for(), "between": unmeasured(report),
            "unjudged": unjudged(report)}


def headline(f: dict[str, Any]) -> str:
    """``input-bound — 41 % of the measured time`` (``off-CPU wait in every call — ...``: a steady wait)."""
    if f["kind"] == "out of memory":
        return "out of memory"
    of = "of the job's time" if f["kind"] == "straggler" or (f["kind"] == "busy machine" and f["label"] is None) \
        else "of the device's memory" if f["kind"] == "memory" \
        else "of the memory its calls end with" if f["of"] == "memory" else OF["time"]  # creep's, leak's level
    return f"{f['kind']}{' in every call' if f.get('every_call') else ''} — {100 * f['share']:.0f} % {of}"


def value_text(value: float | None, unit: str) -> str:
    """A figure's value in the unit a reader expects (ms, MiB, %)."""
    if value is None:
        return ""
    if unit == "s":
        return ms(value)
    if unit.startswith("bytes"):
        return format_bytes(value) + unit[len("bytes"):]
    if unit == "%":
        return f"{value:.0f} %"
    return f"{value:,.4g} {unit}".rstrip()


def evidence_text(e: dict[str, Any], text: Callable[[Any], str] = str) -> str:
    """A finding's evidence: the figure, its value and where it was measured (``text``: how the
    words are written, :func:`~gnnmon.report.escape.md` for markdown)."""
    value = value_text(e["value"], e["unit"])
    return f"`{e['figure']}`" + (f" {value}" if value else "") + f" ({text(e['where'])})"


def looked_for_text(c: dict[str, Any]) -> str:
    """``no leak in rss_end_bytes of step over 8 epochs: one under 3.65 MiB per epoch would go unsaid
    (its noise could hide 174 KiB per epoch, and one that grows it by under 5 % over the run is not
    said)``; the input check's (``check: input``): ``no wait for data in step beyond its noise: ...``;
    unsampled DataLoader workers (``check: workers``): ``the memory of step's 2 DataLoader workers was
    not looked at ...``."""
    if c.get("check") == "input":  # gnnmon.report.diagnosis.input_finding.looked_for
        return (f"no wait for data in {c['label']} beyond its noise: {ms(c['wait_s'])} a batch over {c['batches']} "
                f"batches ({100 * c['share']:.0f} % of the measured time); a steady one under {ms(c['unsaid_s'])} "
                "a batch would go unsaid")
    if c.get("check") == "workers":  # gnnmon.report.diagnosis.creep.looked_for
        n = c["workers"]
        return (f"the memory of {c['label']}'s {n} DataLoader worker{'s' if n != 1 else ''} was not looked at (a leak "
                "there goes unsaid): no sample read it; gnnmon.collect(..., sample=0.5) or gnnmon run --sample 0.5 "
                "records workers_rss_bytes")
    noise, unsaid = c.get("hidden_bytes_per_epoch"), c.get("unsaid_bytes_per_epoch")
    text = f"no leak in {c['figure']} of {c['label']} over {c['epochs']} epochs"
    if c.get("levelled_off_bytes") is not None:
        text += f" (it rose {format_bytes(c['levelled_off_bytes'])}, then levelled off)"
    if noise is None or unsaid is None:
        return text
    if unsaid <= noise:
        return text + f": one under {format_bytes(unsaid)} per epoch would go unsaid (its noise could hide that much)"
    return (text + f": one under {format_bytes(unsaid)} per epoch would go unsaid (its noise could hide "
            f"{format_bytes(noise)} per epoch, and one that grows it by under {100 * MIN_SHARE:.0f} % over the run is "
            "not said)")


def unmeasured_text(between: dict[str, float]) -> str:
    """``The shares are of the measured time: ... cover 25 % of the 19.62 s ...``
    (:func:`gnnmon.report.diagnosis.findings.unmeasured`)."""
    span = between["span_s"]
    return ("The shares are of the measured time: the calls, their waits for data and the collections between "
            f"them, which cover {100 * between['covered_s'] / span:.0f} % of the {ms(span)} from the first call's "
            f"start (its wait for data included) to the last one's end. The other {ms(between['between_s'])} ran "
            "between the calls, unmeasured: "
            "the loop's own code, evaluation, logging or a wait outside the measured step (measure it with a phase, a "
            "decorated call or watch_loader to see it here)")


def unjudged_text(u: dict[str, Any]) -> str:
    """``no leak judged in step's mem_end_bytes: its 120 calls mark no epochs ...``; a label with
    few calls (``check: calls``): ``evaluate: 4 calls, 30 % of the measured time ...``
    (:func:`gnnmon.report.diagnosis.findings.unjudged`)."""
    if u.get("check") == "calls":  # gnnmon.report.diagnosis.findings.few_calls
        return (f"{u['label']}: {u['calls']} call(s), {100 * u['share']:.0f} % of the measured time "
                f"({ms(u['time_s'])}, {ms(u['call_s'])} a call, median): too few to judge whether they waited off the "
                f"CPU, on a busy machine or were slow (those are read from {MIN_CALLS} calls after the first "
                f"{WARMUP}; it has {u['steady']})")
    return (f"no leak judged in {u['label']}'s {', '.join(u['figures'])}: its {u['calls']} calls mark no epochs, and a "
            "leak is judged on epoch levels (run.mark(\"epoch\", e) at each epoch's start in a collect run)")


def notes(looked_for: Sequence[dict[str, Any]], between: dict[str, float] | None, unjudged: Sequence[dict[str, Any]],
          text: Callable[[str], str]) -> list[str]:
    """The sentences after the findings, each where there is one to say: the time between the
    measured calls, what was looked for and not found, what was not looked for (``text``: how the
    words are written, :func:`~gnnmon.report.escape.md` or :func:`html.escape`)."""
    out = [text(unmeasured_text(between)) + "."] if between is not None else []
    if looked_for:
        out.append("Looked for, not found: " + "; ".join(text(looked_for_text(c)) for c in looked_for) + ".")
    if unjudged:
        out.append("Not looked for: " + "; ".join(text(unjudged_text(u)) for u in unjudged) + ".")
    return out


def diagnosis_lines(findings: list[dict[str, Any]], looked_for: Sequence[dict[str, Any]] = (),
                    between: dict[str, float] | None = None, unjudged: Sequence[dict[str, Any]] = ()) -> list[str]:
    """The section a markdown report opens with: each finding ranked, its evidence and next step;
    or one line when there is nothing to say; the time left between the measured calls where it is
    worth saying (``between``: :func:`gnnmon.report.diagnosis.findings.unmeasured`); then what was
    looked for and not found (``looked_for``: :func:`gnnmon.report.diagnosis.findings.looked_for`)
    and what could not be (``unjudged``: :func:`gnnmon.report.diagnosis.findings.unjudged`). The
    words hold your labels and names: written as markdown that reads back as that text (a label
    ``a|<b>x</b>`` with a line break in it stays one list item)."""
    lines = ["### Diagnosis", ""]
    if not findings:
        lines.append(NOTHING)
    for k, f in enumerate(findings, 1):
        lines += [f"{k}. **{md(headline(f))}**: {md(f['words'])}.",
                  "   Evidence: " + "; ".join(evidence_text(e, md) for e in f["evidence"]) + ".",
                  f"   Next: {md(f['next'])}."]
    for note in notes(looked_for, between, unjudged, md):
        lines += ["", note]
    return [*lines, ""]


def diagnosis_html(findings: list[dict[str, Any]], looked_for: Sequence[dict[str, Any]] = (),
                   between: dict[str, float] | None = None, unjudged: Sequence[dict[str, Any]] = ()) -> str:
    """The diagnosis as an HTML fragment, escaped: an ordered list, or the one line; then, as
    :func:`diagnosis_lines` says them, the time between the measured calls, what was looked for
    and not found, and what could not be (one paragraph each, where there is one to say)."""
    if not findings:
        out = f"<p class=\"diagnosis\">{html.escape(NOTHING)}</p>"
    else:
        items = "".join(
            f"<li><b>{html.escape(headline(f))}</b>: {html.escape(f['words'])}.<br>"
            f"<small>Evidence: {html.escape('; '.join(evidence_text(e).replace('`', '') for e in f['evidence']))}."
            f"</small><br>Next: {html.escape(f['next'])}.</li>" for f in findings)
        out = f"<ol class=\"diagnosis\">{items}</ol>"
    return out + "".join(f"\n<p>{note}</p>" for note in notes(looked_for, between, unjudged, html.escape))

"""A user's strings are data wherever the report puts them. A run whose labels, marker values,
config, notes, field names, exception names and file name hold markup (``<!--<script>``,
``</script><script>…``, ``"'><img onerror=…>``), line breaks (``\\n``, U+2028) and table pipes:
the HTML page, opened in a real headless Chromium, draws every chart, shows each string as text and
runs none of it; the markdown report, read by a CommonMark parser with GitHub's tables and raw
HTML on, keeps every table's shape and turns no string into markup; the Chrome trace is JSON a
strict parser takes, each name in it as it was."""

from __future__ import annotations

import html as html_
import json
import re
import time
from pathlib import Path

import orjson
import pytest

import gnnmon
from gnnmon.report.escape import md, no_surrogates, printable
from gnnmon.report.renderers.html import markdown_html, render, script_json
from gnnmon.report.renderers.trace import chrome_trace
from tests.report.renderers.test_html import browser, count, load_page  # noqa: F401 - the browser fixture, shared

PWN = "window.__pwned=1"
HOSTILE = [
    "<!--<script>",
    f"</script><script>{PWN}</script>",
    f"\"'><img src=x onerror={PWN}>",
    f"<svg onload={PWN}>",
    f"</style><script>{PWN}</script>",
    "line\u2028sep\u2029para",
    "a|b\nc",
    "**bold** `code` [link](javascript:alert(1)) _x_ \\| &lt;",
    "**open `tick __dunder__ *star* ~~gone~~",
]
"""Strings a user passes, each meant to break out of where it lands."""


def hostile_error(text: str) -> type[Exception]:
    """An exception class whose name is ``text`` (what a row's ``error`` records)."""
    return type(text, (RuntimeError,), {})


def hostile_run(path: Path) -> gnnmon.RunResult:
    """Each hostile string as a label (two calls, so memory lines and step analysis draw), a
    marker's value, a config key and value, a note, a field's name and value, and the name of an
    exception a call raised."""
    with gnnmon.collect(path, sample=0.005, config={h: h for h in HOSTILE}) as run:
        for k, text in enumerate(HOSTILE):
            run.mark("tag", text)

            @gnnmon.cuda_timed(label=text)
            @gnnmon.monitor_memory_device
            def step(text: str = text, k: int = k) -> None:
                with gnnmon.phase(f"p{k}"):
                    time.sleep(0.002)
                row = gnnmon.current_row()
                row.note(text)
                row.fields[text] = text

            step()
            step()

            @gnnmon.cuda_timed(label=f"raises {text}")
            def fails(text: str = text) -> None:
                raise hostile_error(text)(text)

            with pytest.raises(RuntimeError):
                fails()
    return gnnmon.load(path)


def test_the_page_shows_every_hostile_string_as_text_and_runs_none(tmp_path, browser):  # noqa: F811
    folder = tmp_path / "runs"
    folder.mkdir()
    path = folder / f"\"'><img src=x onerror={PWN}>.jsonl"  # the page's title is the file's name
    result = hostile_run(path)
    page = tmp_path / "page.html"
    gnnmon.Report(result).export("html", page)
    assert load_page(browser, page) == []  # the page's own script ran to its end, no error
    assert browser.execute_script("return window.__pwned") is None
    assert browser.execute_script("return document.querySelectorAll('img, iframe, object, embed').length") == 0
    assert browser.execute_script("return document.scripts.length") == 2  # the data and the page's script
    assert browser.execute_script("return document.querySelectorAll('#timeline svg *[onload], *[onerror]').length") == 0
    # every chart drawn: a mark per row, a memory line per label that returned
    rows = result.records
    assert count(browser, "#timeline .row-mark") == len(rows) == 3 * len(HOSTILE)
    assert count(browser, "#memory .memory-line") == len(HOSTILE)  # the steps'; a raising call is only timed
    assert count(browser, "#timeline .marker-mark") == len(HOSTILE)
    # each string shown as text: the title, the config, the report's headings, notes and tables
    title = browser.execute_script("return document.title")
    assert title == f"gnnmon: {path.name}"
    body = browser.find_element("tag name", "body").text
    for text in HOSTILE:
        shown = printable(text)  # the report writes a line break as its escape (it would end a table row)
        assert f"{shown} — 2 call(s) on cpu" in body, text
        assert f"note: {shown}" in body, text
        assert f"raises {shown} — 1 call(s) on cpu, 1 raised" in body, text
        assert f"call 0: {shown}" in body, text  # the exception's name
    config = browser.execute_script("return Array.from(document.querySelectorAll('table')[0].rows).map("
                                    "r => [r.cells[0].textContent, r.cells[1].textContent])")
    assert config == [[h, json.dumps(h)] for h in HOSTILE]
    charts = browser.execute_script("return Array.from(document.querySelectorAll('#memory h4'))"
                                    ".map(h => h.textContent)")
    assert [c.split(" — mem_peak_bytes")[0] for c in charts] == HOSTILE
    # a hover shows a row's label and figures as text (no markup made of them)
    for i in range(len(rows)):
        browser.execute_script(
            "var r = document.querySelectorAll('#timeline .row-mark')[arguments[0]]; var b = r.getBoundingClientRect();"
            "r.dispatchEvent(new MouseEvent('mousemove', {clientX: b.x + 1, clientY: b.y + 5, bubbles: true}))", i)
        tip = browser.execute_script("var t = document.getElementById('tip'); return [t.querySelector('b').textContent,"
                                     " Array.from(t.querySelectorAll('*')).map(e => e.tagName)]")
        assert tip[0] in {r["label"] for r in rows} and set(tip[1]) <= {"B", "BR"}
    assert browser.execute_script("return window.__pwned") is None


def test_a_lone_surrogate_and_every_hostile_string_in_memory_make_a_working_page(tmp_path, browser):  # noqa: F811
    """Rows in memory (a lone surrogate is text the operating system hands Python, which no UTF-8
    file holds): the page is written, draws each row, and shows the surrogate as its escape."""
    labels = [*HOSTILE, "caf\udce9"]
    rows = [{"label": text, "index": i, "parent": None, "t_start_ns": 10**9 + (k * 2 + i) * 10**7,
             "t_end_ns": 10**9 + (k * 2 + i) * 10**7 + 5 * 10**6, "device": "cpu", "backend": "cpu", "error": None,
             "notes": [text], "wall_s": 0.005, "mem_peak_bytes": 2**20 * (k + i + 1), text: 1.0}
            for k, text in enumerate(labels) for i in range(2)]
    report = gnnmon.Report(rows, manifest={"host": "caf\udce9 <b>", "config": {"k\udce9": "v\udce9"}},
                           markers=[{"kind": "tag", "value": text, "t_ns": 10**9 + k * 2 * 10**7, "carry": True}
                                    for k, text in enumerate(labels)])
    page = tmp_path / "page.html"
    page.write_text(render(report), encoding="utf-8")  # no UnicodeEncodeError
    assert load_page(browser, page) == []
    assert browser.execute_script("return window.__pwned") is None
    assert count(browser, "#timeline .row-mark") == len(rows)
    assert count(browser, "#memory .memory-line") == len(labels)
    body = browser.find_element("tag name", "body").text
    assert "caf\\udce9 — 2 call(s)" in body and "host: caf\\udce9 <b>" in body


def test_the_data_in_the_page_cannot_end_its_script_element():
    text = script_json({"a": "</script><!--<script>", "b": "\u2028\u2029&<>"})
    assert not set(text) & set("<>&\u2028\u2029")
    assert json.loads(text) == {"a": "</script><!--<script>", "b": "\u2028\u2029&<>"}


SPANS = {"strong_open": "strong_close", "em_open": "em_close", "s_open": "s_close", "link_open": "link_close"}


def _spans(inline: list) -> list[str]:
    """The text inside each bold, emphasised, struck or linked span of these inline tokens, and
    each code span's."""
    out, open_, closes = [], [], set(SPANS.values())
    for c in inline:
        if c.type in SPANS:
            open_.append([])
        elif c.type in closes and open_:
            out.append("".join(open_.pop()))
        elif c.type == "code_inline":
            out.append(c.content)
        if c.type in ("text", "code_inline"):
            for parts in open_:
                parts.append(c.content)
    return out


USER_MARKUP = frozenset({"bold", "code", "link", "open", "tick", "dunder", "star", "gone"})
"""The words that only the user's markup payloads carry (``HOSTILE``): a span holding one, whole or
a part of it (``**open`` closed by a later ``**`` of gnnmon's), is the user's text read as markup.
gnnmon's own bold and code (its findings' headings, figure names) hold none of them."""


def _users(span: str) -> bool:
    """Whether this span's text is (in part) a user payload's: one of :data:`USER_MARKUP`'s words,
    or exactly ``x`` (``_x_``)."""
    return span.strip() == "x" or bool(USER_MARKUP & set(re.findall(r"[A-Za-z]+", span.lower())))


def test_markdown_tables_keep_their_shape_and_no_string_becomes_markup(tmp_path):
    markdown_it = pytest.importorskip("markdown_it")
    result = hostile_run(tmp_path / "run.jsonl")
    report = gnnmon.Report(result)
    for text in (report.markdown(), report.markdown(by="tag")):
        # as GitHub reads it: tables and ~~strikethrough~~
        parser = markdown_it.MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
        tokens = parser.parse(text)
        assert not [t for t in tokens if t.type == "html_block"]
        inline = [c for t in tokens if t.type == "inline" for c in t.children or []]
        assert not [c for c in inline if c.type in ("html_inline", "link_open", "image", "s_open")], \
            [c for c in inline if c.type == "html_inline"]
        # gnnmon's own text may be bold or code (a busy machine's finding); no part of the user's
        # ever is: **bold**, `code`, _x_, __dunder__, *star*, or a lone **open or `tick that a later
        # delimiter of gnnmon's would close, each a span whose text holds the user's words
        assert not [span for span in _spans(inline) if _users(span)], _spans(inline)
        # every table: as many cells in each row as in its head
        shape: list[int] = []
        for t in tokens:
            if t.type in ("thead_open", "tbody_open"):
                shape = shape if t.type == "tbody_open" else []
            if t.type == "tr_open":
                shape.append(0)
            if t.type in ("th_open", "td_open"):
                shape[-1] += 1
            if t.type == "table_close":
                assert len(set(shape)) == 1, shape
        html = parser.render(text)
        for bad in ("<script", "<img", "<svg", "<!--", "</style", "<a "):
            assert bad not in html
        shown = html_.unescape(html)
        for h in HOSTILE:
            assert printable(h) in shown, h
    # the page's own reading of the markdown gives the same text back
    page = markdown_html(report.markdown())
    for h in HOSTILE:
        assert html_.escape(printable(h), quote=False) in page, h


def test_no_surrogates_escapes_a_lone_surrogate_and_leaves_other_text_alone():
    for text in ("plain", "café 東京", ""):
        assert no_surrogates(text) is text
    assert no_surrogates("ckpt_caf\udce9.pt") == "ckpt_caf\\udce9.pt"
    assert no_surrogates("a\ud83db") == "a\\ud83db"
    no_surrogates("x\udce9").encode("utf-8")  # now writable as UTF-8


def test_markdown_escapes_read_back_to_the_text():
    for text in [*HOSTILE, "train_step", "_x_", "a\\b", "a\\|b", "tab\there", "\x1b[31m", "caf\udce9"]:
        escaped = md(text)
        assert "\n" not in escaped and "\u2028" not in escaped and not any(0xD800 <= ord(c) <= 0xDFFF for c in escaped)
        assert markdown_html(escaped) == f"<p>{_html(printable(text))}</p>", text
    assert md("train_step") == "train_step"  # an identifier stays readable


def _html(text: str) -> str:
    return html_.escape(text, quote=False)


def test_the_trace_is_strict_json_with_every_name_as_it_was(tmp_path):
    result = hostile_run(tmp_path / "run.jsonl")
    out = tmp_path / "trace.json"
    gnnmon.Report(result).export("trace", out)
    raw = out.read_bytes()
    trace = orjson.loads(raw)  # a strict parser: no NaN, no lone surrogate
    assert trace == json.loads(raw)
    names = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "row"}
    assert names == {x for h in HOSTILE for x in (h, f"raises {h}")}
    markers = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "marker"]
    assert markers == [f"tag={h}" for h in HOSTILE]
    for e in trace["traceEvents"]:
        assert isinstance(e["name"], str) and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert e["ph"] == "M" or isinstance(e["ts"], (int, float))
    # in memory: a lone surrogate and a NaN become what a strict reader takes
    report = gnnmon.Report([{"label": "caf\udce9", "index": 0, "t_start_ns": 1, "t_end_ns": 2, "wall_s": float("nan"),
                             "device": "cpu"}])
    report.export("trace", tmp_path / "t2.json")
    back = orjson.loads((tmp_path / "t2.json").read_bytes())
    assert [e["name"] for e in back["traceEvents"] if e.get("cat") == "row"] == ["caf\\udce9"]
    assert chrome_trace(report.result)["traceEvents"]


def test_the_diagnosis_names_a_hostile_label_as_text_in_one_list_item():
    """A label with a line break, a table bar and markup, named by the diagnosis (planted slow
    calls): each finding stays one item of the list, nothing becomes markup, and the label reads
    back as it was."""
    markdown_it = pytest.importorskip("markdown_it")
    label = "step|<b>x</b>\n**y** [z](javascript:alert(1))"
    rows = [{"label": label, "index": i, "parent": None, "error": None, "t_start_ns": i * 10**8,
             "t_end_ns": i * 10**8 + 1, "wall_s": 0.2 if i % 5 == 4 else 0.02, "device_s": None,
             "notes": ()} for i in range(30)]
    text = gnnmon.Report(rows).markdown()
    section = text.split("### Diagnosis", 1)[1].split("\n### ", 1)[0]
    parser = markdown_it.MarkdownIt("commonmark", {"html": True})
    tokens = parser.parse(section)
    items = [t for t in tokens if t.type == "list_item_open" and t.level == 1]
    findings = [line for line in section.splitlines() if line[:1].isdigit()]
    assert findings and len(items) == len(findings), section
    inline = [c for t in tokens if t.type == "inline" for c in t.children or []]
    assert not [c for c in inline if c.type in ("html_inline", "link_open", "strong_open") and label[:4] in str(c)]
    assert [c for c in inline if c.type == "link_open"] == []
    shown = html_.unescape(parser.render(section))
    assert printable(label) in shown

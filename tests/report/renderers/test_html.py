"""The report page: made from a run with planted rows, phases, GC pauses, markers and samples, loaded
from disk in a real headless Chromium (Debian's ``chromium`` + ``chromium-driver``, driven by
Selenium): no console error, one mark per row (or the documented thinned count), zoom and hover
work. Its memory line and forecast are checked against planted peaks."""

from __future__ import annotations

import gc
import html as html_
import json
import shutil
import time
from pathlib import Path

import pytest

import gnnmon
from gnnmon.report.diagnosis.findings_markdown import NOTHING
from gnnmon.report.renderers.html import MAX_ROW_MARKS, markdown_html, memory_lines, thin
from tests.conftest import KEPT

CALLS, PLANT_S = 12, 0.01


def planted_run(path: Path) -> gnnmon.RunResult:
    @gnnmon.cuda_timed(label="step")
    @gnnmon.monitor_memory_device
    def step(i: int) -> None:
        with gnnmon.phase("forward"):
            time.sleep(PLANT_S)
        with gnnmon.phase("backward"):
            if i == 5:
                gc.collect()  # one planted pause in the middle
            time.sleep(PLANT_S / 2)

    with gnnmon.collect(path, sample=0.005, config={"lr": 0.01, "hidden": 64}) as run:
        for i in range(CALLS):
            if i == 6:
                run.mark("epoch", 1)
            step(i)
    return gnnmon.load(path)


@pytest.fixture(scope="module")
def browser():
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.skip("no Chromium with its driver installed (Debian: apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,1600", "--allow-file-access-from-files"):
        options.add_argument(flag)
    options.binary_location = chromium
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver_path))
    KEPT.add(driver.service.process.pid)  # the browser outlives the test that started it
    yield driver
    driver.quit()
    KEPT.discard(driver.service.process.pid)


def load_page(driver, page: Path) -> list[dict]:
    """Open ``page`` from disk and wait for its script to finish; returns the console's errors."""
    driver.get(page.resolve().as_uri())
    deadline = time.monotonic() + 30
    while driver.execute_script("return document.body && document.body.getAttribute('data-ready')") != "1":
        assert time.monotonic() < deadline, "the page's script did not finish"
        time.sleep(0.05)
    return [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]


def count(driver, selector: str) -> int:
    return int(driver.execute_script(f"return document.querySelectorAll({json.dumps(selector)}).length"))


def test_the_page_draws_every_row_phase_pause_and_marker_with_no_console_error(tmp_path, browser):
    result = planted_run(tmp_path / "run.jsonl")
    page = tmp_path / "run.html"
    gnnmon.Report(result).export("html", page)
    text = page.read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text.replace(
        "https://ui.perfetto.dev", "")  # nothing fetched: works offline
    assert load_page(browser, page) == []
    rows = result.records
    assert count(browser, "#timeline .row-mark") == len(rows) == CALLS
    assert count(browser, "#timeline .phase-mark") == 2 * CALLS
    assert count(browser, "#timeline .gc-mark") == len(result.gc_events) >= 1
    assert count(browser, "#timeline .marker-mark") == len(result.markers) == 1
    assert count(browser, "#timeline .counter-line") >= 1  # sampled utilisation and memory
    assert count(browser, "#memory .memory-line") == 1
    assert "step — 12 call(s)" in browser.find_element("tag name", "body").text  # the report's table
    config = browser.execute_script("return Array.from(document.querySelectorAll('table')[0].rows).map("
                                    "r => [r.cells[0].textContent, r.cells[1].textContent])")
    assert config == [["lr", "0.01"], ["hidden", "64"]]  # the run's config, in the header

    # a row's mark is as long as its wall time: the longest mark is a row that slept 1.5 plants
    widths = browser.execute_script(
        "return Array.from(document.querySelectorAll('#timeline .row-mark')).map(r => r.getBBox().width)")
    span_us = browser.execute_script("var e = JSON.parse(document.getElementById('gnnmon-data').textContent)"
                                     ".trace.traceEvents.filter(e => e.ph !== 'M'); return Math.max(...e.map("
                                     "x => x.ts + (x.dur || 0))) - Math.min(...e.map(x => x.ts))")
    plot = browser.execute_script("return document.querySelector('#timeline svg').getAttribute('width') - 160")
    assert max(widths) / plot == pytest.approx(max(r["wall_s"] for r in rows) * 1e6 / span_us, rel=0.05)

    # zoom in around the middle: every mark gets wider; a hover shows the row's figures
    svg = browser.find_element("css selector", "#timeline svg")
    browser.execute_script("arguments[0].dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: 700, "
                           "clientY: 10, bubbles: true, cancelable: true}))", svg)
    # the page redraws in its next animation frame, which a busy machine may run late: the widths
    # are read again until they change, with load_page's deadline
    read = "return Array.from(document.querySelectorAll('#timeline .row-mark')).map(r => r.getBBox().width)"
    deadline = time.monotonic() + 30
    while (zoomed := browser.execute_script(read)) == widths:
        assert time.monotonic() < deadline, "the page did not redraw after the wheel"
        time.sleep(0.05)
    assert all(z > w for z, w in zip(zoomed, widths, strict=True))
    browser.execute_script("var r = document.querySelector('#timeline .row-mark'); var b = r.getBoundingClientRect();"
                           "r.dispatchEvent(new MouseEvent('mousemove', {clientX: b.x + 1, clientY: b.y + 5, "
                           "bubbles: true}))")
    tip = browser.find_element("id", "tip")
    assert tip.is_displayed() and "step" in tip.text and "wall_ms" in tip.text
    assert load_page(browser, page) == []


@pytest.mark.slow
def test_a_run_of_50000_rows_is_drawn_thinned_to_the_documented_count(tmp_path, browser):
    path = tmp_path / "big.jsonl"
    t0 = 1_800_000_000_000_000_000
    lines = [json.dumps({"type": "manifest", "format": "gnnmon.jsonl", "format_version": 1, "host": "h",
                         "gnnmon": gnnmon.__version__})]
    for i in range(50_000):
        wall = 0.001 if i != 31_337 else 0.5  # one planted spike must stay on the page
        start = t0 + i * 2_000_000 + (498_000_000 if i > 31_337 else 0)
        lines.append(json.dumps({"type": "row", "label": "step", "index": i, "parent": None, "t_start_ns": start,
                                 "t_end_ns": start + int(wall * 1e9), "device": "cpu", "backend": "cpu",
                                 "error": None, "wall_s": wall, "mem_peak_bytes": 2**20 * (100 + i % 7)}))
    path.write_text("\n".join(lines) + "\n")
    report = gnnmon.Report.load(path)
    page = tmp_path / "big.html"
    report.export("html", page)
    assert load_page(browser, page) == []
    # the longest of every ceil(50,000 / 20,000) = 3 rows: ceil(50,000 / 3) marks
    assert count(browser, "#timeline .row-mark") == 16_667 < MAX_ROW_MARKS
    widest = browser.execute_script("var m = Array.from(document.querySelectorAll('#timeline .row-mark'));"
                                    "return Math.max(...m.map(r => r.getBBox().width))")
    plot = browser.execute_script("return document.querySelector('#timeline svg').getAttribute('width') - 160")
    assert widest / plot == pytest.approx(0.5 / (50_000 * 0.002 + 0.498), rel=0.05)
    assert "16,667 of 50,000 rows drawn" in browser.find_element("tag name", "body").text


def test_thinning_keeps_the_longest_of_each_run_of_events():
    events = [{"ts": i, "dur": 1 + (i == 7) * 100} for i in range(10)]
    kept, every = thin(events, 5)
    assert every == 2 and len(kept) == 5 and {"ts": 7, "dur": 101} in kept
    assert thin(events, 10) == (events, 1)
    assert len(thin(events + [{"ts": 10, "dur": 1}], 5)[0]) == 4  # 11 events: the longest of every 3
    assert len(thin(events[:3], MAX_ROW_MARKS)[0]) == 3


def test_the_memory_line_holds_each_call_and_the_forecast_follows_a_planted_model(tmp_path):
    """Peaks planted as 50 MiB + 1 KiB per node + 100 B per edge: the forecast equals them."""
    path = tmp_path / "shapes.jsonl"
    lines = [json.dumps({"type": "manifest", "format": "gnnmon.jsonl", "format_version": 1, "host": "h"})]
    for i in range(60):
        nodes, edges = 1000 + 37 * i, 5000 + (i * 7919) % 3001
        peak = 50 * 2**20 + 1024 * nodes + 100 * edges
        lines.append(json.dumps({"type": "row", "label": "train", "index": i, "parent": None,
                                 "t_start_ns": i * 10**7, "t_end_ns": i * 10**7 + 5 * 10**6, "device": "cuda:0",
                                 "backend": "cuda", "error": None, "wall_s": 0.005, "num_nodes": nodes,
                                 "num_edges": edges, "mem_peak_bytes": peak}))
    path.write_text("\n".join(lines) + "\n")
    line = memory_lines(gnnmon.Report.load(path))["train"]
    assert line["figure"] == "mem_peak_bytes" and line["index"] == list(range(60))
    assert line["values"][10] == pytest.approx((50 * 2**20 + 1024 * 1370 + 100 * (5000 + 79190 % 3001)) / 2**20)
    assert line["forecast"] == pytest.approx(line["values"], rel=1e-6)
    assert "per node" in line["model"]


def test_the_report_markdown_becomes_tables_lists_and_headings():
    out = markdown_html("### step — 3 call(s)\n\n| figure | ms |\n| --- | ---: |\n| wall_s | 1.5 |\n\n"
                        "- note: `x` <b>\n")
    assert "<h4>step — 3 call(s)</h4>" in out
    assert "<th>figure</th>" in out and '<td class="num">1.5</td>' in out and "---" not in out
    assert "<li>note: <code>x</code> &lt;b&gt;</li>" in out


def test_the_page_says_why_a_label_has_no_forecast_and_scales_memory_from_zero(tmp_path, browser):
    """A run whose batch shape never varies has no trusted model: the page says why instead of
    drawing no line silently. The memory chart's axis starts at 0 (a 3 % variation is not drawn
    across the whole height), and the counter tracks label their scale with its unit."""
    path = tmp_path / "flat.jsonl"
    with gnnmon.collect(path, sample=0.005):
        for _ in range(12):
            step_with_graph()
    result = gnnmon.load(path)
    page = tmp_path / "flat.html"
    gnnmon.Report(result).export("html", page)
    assert load_page(browser, page) == []
    body = browser.find_element("tag name", "body").text
    assert "no forecast line" in body and "barely" in body  # the model's own reason
    labels = browser.execute_script("return Array.from(document.querySelectorAll('#memory svg text.axis'))"
                                    ".map(t => t.textContent)")
    assert "0 MiB" in labels and all("e+" not in t for t in labels)
    counters = browser.execute_script("return Array.from(document.querySelectorAll('#timeline svg text.axis'))"
                                      ".map(t => t.textContent)")
    assert any(t.endswith(" MiB") for t in counters) and any(t.endswith(" %") for t in counters), counters


def test_the_machines_memory_has_its_own_track_and_workers_series_need_workers(tmp_path):
    from gnnmon.report.renderers.trace import chrome_trace

    def tracks(children: int) -> dict[str, set]:
        path = tmp_path / f"samples{children}.jsonl"
        lines = [{"type": "manifest", "format": "gnnmon.jsonl", "format_version": 1, "host": "h"}]
        lines += [{"type": "sample", "t_ns": i * 10**8, "cpu_util_pct": 50.0, "rss_bytes": 300 * 2**20,
                   "ram_used_bytes": 12 * 2**30, "children": children, "children_rss_bytes": children * 2**20,
                   "children_cpu_pct": 0.0} for i in range(5)]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        found: dict[str, set] = {}
        for e in chrome_trace(gnnmon.load(path))["traceEvents"]:
            if e.get("ph") == "C":
                found.setdefault(e["name"], set()).update(e["args"])
        return found

    alone, with_workers = tracks(0), tracks(2)
    assert alone["machine memory MiB"] == {"ram_used"} and alone["memory MiB"] == {"rss"}
    assert alone["utilisation %"] == {"cpu_util"}  # no children_cpu without workers
    assert with_workers["memory MiB"] == {"rss", "children_rss"} and "children_cpu" in with_workers["utilisation %"]


def step_with_graph() -> None:
    """A decorated step over a PyG batch of one fixed shape (its model cannot be trusted)."""
    import torch
    from torch_geometric.data import Data

    @gnnmon.monitor_memory_device(label="flat")
    def step() -> None:
        gnnmon.record_graph(Data(x=torch.zeros(1000, 2), edge_index=torch.zeros(2, 4000, dtype=torch.long)))
        torch.ones(1024, 1024).sum()

    step()


def spaced_calls(every: float, wait: float | None = None, memory: float | None = None) -> list[dict]:
    """40 calls of 125 ms, one every ``every`` s, each after a wait for data of ``wait`` s (None: not
    timed) and ending with ``memory`` bytes on cuda:0 (None: none recorded), marking no epochs."""
    start = 2**40
    rows = []
    for i in range(40):
        begin = start + round(i * every * 1e9)
        row = {"label": "step", "index": i, "parent": None, "wall_s": 0.125, "t_start_ns": begin,
               "t_end_ns": begin + 125_000_000}
        if wait is not None:
            row["data_wait_s"] = wait
        if memory is not None:
            row.update(device="cuda:0", mem_end_bytes=memory)
        rows.append(row)
    return rows


def page_data(page: str) -> dict:
    """The page's embedded data (the JSON its script reads)."""
    return json.loads(page.split('<script type="application/json" id="gnnmon-data">', 1)[1].split("</script>", 1)[0])


def test_the_page_says_the_time_between_calls_what_was_looked_for_and_what_was_not_as_the_markdown_does():
    """40 calls of 125 ms every 500 ms, each after a 1 ms wait for data, with memory and no epochs
    marked. Their windows cover 40 × 126 ms = 5.04 s (26 %) of the span from the first wait's start
    to the last end, 1 ms + 39 × 500 ms + 125 ms = 19.626 s: 14.586 s between. The wait (40 ms of the
    5.04 s measured, 1 %) is no finding; one would need 5 % of 5.04 s over 40 batches, 6.3 ms a
    batch. The 38 calls after the 2 of warm-up mark no epochs: no leak judged. The page says each
    sentence the markdown says, escaped (the quotes and apostrophes in them), and carries the
    figures in its data; calls back to back with neither memory nor a wait say none of it."""
    from gnnmon.report.renderers.html import render

    report = gnnmon.Report(spaced_calls(0.5, wait=0.001, memory=500.0 * 2**20))
    sentences = [
        "The shares are of the measured time: the calls, their waits for data and the collections between them, "
        "which cover 26 % of the 19.63 s from the first call's start (its wait for data included) to the last one's "
        "end. The other 14.59 s ran between the calls, unmeasured: the loop's own code, evaluation, logging or a wait "
        "outside the measured step (measure it with a phase, a decorated call or watch_loader to see it here).",
        "Looked for, not found: no wait for data in step beyond its noise: 1.0 ms a batch over 40 batches (1 % of the "
        "measured time); a steady one under 6.3 ms a batch would go unsaid.",
        "Not looked for: no leak judged in step's mem_end_bytes: its 38 calls mark no epochs, and a leak is judged on "
        "epoch levels (run.mark(\"epoch\", e) at each epoch's start in a collect run)."]
    page = render(report)
    diagnosis = page.split("<h2>Diagnosis</h2>", 1)[1].split("<h2>Timeline</h2>", 1)[0]
    markdown = report.markdown()
    for sentence in sentences:
        assert sentence in markdown, markdown
        assert f"<p>{html_.escape(sentence)}</p>" in diagnosis, diagnosis
    assert "'" not in diagnosis and '"' not in diagnosis.replace('class="diagnosis"', "")  # escaped
    data = page_data(page)
    assert data["between"] == pytest.approx({"covered_s": 5.04, "span_s": 19.626, "between_s": 14.586}, rel=1e-9)
    (looked,) = data["looked_for"]
    assert looked == {"label": "step", "check": "input", "batches": 40, "wait_s": pytest.approx(0.001),
                      "share": pytest.approx(0.04 / 5.04), "unsaid_s": pytest.approx(0.05 * 5.04 / 40)}
    assert data["unjudged"] == [{"label": "step", "figures": ["mem_end_bytes"], "calls": 38}]

    quiet = gnnmon.Report(spaced_calls(0.125))
    page = render(quiet)
    diagnosis = page.split("<h2>Diagnosis</h2>", 1)[1].split("<h2>Timeline</h2>", 1)[0]
    assert diagnosis.strip() == f'<p class="diagnosis">{html_.escape(NOTHING)}</p>'
    assert not [s for s in ("The shares are of", "Looked for", "Not looked for") if s in page or s in quiet.markdown()]
    assert {k: page_data(page)[k] for k in ("between", "looked_for", "unjudged")} == {
        "between": None, "looked_for": [], "unjudged": []}

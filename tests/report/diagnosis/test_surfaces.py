"""The diagnosis leads every surface of a report: markdown, the notebook's display, `gnnmon report`
and the HTML page (its section first, and its findings in the page's data)."""

from __future__ import annotations

import json
import re

import gnnmon
from gnnmon.cli import main
from tests.report.diagnosis.planted import steps, write_run


def planted_wait(tmp_path):
    rows = steps(n=60, seed=1)
    for r in rows:
        r["data_wait_s"] = 3 * r["wall_s"]  # the loop waits 3x its step for data: 75 % of its time
    return write_run(tmp_path / "run.jsonl", rows)


def test_every_surface_opens_with_the_diagnosis(tmp_path, capsys):
    path = planted_wait(tmp_path)
    report = gnnmon.Report.load(path)
    first = report.diagnosis()[0]
    assert first["kind"] == "input-bound" and abs(first["share"] - 0.75) < 0.02
    for text in (report.markdown(), report._repr_markdown_()):
        assert text.index("### Diagnosis") < text.index("### train_step")
        assert "1. **input-bound — 75 % of the measured time**" in text
    assert main(["report", str(path)]) == 0
    assert "1. **input-bound — 75 %" in capsys.readouterr().out
    page = tmp_path / "page.html"
    assert main(["report", str(path), "--html", str(page)]) == 0
    html = page.read_text()
    assert html.index("<h2>Diagnosis</h2>") < html.index("<h2>Timeline</h2>")
    assert html.count("input-bound — 75 %") == 1  # not again in the report below it
    data = json.loads(re.search(r'id="gnnmon-data">(.*?)</script>', html, re.S).group(1).replace("<\\/", "</"))
    assert data["diagnosis"][0]["kind"] == "input-bound"


def test_a_memory_findings_headline_says_which_memory_its_share_is_of():
    """A leak's or a creep's share is of the memory its label's calls end with (the last epoch's
    level), which the headline says; the device's memory for a peak; the run's time otherwise."""
    from gnnmon.report.diagnosis.findings_markdown import headline

    assert headline({"kind": "leak", "share": 0.31, "of": "memory"}) == "leak — 31 % of the memory its calls end with"
    assert headline({"kind": "memory", "share": 0.5, "of": "memory"}) == "memory — 50 % of the device's memory"
    assert headline({"kind": "slow steps", "share": 0.2, "of": "time"}) == "slow steps — 20 % of the measured time"

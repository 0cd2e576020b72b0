"""Text the operating system hands Python round-trips.

``os.listdir``, ``sys.argv`` and ``os.environ`` decode a name that is not UTF-8 with the
``surrogateescape`` error handler: ``os.fsdecode(b"ckpt_caf\\xe9.pt") == "ckpt_caf\\udce9.pt"``, a
string no UTF-8 encoder accepts. A run given such text anywhere (its label, config, a marker's value (its
name is an identifier, refused at ``mark()`` otherwise), a field set on the row, the exception its step
raised, the file's own path) is written, read back equal, and reported, printed and exported without an
error.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

import gnnmon
from gnnmon.data.format import encode, parse

OS_NAME = os.fsdecode(b"ckpt_caf\xe9.pt")  # a Latin-1 name on a UTF-8 system
LONE = "half \ud83d of an emoji"  # a lone high surrogate


def test_a_line_holding_a_lone_surrogate_is_written_as_json_and_read_back_equal():
    for text in (OS_NAME, LONE, "\udc80", "plain"):
        line = encode({"label": text, "list": [text], text: 1})
        json.loads(line)  # JSON any reader accepts (the surrogate as a \\u escape)
        assert parse(line) == {"label": text, "list": [text], text: 1}


def test_parse_still_refuses_what_is_not_json():
    for bad in (b'{"a": NaN}', b'{"a": Infinity}', b'{"a": 1', b"nope"):
        with pytest.raises(ValueError):
            parse(bad)


def test_a_run_given_os_text_everywhere_reads_back_equal_and_reports(tmp_path):
    path = tmp_path / f"run_{OS_NAME}.jsonl"

    @gnnmon.cuda_timed(label=f"step {OS_NAME}", device="cpu")
    def step(i):
        row = gnnmon.current_row()
        row.fields["checkpoint"] = OS_NAME
        if i == 2:
            raise ValueError(f"cannot open {OS_NAME}")
        return i

    with gnnmon.collect(path, config={"ckpt": OS_NAME, OS_NAME: LONE, "argv": [OS_NAME]}) as run:
        with pytest.raises(ValueError, match="identifier"):  # refused where it is passed
            run.mark(f"file {OS_NAME}", 1)
        run.mark("ckpt_file", LONE)
        for i in range(3):
            try:
                step(i)
            except ValueError:
                pass
        live = run.records
    loaded = gnnmon.load(path)  # strict: every line is read
    for rows in (live, loaded.records):
        assert [r["label"] for r in rows] == [f"step {OS_NAME}"] * 3
        assert [r["checkpoint"] for r in rows] == [OS_NAME] * 3
        assert rows[2]["error"] == "ValueError" and rows[2].get("ckpt_file") == LONE
    assert loaded.config == {"ckpt": OS_NAME, OS_NAME: LONE, "argv": [OS_NAME]}
    assert any(m.get("value") == LONE for m in loaded.markers)

    text = gnnmon.Report(loaded).markdown()
    text.encode("utf-8")  # printable: no lone surrogate left in what is shown
    assert "ckpt_caf\\udce9.pt" in text  # shown escaped, as Python's backslashreplace writes it
    run.report().markdown().encode("utf-8")  # the live run's report too

    csv_path = tmp_path / "rows.csv"
    gnnmon.Report(loaded).export("csv", csv_path)
    with open(csv_path, newline="", encoding="utf-8") as f:
        assert next(csv.DictReader(f))["label"] == "step ckpt_caf\\udce9.pt"
    gnnmon.Report(loaded).export("trace", tmp_path / "trace.json")
    trace = json.loads((tmp_path / "trace.json").read_text(encoding="utf-8"))
    assert trace

    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}  # strict, as most terminals are
    for args in (["report", str(path)], ["report", str(path), "--format", "csv"]):
        done = subprocess.run([sys.executable, "-m", "gnnmon", *args], capture_output=True, env=env)
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
        assert b"ckpt_caf\\udce9.pt" in done.stdout

"""The command line behaves like a Unix tool: quiet when its reader leaves, CSV cells a program
can parse, help without markup, a version."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import gnnmon
from gnnmon import cuda_timed

ROOT = Path(__file__).resolve().parents[1]


def gnnmon_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gnnmon", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


def planted_run(path: Path, rows: int) -> None:
    @cuda_timed(label="step")
    def step(i: int) -> None:
        if i == 1:
            gnnmon.current_row().note('planted, with a comma and "quotes"')

    with gnnmon.collect(path):
        for i in range(rows):
            step(i)


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path):
    planted_run(tmp_path / "run.jsonl", 3000)  # CSV far larger than a pipe's buffer
    proc = subprocess.Popen([sys.executable, "-m", "gnnmon", "report", "--format", "csv", str(tmp_path / "run.jsonl")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()  # like `| head -1`
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and first.startswith(b"label,")
    assert "Traceback" not in err and "BrokenPipeError" not in err and err == ""


def test_csv_cells_hold_json_not_python_reprs(tmp_path):
    planted_run(tmp_path / "run.jsonl", 3)
    proc = gnnmon_cli("report", "--format", "csv", str(tmp_path / "run.jsonl"))
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert len(rows) == 3
    assert json.loads(rows[0]["notes"]) == [] and json.loads(rows[1]["notes"]) == ['planted, with a comma and "quotes"']


def test_help_is_plain_and_every_argument_says_what_it_is():
    top = gnnmon_cli("--help")
    report = gnnmon_cli("report", "--help")
    assert top.returncode == report.returncode == 0
    for text in (top.stdout, report.stdout):
        assert "``" not in text and ":func:" not in text
    for argument in ("RUN", "--format", "--lenient"):
        line = next(line for line in report.stdout.splitlines() if line.strip().startswith(argument))
        assert len(line.split()) > 1 or argument == "RUN"  # help text beside (RUN's wraps below)
    assert "a run's .jsonl file" in report.stdout


def test_version():
    proc = gnnmon_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"gnnmon {gnnmon.__version__}"


def test_a_missing_file_is_one_line_on_stderr_and_exit_2(tmp_path):
    proc = gnnmon_cli("report", str(tmp_path / "nothing.jsonl"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("gnnmon: ") and len(proc.stderr.strip().splitlines()) == 1



def test_report_html_writes_the_page_beside_the_markdown(tmp_path):
    planted_run(tmp_path / "run.jsonl", 5)
    proc = gnnmon_cli("report", str(tmp_path / "run.jsonl"), "--html", str(tmp_path / "run.html"))
    assert proc.returncode == 0, proc.stderr
    assert "### step — 5 call(s)" in proc.stdout and "wrote a page of 5 rows" in proc.stderr
    page = (tmp_path / "run.html").read_text()
    data = json.loads(page.split('id="gnnmon-data">')[1].split("</script>")[0])
    assert sum(e.get("cat") == "row" for e in data["trace"]["traceEvents"]) == 5
    made = gnnmon_cli("report", str(tmp_path / "run.jsonl"), "--html", str(tmp_path / "new" / "folder" / "x.html"))
    assert made.returncode == 0 and (tmp_path / "new" / "folder" / "x.html").exists()  # its folder is made
    bad = gnnmon_cli("report", str(tmp_path / "run.jsonl"), "--html", str(tmp_path / "run.jsonl" / "x.html"))
    assert bad.returncode == 2 and "cannot write" in bad.stderr and "Traceback" not in bad.stderr


def test_a_corrupt_line_names_the_flag_and_a_skipped_one_warns_on_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    with gnnmon.collect(bad):
        pass
    with bad.open("a") as f:
        f.write('{"type":"row","label":"s"\n')  # planted: a row cut short
    strict = gnnmon_cli("report", str(bad))
    assert strict.returncode == 2 and "gnnmon report --lenient" in strict.stderr
    assert strict.stderr.count("\n") == 1 and "Traceback" not in strict.stderr
    lenient = gnnmon_cli("report", str(bad), "--lenient")
    assert lenient.returncode == 0
    warned = [line for line in lenient.stderr.splitlines() if line]
    assert warned == [f"gnnmon: warning: {bad}:3: skipped a corrupt line ({warned[0].split('(', 1)[1]}"]
    assert ".py:" not in lenient.stderr  # no source path, as Python's own format prints


def test_version_help_and_fields_import_no_torch():
    code = ("import sys\nfrom gnnmon.cli import main\nfor argv in (['--version'], ['--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "main(['fields'])\nprint('torch' in sys.modules)\nimport gnnmon\ngnnmon.__version__\n"
            "print('torch' in sys.modules)\ngnnmon.collect\nprint('torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-3:] == ["False", "False", "True"]


def test_the_forecast_function_is_not_hidden_by_its_subpackage_and_a_late_thread_can_start_gnnmon():
    """Importing ``gnnmon.forecast.shapes`` first would set ``gnnmon.forecast`` to the subpackage;
    a thread whose first use of gnnmon comes after the main thread ended imports torch then."""
    hidden = ("import gnnmon\nimport gnnmon.forecast.shapes\n"
              "print(callable(gnnmon.forecast), gnnmon.forecast.__module__)\n")
    late = ("import sys, threading, time\nimport gnnmon\n"
            "def late():\n    time.sleep(0.3)\n    print('torch' in sys.modules)\n"
            "    with gnnmon.collect() as run:\n        gnnmon.monitor_memory_device(label='late')(lambda: None)()\n"
            "    print(len(run.records), 'torch' in sys.modules)\n"
            "threading.Thread(target=late).start()\n")
    for code, printed in ((hidden, ["True gnnmon.forecast.forecast"]), (late, ["False", "1 True"])):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert (proc.returncode, proc.stdout.splitlines()) == (0, printed), proc.stderr


def test_a_mistyped_option_gets_its_commands_usage_and_the_option_it_was_near(tmp_path, capsys):
    from gnnmon.cli import main

    path = tmp_path / "run.jsonl"
    planted_run(path, 3)
    try:
        main(["report", str(path), "--bi", "epoch"])
    except SystemExit as exit_:
        assert exit_.code == 2
    else:
        raise AssertionError("a mistyped option was accepted")
    err = capsys.readouterr().err
    assert err.startswith("usage: gnnmon report ") and "--bi: did you mean --by?" in err

"""The Prometheus, MLflow and W&B sinks against the real components, started by the tests: a
Prometheus server (Debian's ``prometheus``) scraping a 2-rank job, a sqlite MLflow tracking store
read back through ``MlflowClient``, and an offline W&B run read back from its ``.wandb`` file.
Every figure read back is compared with the row the run's file holds."""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
import warnings
from pathlib import Path

import psutil
import pytest
import torch

import gnnmon
from gnnmon.integrations.metrics import prometheus_metric
from gnnmon.record.sinks import Batch
from tests import rawjsonl
from tests.mlflow_store import make_store
from tests.record.test_distributed import aborted_in_teardown, run_job
from tests.wandb_file import history

PLANT_S = 0.02


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def planted_run(path: Path, sinks: list, calls: int = 4, **options) -> list[dict]:
    """``calls`` steps that each sleep PLANT_S inside a phase; returns the rows of the file."""
    @gnnmon.cuda_timed(label="step", device="cpu")  # the series' device label, wherever CUDA is in use
    def step(i: int) -> int:
        with gnnmon.phase("forward"):
            time.sleep(PLANT_S)
        return i

    with gnnmon.collect(path, sinks=sinks, **options):
        for i in range(calls):
            step(i)
    return [r for r in rawjsonl.lines(path) if r["type"] == "row"]


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_a_figure_is_named_in_base_units_and_a_family_becomes_a_label():
    assert prometheus_metric("wall_s") == ("wall_seconds", None, False)
    assert prometheus_metric("phase_forward_s") == ("phase_seconds", ("phase", "forward"), False)
    assert prometheus_metric("phase_load_data_s") == ("phase_seconds", ("phase", "load_data"), False)
    assert prometheus_metric("layer_conv1_saved_bytes") == ("layer_saved_bytes", ("layer", "conv1"), False)
    assert prometheus_metric("num_nodes__paper") == ("num_nodes_by_type", ("type", "paper"), False)
    assert prometheus_metric("data_hop_2_nodes") == ("data_hop_nodes", ("hop", "2"), False)
    assert prometheus_metric("energy_gpu_j") == ("energy_gpu_joules", None, True)
    assert prometheus_metric("gpu_util_pct") == ("gpu_util_percent", None, False)
    assert prometheus_metric("my-marker") == ("my_marker", None, False)


# -- Prometheus ------------------------------------------------------------------------------

def test_the_endpoint_serves_the_newest_row_its_counters_and_the_step_histogram(tmp_path):
    pytest.importorskip("prometheus_client")
    from gnnmon.integrations.prometheus import STEP_BUCKETS, PrometheusSink

    sink = PrometheusSink(0, linger=0)
    seen: dict = {}

    def look(rows: list) -> None:  # a scrape while the run is live, after the last row arrived
        if sink.port is not None:
            seen.update(scrape(sink.port))

    rows = planted_run(tmp_path / "run.jsonl", [sink, look])
    last = rows[-1]
    key = frozenset({"label": "step", "rank": "0", "host": socket.gethostname(), "device": "cpu"}.items())
    assert seen[("gnnmon_rows_total", key)] == len(rows) == 4
    assert seen[("gnnmon_failed_rows_total", key)] == 0
    assert seen[("gnnmon_step_index", key)] == 3
    assert seen[("gnnmon_wall_seconds", key)] == pytest.approx(last["wall_s"], rel=1e-9)
    assert seen[("gnnmon_wall_seconds", key)] >= PLANT_S
    forward = key | {("phase", "forward")}
    assert seen[("gnnmon_phase_seconds", forward)] == pytest.approx(last["phase_forward_s"], rel=1e-9)
    assert seen[("gnnmon_step_seconds_count", key)] == 4
    assert seen[("gnnmon_step_seconds_sum", key)] == pytest.approx(sum(r["wall_s"] for r in rows), rel=1e-9)
    below = max(b for b in STEP_BUCKETS if b < PLANT_S)
    assert seen[("gnnmon_step_seconds_bucket", key | {("le", str(below))})] == 0
    assert seen[("gnnmon_step_seconds_bucket", key | {("le", "+Inf")})] == 4
    with pytest.raises(OSError):  # closed with the run: nothing left serving
        scrape(sink.port)


def test_energy_and_gc_pauses_add_up_over_rows_as_counters():
    pytest.importorskip("prometheus_client")
    from gnnmon.integrations.prometheus import PrometheusSink

    sink = PrometheusSink(0)
    sink.open({"host": "h", "distributed": {"rank": 1, "local_rank": None}})
    try:
        rows = [{"label": "s", "index": i, "device": "cuda:0", "error": None, "wall_s": 0.1,
                 "energy_gpu_j": 12.5, "gpu_power_w": 250.0 + i} for i in range(3)]
        gcs = [("gc", {"duration_s": 0.25}), ("gc", {"duration_s": 0.5})]
        sink.write(Batch(rows, [], gcs))
        got = scrape(sink.port)
    finally:
        sink.close({})
    key = frozenset({"label": "s", "rank": "1", "host": "h", "device": "cuda:0"}.items())
    assert got[("gnnmon_energy_gpu_joules_total", key)] == 37.5
    assert got[("gnnmon_gpu_power_watts", key)] == 252.0  # a gauge: the newest row
    process = frozenset({"rank": "1", "host": "h"}.items())
    assert got[("gnnmon_gc_pauses_total", process)] == 2
    assert got[("gnnmon_gc_pause_seconds_total", process)] == 0.75


def test_a_port_in_use_costs_the_endpoint_not_the_run(tmp_path):
    pytest.importorskip("prometheus_client")
    from gnnmon.integrations.prometheus import PrometheusSink

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        sink = PrometheusSink(taken.getsockname()[1], per_local_rank=False)
        with pytest.warns(RuntimeWarning, match="Prometheus endpoint cannot serve"):
            rows = planted_run(tmp_path / "run.jsonl", [sink])
    assert len(rows) == 4 and sink.port is None and "cannot serve" in sink.error


def test_an_endpoint_whose_sink_failed_is_shut_down_with_it(tmp_path, monkeypatch):
    pytest.importorskip("prometheus_client")
    from gnnmon.integrations.prometheus import PrometheusSink

    sink = PrometheusSink(0)
    monkeypatch.setattr(sink, "_row", lambda row, key: 1 / 0)
    with pytest.warns(RuntimeWarning, match="disabled the sink"):
        rows = planted_run(tmp_path / "run.jsonl", [sink])
    assert len(rows) == 4 and sink._server is None
    with pytest.raises(OSError):
        scrape(sink.port)


def start_prometheus(tmp_path: Path, targets: list[int]) -> tuple[subprocess.Popen, int]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("no Prometheus server installed (Debian: apt-get install prometheus)")
    port = free_port()
    config = tmp_path / "prometheus.yml"
    # a scrape may wait for a busy rank's interpreter: its timeout is the interval, not a guess at this machine's speed
    config.write_text("global:\n  scrape_interval: 500ms\n  scrape_timeout: 500ms\nscrape_configs:\n"
                      "  - job_name: gnnmon\n    static_configs:\n      - targets: ["
                      + ", ".join(f"'127.0.0.1:{p}'" for p in targets) + "]\n")
    proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "w"))
    # ready, and every target taken up by the scrape manager: it applies discovered targets on a 5 s tick
    # (fixed in Prometheus 2.42), so a target's first scrape can come 5 s after /-/ready; from here on, within
    # one interval plus the target's offset in it (each at most 500 ms)
    want = {f"127.0.0.1:{p}" for p in targets}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            body = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/targets", timeout=1).read())
            if {t["labels"]["instance"] for t in body["data"]["activeTargets"]} >= want:
                return proc, port
        except OSError:
            if proc.poll() is not None:
                raise AssertionError((tmp_path / "prometheus.log").read_text()[-2000:]) from None
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"Prometheus did not take up the targets {sorted(want)} in 60 s")


def query(port: int, promql: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    body = json.loads(urllib.request.urlopen(url, timeout=5).read())
    assert body["status"] == "success", body
    return body["data"]["result"]


@pytest.mark.slow
def test_a_two_rank_job_streams_to_prometheus_and_mlflow_at_once(tmp_path):
    """A real Prometheus server scrapes both ranks' endpoints; both ranks log to one sqlite
    MLflow store. What each reads back equals the rows in that rank's file. A job that aborted in gloo's
    teardown (torch's, after every file ended) runs once more with a fresh server, store and ports."""
    pytest.importorskip("prometheus_client")
    pytest.importorskip("mlflow")

    for attempt in (1, 2):  # a job that aborted in gloo's teardown runs once more, with sinks of its own
        work = tmp_path / f"attempt{attempt}"
        work.mkdir()
        base = free_port()
        while True:  # rank 1 serves base + 1
            try:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", base + 1))
                break
            except OSError:
                base = free_port()
        server, port = start_prometheus(work, [base, base + 1])
        store, client = make_store(work, "ddp_gcn")
        try:
            done = run_job(work, "stream", args=(f"prometheus={base}", f"mlflow={store}"))
            if attempt == 1 and aborted_in_teardown(work, done):
                continue
            for p in done:
                assert p.returncode == 0, p.stderr[-3000:]
            files = {rank: [r for r in rawjsonl.lines(work / f"job.rank{rank}.jsonl") if r["type"] == "row"]
                     for rank in (0, 1)}
            got = {r["metric"]["rank"]: float(r["value"][1])
                   for r in query(port, 'last_over_time(gnnmon_rows_total{label="step"}[10m])')}
            assert got == {"0": 20.0, "1": 20.0}, (  # what to read when a rank is missing
                query(port, 'up{job="gnnmon"}'), [p.stderr[-1500:] for p in done],
                (work / "prometheus.log").read_text()[-1500:])
            for figure, field in (("gnnmon_wall_seconds", "wall_s"), ("gnnmon_step_index", "index")):
                got = {r["metric"]["rank"]: float(r["value"][1])
                       for r in query(port, f'last_over_time({figure}{{label="step"}}[10m])')}
                for rank in (0, 1):
                    assert got[str(rank)] == pytest.approx(files[rank][-1][field], rel=1e-9), figure
            backward = query(port, 'last_over_time(gnnmon_phase_seconds{phase="backward"}[10m])')
            assert {r["metric"]["rank"]: pytest.approx(float(r["value"][1]), rel=1e-9) for r in backward} == {
                str(rank): files[rank][-1]["phase_backward_s"] for rank in (0, 1)}
            break
        finally:
            server.kill()
            server.wait()
    from gnnmon.report.renderers.html import render

    page = render(gnnmon.Report.load(work / "job.jsonl"))  # the job's page: both ranks, the cross-rank view
    data = json.loads(page.split('id="gnnmon-data">')[1].split("</script>")[0])
    assert {e["pid"] for e in data["trace"]["traceEvents"] if e.get("cat") == "row"} == {0, 1}
    assert sum(e.get("cat") == "row" for e in data["trace"]["traceEvents"]) == 40 and data["ranks"] == 2
    assert "<h4>Across ranks — 2 ranks, 20 matched step(s)</h4>" in page
    experiment = client.get_experiment_by_name("ddp_gcn")
    runs = {r.data.tags["gnnmon.rank"]: r for r in client.search_runs([experiment.experiment_id])}
    assert set(runs) == {"0", "1"}
    for rank in (0, 1):
        run = runs[str(rank)]
        assert run.info.status == "FINISHED"
        for field in ("wall_s", "device_s", "phase_forward_s", "phase_backward_s"):
            history_ = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, f"step/{field}"))
            assert history_ == [(r["index"], pytest.approx(r[field], rel=1e-12)) for r in files[rank]], field
        assert run.data.params["distributed.rank"] == str(rank)
        assert [a.path for a in client.list_artifacts(run.info.run_id)] == [f"job.rank{rank}.jsonl"]


# -- MLflow ----------------------------------------------------------------------------------

def test_mlflow_gets_every_figure_at_the_row_step_and_the_manifest_as_params(tmp_path, mlflow_store):
    from gnnmon.integrations.mlflow import MlflowSink

    store, client = mlflow_store
    sink = MlflowSink(tracking_uri=store, experiment="e")
    sparse = MlflowSink(tracking_uri=store, experiment="e", every=2, artifact=False)
    rows = planted_run(tmp_path / "run.jsonl", [sink, sparse], config={"lr": 0.25, "model": {"hidden": 64}})
    assert [m.step for m in client.get_metric_history(sparse.run_id, "step/wall_s")] == [0, 2]
    run = client.get_run(sink.run_id)
    assert run.info.status == "FINISHED"
    walls = sorted((m.step, m.value) for m in client.get_metric_history(sink.run_id, "step/wall_s"))
    assert walls == [(r["index"], r["wall_s"]) for r in rows]
    assert min(v for _, v in walls) >= PLANT_S
    forward = client.get_metric_history(sink.run_id, "step/phase_forward_s")
    assert sorted(m.value for m in forward) == sorted(r["phase_forward_s"] for r in rows)
    assert run.data.params["end.rows"] == "4" and run.data.params["end.ended"] == "stop"
    assert run.data.params["torch"] == torch.__version__ and run.data.params["host"] == socket.gethostname()
    assert run.data.params["config.lr"] == "0.25" and run.data.params["config.model.hidden"] == "64"
    assert [a.path for a in client.list_artifacts(sink.run_id)] == ["run.jsonl"]


def test_an_unreachable_tracking_server_costs_the_sink_not_the_run(tmp_path):
    pytest.importorskip("mlflow")
    from gnnmon.integrations.mlflow import MlflowSink

    sink = MlflowSink(tracking_uri=f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    with pytest.warns(RuntimeWarning, match="cannot reach the tracking server"):
        rows = planted_run(tmp_path / "run.jsonl", [sink])
    assert time.monotonic() - started < 10
    assert len(rows) == 4 and sink.run_id is None and sink.logged == 0


# -- Weights & Biases ------------------------------------------------------------------------

def test_wandb_offline_run_holds_every_figure_against_the_label_index(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from gnnmon.integrations.wandb import WandbSink

    monkeypatch.setenv("WANDB_SILENT", "true")
    sink = WandbSink(project="gnnmon-test", mode="offline", dir=tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        rows = planted_run(tmp_path / "run.jsonl", [sink])
    assert not [p.name() for p in psutil.Process().children(recursive=True) if "wandb" in p.name()]  # none left
    [found] = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    logged, config = history(found)
    steps = [h for h in logged if "step/index" in h]
    assert [h["step/index"] for h in steps] == [r["index"] for r in rows]
    for h, r in zip(steps, rows, strict=True):
        assert h["step/wall_s"] == r["wall_s"] and h["step/phase_forward_s"] == r["phase_forward_s"]
        assert h["step/wall_s"] >= PLANT_S
        assert not any(k.endswith("t_start_ns") or math.isnan(v) for k, v in h.items() if isinstance(v, float))
    assert config["gnnmon"]["host"] == socket.gethostname() and config["gnnmon"]["file"] == str(
        (tmp_path / "run.jsonl").resolve())


def test_each_integration_is_a_registered_sink_by_name():
    pytest.importorskip("prometheus_client")
    from gnnmon.integrations.prometheus import PrometheusSink
    from gnnmon.record.sinks import Sink, sink

    made = sink("prometheus", port=0)
    assert isinstance(made, PrometheusSink) and isinstance(made, Sink) and made.base_port == 0
    with pytest.raises(ValueError, match="port must be between 0 and 65535"):
        sink("prometheus", port=70000)


def test_every_below_one_is_refused_by_name_and_every_n_keeps_each_labels_nth_rows():
    from gnnmon.integrations.metrics import check_every, every_nth

    for bad in (0, -3):
        with pytest.raises(ValueError, match=f"every is a number of rows, >= 1; got {bad}"):
            check_every(bad)
    rows = [{"label": label, "index": i} for i in range(5) for label in ("step", "data")]
    assert [(r["label"], r["index"]) for r in every_nth(rows, 2)] == [
        ("step", 0), ("data", 0), ("step", 2), ("data", 2), ("step", 4), ("data", 4)]
    assert list(every_nth(rows, 1)) == rows

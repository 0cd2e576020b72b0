"""A user's names never overwrite gnnmon's own. A marker or a field set on a row that would take the
name of one of gnnmon's fields (every declared figure, a member of each declared family, the
identity fields, ``type``, ``rank``, a measured figure's prefix) is refused at the call, naming the
clash, and the row keeps gnnmon's value; every other name is yours, and each sink keeps it apart
from its own series: markers, fields set on rows, labels, phase names and config keys named like
Prometheus's (scraped by a real Prometheus server), MLflow's (a sqlite tracking store), W&B's (an
offline run read back), TensorBoard's and the CSV's own leave every one of those as gnnmon wrote it.
"""

from __future__ import annotations

import csv
import json
import math
import socket
import time
import urllib.request
import warnings
from pathlib import Path

import pytest

import gnnmon
from gnnmon.figures import FIGURES, IDENTITY_FIELDS, figure_of, logged_name
from gnnmon.record.names import LINE_FIELDS, clash
from tests.integrations.test_integrations import free_port, query, scrape, start_prometheus

FAMILY_MEMBERS = {"phase_<name>_s": "phase_load_s", "phase_<name>_in": "phase_load_in",
                  "num_nodes__<type>": "num_nodes__paper", "num_edges__<type>": "num_edges__cites",
                  "data_hop_<k>_nodes": "data_hop_2_nodes", "<field>_source": "wall_s_source"}
"""A member of each declared family (the layer families: below)."""

GNNMON_FIELDS = sorted(
    {f.name for f in FIGURES if "<" not in f.name} | set(FAMILY_MEMBERS.values())
    | {f.name.replace("<name>", "conv1") for f in FIGURES if f.name.startswith("layer_<name>_")}
    | set(IDENTITY_FIELDS) | set(LINE_FIELDS) | {"mem_mine", "rss_x", "gc_mine", "phase_mine"})
"""Every name of gnnmon's a row holds: a user's marker or field must take none of them."""

PROMETHEUS_OWN = ["rows", "rows_total", "failed_rows", "failed_rows_total", "step_index", "step_seconds",
                  "step_seconds_bucket", "step_seconds_count", "step_seconds_sum", "sampled_cpu_util_percent",
                  "wall_seconds", "device_seconds", "user_field", "energy_gpu_joules_total"]
"""Names (after ``gnnmon_``) of the Prometheus sink's own series, and some a field of yours could
be turned into; none is a field of gnnmon's, so each is a free name for a marker or a field (its
``gc_pause...``, ``mem_...`` and ``phase_...`` series are: such names on a row are gnnmon's)."""

SINK_OWN = ["sampled", "sampled_", "gnnmon", "timeline", "number", "ended", "end", "host", "torch", "config", "type_"]
"""Names the MLflow, W&B and TensorBoard sinks use for their own keys (each free on a row)."""

CONFIG = {**{n: f"yours {n}" for n in SINK_OWN}, "type": "yours type", "index": "yours index",
          "a.b": "yours a.b", "a": {"b": "yours a/b"}}
"""A config whose keys are the sinks' own (and two of a row's: a config marks no row), and two keys
MLflow writes alike (``config.a.b``)."""

ENDS_GNNMONS = {"x/wall_s": 7.25, "x/index": 7.75, "wall:s": 7.5}
"""Fields of yours whose key ends in one of gnnmon's names: on label ``sampled``, ``x/wall_s`` is
label ``sampled/x``'s ``wall_s`` and ``x/index`` its W&B step; ``wall:s`` is what MLflow writes
``wall_s``."""


def test_each_of_gnnmons_fields_is_refused_as_a_marker_or_a_field_and_the_row_keeps_its_value(tmp_path):
    assert all(f.name in GNNMON_FIELDS or "<" in f.name for f in FIGURES)
    for name in GNNMON_FIELDS:
        assert clash(name) is not None, name

    @gnnmon.cuda_timed(label="step")
    @gnnmon.monitor_memory_device
    def step(name: str) -> None:
        fields = gnnmon.current_row().fields
        with pytest.raises(ValueError, match=rf"a row's field '{name}' would shadow"):
            fields[name] = "mine"
        with pytest.raises(ValueError, match=rf"a row's field '{name}' would shadow"):
            fields.update({"free_one": 1, name: "mine"})  # refused whole: nothing set
        with pytest.raises(ValueError, match=rf"a row's field '{name}' would shadow"):
            del fields[name]
        assert "free_one" not in fields

    with gnnmon.collect(tmp_path / "run.jsonl") as run:
        for name in GNNMON_FIELDS:
            with pytest.raises(ValueError, match=rf"marker kind '{name}' would shadow .*gnnmon"):
                run.mark(name, "mine")
            step(name)
            with gnnmon.memory_scope(label="scope") as scoped:
                with pytest.raises(ValueError, match=rf"a row's field '{name}' would shadow"):
                    scoped[name] = "mine"
    rows = gnnmon.load(tmp_path / "run.jsonl").records
    assert run.markers == [] and len(rows) == 2 * len(GNNMON_FIELDS)
    for row in rows:
        assert "mine" not in row.values() and "free_one" not in row
        assert isinstance(row["mem_peak_bytes"], int) and row["label"] in ("step", "scope")
        assert row["label"] == "scope" or isinstance(row["wall_s"], float)
    steps = [r for r in rows if r["label"] == "step"]
    assert [r["index"] for r in steps] == list(range(len(GNNMON_FIELDS)))


def test_a_name_of_yours_is_taken_on_the_row_as_it_is(tmp_path):
    free = [*PROMETHEUS_OWN, *SINK_OWN, "epoch", "lr", "my field", "memory", "Wall_s"]
    for name in free:
        assert clash(name) is None, name

    @gnnmon.cuda_timed(label="step")
    def step() -> None:
        gnnmon.current_row().fields.update({f"f_{n}": 1.5 for n in free})

    with gnnmon.collect(tmp_path / "run.jsonl") as run:
        for k, name in enumerate(free):
            if name.isidentifier():
                run.mark(name, k)
        step()
    (row,) = gnnmon.load(tmp_path / "run.jsonl").records
    assert all(row[name] == k for k, name in enumerate(free) if name.isidentifier())
    assert all(row[f"f_{n}"] == 1.5 for n in free)
    with open(tmp_path / "rows.csv", "w", newline="") as f:
        gnnmon.report.renderers.csv_export.write_csv(run.result(), f)
    with open(tmp_path / "rows.csv", newline="") as f:
        (line,) = list(csv.DictReader(f))
    assert float(line["wall_s"]) == row["wall_s"] and line["label"] == "step" and line["index"] == "0"
    assert all(line[f"f_{n}"] == "1.5" for n in free)


NAMES = [n for n in PROMETHEUS_OWN + SINK_OWN if n.isidentifier()]
"""The fields of yours the clashing run sets on each row, each to 7000 + its position."""


def clashing_run(path: Path, sinks: list, calls: int = 3) -> list[dict]:
    """Markers and row fields named like the sinks' own series (``m_<name>`` and each of
    :data:`NAMES`), fields whose keys would end in gnnmon's names (:data:`ENDS_GNNMONS`), labels
    named like their keys' first parts, a phase named like a figure (``wall``), a config whose keys
    are theirs (:data:`CONFIG`); the file's rows."""
    names = NAMES
    assert all(clash(n) is None for n in names)

    def make(label: str):
        @gnnmon.cuda_timed(label=label, device="cpu")
        def step(i: int) -> None:
            with gnnmon.phase("wall"), gnnmon.phase("forward"):
                time.sleep(0.002)
            gnnmon.current_row().fields.update({f"{n}": 7000.0 + k for k, n in enumerate(names)} | {
                "my/field": 7.5} | ENDS_GNNMONS)
        return step

    with gnnmon.collect(path, sinks=sinks, sample=0.005, config=CONFIG) as run:
        for k, name in enumerate(names):
            run.mark(f"m_{name}", 9000 + k)
        for label in ("step", "sampled", "gnnmon", "timeline", "sampled/x"):
            for i in range(calls):
                make(label)(i)
        time.sleep(0.05)
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["type"] == "row"]


@pytest.mark.slow
def test_prometheus_series_are_gnnmons_whatever_the_names_of_yours(tmp_path):
    pytest.importorskip("prometheus_client")
    from gnnmon.integrations.prometheus import PrometheusSink

    port = free_port()
    server, prom = start_prometheus(tmp_path, [port])
    try:
        sink = PrometheusSink(port, linger=5.0)
        seen: dict = {}

        class Watch:  # the endpoint scraped by hand too, just before the run ends
            def open(self, manifest):
                pass

            def write(self, batch):
                pass

            def close(self, end):
                seen.update(scrape(port))

        rows = clashing_run(tmp_path / "run.jsonl", [Watch(), sink])  # Watch closes first: the endpoint is up
        labels = {"step", "sampled", "gnnmon", "timeline", "sampled/x"}
        for label in labels:
            mine = [r for r in rows if r["label"] == label]
            key = frozenset({"label": label, "rank": "0", "host": socket.gethostname(), "device": "cpu"}.items())
            assert seen[("gnnmon_rows_total", key)] == len(mine) == 3
            assert seen[("gnnmon_failed_rows_total", key)] == 0
            assert seen[("gnnmon_step_index", key)] == mine[-1]["index"]
            assert seen[("gnnmon_step_seconds_count", key)] == 3
            assert seen[("gnnmon_step_seconds_sum", key)] == pytest.approx(sum(r["wall_s"] for r in mine))
            assert seen[("gnnmon_wall_seconds", key)] == mine[-1]["wall_s"]
            wall_phase = key | {("phase", "wall")}
            assert seen[("gnnmon_phase_seconds", wall_phase)] == mine[-1]["phase_wall_s"]
            for k, name in enumerate(NAMES):  # each of yours, under a family of its own
                assert seen[("gnnmon_user_field", key | {("field", name)})] == 7000.0 + k
                assert seen[("gnnmon_user_field", key | {("field", f"m_{name}")})] == 9000 + k
        assert {n for n, labels in seen if ("field", "rows") in labels} == {"gnnmon_user_field"}
        own = {n for n, _ in seen if n != "gnnmon_user_field"}
        assert own == {n for n, labels in seen if not any(k == "field" for k, _ in labels)}
        # the real server: every series scraped (a clash would have failed the scrape), gnnmon's as written
        deadline = time.monotonic() + 30
        while (not query(prom, 'last_over_time(gnnmon_rows_total{label="sampled/x"}[1m])')
               and time.monotonic() < deadline):
            time.sleep(0.2)
        assert [float(r["value"][1]) for r in query(prom, 'max_over_time(up{job="gnnmon"}[1m])')] == [1.0]
        got = {r["metric"]["label"]: float(r["value"][1])
               for r in query(prom, "last_over_time(gnnmon_rows_total[1m])")}
        assert got == {label: 3.0 for label in labels}
        steps = {r["metric"]["label"]: float(r["value"][1])
                 for r in query(prom, "last_over_time(gnnmon_step_index[1m])")}
        assert steps == {label: 2.0 for label in labels}
        users = query(prom, 'last_over_time(gnnmon_user_field{label="step"}[1m])')
        assert {r["metric"]["field"] for r in users} >= {"rows", "step_index", "rows_total", "user_field"}
    finally:
        server.kill()
        server.wait()


def test_mlflow_keys_of_yours_never_take_the_sinks_own(tmp_path, mlflow_store):
    from gnnmon.integrations.mlflow import MlflowSink

    store, client = mlflow_store
    sink = MlflowSink(tracking_uri=store, experiment="e")
    rows = clashing_run(tmp_path / "run.jsonl", [sink])
    samples = [r for r in map(json.loads, (tmp_path / "run.jsonl").read_text().splitlines()) if r["type"] == "sample"]
    run = client.get_run(sink.run_id)
    # the machine's samples alone under sampled/: at each sample's number, its values
    cpu = sorted((m.step, m.value) for m in client.get_metric_history(sink.run_id, "sampled/cpu_util_pct"))
    assert cpu == [(i, s["cpu_util_pct"]) for i, s in enumerate(samples) if s.get("cpu_util_pct") is not None]
    fields = {k for s in samples for k in s}
    assert not [k for k in run.data.metrics if k.startswith("sampled/") and k[len("sampled/"):] not in fields]
    for label, key in (("step", "step"), ("sampled", "sampled_"), ("gnnmon", "gnnmon_"), ("sampled/x", "sampled_/x")):
        mine = [r for r in rows if r["label"] == label]
        walls = sorted((m.step, m.value) for m in client.get_metric_history(sink.run_id, f"{key}/wall_s"))
        assert walls == [(r["index"], r["wall_s"]) for r in mine], label
        assert [m.value for m in client.get_metric_history(sink.run_id, f"{key}/rows")] == [7000.0] * 3
    params = run.data.params
    assert params["host"] == socket.gethostname() and params["end.rows"] == str(len(rows))
    assert params["end.ended"] == "stop"
    for name, value in CONFIG.items():
        assert name == "a" or params[f"config.{name}"] == value
    assert params["config.a.b"] == "yours a.b"  # the first of two keys MLflow writes alike
    for key, value in (("step/_wall_s", 7.5), ("gnnmon_/_wall_s", 7.5), ("gnnmon_/x/_wall_s", 7.25)):
        assert [m.value for m in client.get_metric_history(sink.run_id, key)] == [value] * 3, key


def test_wandb_keys_and_config_of_yours_never_take_the_sinks_own(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from gnnmon.integrations.wandb import WandbSink
    from tests.wandb_file import history, summary

    monkeypatch.setenv("WANDB_SILENT", "true")
    sink = WandbSink(project="gnnmon-test", mode="offline", dir=tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        rows = clashing_run(tmp_path / "run.jsonl", [sink])
    [found] = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    logged, config = history(found)
    assert config["gnnmon"]["host"] == socket.gethostname()  # gnnmon's own, not your config's "gnnmon"
    assert config["gnnmon_"] == "yours gnnmon" and config["sampled_"] == "yours sampled"
    assert config["sampled__"] == "yours sampled_" and config["timeline_"] == "yours timeline"
    assert config["host"] == "yours host" and config["type"] == "yours type"
    machine = [h for h in logged if "sampled/number" in h]
    assert [h["sampled/number"] for h in machine] == list(range(len(machine))) and machine
    assert not [k for h in machine for k in h if not k.startswith(("sampled/", "_"))]  # _step: W&B's own
    for label, key in (("step", "step"), ("sampled", "sampled_"), ("gnnmon", "gnnmon_"), ("sampled/x", "sampled_/x")):
        mine = [r for r in rows if r["label"] == label]
        logs = [h for h in logged if f"{key}/wall_s" in h]
        assert [(h[f"{key}/index"], h[f"{key}/wall_s"], h[f"{key}/rows"]) for h in logs] == [
            (r["index"], r["wall_s"], 7000.0) for r in mine], label
        assert [(h[f"{key}/x/_wall_s"], h[f"{key}/x/_index"], h[f"{key}/wall:s"]) for h in logs] == [
            (7.25, 7.75, 7.5)] * 3
    end = summary(found)
    assert end["gnnmon/rows"] == len(rows) and end["gnnmon/ended"] == "stop"


def test_tensorboard_tags_of_yours_never_take_the_exports_own(tmp_path):
    pytest.importorskip("tensorboard")
    from gnnmon.report.renderers.tensorboard import scalars

    rows = clashing_run(tmp_path / "run.jsonl", [])
    result = gnnmon.load(tmp_path / "run.jsonl")
    tags: dict[str, list] = {}
    for _, tag, value, step, _ in scalars(result):
        tags.setdefault(tag, []).append((step, value))
    machine = {t for t in tags if t.startswith("timeline/")}
    assert machine and all(len(tags[t]) <= len(result.samples) for t in machine)
    for label, key in (("step", "step"), ("timeline", "timeline_"), ("sampled", "sampled_")):
        mine = [r for r in rows if r["label"] == label]
        assert tags[f"{key}/wall_ms"] == [(r["index"], pytest.approx(r["wall_s"] * 1e3)) for r in mine]
        assert tags[f"{key}/phase_wall_ms"] == [(r["index"], pytest.approx(r["phase_wall_s"] * 1e3)) for r in mine]
    assert logged_name("phase_wall_s") == ("phase_wall_ms", 1e3) and logged_name("phase_load_s") == ("load_ms", 1e3)
    assert logged_name("phase_phase_x_s")[0] == "phase_phase_x_ms" and logged_name("phase_gc_s")[0] == "phase_gc_ms"
    assert figure_of("phase_wall_s") is not None and not math.isnan(rows[0]["phase_wall_s"])


def test_gnnmons_own_prometheus_series_never_share_a_name():
    """Each of gnnmon's figures (a member of each family) and each of the sink's own series has a
    name of its own with one set of labels and one kind; then a planted batch: a Data row, then a
    HeteroData row with its per-type counts and total, rows whose GC paused them, the process's GC
    events before and after, each read back from the endpoint as planted."""
    pytest.importorskip("prometheus_client")
    from prometheus_client.parser import text_string_to_metric_families

    from gnnmon.integrations.metrics import row_figures
    from gnnmon.integrations.prometheus import OWN_SERIES, ROW_LABELS, PrometheusSink, row_metric
    from gnnmon.record.sinks import Batch

    texts = {"phase_<name>_in", "<field>_source"}  # no series
    row = {FAMILY_MEMBERS.get(f.name, f.name.replace("<name>", "conv1")): 1.0 for f in FIGURES if f.name not in texts}
    seen: dict[str, tuple] = {}
    for field, _ in row_figures(row):
        metric = row_metric(field)
        shape = (ROW_LABELS + ((metric.part[0],) if metric.part else ()), metric.accumulated)
        assert seen.setdefault(metric.name, shape) == shape, (field, metric.name)
        assert metric.name not in OWN_SERIES and not metric.name.startswith("sampled_"), field
    assert row_metric("gc_pause_s").name == "row_gc_pause_seconds"
    assert row_metric("num_nodes__paper") == ("num_nodes_by_type", ("type", "paper"), False)

    def ran(**fields: float) -> dict:
        return {"label": "step", "index": 0, "device": "cpu", "error": None, **fields}

    sink = PrometheusSink(0)
    sink.open({"host": "h", "distributed": {"rank": 1, "local_rank": None}})
    try:
        sink.write(Batch([ran(label="eval", num_nodes=5, gc_pause_s=0.125)], [], [("gc", {"duration_s": 0.25})]))
        hetero = ran(num_nodes__paper=3, num_nodes__author=4, num_nodes=7, num_edges__a__cites__p=9, num_edges=9,
                     gc_pause_s=0.375)
        sink.write(Batch([hetero], [], [("gc", {"duration_s": 0.5})]))
        text = urllib.request.urlopen(f"http://127.0.0.1:{sink.port}/metrics", timeout=5).read().decode()
    finally:
        sink.close({})
    samples = [(s.name, frozenset(s.labels.items()), s.value)
               for family in text_string_to_metric_families(text) for s in family.samples]
    assert len({(n, labels) for n, labels, _ in samples}) == len(samples)  # no series twice: Prometheus would refuse
    got = {(n, labels): v for n, labels, v in samples}
    process = frozenset({"rank": "1", "host": "h"}.items())
    eval_, step = ({"label": label, "rank": "1", "host": "h", "device": "cpu"} for label in ("eval", "step"))
    eval_, step = frozenset(eval_.items()), frozenset(step.items())
    assert got[("gnnmon_gc_pauses_total", process)] == 2
    assert got[("gnnmon_gc_pause_seconds_total", process)] == 0.75
    assert got[("gnnmon_row_gc_pause_seconds", eval_)] == 0.125
    assert got[("gnnmon_row_gc_pause_seconds", step)] == 0.375
    assert got[("gnnmon_num_nodes", eval_)] == 5 and got[("gnnmon_num_nodes", step)] == 7
    assert got[("gnnmon_num_nodes_by_type", step | {("type", "paper")})] == 3
    assert got[("gnnmon_num_nodes_by_type", step | {("type", "author")})] == 4
    assert got[("gnnmon_num_edges_by_type", step | {("type", "a__cites__p")})] == 9
    assert got[("gnnmon_num_edges", step)] == 9
    assert {n for n, _ in got if "num_nodes" in n or "gc_pause" in n} == {
        "gnnmon_num_nodes", "gnnmon_num_nodes_by_type", "gnnmon_gc_pause_seconds_total",
        "gnnmon_row_gc_pause_seconds", "gnnmon_gc_pauses_total"}

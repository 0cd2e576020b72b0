"""An MLflow sink: each row's figures as metrics at the row's call number, the manifest as params
and tags, the run's file as an artefact when the run stops.

Usage::

    from gnnmon.integrations.mlflow import MlflowSink
    with gnnmon.collect("runs/job.jsonl", sinks=[MlflowSink(experiment="flickr")]):
        ...

Metric keys are ``<label>/<field>`` in stored units (``step/wall_s``, ``step/phase_forward_s``, and
``step/<figure>`` for a figure in bytes), logged at ``step=index`` with the row's end as timestamp; the sampled
machine goes to ``sampled/<field>`` at the sample's number (a label ``sampled`` is logged as
``sampled_``: no label takes the sink's own keys). Your config is logged as params under
``config.``, apart from the manifest's own. Without ``run_id`` the sink logs into
the process's active MLflow run if there is one, else it creates a run (one per rank in a
distributed job, named ``<run_name>-rank<k>`` and tagged ``gnnmon.rank``) and ends it with the
gnnmon run: FINISHED, or FAILED when the run ended on an exception.

Calls go through ``MlflowClient`` on the run's writer thread, in batches of at most 1,000 metrics.
A row costs about 1.4 ms against a local sqlite store (``benchmarks/sinks_cost.py``): for steps
shorter than that, ``every=N`` logs each label's rows whose index is a multiple of N only, or the
writer falls behind and, past the run's backlog, the step waits for it.
A tracking server that cannot be reached when the run starts costs the sink, not the run (one
warning; ``error`` says why); one that fails later disables the sink as any failing sink is (one
warning, ``run.sink_errors``): what it had not logged yet stays in the run's file only.

Needs ``mlflow`` (``pip install mlflow`` or ``gnnmon[mlflow]``).
"""

from __future__ import annotations

import re
import socket
import time
import urllib.parse
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from gnnmon.integrations.metrics import check_every, every_nth, field_part, key_part, row_figures, sample_figures
from gnnmon.record.sinks import SINK_FAILED, Batch, register_sink

try:
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError("gnnmon.integrations.mlflow needs mlflow: pip install mlflow (or 'gnnmon[mlflow]')") from exc

__all__ = ["MlflowSink", "flat_params", "metric_key"]

PER_CALL = 1000
"""Metrics per ``log_batch`` call (MLflow's limit)."""

PARAMS_PER_CALL = 100
PARAM_LENGTH = 6000
"""Characters of a param's value MLflow keeps; longer values are cut, ending in ``...``."""

_KEY_BAD = re.compile(r"[^\w\-. /]")


def metric_key(label: str, field: str) -> str:
    """``<label>/<field>``, with characters MLflow refuses in a key replaced by ``_``; a label that
    would be the sink's own ``sampled`` gets an underscore more (:func:`key_part`), and so does a
    field of yours that would end in one of gnnmon's names (:func:`field_part`)."""
    return f"{key_part(_clean(str(label)))}/{field_part(field, _clean)}"


def _clean(text: str) -> str:
    """``text`` with each character MLflow refuses in a key written ``_``."""
    return _KEY_BAD.sub("_", text)


def flat_params(manifest: Mapping[str, Any]) -> dict[str, str]:
    """The manifest as params: nested dicts as dotted keys (``devices.cpu_count``, ``config.lr``:
    your config under ``config.``, apart from gnnmon's), lists and values as text, cut to MLflow's
    length; the line's ``type`` left out. Two keys of your config that MLflow would write alike
    (``a.b`` and ``{"a": {"b": ...}}``, ``a:b`` and ``a_b``) keep the first: MLflow refuses a
    param logged twice with two values, which would cost the run its sink."""
    out: dict[str, str] = {}
    for name, value in _flat(manifest, ""):
        if name != "type":
            text = str(value)
            out.setdefault(name, text if len(text) <= PARAM_LENGTH else text[: PARAM_LENGTH - 3] + "...")
    return out


def _flat(mapping: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
    """``(dotted key, value)`` of each leaf of ``mapping`` (an empty dict is a leaf)."""
    for key, value in mapping.items():
        name = _clean(f"{prefix}{key}")
        if isinstance(value, Mapping) and value:
            yield from _flat(value, name + ".")
        else:
            yield name, value


def _reachable(uri: str) -> str | None:
    """Why an HTTP tracking server cannot be reached now (one quick connect), else None. MLflow's
    own client retries for minutes, which would hold the run's writer thread."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return None
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=2.0).close()
    except OSError as exc:
        return f"cannot reach the tracking server {uri}: {exc}"
    return None


def _experiment(client: Any, name: str) -> str:
    """The experiment's id, made if it does not exist (another rank may make it meanwhile)."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        return str(found.experiment_id)
    try:
        return str(client.create_experiment(name))
    except Exception:
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return str(found.experiment_id)


class MlflowSink:
    """Logs a run's rows to MLflow (see the module doc)."""

    def __init__(self, *, tracking_uri: str | None = None, experiment: str | None = None, run_id: str | None = None,
                 run_name: str | None = None, artifact: bool = True, every: int = 1) -> None:
        self.every = check_every(every)
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.run_id = run_id
        self.run_name = run_name
        self.artifact = artifact
        self.error: str | None = None  # why the sink logs nothing
        self.logged = 0  # metrics logged
        self._client: Any = None
        self._owned = False  # the sink made the MLflow run, so it ends it
        self._file: str | None = None
        self._samples = 0

    def open(self, manifest: dict[str, Any]) -> None:
        import mlflow

        uri = self.tracking_uri or mlflow.get_tracking_uri()
        why = _reachable(uri)
        if why is not None:
            self.error = why
            warnings.warn(f"gnnmon's MLflow sink {why}; the run goes on without it (its file keeps every row)",
                          RuntimeWarning, 2)
            return
        client = MlflowClient(tracking_uri=uri)
        rank = (manifest.get("distributed") or {}).get("rank")
        tags = {"gnnmon.version": str(manifest.get("gnnmon")), "gnnmon.host": str(manifest.get("host"))}
        if rank is not None:
            tags["gnnmon.rank"] = str(rank)
        run_id = self.run_id
        active = mlflow.active_run()
        if run_id is None and rank is None and active is not None and self.tracking_uri is None:
            run_id = active.info.run_id
        if run_id is None:
            name = self.experiment or "gnnmon"
            experiment_id = _experiment(client, name)
            run_name = self.run_name or f"gnnmon-{manifest.get('host')}-{manifest.get('pid')}"
            if rank is not None:
                run_name += f"-rank{rank}"
            run_id = client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id
            self._owned = True
        else:
            client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        params = [Param(k, v) for k, v in flat_params(manifest).items()]
        for i in range(0, len(params), PARAMS_PER_CALL):
            client.log_batch(run_id, params=params[i: i + PARAMS_PER_CALL])
        self.run_id, self._client, self._file = run_id, client, manifest.get("file")

    def write(self, batch: Batch) -> None:
        if self._client is None:
            return
        metrics: list[Metric] = []
        for row in every_nth(batch.rows, self.every):
            stamp = int((row.get("t_end_ns") or row.get("t_start_ns") or time.time_ns()) // 1_000_000)
            step, label = int(row.get("index", 0)), str(row.get("label"))
            metrics += [Metric(metric_key(label, f), float(v), stamp, step) for f, v in row_figures(row)]
        for sample in batch.samples:
            stamp = int(sample.get("t_ns", time.time_ns()) // 1_000_000)
            metrics += [Metric(f"sampled/{_clean(f)}", float(v), stamp, self._samples)
                        for f, v in sample_figures(sample)]
            self._samples += 1
        for i in range(0, len(metrics), PER_CALL):
            self._client.log_batch(self.run_id, metrics=metrics[i: i + PER_CALL])
            self.logged += len(metrics[i: i + PER_CALL])

    def close(self, end: dict[str, Any]) -> None:
        client, self._client = self._client, None
        if client is None or str(end.get("ended")).startswith(SINK_FAILED):
            return  # after a failed call, nothing more to a server that may hang on each one
        client.log_batch(self.run_id, params=[Param("end.rows", str(end.get("rows"))),
                                              Param("end.ended", str(end.get("ended")))])
        if self.artifact and self._file:
            client.log_artifact(self.run_id, self._file)
        if self._owned:
            ended = str(end.get("ended") or "stop")
            client.set_terminated(self.run_id, "FINISHED" if ended in ("stop", "exit") else "FAILED")

    def __repr__(self) -> str:
        return f"MlflowSink(run_id={self.run_id!r})"


register_sink("mlflow", MlflowSink)

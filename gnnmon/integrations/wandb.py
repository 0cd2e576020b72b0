"""A Weights & Biases sink: each row's figures logged against the row's call number, the manifest
as the run's config, the run's file as an artefact when the run stops.

Usage::

    from gnnmon.integrations.wandb import WandbSink
    with gnnmon.collect("runs/job.jsonl", sinks=[WandbSink(project="flickr")]):
        ...

Keys are ``<label>/<field>`` in stored units (``step/wall_s``); each label's figures are plotted
against its own ``<label>/index`` (``define_metric``), so rows of labels that run at different
rates share one W&B run. The sampled machine goes to ``sampled/<field>``; the manifest to the run's
config under ``gnnmon``, your config beside it, at the top; the end to ``gnnmon/rows`` and
``gnnmon/ended`` in its summary. A label or config key of yours that would be one of these
(``sampled``, ``gnnmon``) is logged with an underscore more (``gnnmon_``), and a field of yours
whose key would end in one of gnnmon's names (``x/index``, label ``<label>/x``'s step) with an
underscore before that name (``x/_index``), so none overwrites them. Without ``run`` the sink
logs into the process's W&B run if one is active (outside a distributed job), else it starts one
(``wandb.init(project=..., mode=..., dir=..., **init)``; in a job one run per rank, grouped by the
job's path, named ``rank<k>``) and finishes it with the gnnmon run (exit code 1 when the run ended
on an exception), then ends W&B's service process if no other W&B run is active.
``mode="offline"`` writes the run under ``dir`` for ``wandb sync`` later.

Calls are made on the run's writer thread; a row costs about 0.2 ms offline
(``benchmarks/sinks_cost.py``); ``every=N`` logs each label's rows whose index is a multiple of N
only. A W&B call that raises disables the sink as any failing sink is (one warning,
``run.sink_errors``): what it had not logged stays in the run's file only.

Needs ``wandb`` (``pip install wandb`` or ``gnnmon[wandb]``).
"""

from __future__ import annotations

import os
from typing import Any

from gnnmon.fields import own_part
from gnnmon.integrations.metrics import check_every, every_nth, field_part, key_part, row_figures, sample_figures
from gnnmon.record.sinks import Batch, register_sink

try:
    import wandb
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError("gnnmon.integrations.wandb needs wandb: pip install wandb (or 'gnnmon[wandb]')") from exc

__all__ = ["WandbSink"]


class WandbSink:
    """Logs a run's rows to Weights & Biases (see the module doc)."""

    def __init__(self, *, project: str | None = None, run: Any = None, mode: str | None = None,
                 dir: str | os.PathLike[str] | None = None, every: int = 1, **init: Any) -> None:
        self.every = check_every(every)
        self.project = project
        self.run = run
        self.mode = mode
        self.dir = os.fspath(dir) if dir is not None else None
        self.init = init
        self.logged = 0  # rows and samples logged
        self._owned = False
        self._labels: set[str] = set()
        self._file: str | None = None
        self._samples = 0

    def open(self, manifest: dict[str, Any]) -> None:
        dist = manifest.get("distributed") or {}
        rank = dist.get("rank")
        run = self.run
        if run is None and rank is None:
            run = wandb.run
        if run is None:
            options: dict[str, Any] = {"project": self.project or "gnnmon", "mode": self.mode, "dir": self.dir,
                                       "config": {"gnnmon": _config(manifest), **_yours(manifest)},
                                       "settings": wandb.Settings(console="off"), "reinit": "create_new"}
            if rank is not None:
                options.update(group=str(dist.get("job_path") or "gnnmon"), name=f"rank{rank}")
            options.update(self.init)
            run = wandb.init(**{k: v for k, v in options.items() if v is not None})
            self._owned = True
        else:
            run.config.update({"gnnmon": _config(manifest)}, allow_val_change=True)
        self.run, self._file = run, manifest.get("file")

    def write(self, batch: Batch) -> None:
        run = self.run
        if run is None:
            return
        for row in every_nth(batch.rows, self.every):
            label = key_part(row.get("label"))
            if label not in self._labels:
                self._labels.add(label)
                run.define_metric(f"{label}/index")
                run.define_metric(f"{label}/*", step_metric=f"{label}/index")
            values = {f"{label}/{field_part(field)}": value for field, value in row_figures(row)}
            values[f"{label}/index"] = int(row.get("index", 0))
            run.log(values)
            self.logged += 1
        for sample in batch.samples:
            if not self._samples:
                run.define_metric("sampled/number")
                run.define_metric("sampled/*", step_metric="sampled/number")
            values = {f"sampled/{field}": value for field, value in sample_figures(sample)}
            values["sampled/number"] = self._samples
            run.log(values)
            self._samples += 1
            self.logged += 1

    def close(self, end: dict[str, Any]) -> None:
        run, self.run = self.run, None
        if run is None:
            return
        run.summary["gnnmon/rows"] = end.get("rows")
        run.summary["gnnmon/ended"] = end.get("ended")
        if self._file and os.path.exists(self._file):
            artifact = wandb.Artifact(f"gnnmon-{run.id}", type="gnnmon-run")
            artifact.add_file(self._file)
            run.log_artifact(artifact)
        if self._owned:
            ended = str(end.get("ended") or "stop")
            run.finish(exit_code=0 if ended in ("stop", "exit") else 1)
            if wandb.run is None:  # W&B's service process outlives its runs: end it with ours
                wandb.teardown()

    def __repr__(self) -> str:
        return f"WandbSink(project={self.project!r})"


def _config(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest less its line type and the user's config (which goes to the top level)."""
    return {k: v for k, v in manifest.items() if k not in ("type", "config")}


def _yours(manifest: dict[str, Any]) -> dict[str, Any]:
    """The user's config, each key as it is unless it would be gnnmon's own (``gnnmon`` ->
    ``gnnmon_``: :func:`gnnmon.fields.own_part`)."""
    return {own_part(str(k)): v for k, v in (manifest.get("config") or {}).items()}


register_sink("wandb", WandbSink)

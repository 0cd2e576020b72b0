"""A row's numeric figures, named for a metrics system: what the Prometheus, MLflow and W&B sinks
send. Each figure keeps its stored unit (seconds, bytes); only names change with the target.

A family figure (``phase_<name>_s``, ``layer_<name>_forward_s``, ``num_nodes__<type>``,
``data_hop_<k>_nodes``) becomes one metric with the part as a label (Prometheus) or stays one key
per part (MLflow, W&B, whose keys are free text).

Your names never take a sink's own: a field of yours (a marker, a field set on a row: any name
gnnmon does not declare) goes to Prometheus as ``gnnmon_user_field{field="<name>"}``, never as a
metric of its own name (``run.mark("rows", 7)`` would have been ``gnnmon_rows``, beside the sink's
``gnnmon_rows_total``); a label whose first part is one of the keys' own (``sampled``, ``gnnmon``,
``timeline``) gets an underscore more in MLflow and W&B keys (:func:`key_part`), and a field of
yours whose key would end in one of gnnmon's names (``x/wall_s``, which is label ``<label>/x``'s
``wall_s``) gets an underscore before that name (:func:`field_part`); gnnmon's own fields cannot be
yours (:mod:`gnnmon.record.names` refuses them)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from gnnmon.data.format import SAMPLE_NOT_FIGURES
from gnnmon.fields import is_number, own_part
from gnnmon.figures import (
    BYTES,
    FIGURES,
    JOULES,
    KILOGRAMS,
    NANOSECONDS,
    PERCENT,
    SECONDS,
    TEXT,
    WATTS,
    Unit,
    figure_of,
    layer_field,
    phase_field,
    unit_of,
)
from gnnmon.record.names import clash

NOT_FIGURES = frozenset({"index", "t_start_ns", "t_end_ns", "rank"})
"""Numeric fields of a row that say which row it is, not what it measured."""

PROMETHEUS_UNITS: dict[Unit, str] = {SECONDS: "_seconds", BYTES: "_bytes", PERCENT: "_percent", WATTS: "_watts",
                                     JOULES: "_joules", KILOGRAMS: "_kilograms"}
"""A stored unit's suffix in a Prometheus name (base units, spelled out, as its conventions ask)."""

ACCUMULATED = (JOULES, KILOGRAMS)
"""Units whose per-row figures add up over a run (energy, emissions): counters, not gauges."""

_BAD = re.compile(r"[^a-zA-Z0-9_]")


class Metric(NamedTuple):
    """One figure of a row as a metric: ``name`` without prefix, in base units; ``part`` the
    family's label (``("phase", "forward")``) or None; ``accumulated``: a counter's increment."""

    name: str
    part: tuple[str, str] | None
    accumulated: bool


def check_every(every: int) -> int:
    """A sink's ``every=N`` (rows logged one in N), refused unless it is at least 1."""
    if every < 1:
        raise ValueError(f"every is a number of rows, >= 1; got {every!r}")
    return every


def every_nth(rows: Iterable[Mapping[str, Any]], every: int) -> Iterator[Mapping[str, Any]]:
    """The rows an ``every=N`` sink logs: each label's rows whose index is a multiple of N (the
    same steps of every label and every rank)."""
    return (row for row in rows if not int(row.get("index", 0)) % every)


def row_figures(row: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    """``(field, value)`` of every numeric figure of a finished row (identity and clock fields,
    texts and missing figures left out); fields of yours (markers, fields set on the row) that
    hold numbers are included: :func:`yours` tells them apart."""
    for field, value in row.items():
        if field in NOT_FIGURES or not is_number(value):
            continue
        unit = unit_of(field)
        if unit is TEXT or unit is NANOSECONDS:
            continue
        yield field, value


def yours(field: str) -> bool:
    """Whether a row's field is one of yours (a marker carried on rows, a field set on the row): a
    name gnnmon does not declare (it refuses your names that it does: gnnmon.record.names)."""
    return figure_of(field) is None


def key_part(label: Any) -> str:
    """A row's label as the first part of an MLflow or W&B key: as it is, unless it would be one of
    the sinks' own parts (``sampled``, ``gnnmon``: :func:`gnnmon.fields.own_part`)."""
    return own_part(str(label))


def field_part(field: str, clean: Callable[[str], str] = str) -> str:
    """A row's field as the part of an MLflow or W&B key after its label, written by ``clean`` (the
    sink's own character rules). gnnmon's field as it is; yours too, unless the key's last ``/``
    part would then be a name of gnnmon's (``x/wall_s``: label ``<label>/x``'s ``wall_s``; ``wall:s``,
    which MLflow writes ``wall_s``): that part gets an underscore before it (``x/_wall_s``). So a
    key whose last part is gnnmon's name is always gnnmon's figure of the label before it."""
    name = clean(field)
    if not yours(field):
        return name
    head, sep, last = name.rpartition("/")
    return f"{head}{sep}_{last}" if clash(last) is not None else name


def sample_figures(sample: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    """``(field, value)`` of a sample's figures of the machine now (utilisation, power, memory)."""
    for field, value in sample.items():
        if field not in SAMPLE_NOT_FIGURES and is_number(value):
            yield field, value


def _prometheus_name(field: str, unit: Unit) -> str:
    suffix = PROMETHEUS_UNITS.get(unit)
    if suffix is not None and field.endswith(unit.suffix):
        field = field[: -len(unit.suffix)] + suffix
    return _BAD.sub("_", field)


def prometheus_metric(field: str) -> Metric:
    """The Prometheus metric of a row field (``phase_forward_s`` -> ``phase_seconds`` with
    ``phase="forward"``; ``layer_conv1_saved_bytes`` -> ``layer_saved_bytes`` with ``layer="conv1"``;
    ``energy_gpu_j`` -> ``energy_gpu_joules``, a counter)."""
    unit = unit_of(field)
    accumulated = unit in ACCUMULATED
    phase = phase_field(field)
    if phase is not None:
        return Metric("phase_seconds", ("phase", phase), False)
    layer = layer_field(field)
    if layer is not None:
        name, layer_figure = layer
        return Metric(_prometheus_name("layer_" + layer_figure, unit), ("layer", name), False)
    figure = figure_of(field)
    if figure is not None and "<" in figure.name:
        head, rest = figure.name.split("<", 1)
        placeholder, tail = rest.split(">", 1)
        part = field[len(head): len(field) - len(tail)]
        key = {"name": head.split("_")[0], "k": "hop"}.get(placeholder, placeholder)
        name = _prometheus_name(head.rstrip("_") + tail, unit)
        return Metric(name + f"_by_{key}" if name in _plain_names() else name, (key, part), accumulated)
    return Metric(_prometheus_name(field, unit), None, accumulated)


def _plain_names() -> frozenset[str]:
    """The Prometheus names of the figures that are not families (``num_nodes``): a family that
    would take one (``num_nodes__<type>``) is ``num_nodes_by_type``, since one name cannot hold
    series with and without the family's label."""
    global _PLAIN
    if _PLAIN is None:
        _PLAIN = frozenset(_prometheus_name(f.name, unit_of(f.name)) for f in FIGURES if "<" not in f.name)
    return _PLAIN


_PLAIN: frozenset[str] | None = None

"""A forecast's budget: the largest batch settings whose worst batch stays under a target share
of the device's memory (:meth:`gnnmon.forecast.forecast.Forecast.budget`). Plain data with the
units in its fields' names, which reads as a mapping too (``budget["batch_size"]``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gnnmon.report.memory.model import format_bytes


@dataclass(frozen=True)
class Budget(Mapping[str, Any]):
    """``batch_size``: the largest batch size whose worst batch fits (0: none does, and ``why``
    says which of the model's figures is over the target); ``max_num_nodes`` / ``max_num_edges``: the largest
    ``max_num`` of PyG's ``DynamicBatchSampler`` in ``mode="node"`` / ``"edge"`` (0: no count the model
    vouches for fits); for a model of per-type terms (``per_type``) of the totals, as the sampler
    counts them, each type at the most of it per node (per edge) the forecast's scan saw; None
    where the scan bounds no such count (``samplers_why`` says why: not a limit of 0): a per-type
    model's type with no share, or, for any model, a batch with nodes and no edge (or none with
    nodes) for ``max_num_edges``; ``target_bytes``:
    ``fraction`` × the capacity, bytes; ``binds``: which of nodes and edges weighs most in the
    model; ``limited_by_model``: the budget stops at what the model vouches for (a larger batch
    must be measured to size beyond it); ``beyond_fitted``: the node budget over the largest batch
    the model was fitted on (above 1: an extrapolation; None without one); ``batch_size_high``:
    the largest batch size whose worst batch's lower bound fits (the forecast's upper bound
    mirrored below its point: beyond it the model says the batch is over the target), so the model
    puts the limit between ``batch_size`` and ``batch_size_high``: the budget's stated bounds."""

    batch_size: int
    max_num_nodes: int | None
    max_num_edges: int | None
    target_bytes: float
    fraction: float
    binds: str
    limited_by_model: bool
    beyond_fitted: float | None
    batch_size_high: int = 0
    why: str | None = None
    """Where no batch fits: what is over the target, in the forecast's own figures (None where one fits)."""
    per_type: bool = False
    """Whether the model is of per-type terms (its ``max_num`` are of the totals at the scan's most of each type)."""
    samplers_why: str | None = None
    """Why a ``max_num`` is not given (None), in words; None where both are."""
    graph_note: str | None = None
    """Where ``max_num_nodes`` (``max_num_edges``) was above what the graph holds, that it is now the
    graph's count (a budget above it is no batch anyone can make); where the graph's size is not
    known and the node budget is above every batch read, that it may be above the graph's. None
    otherwise."""
    batch_size_from: str | None = None
    """What the batch size's worst batch is, in words: the heaviest of the batches a loader's
    sampler draws at the size (how many: an epoch's; the heaviest's nodes; a scanned batch where
    that is heavier; the chance a batch training draws is heavier), the costliest graphs summed,
    or plain batches (a run's rows) scaled to the size, an upper bound on a sampler's batches,
    which share more nodes as they grow (so a budget from a run's rows can be well below one from
    the loader); None where no batch fits."""
    extrapolated: str | None = None
    """Where the batch size is below the fewest items of any plain batch read (a run's rows), that
    its worst batch is those batches' most scaled down, an extrapolation and not a bound (a smaller
    batch's items share fewer nodes), in words; None otherwise."""

    @property
    def fits(self) -> bool:
        """Whether any batch fits under the target (a batch size of at least 1)."""
        return self.batch_size >= 1

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (JSON-ready)."""
        return asdict(self)

    def __getitem__(self, key: str) -> Any:
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.__dataclass_fields__)

    def __len__(self) -> int:
        return len(self.__dataclass_fields__)

    def said(self) -> str:
        """The budget in words, without its target: the batch size and the samplers' ``max_num`` (those
        of at least 1: a ``DynamicBatchSampler`` of 0 takes nothing; for a per-type model, what they
        assume, and why one is not given); or, where no batch fits, why."""
        if not self.fits:
            return f"no batch fits: {self.why or 'the model vouches for no batch size'}"
        samplers = [f"(mode='{mode}', max_num={n:,})" for mode, n in (("node", self.max_num_nodes),
                                                                       ("edge", self.max_num_edges))
                    if n is not None and n >= 1]
        text = f"batch_size <= {self.batch_size:,}"
        if samplers:
            text += ", or DynamicBatchSampler" + " / ".join(samplers)
            if self.per_type:
                text += " (nodes and edges of all types, each type at the most per node / edge the forecast read)"
        if self.samplers_why:
            text += f"; {self.samplers_why}"
        if self.graph_note:
            text += f"; {self.graph_note}"
        return text

    def __str__(self) -> str:
        target = f"{format_bytes(self.target_bytes)} ({self.fraction:.0%} of the capacity)"
        if not self.fits:
            return f"no batch fits under {target}: {self.why or 'the model vouches for no batch size'}"
        text = f"{self.said()}, under {target}; {self.binds} weigh most"
        if self.batch_size_high > self.batch_size:
            text += (f"; the model puts the limit between batch_size {self.batch_size:,} and {self.batch_size_high:,} "
                     "(its upper and lower bounds)")
        if self.limited_by_model:
            text += "; stopped where the model stops vouching (measure a larger batch to size beyond it)"
        if self.batch_size_from:
            text += f"; the batch size's worst batch: {self.batch_size_from}"
        if self.extrapolated:
            text += f"; {self.extrapolated}"
        return text

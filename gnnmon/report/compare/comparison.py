"""What ``Report.compare(other)`` returns: two runs' lines (:mod:`gnnmon.report.compare.lines`) in scopes
(``all``; for distributed jobs also ``rank <r>`` for each rank both ran), the regressions beyond
the limits given, and the comparison as markdown, plain data (JSON) or a page."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from gnnmon.data.table import Table
from gnnmon.report.compare.lines import (
    between_runs,
    compare_tables,
    inconclusive,
    merged,
    others_load,
    ranks_of,
    regressions,
)
from gnnmon.report.compare.text import comparison_markdown, comparison_page

LOAD_DIFFERS = 25.0
"""Other processes' CPU (% of one core) by which two runs' loads must differ to be named."""


def run_name(manifest: Mapping[str, Any], default: str) -> str:
    """A run's file name (a job's path), else ``default``."""
    file = ((manifest or {}).get("distributed") or {}).get("job_path") or (manifest or {}).get("file")
    return os.path.basename(str(file)) if file else default


def _rank_tables(table: Table) -> dict[Any, Table]:
    """A job's rows per rank (each rank's rows once, in order)."""
    return {rank: t for rank, t in table.where("rank").items() if rank is not None}


class Comparison:
    """Two runs side by side. ``lines``: every figure of every label (and phase) in every scope,
    each with both values, their standard errors, the relative ``change``, a ``verdict`` (slower,
    faster, more, less, within noise, same, added, removed) and ``judged`` (``time``, ``memory`` or
    None); ``regressions(max_slowdown, max_memory_growth)``: the judged lines beyond those limits
    (shares: 0.05 is 5 %)."""

    def __init__(self, base: Table, new: Table, base_name: str = "BASE", new_name: str = "NEW",
                 max_slowdown: float | None = None, max_memory_growth: float | None = None) -> None:
        self.base_name, self.new_name = base_name, new_name
        self.max_slowdown, self.max_memory_growth = max_slowdown, max_memory_growth
        self.notes: list[str] = []
        self.lines = compare_tables("all", base, new)
        ra, rb = ranks_of(base), ranks_of(new)
        if len(ra) > 1 or len(rb) > 1:
            ta, tb = _rank_tables(base), _rank_tables(new)
            for rank in sorted(set(ta) & set(tb)):
                self.lines += compare_tables(f"rank {rank}", ta[rank], tb[rank])
            if set(ra) != set(rb):
                self.notes.append(f"ranks differ: {base_name} has {len(ra)}, {new_name} {len(rb)}; compared rank "
                                  "by rank where both have it")
        la, lb = others_load(base), others_load(new)
        if la is not None and lb is not None and abs(la - lb) >= LOAD_DIFFERS:
            self.notes.append(f"the machine's load differed: other processes took {la:.0f} % of a core on "
                              f"{base_name}'s cores and {lb:.0f} % on {new_name}'s (median over the calls, "
                              "sampled): a change in time may be the machine's, not the code's")

    @classmethod
    def of_runs(cls, bases: Sequence[Table], news: Sequence[Table], base_name: str = "BASE", new_name: str = "NEW",
                max_slowdown: float | None = None, max_memory_growth: float | None = None) -> Comparison:
        """Several runs a side (reruns of the same code): each side's calls together, and each time
        figure's standard error at least the spread of its runs' own figures / √runs (the spread
        between reruns that one run cannot show); the names say how many runs each side has."""
        if not bases or not news:
            raise ValueError("compare needs at least one run on each side")
        names = (f"{base_name} ({len(bases)} runs)" if len(bases) > 1 else base_name,
                 f"{new_name} ({len(news)} runs)" if len(news) > 1 else new_name)
        out = cls(merged(bases), merged(news), *names, max_slowdown=max_slowdown, max_memory_growth=max_memory_growth)
        between_runs(out.lines, bases, news)
        return out

    def regressions(self, max_slowdown: float | None = None, max_memory_growth: float | None = None) -> list[dict[str, Any]]:
        """The judged lines that regressed beyond the limits (default: those given when made)."""
        return regressions(self.lines, self.max_slowdown if max_slowdown is None else max_slowdown,
                           self.max_memory_growth if max_memory_growth is None else max_memory_growth)

    def inconclusive(self, max_slowdown: float | None = None,
                     max_memory_growth: float | None = None) -> list[dict[str, Any]]:
        """The judged step lines whose noise is wider than their limit (and that did not regress)."""
        return inconclusive(self.lines, self.max_slowdown if max_slowdown is None else max_slowdown,
                            self.max_memory_growth if max_memory_growth is None else max_memory_growth)

    def to_dict(self) -> dict[str, Any]:
        """The comparison as plain data (what ``--format json`` prints)."""
        return {"base": self.base_name, "new": self.new_name, "max_slowdown": self.max_slowdown,
                "max_memory_growth": self.max_memory_growth, "notes": self.notes, "lines": self.lines,
                "regressions": self.regressions(), "inconclusive": self.inconclusive()}

    def markdown(self) -> str:
        """The comparison as markdown: the verdict first, then one table per scope and label."""
        return comparison_markdown(self)

    def to_html(self, path: str | os.PathLike[str]) -> str:
        """Write the comparison as one self-contained page; says what was written."""
        page = comparison_page(self)
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
        return f"a comparison page ({len(page) / 1024:.0f} KiB)"

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        return f"<gnnmon Comparison: {self.base_name} vs {self.new_name}, {len(self.regressions())} regression(s)>"

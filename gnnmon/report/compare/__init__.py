"""Runs against runs: each side's runs' figures per label and phase (:mod:`.lines`), the tests over
runs that bound each change and decide the gate (:mod:`.gate`); what ``Report.compare`` returns
(:mod:`.comparison`) and says (:mod:`.text`); the ranks of one distributed job against one another
(:mod:`.cross_rank`)."""

from typing import Any

from gnnmon.report.compare import lines
from gnnmon.report.moved import forward


def __getattr__(name: str) -> Any:
    """The names of the module ``gnnmon.report.compare`` was before it became this wing (deprecated)."""
    return forward(__name__, lines, name)

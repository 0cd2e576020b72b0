"""Runs against runs: two runs' lines per label and phase with the noise each shows, and the gate
(:mod:`.lines`); what ``Report.compare`` returns (:mod:`.comparison`) and says (:mod:`.text`); the
ranks of one distributed job against one another (:mod:`.cross_rank`)."""

from typing import Any

from gnnmon.report.compare import lines
from gnnmon.report.moved import forward


def __getattr__(name: str) -> Any:
    """The names of the module ``gnnmon.report.compare`` was before it became this wing (deprecated)."""
    return forward(__name__, lines, name)

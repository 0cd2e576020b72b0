"""The diagnosis: a run's findings, ranked by the share of its time (or memory) at stake, each with
its evidence and the next thing to try (:mod:`.findings`), one module per kind of finding (time,
input, GC, memory, creep), and the findings in words (:mod:`.text`)."""

from typing import Any

from gnnmon.report.diagnosis import findings
from gnnmon.report.moved import forward


def __getattr__(name: str) -> Any:
    """The names of the module ``gnnmon.report.diagnosis`` was before it became this wing (deprecated)."""
    return forward(__name__, findings, name)

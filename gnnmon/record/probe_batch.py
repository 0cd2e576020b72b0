"""The loader's batch: the figures of the batch a watched loader handed out last
(``gnnmon.watch_loader``: ``data_wait_s`` and the sampler's) go on the top-level row that opens
next, the step that consumes it; chosen while a watched loader's pass is open."""

from __future__ import annotations

import contextlib
from typing import Any

from gnnmon.record import state


class LoaderBatch:
    """Takes the waiting batch's figures as a top-level row opens."""

    top_level = True

    def open(self, row: Any) -> None:
        if state.NEXT_BATCH:
            with contextlib.suppress(IndexError):  # another thread's row took it first
                row.fields.update(state.NEXT_BATCH.pop())

    def close(self, row: Any, opened: Any, fields: dict[str, Any], error: BaseException | None) -> None:
        return None


def choose(run: Any) -> LoaderBatch | None:
    """While a watched loader's pass is open (:data:`gnnmon.record.state.PASSES`)."""
    return LoaderBatch() if state.PASSES[0] else None

"""A progress bar for the play scripts' sweeps: on stderr, only on a terminal (quiet in CI, logs
and pipes), shown once a sweep has taken a second."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

DELAY_S = 1.0
"""A sweep shorter than this draws no bar."""


def progress(items: Iterable[T], desc: str, total: int | None = None) -> Iterator[T]:
    """``items``, with a bar named ``desc`` where stderr is a terminal (tqdm; plain without it)."""
    try:
        from tqdm import tqdm
    except ImportError:
        yield from items
        return
    yield from tqdm(items, desc=desc, total=total, file=sys.stderr, delay=DELAY_S, leave=False, disable=None,
                    dynamic_ncols=True)

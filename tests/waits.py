"""Every wait for a fake device, counted by thread: what a test of "the host never waited" asserts.

A host waits for its device in three ways, and each is counted here on the thread that made it:
``torch.cuda.synchronize()`` (``sync``), an event's ``synchronize()`` (``event_sync``), and polling,
an event's ``query()`` asked again on the same thread after it answered "not done" since it was last
recorded (``poll``: a loop of queries is a wait however it sleeps between them; one query that finds
the work still running and moves on is not). Counted only inside :meth:`Waits.during`: reading a
run's rows afterwards may wait for a row's device work, as designed, and is not the step's::

    waits = Waits(fake_cuda, monkeypatch)
    with waits.during():
        step()
    assert waits.on() == {}  # this thread never waited: no sync, no event sync, no poll

The fakes (``tests/fakes.py``) keep counting as they do; this wraps their methods for one test.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import torch

from tests import fakes


class Waits:
    """Waits for ``fake``'s device by kind (``sync``, ``event_sync``, ``poll``) and thread ident."""

    def __init__(self, fake: Any, monkeypatch: Any) -> None:
        self.fake = fake
        self.by_thread: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self._on = False
        self._unready: set[tuple[int, int]] = set()  # (thread, event) told "not done" since its record
        waits = self
        sync, event_sync = fake.synchronize, fakes._FakeEvent.synchronize
        query, mark = fakes._FakeEvent.query, fakes._FakeEvent.mark

        def synchronize(device: Any = None) -> None:
            waits._count("sync")
            sync() if device is None else sync(device)  # torch.mps.synchronize takes no device

        def event_synchronize(event: Any) -> None:
            if event.owner is fake:
                waits._count("event_sync")
            event_sync(event)

        def event_query(event: Any) -> bool:
            done = query(event)
            if event.owner is fake and waits._on:
                key = (threading.get_ident(), id(event))
                if key in waits._unready:
                    waits._count("poll")
                if done:
                    waits._unready.discard(key)
                else:
                    waits._unready.add(key)
            return done

        def event_mark(event: Any, stream: Any) -> None:  # recorded again: a new point to wait for
            ident = id(event)
            waits._unready = {key for key in waits._unready if key[1] != ident}
            mark(event, stream)

        monkeypatch.setattr(fake, "synchronize", synchronize)
        for module in (torch.cuda, getattr(torch, "xpu", None), getattr(torch, "mps", None)):
            # the fake's install bound ``torch.<kind>.synchronize`` to its method: that name is the
            # one a backend calls, so it is wrapped too (else such a wait would go uncounted)
            if module is not None and getattr(module, "synchronize", None) == sync:
                monkeypatch.setattr(module, "synchronize", synchronize)
        monkeypatch.setattr(fakes._FakeEvent, "synchronize", event_synchronize)
        monkeypatch.setattr(fakes._FakeEvent, "query", event_query)
        monkeypatch.setattr(fakes._FakeEvent, "mark", event_mark)

    def _count(self, kind: str) -> None:
        if self._on:
            self.by_thread[threading.get_ident()][kind] += 1

    @contextlib.contextmanager
    def during(self) -> Iterator[Waits]:
        """Count the waits made inside this block (on any thread)."""
        self._on = True
        try:
            yield self
        finally:
            self._on = False

    def on(self, thread: threading.Thread | None = None) -> dict[str, int]:
        """The waits ``thread`` (this one by default) made inside :meth:`during`, by kind; ``{}`` if none."""
        ident = (thread or threading.current_thread()).ident
        return {kind: n for kind, n in self.by_thread.get(ident or 0, {}).items() if n}

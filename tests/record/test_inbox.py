"""A run's inbox (gnnmon/record/inbox.py) on its own, with planted deferred figures and a planted
join: rows leave in the order they closed; a row whose figures are not ready holds back every row
after it, unless forced, and force resolves them all; past MAX_PENDING waiting rows the oldest are
forced out; a deferred figure that raises leaves a note on its row, which is kept; a row the
timeline does not cover yet is held back unless forced, and forcing asks for a sample once."""

from __future__ import annotations

from gnnmon.record.inbox import MAX_PENDING, Inbox


class Planted:
    """A deferred figure: ``ready()`` says what the test set (and counts the questions);
    ``resolve`` puts ``value`` in ``field`` (or raises ``fails``) and logs it."""

    def __init__(self, field: str, value: float, ready: bool = True, fails: Exception | None = None,
                 log: list | None = None) -> None:
        self.field, self.value, self.is_ready, self.fails = field, value, ready, fails
        self.asked = 0
        self.resolved = 0
        self.log = log if log is not None else []

    def ready(self) -> bool:
        self.asked += 1
        return self.is_ready

    def resolve(self, fields: dict) -> None:
        self.resolved += 1
        self.log.append((fields["index"], self.field))
        if self.fails is not None:
            raise self.fails
        fields[self.field] = self.value


class Broken(Planted):
    """A device event whose query raises (CUDA's after an asynchronous error: 'device-side assert
    triggered'), and so does reading it."""

    def ready(self) -> bool:
        self.asked += 1
        raise RuntimeError("CUDA error: device-side assert triggered")

    def resolve(self, fields: dict) -> None:
        self.resolved += 1
        raise RuntimeError("CUDA error: device-side assert triggered")


class PlantedJoin:
    """A timeline that reaches ``until`` ns: it covers a row ending at or before it. ``refresh``
    (a sample now) reaches every row closed so far; ``join`` puts a planted figure on the row."""

    def __init__(self, until: int) -> None:
        self.until = until
        self.refreshes = 0
        self.joined: list[int] = []

    def covers(self, fields) -> bool:
        return fields["t_end_ns"] <= self.until

    def refresh(self) -> None:
        self.refreshes += 1
        self.until = 10**30

    def join(self, fields) -> None:
        self.joined.append(fields["index"])
        fields["cpu_util_pct"] = 50.0 + fields["index"]


def row(i: int) -> dict:
    """Row ``i`` closed at ``100 * (i + 1)`` ns."""
    return {"index": i, "t_start_ns": 100 * i, "t_end_ns": 100 * (i + 1)}


def indexes(rows) -> list[int]:
    return [r["index"] for r in rows]


def test_rows_leave_in_the_order_they_closed_with_their_deferred_figures():
    """Ten rows, with and without deferred figures (all ready): the same row objects out, in the
    order appended, each deferred figure resolved once into its own row."""
    inbox = Inbox()
    closed = []
    for i in range(10):
        fields = row(i)
        closed.append(fields)
        inbox.append(fields if i % 3 == 0 else (fields, [Planted("device_s", i / 10)]))
    out = inbox.take_ready(None, force=False)
    assert indexes(out) == list(range(10)) and all(a is b for a, b in zip(out, closed, strict=True))
    assert [r.get("device_s") for r in out] == [None if i % 3 == 0 else i / 10 for i in range(10)]
    assert not inbox
    inbox.extend([row(10), (row(11), [Planted("device_s", 1.1)])])
    assert indexes(inbox.take_ready(None, force=False)) == [10, 11]


def test_a_row_whose_figures_are_not_ready_holds_back_every_later_row():
    """Rows 0-1 ready, row 2's device event not done, rows 3-5 ready (one with no deferred figure
    at all): rows 0-1 leave; row 2 is asked without being resolved; once it is ready, 2-5 leave in
    order."""
    inbox = Inbox()
    late = Planted("device_s", 0.2, ready=False)
    inbox.extend([(row(0), [Planted("device_s", 0.0)]), row(1), (row(2), [Planted("phase_forward_s", 0.1), late]),
                  row(3), (row(4), [Planted("device_s", 0.4)]), row(5)])
    assert indexes(inbox.take_ready(None, force=False)) == [0, 1]
    assert len(inbox) == 4 and late.asked >= 1 and late.resolved == 0
    assert indexes(inbox.take_ready(None, force=False)) == []  # asked again: still not ready
    late.is_ready = True
    out = inbox.take_ready(None, force=False)
    assert indexes(out) == [2, 3, 4, 5] and late.resolved == 1
    assert out[0]["device_s"] == 0.2 and out[0]["phase_forward_s"] == 0.1 and out[2]["device_s"] == 0.4


def test_force_takes_every_row_and_resolves_the_figures_not_ready():
    """Five rows none of whose figures are ready: forced, all five leave in order, every deferred
    figure resolved once (what a flush or the run's stop does: wait for the device)."""
    inbox = Inbox()
    log: list = []
    planted = [[Planted("device_s", i + 0.5, ready=False, log=log),
                Planted("ddp_ready_s", i + 0.25, ready=False, log=log)]
               for i in range(5)]
    inbox.extend((row(i), planted[i]) for i in range(5))
    out = inbox.take_ready(None, force=True)
    assert indexes(out) == [0, 1, 2, 3, 4] and not inbox
    assert [(r["device_s"], r["ddp_ready_s"]) for r in out] == [(i + 0.5, i + 0.25) for i in range(5)]
    assert log == [(i, f) for i in range(5) for f in ("device_s", "ddp_ready_s")]
    assert all(d.resolved == 1 for ds in planted for d in ds)


def test_more_than_max_pending_rows_waiting_forces_out_the_oldest():
    """MAX_PENDING + 5 rows, none ready: without force the 5 oldest leave (their figures resolved:
    waited for), MAX_PENDING stay; one more closed pushes one more out (the next oldest)."""
    inbox = Inbox()
    planted = [Planted("device_s", float(i), ready=False) for i in range(MAX_PENDING + 6)]
    inbox.extend((row(i), [planted[i]]) for i in range(MAX_PENDING + 5))
    out = inbox.take_ready(None, force=False)
    assert indexes(out) == [0, 1, 2, 3, 4] and [r["device_s"] for r in out] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert len(inbox) == MAX_PENDING and all(d.resolved == 0 for d in planted[5:])
    assert inbox.take_ready(None, force=False) == []  # MAX_PENDING waiting: not more than it
    inbox.append((row(MAX_PENDING + 5), [planted[-1]]))
    assert indexes(inbox.take_ready(None, force=False)) == [5]
    assert len(inbox) == MAX_PENDING and inbox.oldest_start() == row(6)["t_start_ns"]


def test_a_deferred_figure_that_raises_becomes_a_note_and_the_row_is_kept():
    """Row 0's middle figure raises (ready or forced out): the row still leaves, with the note
    'deferred figure failed: <the error>', the other figures of the row resolved, the next row
    untouched."""
    for force in (False, True):
        inbox = Inbox()
        before, bad, after = (Planted("device_s", 0.5),
                              Planted("phase_forward_s", 0.0, fails=RuntimeError("event lost")),
                              Planted("ddp_ready_s", 0.25))
        inbox.extend([(row(0), [before, bad, after]), (row(1), [Planted("device_s", 1.5)])])
        out = inbox.take_ready(None, force=force)
        assert indexes(out) == [0, 1], force
        assert out[0]["notes"] == ("deferred figure failed: event lost",)
        assert out[0]["device_s"] == 0.5 and out[0]["ddp_ready_s"] == 0.25 and "phase_forward_s" not in out[0]
        assert (before.resolved, bad.resolved, after.resolved) == (1, 1, 1)
        assert out[1] == {**row(1), "device_s": 1.5}  # no note on the next row


def test_a_deferred_figure_whose_readiness_raises_loses_no_row():
    """Row 1's device event raises when asked whether it is done: rows 0 and 2 leave finished,
    and row 1 too, with the note 'deferred figure failed: <the error>' (the failing question
    raised out of take_ready, after rows 0 had left the inbox: it was lost, and row 1 held back
    every later row until MAX_PENDING were waiting)."""
    inbox = Inbox()
    broken = Broken("device_s", 0.0)
    inbox.extend([(row(0), [Planted("device_s", 0.5)]), (row(1), [Planted("phase_forward_s", 0.1), broken]),
                  (row(2), [Planted("device_s", 2.5)])])
    out = inbox.take_ready(None, force=False)
    assert indexes(out) == [0, 1, 2] and not inbox
    assert out[0]["device_s"] == 0.5 and out[2]["device_s"] == 2.5 and "notes" not in out[0]
    assert out[1]["notes"] == ("deferred figure failed: CUDA error: device-side assert triggered",)
    assert out[1]["phase_forward_s"] == 0.1 and broken.asked == 1 and broken.resolved == 1


def test_a_row_the_join_does_not_cover_is_held_back_unless_forced():
    """The timeline reaches 250 ns: rows ending at 100 and 200 are joined and leave; the row
    ending at 300 holds back itself and the next; MAX_PENDING of overflow does not force it out
    either. When the timeline reaches 300 it leaves. Forced, the rest leave after one refresh
    (one sample asked for, not one a row), every row joined once, in order."""
    inbox = Inbox()
    join = PlantedJoin(until=250)
    inbox.extend([row(0), (row(1), [Planted("device_s", 0.1)]), row(2), row(3)])
    out = inbox.take_ready(join, force=False)
    assert indexes(out) == [0, 1] and [r["cpu_util_pct"] for r in out] == [50.0, 51.0]
    assert indexes(inbox) == [2, 3] and join.refreshes == 0
    inbox.extend(row(i) for i in range(4, MAX_PENDING + 10))  # overflow: still held for the timeline
    assert inbox.take_ready(join, force=False) == [] and join.refreshes == 0
    join.until = 300
    assert indexes(inbox.take_ready(join, force=False)) == [2]
    out = inbox.take_ready(join, force=True)
    assert indexes(out) == list(range(3, MAX_PENDING + 10)) and not inbox
    assert join.refreshes == 1
    assert join.joined == list(range(MAX_PENDING + 10)) and all(r["cpu_util_pct"] == 50.0 + r["index"] for r in out)


def test_a_forced_take_asks_for_no_sample_when_the_timeline_covers_every_row():
    """The timeline past every row: forcing joins them all and asks the sampler for nothing."""
    inbox = Inbox()
    join = PlantedJoin(until=10**6)
    inbox.extend([row(0), (row(1), [Planted("device_s", 0.1, ready=False)])])
    assert indexes(inbox.take_ready(join, force=True)) == [0, 1] and join.refreshes == 0


def test_a_forced_take_asks_once_when_the_sampler_does_not_answer():
    """A sampler that does not answer (its refresh moves nothing; each ask can wait seconds):
    forcing still takes every row, joined, in order, after one ask, not one a row."""
    inbox = Inbox()
    join = PlantedJoin(until=0)
    join.refresh = lambda: setattr(join, "refreshes", join.refreshes + 1)  # the timeline stays at 0
    inbox.extend(row(i) for i in range(5))
    assert indexes(inbox.take_ready(join, force=True)) == [0, 1, 2, 3, 4]
    assert join.refreshes == 1 and join.joined == [0, 1, 2, 3, 4]


class BrokenJoin(PlantedJoin):
    """A timeline whose questions raise for row 1 (a bug, a sampler gone mid-answer)."""

    def covers(self, fields) -> bool:
        if fields["index"] == 1:
            raise IndexError("planted: covers")
        return super().covers(fields)

    def join(self, fields) -> None:
        if fields["index"] == 2:
            raise KeyError("planted: join")
        super().join(fields)


def test_a_join_that_raises_loses_no_row():
    """The join raises when asked whether it covers row 1 and when joining row 2: every row still
    leaves, in order, the failing ones with a note saying what failed, the others joined."""
    inbox = Inbox()
    join = BrokenJoin(until=10**6)
    inbox.extend(row(i) for i in range(4))
    out = inbox.take_ready(join, force=False)
    assert indexes(out) == [0, 1, 2, 3] and not inbox
    assert list(out[2]["notes"]) == ["timeline join failed: 'planted: join'"] and "cpu_util_pct" not in out[2]
    assert [r.get("cpu_util_pct") for r in (out[0], out[1], out[3])] == [50.0, 51.0, 53.0]


def test_oldest_start_is_the_start_of_the_oldest_row_waiting():
    inbox = Inbox()
    assert inbox.oldest_start() is None
    inbox.extend([(row(3), [Planted("device_s", 0.3, ready=False)]), row(4)])
    assert inbox.oldest_start() == 300
    inbox.take_ready(None, force=True)
    assert inbox.oldest_start() is None

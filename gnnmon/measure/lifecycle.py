"""Measurements and their life cycle in a row: a call's row is opened, its measurements are
entered in order (outermost first), the call runs, they are exited in reverse and the row is
closed. :class:`~gnnmon.measure.bracket.Bracket` enters and exits them, the one path that
decorated calls, scopes, phases and the Lightning callback all take; here is what a measurement is.

What holds whatever interrupts it (an exception a signal handler raises can land at any line):

* a measurement is listed in ``row.entered`` before it is entered, so its exit always runs;
* a measurement's exit never assumes its entry finished (``tests/measure/test_lifecycle.py`` raises at
  every line of every entry): state is set in ``__init__`` to "nothing started" and published
  whole at the end of ``__enter__``;
* an exception from a measurement's exit is its own failure (a note and a warning) unless a signal
  handler raised it (:func:`gnnmon.errors.raised_by_handler`), which reaches the caller.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from types import FrameType
from typing import Any, ClassVar

from gnnmon.devices.arguments import scan_arguments
from gnnmon.devices.resolve import parse_device
from gnnmon.measure.graph import graph_shape
from gnnmon.record.row import Row


class Measurement:
    """Base of measurements: a context manager filling ``row.fields``.

    Subclasses set ``name``, ``option_names`` and ``defaults``, and may override
    :meth:`check_options` (called once, when a decorator or scope is made) to validate option
    values. A measurement is made per call as ``cls(row, options)``, ``options`` being the checked
    mapping with every default filled in (one positional argument: cheap on the step's path).
    """

    __slots__ = ("row", "options")
    name: ClassVar[str] = "measurement"
    option_names: ClassVar[tuple[str, ...]] = ()
    defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, row: Row, options: Mapping[str, Any]) -> None:
        self.row = row
        self.options = options

    @classmethod
    def check_options(cls, options: dict[str, Any], where: str) -> dict[str, Any]:
        """Refuse unknown options; fill in defaults; turn a ``device`` option into a
        ``torch.device``."""
        unknown = sorted(set(options) - set(cls.option_names))
        if unknown:
            raise TypeError(
                f"{where}: unknown option(s) {', '.join(map(repr, unknown))}; "
                f"expected some of {', '.join(cls.option_names) or 'none'}"
            )
        options = {**cls.defaults, **options}
        if options.get("device") is not None:
            options["device"] = parse_device(options["device"])
        return options

    def __enter__(self) -> Measurement:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        return None

    def failed(self, err: Exception) -> None:
        """Say on the row, and once as a warning, that this measurement failed (the call goes on)."""
        self.row.note(f"{self.name} failed: {type(err).__name__}: {err}")
        warnings.warn(f"gnnmon {self.name} measurement failed: {err!r}", RuntimeWarning, 3)


def open_row(label: str, args: tuple[Any, ...], kwargs: dict[str, Any], owner: FrameType | None = None) -> Row:
    """A new row for a call (not yet open): one pass over its arguments gives their device (kept,
    not the objects) and the shape of a PyG batch among them."""
    if not args and not kwargs:
        return Row(label, owner=owner)
    found, data = scan_arguments(args, kwargs)
    return Row(label, found=found, shape=graph_shape(data) if data is not None else None, owner=owner)

"""One helper that turns a measurement (a context manager over a row) into a decorator and a scope.

A measurement class takes ``(row, options)`` (its options checked once, defaults filled in) and
fills the row's fields between ``__enter__`` and ``__exit__``. From it :func:`make_decorator` builds ``@name`` / ``@name(**options)`` and
:func:`make_scope` builds ``with name(**options) as fields:``.

Stacked gnnmon decorators on one function fill ONE row. Directly stacked ones merge into one
wrapper that enters every measurement (outermost first) around one call. With a foreign
``functools.wraps`` decorator in between, the outer wrapper opens the row and the gnnmon wrapper
below joins it when called (it is found through the attributes ``wraps`` copies). Any other
decorated call made inside gets a row of its own, whose ``parent`` names the enclosing row.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, ClassVar

import torch

from gnnmon.devices.resolve import parse_device, scan_arguments
from gnnmon.measure.graph import graph_shape
from gnnmon.record.interrupts import hold, release
from gnnmon.record.row import Row

is_compiling: Callable[[], bool] = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
"""True while ``torch.compile`` traces the code that calls it (Dynamo folds it to a constant): a
gnnmon decorator or phase inside a compiled function then adds nothing to the graph (no graph
break, no row); measure around the compiled call instead (docs/timing-and-gc.md)."""

# (wrapper expected next, row it should join), set by an outer wrapper just before it calls down.
_JOIN: ContextVar[tuple[Any, Row] | None] = ContextVar("gnnmon_join", default=None)


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



def default_label(func: Any) -> str:
    """A row's label when none is given: the function's qualified name without the enclosing
    functions (``main.<locals>.train_step`` -> ``train_step``; ``Trainer.step`` stays), or the
    class name of a callable object (a module instance: ``GCN``), never its repr."""
    qualname = getattr(func, "__qualname__", None)
    if isinstance(qualname, str) and qualname:
        return qualname.rsplit("<locals>.", 1)[-1]
    inner = getattr(func, "func", None)  # functools.partial
    if inner is not None and inner is not func:
        return default_label(inner)
    return type(func).__qualname__.rsplit("<locals>.", 1)[-1]

def _check_label(label: Any, where: str) -> str | None:
    if label is not None and not isinstance(label, str):
        raise TypeError(f"{where}: label must be a string, not {type(label).__name__}")
    if label is not None and ("#" in label or not label):
        raise ValueError(f"{where}: label must be non-empty and contain no '#', got {label!r}")
    return label


def _check_target(func: Any, where: str) -> None:
    if inspect.isclass(func):
        raise TypeError(f"{where} decorates functions and methods, not the class {func.__name__}")
    if not callable(func):
        raise TypeError(
            f"{where} decorates a function; got {type(func).__name__} {func!r}. "
            f"Pass options by keyword, e.g. {where}(label='train')"
        )
    name = default_label(func)  # a functools.partial has no __qualname__
    if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
        raise TypeError(
            f"{where} cannot decorate the generator function {name}: its body runs "
            "after the call returns, outside the measurement. Decorate the function that "
            "consumes it, or wrap each step in a scope"
        )
    if inspect.iscoroutinefunction(func):
        raise TypeError(
            f"{where} cannot decorate the coroutine function {name}: gnnmon measures "
            "synchronous calls. Use the scope form inside the coroutine instead"
        )


def open_row(label: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Row:
    """A new row for a call: one pass over its arguments gives their device (kept, not the
    objects) and the shape of a PyG batch among them."""
    if not args and not kwargs:
        return Row(label)
    found, data = scan_arguments(args, kwargs)
    return Row(label, found=found, shape=graph_shape(data) if data is not None else None)


def _failed(measure: Measurement, row: Row, err: Exception) -> None:
    row.note(f"{measure.name} failed: {type(err).__name__}: {err}")
    warnings.warn(f"gnnmon {measure.name} measurement failed: {err!r}", RuntimeWarning, 3)


def enter_measurements(measures: list[tuple[type[Measurement], dict]], row: Row, entered: list[Measurement]) -> None:
    """Enter each measurement (outermost first) into ``entered``. One that fails for want of a
    resource (out of file descriptors: ``OSError``) is left out with a note; the call goes on."""
    for measure_cls, opts in measures:
        measure = measure_cls(row, opts)
        try:
            measure.__enter__()
        except OSError as err:
            _failed(measure, row, err)
            continue
        entered.append(measure)


def exit_measurements(entered: list[Measurement], row: Row | None, exc: BaseException | None) -> None:
    """Exit the measurements (innermost first), then close ``row`` (None: another's to close). A
    measurement's own failure becomes a note on its row, never the caller's problem."""
    exc_type, tb = (None, None) if exc is None else (type(exc), exc.__traceback__)
    for measure in reversed(entered):
        try:
            measure.__exit__(exc_type, exc, tb)
        except Exception as err:  # noqa: BLE001 - a broken figure must not change the user's call
            _failed(measure, measure.row, err)
    if row is not None:
        row.close(exc)


def _finish(entered: list[Measurement], row: Row | None, exc: BaseException | None, token: Any, held: bool) -> None:
    """:func:`exit_measurements`, then reset the join and end the held section ``held`` (a Ctrl-C
    that came meanwhile is raised back in the caller's code)."""
    try:
        exit_measurements(entered, row, exc)
    finally:
        if token is not None:
            _JOIN.reset(token)
        release(held)


def _wrap(func: Any, cls: type[Measurement], where: str, label: str | None, options: dict) -> Any:
    if isinstance(func, (staticmethod, classmethod)):
        return type(func)(_wrap(func.__func__, cls, where, label, options))
    _check_target(func, where)
    measures: list[tuple[type[Measurement], dict]] = [(cls, options)]
    target = func
    below: Any = getattr(func, "__gnnmon_self__", None)
    if below is not None and below is func:
        # Directly on another gnnmon wrapper: one wrapper with both measurements (outer first).
        measures += below.__gnnmon_measures__
        target = below.__gnnmon_target__
        inner = below.__gnnmon_inner__
    else:
        # A gnnmon wrapper further down, behind a foreign functools.wraps decorator: it joins
        # this row when called (see _JOIN).
        inner = below
    if label is None:
        label = getattr(func, "__gnnmon_label__", None)
    row_label = label or default_label(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if is_compiling():  # traced by torch.compile: the call alone goes into the graph (no row)
            return target(*args, **kwargs)
        # gnnmon's own steps run held (a Ctrl-C waits for them: see record/interrupts.py); the
        # user's call does not.
        held = hold()
        row: Row | None = None
        own = True
        token = None
        entered: list[Measurement] = []
        try:
            joined = _JOIN.get()
            if joined is None:
                row = open_row(row_label, args, kwargs)
                token = None if inner is None else _JOIN.set((inner, row))
            else:
                own = joined[0] is not wrapper
                row = open_row(row_label, args, kwargs) if own else joined[1]
                # Tell the next gnnmon wrapper below to join; clear a stale invitation otherwise.
                token = _JOIN.set((inner, row))
            enter_measurements(measures, row, entered)
        except BaseException as exc:
            if own and row is not None:
                row.note(f"did not start: {type(exc).__name__}: {exc}")
            _finish(entered, row if own else None, exc, token, held)
            raise
        release(held)
        try:
            result = target(*args, **kwargs)
        except BaseException as exc:
            _finish(entered, row if own else None, exc, token, hold())
            raise
        _finish(entered, row if own else None, None, token, hold())
        return result

    wrapper.__gnnmon_self__ = wrapper  # type: ignore[attr-defined]
    wrapper.__gnnmon_label__ = label  # type: ignore[attr-defined]
    wrapper.__gnnmon_measures__ = measures  # type: ignore[attr-defined]
    wrapper.__gnnmon_target__ = target  # type: ignore[attr-defined]
    wrapper.__gnnmon_inner__ = inner  # type: ignore[attr-defined]
    return wrapper


def make_decorator(cls: type[Measurement], where: str) -> Callable[..., Any]:
    """Build ``@where`` (bare) and ``@where(label=..., **options)`` over a measurement class."""

    def decorator(func: Any = None, /, *, label: str | None = None, **options: Any) -> Any:
        _check_label(label, f"@{where}")
        opts = cls.check_options(dict(options), f"@{where}")
        if func is None:
            return lambda f: _wrap(f, cls, f"@{where}", label, opts)
        return _wrap(func, cls, f"@{where}", label, opts)

    decorator.__name__ = decorator.__qualname__ = where
    return decorator


class _Scope:
    """``with scope(...) as fields:`` — a row of its own around a block, filled by one measurement."""

    __slots__ = ("_cls", "_label", "_options", "_row", "_entered")

    def __init__(self, cls: type[Measurement], label: str, options: dict) -> None:
        self._cls, self._label, self._options = cls, label, options
        self._row: Row | None = None
        self._entered: list[Measurement] = []

    def __enter__(self) -> dict[str, Any]:
        if self._row is not None:
            raise RuntimeError("this gnnmon scope is already open; make a new one per block")
        held = hold()
        row = None
        try:
            self._row = row = Row(self._label)
            enter_measurements([(self._cls, self._options)], row, self._entered)
        except BaseException as exc:
            _finish(self._entered, row, exc, None, held)
            raise
        release(held)
        return row.fields

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        assert self._row is not None
        _finish(self._entered, self._row, exc, None, hold())
        return None


def make_scope(cls: type[Measurement], where: str, default_label: str) -> Callable[..., Any]:
    """Build ``where(label=..., **options)``, a context manager yielding the row's fields."""

    def scope(*, label: str | None = None, **options: Any) -> _Scope:
        _check_label(label, f"{where}()")
        opts = cls.check_options(dict(options), f"{where}()")
        return _Scope(cls, label or default_label, opts)

    scope.__name__ = scope.__qualname__ = where
    return scope

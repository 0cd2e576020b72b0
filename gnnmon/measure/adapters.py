"""One helper that turns a measurement (a context manager over a row) into a decorator and a scope.

A measurement class takes ``(row, options)`` (its options checked once, defaults filled in) and
fills the row's fields between ``__enter__`` and ``__exit__``. From it :func:`make_decorator` builds
``@name`` / ``@name(**options)`` and
:func:`make_scope` builds ``with name(**options) as fields:``.

Stacked gnnmon decorators on one function fill ONE row. Directly stacked ones merge into one
wrapper that enters every measurement (outermost first) around one call. With a foreign
``functools.wraps`` decorator in between, the outer wrapper opens the row and the gnnmon wrapper
below joins it when called (it is found through the attributes ``wraps`` copies). Scopes
stacked with one label in one function fill one row too. Any other decorated call made inside
gets a row of its own, whose ``parent`` names the enclosing row.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, MutableMapping
from contextvars import ContextVar
from types import FrameType
from typing import Any

import torch

from gnnmon.measure.bracket import (
    HELD,
    IN_GC,
    Bracket,
    close_call,
    hold,
    is_compiling,
    open_call,
    reentered,
    release,
    releasing,
)
from gnnmon.measure.lifecycle import Measurement, open_row
from gnnmon.record import state
from gnnmon.record.row import Row

# (wrapper expected next, row it should join), set by an outer wrapper just before it calls down.
_JOIN: ContextVar[tuple[Any, Row] | None] = ContextVar("gnnmon_join", default=None)


def default_label(func: Any) -> str:
    """A row's label when none is given: the user's function's qualified name without the enclosing
    functions (``main.<locals>.train_step`` -> ``train_step``; ``Trainer.step`` stays), whatever
    wraps it (:func:`users_callable`), or the class name of a callable object (a module instance:
    ``GCN``; a scripted or compiled one too), never its repr."""
    func = users_callable(func)
    if isinstance(func, torch.jit.ScriptFunction):  # traced: no Python function kept
        return str(func.name)
    if isinstance(func, torch.jit.ScriptModule):
        return str(func.original_name)
    qualname = getattr(func, "__qualname__", None)
    if isinstance(qualname, str) and qualname:
        return qualname.rsplit("<locals>.", 1)[-1]
    return type(func).__qualname__.rsplit("<locals>.", 1)[-1]


def users_callable(func: Any) -> Any:
    """The callable the user wrote under what wraps it: a ``functools.partial``'s function, a
    ``torch.jit.script`` function's Python source function, the module a ``torch.compile`` module
    wraps (a compiled function keeps its name through ``functools.wraps``), each as often as nested."""
    inner: Any
    for _ in range(32):  # a cycle of wrappers cannot hold the decorator
        if isinstance(func, functools.partial):
            inner = func.func
        elif isinstance(func, torch.jit.ScriptFunction):
            inner = getattr(func, "_torchdynamo_inline", None)
        elif isinstance(func, torch.nn.Module) and hasattr(func, "_orig_mod"):
            inner = func._orig_mod
        else:
            inner = None
        if inner is None or inner is func:
            return func
        func = inner
    return func


def _by_class(func: Any, label: str) -> Callable[[Any], str] | None:
    """For a method (``Cls.name``, first parameter ``self``): the label of a call from its
    instance, so that a subclass inheriting the decorated method is labelled by its own class
    (``GAT.forward``, not the base's ``GNN.forward``); None for anything else."""
    head, _, name = label.rpartition(".")
    try:
        first = next(iter(inspect.signature(func).parameters), None)
    except (TypeError, ValueError):
        return None
    if not head or first != "self":
        return None
    labels: dict[type, str] = {}

    def of(instance: Any) -> str:
        kind = type(instance)
        found = labels.get(kind)
        if found is None:
            owner = kind.__qualname__.rsplit("<locals>.", 1)[-1]  # as default_label names it
            found = labels[kind] = label if owner == head else f"{owner}.{name}"
        return found

    return of


_LABELS: set[str] = set()
"""Labels checked already (a scope is made with its label on every step)."""


def _check_label(label: Any, where: str) -> str | None:
    if label.__class__ is str and label in _LABELS:
        return label
    if label is not None and not isinstance(label, str):
        raise TypeError(f"{where}: label must be a string, not {type(label).__name__}")
    if label is not None and ("#" in label or not label):
        raise ValueError(f"{where}: label must be non-empty and contain no '#', got {label!r}")
    if label is not None and len(_LABELS) < 4096:
        _LABELS.add(label)
    return label


def _check_target(func: Any, where: str, scope: str | None) -> None:
    """Refuse what a decorator cannot measure, naming what can (``scope``: its block form, e.g.
    ``gnnmon.timed()``; None: it has none)."""
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
            "consumes it" + (f", or wrap each step in `with {scope}:`" if scope else "")
        )
    if inspect.iscoroutinefunction(func):
        raise TypeError(
            f"{where} cannot decorate the coroutine function {name}: gnnmon measures "
            "synchronous calls. " + (f"Use `with {scope}:` inside the coroutine instead" if scope else
                                     "Decorate a synchronous function the coroutine calls instead")
        )


@releasing
def _finish(bracket: Bracket | None, exc: BaseException | None, token: Any, held: bool, result: Any = None,
            started: bool = True) -> Any:
    """Close ``bracket`` (one that has not ``started`` the user's code fails: its row says it did
    not start), then reset the join and end the held section ``held`` (a Ctrl-C that came meanwhile
    is raised here, the row whole); returns ``result``."""
    try:
        if bracket is not None:
            if started:
                bracket.close(exc)
            else:
                bracket.fail(exc)  # type: ignore[arg-type]
    finally:
        if token is not None:
            _JOIN.reset(token)
    return release(held, value=result)


def _wrap(func: Any, cls: type[Measurement], where: str, label: str | None, options: dict,
          scope: str | None) -> Any:
    if isinstance(func, (staticmethod, classmethod)):
        return type(func)(_wrap(func.__func__, cls, where, label, options, scope))
    _check_target(func, where, scope)
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
    by_class = _by_class(func, row_label) if label is None else None

    @functools.wraps(func)
    @releasing
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # A signal handler's call while gnnmon's code is interrupted, or one traced by
        # torch.compile: the call alone (record/interrupts.py; no graph break, no row).
        if is_compiling() or (HELD.depth or IN_GC.__dict__) and reentered():  # unmeasured(), in this frame
            return target(*args, **kwargs)
        if inner is not None or _JOIN.get() is not None:  # a row shared with a wrapper further down
            return joined_call(args, kwargs)
        # the frame is never bound to a local of its own: it would hold itself (a cycle a row)
        row = open_call(row_label if by_class is None or not args else by_class(args[0]), args, kwargs,
                        sys._getframe(), measures)
        try:
            result = target(*args, **kwargs)
        except BaseException as exc:
            close_call(row, exc)
            raise
        return close_call(row, None, result)

    @releasing
    def joined_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # gnnmon's own steps run held (a Ctrl-C waits for them); the user's call does not.
        held = hold()
        bracket: Bracket | None = None
        token = None
        try:
            joined = _JOIN.get()
            if joined is not None and joined[1].closed:
                joined = None  # an invitation left behind by an interrupted call
            if joined is None or joined[0] is not wrapper:
                name = row_label if by_class is None or not args else by_class(args[0])
                row = (open_row(name, args, kwargs, sys._getframe(1) if held else None) if args or kwargs
                       else Row(name, owner=sys._getframe(1) if held else None)).open()
                bracket = Bracket(row, True, measures)
                if joined is not None or inner is not None:
                    token = _JOIN.set((inner, row))
            else:
                bracket = Bracket(joined[1], False, measures)
                # Tell the next gnnmon wrapper below to join; clear the invitation otherwise.
                token = _JOIN.set((inner, bracket.row))
            was_held, held = held, False
            release(was_held)  # raises a Ctrl-C that came during the set-up: the row closes with it
        except BaseException as exc:
            _finish(bracket, exc, token, held or hold(), started=False)
            raise
        try:
            result = target(*args, **kwargs)
        except BaseException as exc:
            _finish(bracket, exc, token, hold())
            raise
        held = hold()  # _finish's success path, in this frame
        try:
            bracket.close(None)
        finally:
            if token is not None:
                _JOIN.reset(token)
        return release(held, value=result)

    wrapper.__gnnmon_self__ = wrapper  # type: ignore[attr-defined]
    wrapper.__gnnmon_label__ = label  # type: ignore[attr-defined]
    wrapper.__gnnmon_measures__ = measures  # type: ignore[attr-defined]
    wrapper.__gnnmon_target__ = target  # type: ignore[attr-defined]
    wrapper.__gnnmon_inner__ = inner  # type: ignore[attr-defined]
    return wrapper


def make_decorator(cls: type[Measurement], where: str, scope: str | None = None) -> Callable[..., Any]:
    """Build ``@where`` (bare) and ``@where(label=..., **options)`` over a measurement class;
    ``scope``: its block form, which its errors name (``gnnmon.timed()``; None: it has none)."""

    def decorator(func: Any = None, /, *, label: str | None = None, **options: Any) -> Any:
        _check_label(label, f"@{where}")
        opts = cls.check_options(dict(options), f"@{where}")
        if func is None:
            return lambda f: _wrap(f, cls, f"@{where}", label, opts, scope)
        return _wrap(func, cls, f"@{where}", label, opts, scope)

    decorator.__name__ = decorator.__qualname__ = where
    decorator.__signature__ = _signature(cls, positional=True)  # type: ignore[attr-defined]
    return decorator


def _signature(cls: type[Measurement], positional: bool) -> inspect.Signature:
    """What ``inspect.signature`` (and so IDEs, ``help`` and notebooks) shows of a decorator or
    scope: each option by name with its default, instead of ``**options``."""
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("func", inspect.Parameter.POSITIONAL_ONLY, default=None)] if positional else []
    params.append(inspect.Parameter("label", kw if positional else inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    default=None, annotation="str | None"))
    params += [inspect.Parameter(name, kw, default=cls.defaults.get(name)) for name in cls.option_names]
    return inspect.Signature(params)


class _Scope:
    """``with scope(...) as fields:`` — a row of its own around a block, filled by one measurement.

    Scopes stacked in one ``with`` (or nested in the same function) with the same label fill ONE
    row, as stacked decorators do: ``with memory_scope(label="x"), timed(label="x"):`` — the inner
    one joins the row the outer one opened, adding its measurement (not one already there)."""

    # What a new scope starts with, as class defaults (a scope is made for every block it measures).
    _bracket: Bracket | None = None  # set while the scope is open and measured
    _entered = False  # entered once (a scope object is one block's)
    _frame: FrameType | None = None
    _outer: _Scope | None = None

    def __init__(self, cls: type[Measurement], label: str, measures: list[tuple[type[Measurement], dict]]) -> None:
        self._cls = cls
        self._label = label
        self._measures = measures  # [(cls, its checked options)]: what the bracket enters

    def _joins(self, frame: FrameType, outer: _Scope) -> Row | None:
        """The row of the innermost open scope if this one stacks on it: same label, opened in the
        same frame, still the current row, without this kind of measurement."""
        bracket = outer._bracket
        row = bracket.row if bracket is not None else None
        if (row is None or outer._frame is not frame or outer._label != self._label
                or row.closed or state.CURRENT_ROW.get() is not row
                or any(type(m) is self._cls for m in row.entered)):
            return None
        return row

    @releasing
    def __enter__(self) -> MutableMapping[str, Any]:
        if self._entered:
            raise RuntimeError("this gnnmon scope was entered already; make a new one per block")
        self._entered = True
        if is_compiling() or (HELD.depth or IN_GC.__dict__) and reentered():  # unmeasured(), in this frame
            return {"label": self._label,
                    "notes": ("unmeasured: traced by torch.compile, or a signal handler interrupted gnnmon",)}
        held = hold()
        frame = sys._getframe(1)
        outer = _OPEN_SCOPE.get()
        try:
            row = None if outer is None else self._joins(frame, outer)
            bracket = Bracket(Row(self._label).open(), True, self._measures) if row is None else \
                Bracket(row, False, self._measures)
        except BaseException:
            release(held)
            raise
        self._bracket, self._frame, self._outer = bracket, frame, outer
        _OPEN_SCOPE.set(self)
        # a Ctrl-C raised here: the block never runs, so the row closes now, saying so
        return release(held, undo=self._not_started, value=bracket.row.user_fields())

    def _not_started(self) -> None:
        bracket = self._bracket
        self._leave()
        if bracket is not None:
            bracket.not_started()

    def _leave(self) -> None:
        if _OPEN_SCOPE.get() is self:
            outer = self._outer
            while outer is not None and outer._bracket is None:  # one left before this (closed out of order)
                outer = outer._outer
            _OPEN_SCOPE.set(outer)
            self._outer = None
        # else left out of order: its outer stays, so that the one current now finds the open one below
        self._frame = None
        self._bracket = None

    @releasing
    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        bracket = self._bracket
        if bracket is None:  # unmeasured, or closed when a Ctrl-C stopped its entry
            return None
        held = hold()  # from here a Ctrl-C waits for the row to be whole
        try:
            self._leave()
            bracket.close(exc)
        finally:
            release(held)
        return None


_OPEN_SCOPE: ContextVar[_Scope | None] = ContextVar("gnnmon_open_scope", default=None)
"""The innermost scope open in this context: the one a scope stacked on it joins."""


def make_scope(cls: type[Measurement], where: str, default_label: str, decorator: str) -> Callable[..., Any]:
    """Build ``where(label=..., **options)``, a context manager yielding the row's fields;
    ``decorator``: its decorator form, which an error names where the scope decorates a function."""
    called = f"{where}()"
    # A scope with no option (the usual ``timed(label=...)``) enters these, checked once, here: its
    # defaults, which no measurement changes (one whose checked options hold state of their own,
    # as @gc_controlled's call count, has no scope).
    plain = [(cls, cls.check_options({}, called))]

    def scope(label: str | None = None, **options: Any) -> _Scope:  # label by position, as a phase's name, or keyword
        if label is not None:
            try:
                _check_label(label, called)
            except TypeError:
                if callable(label):  # @timed over a function
                    raise TypeError(f"{called} measures a block (with {where}(...):); a function is decorated "
                                    f"with @{decorator}") from None
                raise
        measures = [(cls, cls.check_options(dict(options), called))] if options else plain
        return _Scope(cls, label or default_label, measures)

    scope.__name__ = scope.__qualname__ = where
    scope.__signature__ = _signature(cls, positional=False)  # type: ignore[attr-defined]
    return scope

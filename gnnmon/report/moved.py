"""Names the report's modules had before they moved into its wings (``diagnosis/``, ``compare/``,
``memory/``, ``renderers/``): ``import gnnmon.report.memory_model`` still works, with a
:class:`DeprecationWarning` naming the new module, and gives a module whose every attribute is the
new module's (:func:`install`, with the map ``gnnmon.report`` keeps). ``gnnmon.report.compare`` and
``gnnmon.report.diagnosis`` are wings now: their old functions answer from the wing
(:func:`forward`), with the same warning."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Mapping
from types import ModuleType
from typing import Any


def warn_moved(old: str, new: str, stacklevel: int = 3) -> None:
    """Say that ``old`` is ``new`` now (a :class:`DeprecationWarning`)."""
    warnings.warn(f"{old} moved to {new}; import it from there (the old name goes in a later release)",
                  DeprecationWarning, stacklevel=stacklevel)


def forward(wing: str, module: ModuleType, name: str) -> Any:
    """A name of the old module ``wing`` (e.g. ``gnnmon.report.compare``), from ``module``, the wing's
    module that holds it now."""
    try:
        value = getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {wing!r} has no attribute {name!r}") from None
    warn_moved(f"{wing}.{name}", f"{module.__name__}.{name}", stacklevel=4)
    return value


class _Alias(importlib.abc.Loader):
    """Makes an old name's module: every attribute read from the new module."""

    def __init__(self, target: ModuleType) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module object

    def exec_module(self, module: ModuleType) -> None:
        target = self.target
        warn_moved(module.__name__, target.__name__, stacklevel=3)  # the importing line (importlib's frames are skipped)
        module.__doc__ = target.__doc__
        module.__getattr__ = lambda name: getattr(target, name)  # type: ignore[method-assign]
        module.__dir__ = lambda: dir(target)  # type: ignore[method-assign]


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the old names only, after every other finder has found nothing."""

    def __init__(self, moved: Mapping[str, ModuleType]) -> None:
        self.moved = dict(moved)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        module = self.moved.get(fullname)
        return None if module is None else importlib.machinery.ModuleSpec(fullname, _Alias(module))


def install(moved: Mapping[str, ModuleType]) -> None:
    """Let the old names in ``moved`` (old dotted name -> the module it is now) be imported; once
    per process."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder(moved))

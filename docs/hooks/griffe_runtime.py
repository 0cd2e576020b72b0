"""A griffe extension for the API reference, for two things the source alone does not show.

**Decorators and scopes as the functions they are at run time.**
``monitor_memory_device``, ``cuda_timed``, ``gc_controlled``, ``memory_scope`` and ``timed`` are
made by ``gnnmon.measure.adapters.make_decorator`` / ``make_scope`` from a measurement class, and
get their docstring by assignment (``x.__doc__ = ...``) and their signature (each option by name
with its default) as ``__signature__``. Read from the source alone they are plain attributes with
neither, so this extension imports each one and documents it with ``inspect.signature`` and
``__doc__``: the same signature IDEs, ``help`` and notebooks show, taken from the code, never
written twice. Everything else is read from the source as usual.

**Sphinx roles as links.** The docstrings name other objects the Sphinx way
(``:func:`collect```, ``:class:`~gnnmon.data.result.RunResult```), which Markdown would show as
``:func:collect``. Each role becomes the name in code, linked to its reference where the site
renders that object and plain where it does not (an optional cross-reference: an internal helper a
docstring names is not an error). The docstrings stay as they are.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

import griffe

FACTORIES = ("make_decorator(", "make_scope(")
"""An attribute whose value is a call to one of these is documented from its runtime object."""

ROOT = Path(__file__).resolve().parents[2]

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|data|mod|exc|obj|const):`(~?)([A-Za-z_][\w.]*)(\(\))?`")


class RuntimeSignatures(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if str(ROOT) not in sys.path:  # the checkout being documented, not an installed copy
            sys.path.insert(0, str(ROOT))
        for module in _modules(pkg):
            for name, member in list(module.members.items()):
                if member.is_alias or not member.is_attribute:
                    continue
                if not str(getattr(member, "value", "") or "").startswith(FACTORIES):
                    continue
                runtime = importlib.import_module(module.path)
                where = Path(inspect.getfile(runtime)).resolve()
                if module.filepath is not None and where != Path(str(module.filepath)).resolve():
                    raise RuntimeError(f"{module.path} imports from {where}, not the documented "
                                       f"{module.filepath}: run mkdocs from the checkout (python -m mkdocs)")
                module.set_member(name, _function(name, getattr(runtime, name), member, loader))
        for obj in _objects(pkg):
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = ROLE.sub(lambda m, o=obj: _link(o, m), obj.docstring.value)


def _modules(module: griffe.Module) -> list[griffe.Module]:
    found = [module]
    for member in module.members.values():
        if not member.is_alias and member.is_module:
            found += _modules(member)  # type: ignore[arg-type]
    return found


def _objects(obj: Any) -> list[Any]:
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            found += _objects(member)
    return found


def _link(obj: Any, match: re.Match[str]) -> str:
    """A role's name in code, as an optional cross-reference to the object it names (resolved
    from where the docstring is, as Sphinx does)."""
    short, name, call = match.groups()
    head, _, rest = name.partition(".")
    try:
        target = obj.resolve(head)
        target = f"{target}.{rest}" if rest else target
    except Exception:  # noqa: BLE001 - a full path, or a name griffe cannot place: link it as written
        target = name
    title = (name.rpartition(".")[2] if short else name) + (call or "")
    return f'<autoref identifier="{target}" optional><code>{title}</code></autoref>'


def _text(value: Any) -> str | None:
    if value is inspect.Parameter.empty:
        return None
    return value if isinstance(value, str) else getattr(value, "__name__", repr(value))


def _function(name: str, obj: Any, member: Any, loader: griffe.GriffeLoader) -> griffe.Function:
    if not callable(obj) or not obj.__doc__:
        raise RuntimeError(f"{member.path}: expected a documented callable, got {obj!r}")
    parameters = griffe.Parameters(*(
        griffe.Parameter(
            p.name,
            annotation=_text(p.annotation),
            kind=griffe.ParameterKind(p.kind.description),
            default=None if p.default is inspect.Parameter.empty else repr(p.default),
        )
        for p in inspect.signature(obj).parameters.values()
    ))
    function = griffe.Function(name, lineno=member.lineno, endlineno=member.endlineno, parameters=parameters)
    function.docstring = griffe.Docstring(
        inspect.cleandoc(obj.__doc__), parent=function,
        parser=loader.docstring_parser, parser_options=loader.docstring_options,
    )
    return function


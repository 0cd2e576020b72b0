"""The import graph of a package, read from its source with ``ast`` (nothing is imported), and the
rules gnnmon's layout keeps: no cycle, every import pointing down the flow, and no torch or PyG in
the stages that read a run (its data and its report).

Run it to see the graph: ``python -m tests.importgraph`` prints each module's gnnmon imports;
``python -m tests.importgraph --rooms`` draws the stages and their modules (docs/architecture.md);
``--face`` writes the face's ``TYPE_CHECKING`` block from its table (gnnmon/__init__.py).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT_MODULES = {"_version", "errors", "fields", "figures", "registry"}
"""Leaf modules at the package root: the vocabulary every stage shares. They import nothing."""

API_MODULES = {"__init__", "__main__", "cli"}
"""The package's face at the root: it may import every stage."""

ALLOWED: dict[str, set[str]] = {
    "api": {"forecast", "measure", "record", "timeline", "report", "data", "devices", "root"},
    "forecast": {"measure", "record", "report", "data", "devices", "root"},
    "integrations": {"measure", "record", "data", "devices", "root"},
    "measure": {"record", "devices", "root"},
    "record": {"timeline", "report", "data", "devices", "root"},
    "timeline": {"data", "devices", "root"},
    "report": {"data", "root"},
    "data": {"root"},
    "devices": {"root"},
    "root": set(),
}
"""Which stages a stage may import (besides its own modules). Data flows measure -> record ->
report with the timeline beside the record, and a forecast reads loaders with a report's model;
the run's plain data (``data``: its file format, result and table) lies under the record, the
timeline and the report; devices and the root modules lie under everything."""

TORCH_FREE = ("data", "report")
"""Stages that read a run: they, and every gnnmon module they import, import no torch and no PyG
(a run file is read, reported and exported on a machine that has neither in memory)."""

HEAVY = ("torch", "torch_geometric")
"""Top-level packages the :data:`TORCH_FREE` stages must not import."""


@dataclass(frozen=True)
class Import:
    """One gnnmon import in a module's source."""

    source: str  # importing module, e.g. "gnnmon.record.row"
    target: str  # imported module, e.g. "gnnmon.record.run"
    line: int
    typing_only: bool  # under ``if TYPE_CHECKING:`` (annotations; never executed)
    in_function: bool  # inside a function body (a late import), or in the face's table (made on first use)
    by_string: bool = False  # a module named in a string ("gnnmon.x.y", "gnnmon.x:Name"), imported later


def module_name(package_dir: Path, path: Path) -> str:
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(package_dir: Path, base: str, name: str | None) -> str:
    """``from base import name``: the module ``base.name`` if it is one, else ``base``."""
    if name is not None:
        candidate = f"{base}.{name}"
        rel = Path(*candidate.split(".")[1:])
        if (package_dir / rel).with_suffix(".py").exists() or (package_dir / rel / "__init__.py").exists():
            return candidate
    return base


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(package_dir: Path, path: Path) -> list[Import]:
    """The package-internal imports in one file, each with where it sits."""
    pkg = package_dir.name
    me = module_name(package_dir, path)
    is_pkg_init = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[Import] = []

    def visit(node: ast.AST, typing_only: bool, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.body:
                    visit_one(sub, True, in_function)
                for sub in child.orelse:
                    visit_one(sub, typing_only, in_function)
                continue
            visit_one(child, typing_only, in_function)

    def visit_one(node: ast.AST, typing_only: bool, in_function: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == pkg or alias.name.startswith(pkg + "."):
                    found.append(Import(me, alias.name, node.lineno, typing_only, in_function))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = me.split(".") if is_pkg_init else me.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base == pkg or base.startswith(pkg + "."):
                for alias in node.names:
                    target = _resolve(package_dir, base, alias.name)
                    found.append(Import(me, target, node.lineno, typing_only, in_function))
        else:
            inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(node, typing_only, inner)

    visit(tree, False, False)
    return [imp for imp in found if imp.target != me]


def _runtime_imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """One file's import statements (anywhere in it, functions included), those only under
    ``TYPE_CHECKING`` (annotations) left out."""
    tree = ast.parse(path.read_text(), filename=str(path))
    typing_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for sub in node.body:
                typing_lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return [node for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno not in typing_lines]


def outside_imports(package_dir: Path, path: Path) -> list[tuple[str, int]]:
    """The top-level packages outside gnnmon that one file imports (anywhere in it, functions
    included; annotations only under ``TYPE_CHECKING`` left out), with the line."""
    found = []
    for node in _runtime_imports(path):
        if isinstance(node, ast.Import):
            found += [(alias.name.split(".")[0], node.lineno) for alias in node.names]
        elif not node.level and node.module:
            found.append((node.module.split(".")[0], node.lineno))
    return [(name, line) for name, line in found if name != package_dir.name]


def outside_modules(package_dir: Path, path: Path) -> list[str]:
    """The modules outside gnnmon that one file imports, by their full dotted names (``from
    torch_geometric.loader import NeighborLoader``: ``torch_geometric.loader`` and
    ``torch_geometric.loader.NeighborLoader``, which may be a module or a name in one), annotations
    only under ``TYPE_CHECKING`` left out: a submodule's own side effects are its package's."""
    found = []
    for node in _runtime_imports(path):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif not node.level and node.module:
            found += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*"]
    return [name for name in found if name.split(".")[0] != package_dir.name]


def heavy(package_dir: Path, stages: tuple[str, ...] = TORCH_FREE, banned: tuple[str, ...] = HEAVY
          ) -> list[tuple[str, str, int, str]]:
    """``(module, banned package, line, how it is reached)`` for every module in ``stages``, or
    imported at run time from one of them (however indirectly), that imports a ``banned`` package."""
    # imported when a name is used, not when the importer is: a string's module, and the face's
    # imports inside its functions (each public name's module, on first use)
    imports = [i for i in all_imports(package_dir) if not i.typing_only and not i.by_string
               and not (i.in_function and stage(i.source) == "api")]
    graph: dict[str, set[str]] = {}
    for imp in imports:
        graph.setdefault(imp.source, set()).add(imp.target)
    paths = {module_name(package_dir, p): p for p in package_dir.rglob("*.py")}
    start = [m for m in paths if stage(m) in stages]
    via: dict[str, str] = {m: m for m in start}
    todo = list(start)
    while todo:
        module = todo.pop()
        targets = set(graph.get(module, ()))
        parent = module.rpartition(".")[0]  # importing a module runs its package's __init__ first
        if parent and parent in paths:
            targets.add(parent)
        for target in targets:
            if target not in via and target in paths:
                via[target] = f"{via[module]} -> {target}" if via[module] != module else f"{module} -> {target}"
                todo.append(target)
    out = []
    for module, how in sorted(via.items()):
        for name, line in outside_imports(package_dir, paths[module]):
            if name in banned:
                out.append((module, name, line, how))
    return out


MODULE_STRING = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?::[A-Za-z_]\w*)?$")
"""A string that names a module (``"gnnmon.report.report"``), or a name in one
(``"gnnmon.report:Report"``): what ``importlib.import_module``, entry points and lazy tables read."""

DYNAMIC = {"import_module", "__import__"}
"""Calls that import the module named by their first argument (``importlib.import_module``,
``__import__``). ``importlib.resources.files`` given a string imports it too: a constant one is a
string of the first kind; given the module itself it imports nothing."""


FACE_TABLE = "_PUBLIC"
"""The face's table in the package's ``__init__.py``: public name -> the module that defines it,
imported when the name is first used. Its modules are arrows from the face (made inside a function,
like a late import: ``import gnnmon`` runs none of them), not imports by string."""


def _face_table(tree: ast.Module) -> ast.Dict | None:
    """The face's table (:data:`FACE_TABLE`), a dict of constants, if this module holds one."""
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == FACE_TABLE and isinstance(node.value, ast.Dict):
            return node.value
    return None


def face_table(package_dir: Path) -> dict[str, str]:
    """The face's table, read from ``__init__.py``'s source: public name -> module."""
    table = _face_table(ast.parse((package_dir / "__init__.py").read_text()))
    if table is None:
        return {}
    return {key.value: value.value for key, value in zip(table.keys, table.values, strict=True)
            if isinstance(key, ast.Constant) and isinstance(value, ast.Constant)}


def face_imports(package_dir: Path) -> list[Import]:
    """The face's table as arrows: from the package to each module it names, made on first use."""
    path = package_dir / "__init__.py"
    table = _face_table(ast.parse(path.read_text(), filename=str(path)))
    if table is None:
        return []
    return [Import(package_dir.name, value.value, value.lineno, False, True) for value in table.values
            if isinstance(value, ast.Constant) and isinstance(value.value, str)]


def face_block(package_dir: Path) -> str:
    """The face's ``if TYPE_CHECKING:`` block as the table says it (a type checker does not read
    the table): one ``from module import name as name`` a name, in import order."""
    lines = sorted(f"    from {module} import {name} as {name}" for name, module in face_table(package_dir).items())
    return "\n".join(lines) + "\n"


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def string_imports(package_dir: Path, path: Path) -> list[Import]:
    """Imports one file makes by string: every string (docstrings aside) that names a module of the
    package, or a name in one; and every call of :data:`DYNAMIC` whose module is computed at run time
    (``target`` "?": it may be any module)."""
    pkg = package_dir.name
    me = module_name(package_dir, path)
    tree = ast.parse(path.read_text(), filename=str(path))
    docs = _docstrings(tree)
    table = _face_table(tree) if me == pkg else None  # the face's arrows: see face_imports
    skip = docs | ({id(n) for n in ast.walk(table)} if table is not None else set())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            match = MODULE_STRING.match(node.value)
            if match and match.group(1).split(".")[0] == pkg:
                name = match.group(1)
                rel = Path(*name.split(".")[1:])
                if (package_dir / rel).with_suffix(".py").exists() or (package_dir / rel / "__init__.py").exists():
                    found.append(Import(me, name, node.lineno, False, False, by_string=True))
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            looked_up = node.args[0]  # the face's table[name]: one of its modules, read as arrows already
            if table is not None and isinstance(looked_up, ast.Subscript) and isinstance(looked_up.value, ast.Name) \
                    and looked_up.value.id == FACE_TABLE:
                continue
            if called in DYNAMIC and not isinstance(node.args[0], ast.Constant):
                found.append(Import(me, "?", node.lineno, False, False, by_string=True))
    return found


def all_imports(package_dir: Path) -> list[Import]:
    """Every import in the package: by statement, by string (see :func:`string_imports`) and by the
    face's table (see :func:`face_imports`)."""
    out: list[Import] = []
    for path in sorted(package_dir.rglob("*.py")):
        out.extend(imports_of(package_dir, path))
        out.extend(string_imports(package_dir, path))
    return out + face_imports(package_dir)


def by_string(imports: list[Import]) -> list[Import]:
    """Imports made by string, anywhere in the package (the face's table aside: its modules are read
    as arrows, :func:`face_imports`). A string import hides an arrow from this graph's readers."""
    return [imp for imp in imports if imp.by_string]


def stage(module: str) -> str:
    """The stage of a module: its folder, ``root`` for the shared leaf modules, ``api`` for the face."""
    parts = module.split(".")[1:]
    if not parts:
        return "api"
    if parts[0] in API_MODULES:  # cli is a package of the face: a module a command
        return "api"
    if len(parts) == 1 and parts[0] in ROOT_MODULES:
        return "root"
    return parts[0]


CONCERN_LINES = 40
"""A group of a module's definitions this long, that no other group refers to (nor it to them),
is a concern of its own: a module with two such groups holds two concerns."""


def _definitions(tree: ast.Module) -> tuple[dict[str, tuple[int, set[str]]], list[set[str]]]:
    """A module's top-level definitions (functions, classes, assigned names) with their length in
    lines and the names they refer to; and the names each other top-level statement refers to."""
    defs: dict[str, tuple[int, set[str]]] = {}
    loose: list[set[str]] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) or (
                isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            continue  # imports and docstrings tie nothing together
        lines = (stmt.end_lineno or stmt.lineno) - stmt.lineno + 1
        refs = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[stmt.name] = (lines, refs - {stmt.name})
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            for i, name in enumerate(names):
                defs[name] = (lines if i == 0 else 0, refs - set(names))
        else:  # a registration, a loop, an if: it ties together what it refers to
            loose.append(refs)
    return defs, loose


def groups(path: Path) -> list[tuple[int, list[str]]]:
    """A module's definitions in groups that refer to one another (directly or through others),
    each with its length in lines, longest first."""
    defs, loose = _definitions(ast.parse(path.read_text(), filename=str(path)))
    ties = [(name, other) for name, (_, refs) in defs.items() for other in refs & defs.keys()]
    for refs in loose:
        tied = sorted(refs & defs.keys())
        ties += zip(tied, tied[1:], strict=False)
    return _grouped({name: lines for name, (lines, _) in defs.items()}, ties)


def _grouped(lines: dict[str, int], ties: Iterable[tuple[str, str]]) -> list[tuple[int, list[str]]]:
    """Names (each ``lines`` long) joined wherever ``ties`` pairs two, as groups with their total
    length, longest first (union-find)."""
    parent = {name: name for name in lines}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for a, b in ties:
        parent[root(a)] = root(b)
    found: dict[str, list[str]] = {}
    for name in lines:
        found.setdefault(root(name), []).append(name)
    return sorted(((sum(lines[n] for n in names), sorted(names)) for names in found.values()), reverse=True)


CONSTRUCTORS = {"__init__", "__new__", "__post_init__"}
"""Methods that set up every attribute of a class: they tie nothing together (LCOM4's rule)."""


def method_groups(cls: ast.ClassDef) -> list[tuple[int, list[str]]]:
    """A class's methods in groups that share an attribute of ``self`` (or ``cls``) or call one
    another, each with its length in lines, longest first; the constructors left out."""
    methods: dict[str, tuple[int, set[str]]] = {}
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name not in CONSTRUCTORS:
            lines = (stmt.end_lineno or stmt.lineno) - stmt.lineno + 1
            used = {n.attr for n in ast.walk(stmt) if isinstance(n, ast.Attribute)
                    and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")}
            methods[stmt.name] = (lines, used)
    ties: list[tuple[str, str]] = []
    users: dict[str, list[str]] = {}
    for name, (_, used) in methods.items():
        for attr in used:
            if attr in methods:
                ties.append((name, attr))
            else:
                users.setdefault(attr, []).append(name)
    for names in users.values():
        ties += zip(names, names[1:], strict=False)
    return _grouped({name: lines for name, (lines, _) in methods.items()}, ties)


def many_concerns(package_dir: Path, lines: int = CONCERN_LINES) -> list[tuple[str, list[tuple[int, list[str]]]]]:
    """Modules with two groups of definitions or more, each at least ``lines`` long, that never
    refer to one another (see :func:`groups`); and classes with two such groups of methods (see
    :func:`method_groups`), named ``module.Class``: two concerns in one place. A module's length
    alone says nothing: one concern may take many lines, two may take few."""
    out = []
    for path in sorted(package_dir.rglob("*.py")):
        name = module_name(package_dir, path)
        big = [g for g in groups(path) if g[0] >= lines]
        if len(big) > 1:
            out.append((name, big))
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                methods = [g for g in method_groups(node) if g[0] >= lines]
                if len(methods) > 1:
                    out.append((f"{name}.{node.name}", methods))
    return out


def cycles(imports: list[Import], typing: bool = False) -> list[list[str]]:
    """Import cycles, each as a path that ends where it starts: among run-time imports, or with
    ``typing`` among all of them (an annotation that names a module which imports this one is
    coupling too, though it never executes). Strongly connected components, one cycle shown per
    component."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if typing or not imp.typing_only:
            graph.setdefault(imp.source, set()).add(imp.target)
            graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = [0]

    def strongconnect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return [_one_cycle(graph, comp) for comp in components]


def _one_cycle(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """A concrete cycle inside a strongly connected component (breadth-first from its first node)."""
    members = set(comp)
    start = comp[0]
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, v, start]
                if w not in parents:
                    parents[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp + [comp[0]]


def upward(imports: list[Import]) -> list[Import]:
    """Imports that point up the flow: from a stage to one it may not import (see ALLOWED)."""
    bad = []
    for imp in imports:
        src, dst = stage(imp.source), stage(imp.target)
        if src == dst or imp.target == "?":  # a computed module name: see by_string
            continue
        if dst not in ALLOWED.get(src, set()):
            bad.append(imp)
    return bad


def late(imports: list[Import]) -> list[Import]:
    """gnnmon imports made inside a function (the way cycles are usually hidden), except in the
    package's face (the CLI, ``__init__``): nothing imports it, so it hides no cycle, and it
    imports the measuring stages (and torch with them) only once a command needs them."""
    return [imp for imp in imports if imp.in_function and stage(imp.source) != "api"]


FLOW = ("api", "forecast", "integrations", "measure", "record", "timeline", "report", "data", "devices", "root")
"""The stages from the face down to the root modules: each may import only stages after it (ALLOWED)."""


def _first_sentence(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(), filename=str(path))) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    text = re.sub(r":[a-z]+:`~?\.?([\w.]+)`",
                  lambda m: f"`{m.group(1).rsplit('.', 1)[-1] if '~' in m.group(0) else m.group(1)}`",
                  text).replace("``", "`")  # reStructuredText roles and literals as markdown code
    cut = text.find(". ")
    return text if cut < 0 else text[:cut + 1]


def rooms(package_dir: Path) -> str:
    """The house as markdown, drawn from the code: each stage in the flow's order, what it may
    import, its folder's first sentence and its modules, a wing (a folder inside a stage) with its
    own; what ``docs/architecture.md`` shows between its markers."""
    out = []
    for name in FLOW:
        allowed = ", ".join(f"`{s}`" for s in FLOW if s in ALLOWED[name]) or "nothing"
        if name == "api":
            modules = sorted(f"{m}.py" for m in API_MODULES if (package_dir / f"{m}.py").exists())
            modules += [f"cli/{p.name}" for p in sorted((package_dir / "cli").glob("*.py"))]
            out += ["### the face (`gnnmon/`)", "", f"May import: {allowed}. Modules: " +
                    ", ".join(f"`{m}`" for m in modules) + ".", ""]
            continue
        if name == "root":
            modules = sorted(f"{m}.py" for m in ROOT_MODULES)
            out += ["### the root modules (`gnnmon/`)", "", "The vocabulary every stage shares; they import "
                    "nothing. Modules: " + ", ".join(f"`{m}`" for m in modules) + ".", ""]
            continue
        folder = package_dir / name
        floor = sorted(p.name for p in folder.glob("*.py") if p.name != "__init__.py")
        out += [f"### `{name}/`", "", _first_sentence(folder / "__init__.py"), "",
                f"May import: {allowed}. Modules ({len(floor)}): " + ", ".join(f"`{m}`" for m in floor) + "."]
        for wing in sorted(p.parent for p in folder.glob("*/__init__.py")):
            inside = sorted(p.name for p in wing.glob("*.py") if p.name != "__init__.py")
            out += [f"- wing `{name}/{wing.name}/` ({len(inside)}): " + ", ".join(f"`{m}`" for m in inside) +
                    f" — {_first_sentence(wing / '__init__.py')}"]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    package_dir = Path(__file__).resolve().parents[1] / "gnnmon"
    if sys.argv[1:] == ["--rooms"]:
        print(rooms(package_dir), end="")
        return 0
    if sys.argv[1:] == ["--face"]:
        print(face_block(package_dir), end="")
        return 0
    imports = all_imports(package_dir)
    by_source: dict[str, list[str]] = {}
    for imp in imports:
        tag = " (typing)" if imp.typing_only else ""
        by_source.setdefault(imp.source, []).append(imp.target + tag)
    for source in sorted(by_source):
        print(f"{source} [{stage(source)}] -> {', '.join(sorted(set(by_source[source])))}")
    problems = [f"cycle: {' -> '.join(c)}" for c in cycles(imports)]
    problems += [f"cycle through annotations: {' -> '.join(c)}" for c in cycles(imports, typing=True)
                 if c not in cycles(imports)]
    problems += [f"two concerns or more: {name}: "
                 + "; ".join(f"{n} lines ({', '.join(names[:4])})" for n, names in big)
                 for name, big in many_concerns(package_dir)]
    problems += [f"up the flow: {i.source}:{i.line} imports {i.target}" for i in upward(imports)]
    problems += [f"late import: {i.source}:{i.line} imports {i.target}" for i in late(imports)]
    problems += [f"import by string: {i.source}:{i.line} imports {i.target}" for i in by_string(imports)]
    problems += [f"{name} in a stage that reads runs: {module}:{line} (reached as {how})"
                 for module, name, line, how in heavy(package_dir)]
    print("\n".join(problems) or "no cycle (annotations included), nothing up the flow, no late import, "
                                 "no import by string, "
                                 "no module or class of two concerns, no torch where runs are read")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

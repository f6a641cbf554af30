"""No import cycles among dyn's Python modules.

The graph is read from the source with ``ast``: every ``import`` and ``from
... import`` of a dyn module counts, at the top of a module or inside a
function alike (a function-level import that closes a circle is still a
circle; it only moves the failure to run time). Importing a submodule also
runs its package's __init__, which re-exports the submodules: that implicit
edge is left out, explicit imports of a package are not.

dyn/_config.py, dyn/params.py, dyn/io/ and dyn/trainers.py depend one way:
params imports _config and io; io and _config import neither (they call what
params registers: _config.on_seed, io._objects.use_parameter_classes).
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Cycles that exist and are not part of the saving/config/parameters core; a
# new cycle anywhere else fails test_no_new_cycles.
KNOWN_CYCLES = []


def _modules(root, package="dyn"):
    """{module name: (path, is_package)} for every .py file under root/package."""
    mods = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        mods[".".join(parts)] = (path, is_package)
    return mods


def import_graph(root, package="dyn"):
    """{module: {imported module: line}} among the modules of package."""
    mods = _modules(root, package)
    graph = {}
    for name, (path, is_package) in mods.items():
        edges = graph[name] = {}

        def add(target, line, edges=edges):
            if target in mods:
                edges.setdefault(target, line)

        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package holding this module
                    here = name.split(".") if is_package else name.split(".")[:-1]
                    here = here[: len(here) - (node.level - 1)]
                    base = ".".join(here + ([base] if base else []))
                for alias in node.names:  # a submodule if there is one, else a name of base
                    sub = base + "." + alias.name
                    add(sub if sub in mods else base, node.lineno)
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan), as sets."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                found.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def describe(graph, comp):
    return "; ".join(
        "%s -> %s (line %d)" % (a, b, line)
        for a in sorted(comp)
        for b, line in sorted(graph[a].items())
        if b in comp
    )


def _core(name):
    return name in ("dyn._config", "dyn.params", "dyn.trainers", "dyn.io") or name.startswith("dyn.io.")


def test_config_params_io_trainers_are_in_no_cycle():
    graph = import_graph(ROOT)
    assert "dyn.io._collections" in graph["dyn.params"]  # the graph sees the imports
    bad = [c for c in cycles(graph) if any(_core(m) for m in c)]
    assert not bad, "import cycle through _config/params/io/trainers: " + " | ".join(
        describe(graph, c) for c in bad
    )


def test_io_and_config_do_not_import_params_or_trainers():
    graph = import_graph(ROOT)
    io = {m for m in graph if m == "dyn.io" or m.startswith("dyn.io.")}
    above = {"dyn", "dyn.params", "dyn.trainers"}  # they import io and _config, not the reverse
    for name in sorted(io | {"dyn._config"}):
        wrong = sorted(set(graph[name]) & (above | io if name == "dyn._config" else above))
        assert not wrong, "%s imports %s" % (name, ", ".join(wrong))


def test_no_new_cycles():
    graph = import_graph(ROOT)
    new = [c for c in cycles(graph) if not any(c <= known for known in KNOWN_CYCLES)]
    assert not new, "new import cycles: " + " | ".join(describe(graph, c) for c in new)


def test_a_function_level_import_closing_a_circle_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg import a\n")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n    return a\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.sub.b"] == {"pkg.a": 2}
    assert cycles(graph) == [{"pkg.a", "pkg.sub.b"}]

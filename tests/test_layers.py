"""The package's shape: layers that never import upward, no import cycle, small modules.

Every import counts, at module level or inside a function: a lazy import is for
start-up time, never a way around the layering. The order is the one in
``prefetch/__init__.py``'s docstring and in docs/architecture.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "prefetch"

# Lowest first. A module may import its own layer and any layer before it.
LAYERS = [
    "errors", "model", "fs", "net", "ui", "cache", "archive", "engine", "store", "mirrors", "hf", "ms",
    "flow", "operations", "jobs", "doctor", "demo", "api", "streaming", "adapters", "dropins", "commands", "cli", "__main__",
    "__init__",
]
MAX_TOP_LEVEL = 10
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, imported prefetch module) for every import in ``path``, however deeply nested."""
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "prefetch"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "prefetch":
                continue
            modules = _modules()
            for alias in node.names:  # ``from prefetch.x import y`` where y is a module
                sub = f"{target}.{alias.name}"
                found.append((node.lineno, sub if sub in modules else target))
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_package_is_a_known_layer():
    tops = {_layer(m) for m in _modules()}
    assert tops <= set(LAYERS), f"add {sorted(tops - set(LAYERS))} to LAYERS and to the docs"


def test_no_layer_imports_a_higher_one():
    upward = []
    for module, path in _modules().items():
        mine = LAYERS.index(_layer(module))
        for line, target in _imports(module, path):
            theirs = LAYERS.index(_layer(target))
            if theirs > mine:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} imports {target}")
    assert not upward, "lower layers never import higher ones:\n" + "\n".join(upward)


def test_no_import_cycle():
    modules = _modules()
    graph = {m: {t for _, t in _imports(m, p) if t in modules and t != m} for m, p in modules.items()}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert not cycles, f"import cycles: {cycles}"


def test_few_modules_at_the_top():
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= MAX_TOP_LEVEL, loose


def test_modules_are_small():
    big = {}
    for path in _modules().values():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            big[str(path.relative_to(PACKAGE.parent))] = lines
    assert not big, f"split these by concern: {big}"


def test_every_package_says_what_it_owns_and_may_import():
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert doc, f"{init.relative_to(PACKAGE.parent)} has no docstring"
        if init.parent != PACKAGE and init.parent.parent == PACKAGE:  # a layer
            assert "import" in doc.lower(), f"{init.relative_to(PACKAGE.parent)}: say what it may import"

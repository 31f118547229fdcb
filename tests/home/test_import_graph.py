"""The packages under home/ import each other without a cycle, and the substrate imports none;
no module of any product package imports itself back through others.

Read from the source with :mod:`ast`, so an import inside a function or under
``TYPE_CHECKING`` counts as much as one at the top. The modules directly in
home/ (``home.cli``, ``home.up``, ...) are the composition root and may import
every package; no package may import them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

HOME = Path(__file__).resolve().parents[2] / "home"
ROOT_MODULES = {path.stem for path in HOME.glob("*.py")}
REPO = HOME.parent
PRODUCT_PACKAGES = ("bridge", "edge", "home", "shared", "firmware", "hil")


def imported_modules(path: Path) -> Iterator[str]:
    """Every absolute module name ``path`` imports, resolving relative imports."""
    package = path.relative_to(HOME.parent).with_suffix("").parts[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield module
            # `from home import llm` names a package, not an attribute.
            yield from (f"{module}.{alias.name}" for alias in node.names)


def package_edges() -> dict[str, set[str]]:
    """Package of home → the other packages (or root modules) of home it imports."""
    edges: dict[str, set[str]] = {}
    for path in sorted(HOME.glob("*/**/*.py")):
        source = path.relative_to(HOME).parts[0]
        targets = edges.setdefault(source, set())
        for module in imported_modules(path):
            parts = module.split(".")
            if parts[0] == "home" and len(parts) > 1 and parts[1] != source:
                targets.add(parts[1])
    return edges


def module_name(path: Path) -> str:
    """``bridge/node/core.py`` -> ``bridge.node.core``; a package is its ``__init__``."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_edges() -> dict[str, set[str]]:
    """Module of a product package -> the product modules it imports.

    ``from package import module`` is an edge to that module alone (Python loads it
    without running the package's ``__init__`` again); ``from package import name``
    is an edge to the package.
    """
    files = {
        module_name(path): path
        for package in PRODUCT_PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
    }
    edges: dict[str, set[str]] = {}
    for name, path in files.items():
        own = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets = edges.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name in files)
            elif isinstance(node, ast.ImportFrom):
                base = own[: len(own) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                for alias in node.names:
                    submodule = f"{module}.{alias.name}"
                    if submodule in files:
                        targets.add(submodule)
                    elif module in files:
                        targets.add(module)
        targets.discard(name)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``edges`` as a path that ends where it starts, or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for target in sorted(edges.get(node, ())):
            cycle = visit(target, [*path, node])
            if cycle is not None:
                return cycle
        done.add(node)
        return None

    for start in sorted(edges):
        cycle = visit(start, [])
        if cycle is not None:
            return cycle
    return None


def test_the_packages_of_home_import_each_other_without_a_cycle() -> None:
    cycle = find_cycle(package_edges())
    assert cycle is None, " -> ".join(cycle or [])


def test_no_product_module_imports_itself_back() -> None:
    cycle = find_cycle(module_edges())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_module_graph_covers_every_product_package() -> None:
    edges = module_edges()
    assert {name.split(".")[0] for name in edges} == set(PRODUCT_PACKAGES)
    assert "bridge.node.link" in edges["bridge.node.core"]
    assert "home.jmfts.write_batcher" in edges["home.jmfts.store"]
    assert "home.jmfts" not in edges["home.jmfts.store"]


def test_the_substrate_imports_no_other_part_of_home() -> None:
    assert package_edges()["substrate"] == set()


def test_no_package_imports_the_composition_root() -> None:
    importers = {
        source: targets & ROOT_MODULES
        for source, targets in package_edges().items()
        if targets & ROOT_MODULES
    }
    assert importers == {}


def test_the_graph_is_read_from_every_package() -> None:
    edges = package_edges()
    assert {"agents", "llm", "substrate"} <= set(edges)
    assert "llm" in edges["agents"] and "substrate" in edges["llm"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]

"""Every exception tether defines hangs under one root: :class:`shared.errors.TetherError`.

Each module of every product package (the ``[tool.setuptools.packages.find]``
includes of pyproject.toml) is imported and each public exception class it defines
is checked: a TetherError, and below exactly one package root (a class straight
under TetherError that is not one of the category umbrellas). Private exceptions
(``_Name``) are control flow that never leaves their module.
"""

from __future__ import annotations

import importlib
import inspect
import tomllib
from pathlib import Path

import pytest

from edge.errors import EdgeError
from edge.tui.errors import TuiError
from home.substrate.errors import ComponentError, HomeConfigError, SubstrateError
from shared.errors import (
    ConfigurationError,
    InputError,
    LinkError,
    RefusedError,
    TetherError,
    UnavailableError,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
UMBRELLAS = (ConfigurationError, InputError, RefusedError, UnavailableError, LinkError)


def product_modules() -> list[str]:
    """The dotted name of every module of the product packages, ``__main__`` left out."""
    with (REPO_ROOT / "pyproject.toml").open("rb") as f:
        includes = tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]["include"]
    names = []
    for package in sorted(pattern.rstrip("*") for pattern in includes):
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            if path.name == "__main__.py":
                continue
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def exceptions_defined_in(module_name: str) -> list[type[BaseException]]:
    """The public exception classes ``module_name`` defines (not those it imports)."""
    module = importlib.import_module(module_name)
    return [
        value
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == module_name
        and not name.startswith("_")
    ]


def package_roots(cls: type[BaseException]) -> list[type[BaseException]]:
    """The classes in ``cls``'s ancestry that sit straight under TetherError, umbrellas aside."""
    return [
        base
        for base in cls.__mro__
        if TetherError in base.__bases__ and base not in UMBRELLAS and base is not TetherError
    ]


def test_the_walk_finds_the_package_errors() -> None:
    modules = product_modules()
    for name in ("shared.errors", "bridge.errors", "edge.tui.errors", "hil.runner"):
        assert name in modules


@pytest.mark.parametrize("module_name", product_modules())
def test_every_exception_is_a_tether_error_under_one_package_root(module_name: str) -> None:
    for cls in exceptions_defined_in(module_name):
        if cls is TetherError or cls in UMBRELLAS:
            continue
        assert issubclass(cls, TetherError), f"{module_name}.{cls.__name__} is not a TetherError"
        roots = [root.__qualname__ for root in package_roots(cls)]
        assert len(roots) == 1, f"{module_name}.{cls.__name__} has package roots {roots}"


def test_the_tui_is_part_of_the_edge() -> None:
    assert issubclass(TuiError, EdgeError)


def test_a_bad_home_config_is_configuration_not_a_component_failure() -> None:
    assert issubclass(HomeConfigError, SubstrateError)
    assert issubclass(HomeConfigError, ConfigurationError)
    assert not issubclass(HomeConfigError, ComponentError)

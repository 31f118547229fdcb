"""The product's code stays readable in one sitting, and errors reach the user in one place.

Read from the source of the product packages: no file over 600 lines, no function over
80 (a nested function counts inside the one holding it too), and no exit code picked by
hand outside :mod:`shared.cli`, the wrapper every command line goes through (which maps
the error umbrellas to exit codes). Every command line is built on its ``CommandApp``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PRODUCT_PACKAGES = ("bridge", "edge", "home", "shared", "firmware", "hil")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
# The wrapper, and the exit codes it picks from.
EXIT_CODE_OWNERS = {Path("shared/cli.py"), Path("shared/exit_codes.py")}
# Ways to end a process with a status of one's own choosing, and the Typer app that
# bypasses the wrapper.
HAND_PICKED_EXIT = re.compile(
    r"\bSystemExit\b|\bsys\.exit\(|\bos\._exit\(|\bExit\(|\bctx\.exit\(|\bExitCode\b"
    r"|\btyper\.Typer\b"
)


def product_files() -> list[Path]:
    """Every Python file of the product packages, relative to the repository root."""
    return sorted(
        path.relative_to(REPO_ROOT)
        for package in PRODUCT_PACKAGES
        for path in (REPO_ROOT / package).rglob("*.py")
    )


def long_functions(source: str, limit: int) -> list[tuple[str, int, int]]:
    """Each function of ``source`` longer than ``limit`` lines: name, first line, length."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > limit:
                found.append((node.name, node.lineno, length))
    return found


def hand_picked_exits(source: str) -> list[tuple[int, str]]:
    """Each line of ``source`` that ends a process with an exit code of its own choosing."""
    return [
        (number, line.strip())
        for number, line in enumerate(source.splitlines(), start=1)
        if HAND_PICKED_EXIT.search(line.split("#", 1)[0])
    ]


def test_the_walk_finds_the_product() -> None:
    files = product_files()
    assert Path("shared/cli.py") in files and Path("home/up_command.py") in files


@pytest.mark.parametrize("path", product_files(), ids=str)
def test_no_file_is_over_600_lines(path: Path) -> None:
    lines = len((REPO_ROOT / path).read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_FILE_LINES, f"{path} has {lines} lines (at most {MAX_FILE_LINES})"


@pytest.mark.parametrize("path", product_files(), ids=str)
def test_no_function_is_over_80_lines(path: Path) -> None:
    found = long_functions((REPO_ROOT / path).read_text(encoding="utf-8"), MAX_FUNCTION_LINES)
    assert not found, "; ".join(f"{path}:{line} {name} has {n} lines" for name, line, n in found)


@pytest.mark.parametrize("path", [p for p in product_files() if p not in EXIT_CODE_OWNERS], ids=str)
def test_no_exit_code_is_picked_outside_the_wrapper(path: Path) -> None:
    found = hand_picked_exits((REPO_ROOT / path).read_text(encoding="utf-8"))
    assert not found, "; ".join(f"{path}:{n}: {line}" for n, line in found)


def test_the_checks_see_what_they_look_for() -> None:
    body = "\n".join(f"    x = {i}" for i in range(81))
    assert long_functions(f"def f() -> None:\n{body}\n", 80) == [("f", 1, 82)]
    assert long_functions("def g() -> None:\n    pass\n", 80) == []
    for line in (
        "raise typer.Exit(ExitCode.USAGE)",
        "raise typer.Exit(2)",
        "sys.exit(1)",
        "raise SystemExit(2) from None",
        "ctx.exit(1)",
        "app = typer.Typer(name='x')",
    ):
        assert hand_picked_exits(line) == [(1, line)], line
    assert hand_picked_exits("finish(ok=result.ok)  # typer.Exit( is the wrapper's") == []

"""Every console script starts on the install it belongs to; one without its extra says so.

An install is simulated in a fresh interpreter: every package outside what pyproject.toml
asks for (the base dependencies plus the chosen extras, followed through the installed
packages' own requirements) is made unimportable, as on a machine where pip never put it,
and the entry point named in [project.scripts] is run with --help.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from shared.exit_codes import ExitCode

REPO_ROOT = Path(__file__).resolve().parents[2]
PROJECT = "tether"
# Which extra each console script needs (None: the base install, a board's, is enough).
SCRIPT_EXTRAS: dict[str, str | None] = {
    "bridge": None,
    "edge": None,
    "firmware": None,
    "home": "home",
    "hil": "hil",
}
INSTALLS: dict[str, tuple[str, ...]] = {"base": (), "home": ("home",), "hil": ("hil",)}
# The installer's own packages are on every machine; nothing of ours imports them.
TOOLING = frozenset({"pip", "setuptools", "wheel"})

# Runs in the child: make the absent packages unimportable (None in sys.modules is
# what `import` reports as "No module named ..."), then run the entry point.
RUN_ENTRY_POINT = """
import importlib, sys
absent, entry, script, args = sys.argv[1].split(","), sys.argv[2], sys.argv[3], sys.argv[4:]
for name in [n for n in sys.modules if n.partition(".")[0] in absent]:
    del sys.modules[name]
for name in absent:
    sys.modules[name] = None
module, _, function = entry.partition(":")
sys.argv = [script, *(args or ["--help"])]
getattr(importlib.import_module(module), function)()
"""


@cache
def pyproject() -> dict[str, Any]:
    with (REPO_ROOT / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)["project"]


def requirement_closure(requirements: Iterable[str]) -> frozenset[str]:
    """The distributions ``requirements`` bring, through the installed ones' own requirements."""
    seen: set[tuple[str, str]] = set()
    names: set[str] = set()
    todo = [(Requirement(text), "") for text in requirements]
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        for wanted in ("", *requirement.extras):
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            names.add(name)
            try:
                requires = metadata.requires(name) or []
            except metadata.PackageNotFoundError:  # not for this platform or Python
                continue
            todo += [(Requirement(text), wanted) for text in requires]
    return frozenset(names)


@cache
def absent_modules(extras: tuple[str, ...]) -> tuple[str, ...]:
    """Top-level modules of every installed distribution that an install with ``extras`` lacks."""
    project = pyproject()
    optional = project["optional-dependencies"]
    present = requirement_closure(
        [*project["dependencies"], *(req for extra in extras for req in optional[extra])]
    )
    keep = present | TOOLING | {PROJECT}
    providers = metadata.packages_distributions()
    return tuple(
        sorted(
            module
            for module, dists in providers.items()
            if not {canonicalize_name(d) for d in dists} & keep
        )
    )


def run_script(script: str, install: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with ``args`` (default --help) as the ``install`` would."""
    absent = absent_modules(INSTALLS[install])
    entry = pyproject()["scripts"][script]
    return subprocess.run(
        [sys.executable, "-c", RUN_ENTRY_POINT, ",".join(absent), entry, script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def cases() -> list[tuple[str, str]]:
    """A base script on the base install; an extra's script on each install."""
    return [
        (script, install)
        for script, extra in SCRIPT_EXTRAS.items()
        for install in (INSTALLS if extra else ["base"])
    ]


def test_every_console_script_has_a_known_install() -> None:
    assert set(pyproject()["scripts"]) == set(SCRIPT_EXTRAS)
    assert {e for e in SCRIPT_EXTRAS.values() if e} <= set(pyproject()["optional-dependencies"])


def test_the_simulated_base_install_lacks_the_extras() -> None:
    absent = absent_modules(INSTALLS["base"])
    assert {"paramiko", "psutil", "fastapi", "faiss"} <= set(absent)
    assert not {"typer", "rich", "nats", "asyncssh", "yaml", "shared", "home"} & set(absent)


@pytest.mark.parametrize(("script", "install"), cases())
def test_script_starts_or_names_its_missing_extra(script: str, install: str) -> None:
    extra = SCRIPT_EXTRAS[script]
    result = run_script(script, install)
    if extra is None or extra in INSTALLS[install]:
        assert result.returncode == 0, result.stderr
        assert "Usage:" in result.stdout
        return
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"{script} needs the {extra} extra: pip install 'tether[{extra}]'")


def test_home_memory_calibrate_draws_its_plot_on_the_home_install(tmp_path: Path) -> None:
    ledger = tmp_path / "searches.jsonl"
    records = [
        {"kind": "search", "search_id": "s1", "threshold": 0.5,
         "hits": [{"id": 1, "score": 0.7, "passed": True}]},
        {"kind": "use", "search_id": "s1", "used_ids": [1], "unused_ids": []},
    ]  # fmt: skip
    ledger.write_text("".join(json.dumps(record) + "\n" for record in records))
    plot = tmp_path / "calibration.png"
    result = run_script(
        "home", "home", "memory", "calibrate", "some_agent", "--ledger", str(ledger),
        "--plot", str(plot), "--json",
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr  # 1: too little to suggest a threshold
    assert json.loads(result.stdout)["plot"] == str(plot) and plot.exists()

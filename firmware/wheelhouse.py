"""The aarch64 wheelhouse: our own wheel built from the tree, its dependencies from PyPI.

Everything the board's venv installs comes from here, offline: ``pip install
--no-index --find-links``. Only binary wheels for the board's platform and
Python (Debian bookworm: CPython 3.11, glibc 2.36) are accepted.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from firmware.errors import BuildError
from firmware.host import run_tool

# Newest first; the board's Debian (glibc 2.36) runs them all. pymicro-wakeword is 2_35 only.
PLATFORMS = (
    "manylinux_2_35_aarch64",
    "manylinux_2_28_aarch64",
    "manylinux_2_17_aarch64",
    "manylinux2014_aarch64",
)
PYTHON_VERSION = "3.11"
ABI = "cp311"


@dataclass(frozen=True)
class Wheelhouse:
    """A folder of wheels and which one is ours."""

    path: Path
    own_wheel: Path
    version: str

    def digests(self) -> dict[str, str]:
        """sha256 of every wheel, by file name."""
        return {
            wheel.name: hashlib.sha256(wheel.read_bytes()).hexdigest()
            for wheel in sorted(self.path.glob("*.whl"))
        }


def download_command(target: Path, requirements: list[str]) -> list[str]:
    """``pip download`` of binary aarch64 wheels for the board's Python."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--dest",
        str(target),
        "--python-version",
        PYTHON_VERSION,
        "--implementation",
        "cp",
        "--abi",
        ABI,
    ]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    return command + requirements


def build_wheelhouse(
    source_tree: Path, target: Path, extra: list[str], epoch: int | None
) -> Wheelhouse:
    """Build our wheel from ``source_tree`` and fetch it and ``extra``'s aarch64 dependencies."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    own_dir = target / "own"
    env = {"SOURCE_DATE_EPOCH": str(epoch)} if epoch is not None else {}
    run_tool(
        "wheelhouse",
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            "--wheel-dir",
            str(own_dir),
            str(source_tree),
        ],
        env=env,
    )
    wheels = sorted(own_dir.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError("wheelhouse", f"expected one wheel from {source_tree}, got {wheels}")
    own = target / wheels[0].name
    shutil.move(str(wheels[0]), own)
    own_dir.rmdir()
    _download_with_pure_sdists(target, [str(own), *extra])
    version = own.name.split("-")[1]
    return Wheelhouse(target, own, version)


_NO_DISTRIBUTION = re.compile(r"No matching distribution found for ([A-Za-z0-9_.\-]+)")
MAX_PURE_SDISTS = 8


def _download_with_pure_sdists(target: Path, requirements: list[str]) -> None:
    """Download binary wheels; a dependency published only as a pure-Python sdist
    (e.g. vosk's ``srt``) is built here into a ``py3-none-any`` wheel and offered to pip."""
    built: set[str] = set()
    while True:
        try:
            run_tool(
                "wheelhouse", [*download_command(target, requirements), "--find-links", str(target)]
            )
            return
        except BuildError as exc:
            missing = _NO_DISTRIBUTION.search(str(exc))
            if missing is None or missing.group(1) in built or len(built) >= MAX_PURE_SDISTS:
                raise
            name = missing.group(1)
        built.add(name)
        before = set(target.glob("*.whl"))
        run_tool(
            "wheelhouse",
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
             "--disable-pip-version-check", "--wheel-dir", str(target), name],
        )  # fmt: skip
        new = set(target.glob("*.whl")) - before
        if not new or not all(
            w.name.endswith("-py3-none-any.whl") or "-py2.py3-none-any" in w.name for w in new
        ):
            raise BuildError(
                "wheelhouse",
                f"{name} has no aarch64 wheel on PyPI and does not build as pure Python "
                f"({sorted(w.name for w in new)}); it cannot go on the board offline",
            )

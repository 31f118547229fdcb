"""The build machine: its tools, its binfmt_misc, where the build cache lives.

This is the one module of :mod:`firmware` that reads environment variables.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from firmware.errors import BuildError, HostToolError

BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
QEMU_AARCH64_ENTRY = "qemu-aarch64"

ENABLE_BINFMT_HINT = (
    "arm64 programs cannot run on this machine. Enable qemu-user-static through binfmt_misc:\n"
    "  apt-get install qemu-user-static binfmt-support\n"
    "  mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc   # if not mounted\n"
    "  update-binfmts --enable qemu-aarch64\n"
    "(in a container, the host must have the F (fix binary) flag registered for qemu-aarch64)"
)


def cache_dir() -> Path:
    """Where built root filesystems are cached: $TETHER_CACHE_DIR, else ~/.cache/tether."""
    explicit = os.environ.get("TETHER_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tether"


def source_date_epoch() -> int | None:
    """$SOURCE_DATE_EPOCH as an int, if set; bad values are an error, not ignored."""
    value = os.environ.get("SOURCE_DATE_EPOCH")
    if value is None or value == "":
        return None
    if not value.isdigit():
        raise HostToolError(f"SOURCE_DATE_EPOCH must be whole seconds since 1970, got {value!r}")
    return int(value)


def require_tools(*names: str) -> dict[str, str]:
    """The absolute path of each named program; HostToolError names those missing."""
    found = {name: shutil.which(name) for name in names}
    missing = sorted(name for name, path in found.items() if path is None)
    if missing:
        raise HostToolError(
            f"missing host tool(s): {', '.join(missing)}; `make bootstrap` installs the "
            "Debian packages listed in DEB_PACKAGES in the Makefile"
        )
    return {name: path for name, path in found.items() if path is not None}


def ensure_binfmt_arm64() -> str:
    """Make sure arm64 binaries run here (mounting binfmt_misc if needed); say how they run."""
    if not (BINFMT_DIR / "register").exists():
        # The filesystem is often present but not mounted; mounting it is harmless.
        subprocess.run(
            ["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT_DIR)],
            capture_output=True,
            check=False,
        )
    entry = BINFMT_DIR / QEMU_AARCH64_ENTRY
    if not entry.exists() and shutil.which("update-binfmts"):
        subprocess.run(
            ["update-binfmts", "--enable", QEMU_AARCH64_ENTRY], capture_output=True, check=False
        )
    if not entry.exists() or not entry.read_text().startswith("enabled"):
        raise HostToolError(ENABLE_BINFMT_HINT)
    interpreter = next(
        (
            line.split(None, 1)[1]
            for line in entry.read_text().splitlines()
            if line.startswith("interpreter ")
        ),
        "qemu-aarch64",
    )
    check = shutil.which("arch-test")
    if check:
        result = subprocess.run([check, "arm64"], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise HostToolError(
                f"arch-test arm64 failed: {result.stdout.strip()}\n{ENABLE_BINFMT_HINT}"
            )
    return interpreter


def run_tool(
    stage: str,
    command: list[str],
    *,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
) -> str:
    """Run a host tool for build ``stage``; BuildError with its output when it fails."""
    full_env = {**os.environ, **(env or {})}
    result = subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=full_env, check=False
    )
    if result.returncode != 0:
        raise BuildError(
            stage,
            f"{' '.join(command)} exited {result.returncode}:\n{result.stderr.strip()}"
            f"\n{result.stdout.strip()}".rstrip(),
        )
    return result.stdout

"""The base root filesystem: `mmdebstrap --arch=arm64`, cached as a tarball keyed on its inputs.

Everything that varies per board (the venv, config, keys) is added later, on a
copy; the cached tarball holds only what the profile's package list, the hook
scripts and the suite determine, so a rebuild with a new edge version reuses it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from firmware.errors import BuildError
from firmware.profiles import ARCH, COMPONENTS, SUITE, Profile

# Bump when the way the rootfs is made changes in a way the inputs below do not show.
RECIPE_VERSION = 1
VARIANT = "apt"


def _board_file(name: str) -> bytes:
    return resources.files("firmware.board").joinpath(name).read_bytes()


@dataclass(frozen=True)
class RootfsSpec:
    """Everything that determines the base root filesystem's contents."""

    profile: Profile
    suite: str = SUITE
    arch: str = ARCH
    components: tuple[str, ...] = COMPONENTS
    mirror: str | None = None

    def key_material(self) -> dict[str, object]:
        """The inputs the cache key is computed from, as plain JSON data."""
        return {
            "recipe": RECIPE_VERSION,
            "suite": self.suite,
            "arch": self.arch,
            "variant": VARIANT,
            "components": list(self.components),
            "mirror": self.mirror,
            "packages": sorted(self.profile.packages),
            "initrd_modules": list(self.profile.initrd_modules),
            "setup_hook": hashlib.sha256(_board_file("rootfs-setup.sh")).hexdigest(),
            "customize_hook": hashlib.sha256(_board_file("rootfs-customize.sh")).hexdigest(),
        }

    def key(self) -> str:
        """The cache key: a sha256 over :meth:`key_material`, shortened."""
        text = json.dumps(self.key_material(), sort_keys=True).encode()
        return hashlib.sha256(text).hexdigest()[:16]


@dataclass(frozen=True)
class CachedRootfs:
    """A base root filesystem tarball and the package versions inside it."""

    tarball: Path
    versions: dict[str, str]
    key: str
    built: bool


def cache_paths(spec: RootfsSpec, cache: Path) -> tuple[Path, Path]:
    """Where ``spec``'s tarball and its package versions live in ``cache``."""
    stem = f"rootfs-{spec.profile.name}-{spec.suite}-{spec.arch}-{spec.key()}"
    return cache / f"{stem}.tar", cache / f"{stem}.versions"


def read_versions(path: Path) -> dict[str, str]:
    """Parse the ``package<TAB>version`` lines dpkg-query wrote."""
    versions: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, version = line.partition("\t")
        if not sep:
            raise BuildError("rootfs", f"{path}:{number}: expected 'package<TAB>version'")
        versions[name] = version
    return versions


def mmdebstrap_command(spec: RootfsSpec, out: Path, hooks: Path, versions_out: Path) -> list[str]:
    """The mmdebstrap command line that builds ``spec`` into the tarball ``out``."""
    command = [
        "nice",
        "-n",
        "10",
        "mmdebstrap",
        f"--arch={spec.arch}",
        f"--variant={VARIANT}",
        f"--components={','.join(spec.components)}",
        f"--include={','.join(spec.profile.packages)}",
        "--aptopt=Acquire::Retries=3",
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        "--dpkgopt=path-exclude=/usr/share/man/*",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        "--dpkgopt=path-include=/usr/share/locale/locale.alias",
        f'--setup-hook=sh {hooks / "rootfs-setup.sh"} "$1"',
        (
            f'--customize-hook=sh {hooks / "rootfs-customize.sh"} "$1" '
            f"{hooks / 'modules'} {versions_out}"
        ),
        spec.suite,
        str(out),
    ]
    if spec.mirror:
        command.append(spec.mirror)
    return command


def ensure_rootfs(
    spec: RootfsSpec,
    cache: Path,
    *,
    on_line: Callable[[str], None] = lambda _line: None,
    log: Path | None = None,
) -> CachedRootfs:
    """The cached tarball for ``spec``, building it with mmdebstrap when absent."""
    tarball, versions = cache_paths(spec, cache)
    if tarball.exists() and versions.exists():
        return CachedRootfs(tarball, read_versions(versions), spec.key(), built=False)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tether-rootfs-", dir=cache) as work_dir:
        work = Path(work_dir)
        for name in ("rootfs-setup.sh", "rootfs-customize.sh"):
            (work / name).write_bytes(_board_file(name))
        (work / "modules").write_text("".join(f"{m}\n" for m in spec.profile.initrd_modules))
        partial, partial_versions = work / "rootfs.tar", work / "versions"
        command = mmdebstrap_command(spec, partial, work, partial_versions)
        _run_streaming(command, on_line, log or tarball.with_suffix(".log"))
        os.replace(partial_versions, versions)
        os.replace(partial, tarball)
    return CachedRootfs(tarball, read_versions(versions), spec.key(), built=True)


def _run_streaming(command: list[str], on_line: Callable[[str], None], log: Path) -> None:
    """Run ``command``, logging every line and passing it to ``on_line``; BuildError on failure."""
    tail: list[str] = []
    # Popen as a context manager closes the stdout pipe; a bare Popen leaked it
    # (a ResourceWarning that only the cold, first-build path ever met).
    with (
        log.open("w") as sink,
        subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
        ) as process,
    ):
        try:
            for line in process.stdout or ():
                sink.write(line)
                tail = [*tail[-19:], line.rstrip()]
                on_line(line.rstrip())
            code = process.wait()
        finally:
            if process.poll() is None:
                process.terminate()
                process.wait()
    if code != 0:
        raise BuildError(
            "rootfs", f"mmdebstrap exited {code}; log {log}; last lines:\n" + "\n".join(tail)
        )

"""The image manifest: what an ``.img.zst`` is, in JSON beside it.

``firmware flash`` and ``firmware verify`` trust the image only as far as this
file describes it: sha256 and size of the raw and compressed image, the disk
layout, the Debian release and package versions, our version, the edge config
and the digest of the bridge half the image carries.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from firmware.errors import ManifestError

FORMAT = "tether-firmware-manifest/1"
IMAGE_SUFFIX = ".img.zst"
MANIFEST_SUFFIX = ".manifest.json"


@dataclass(frozen=True)
class FileDigest:
    """A file's name, size in bytes and sha256."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class PartitionRecord:
    """One partition as the manifest records it."""

    number: int
    start: int
    size: int
    type: str
    filesystem: str
    label: str
    partuuid: str


@dataclass(frozen=True)
class DebianRecord:
    """The base system: release, architecture, rootfs cache key and package versions."""

    suite: str
    arch: str
    components: list[str]
    rootfs_key: str
    packages: dict[str, str]


@dataclass(frozen=True)
class EdgeRecord:
    """What runs on the board: our version, the unit's command, the config, the bridge half."""

    version: str
    wheel_sha256: str
    exec_start: str
    config: str
    bridge_half: str | None
    bridge_half_sha256: str | None
    bridge_half_digest: str | None
    board_key: bool
    wheels: dict[str, str] = field(default_factory=dict)
    home: str | None = None  # HOST:PORT the board connects to (from the half it carries)


@dataclass(frozen=True)
class Manifest:
    """Everything ``firmware flash`` and ``firmware verify`` need to trust an image."""

    device: str
    profile: str
    image: FileDigest
    compressed: FileDigest
    disk_id: str
    partitions: list[PartitionRecord]
    debian: DebianRecord
    edge: EdgeRecord
    source_date_epoch: int | None
    format: str = FORMAT

    def to_json(self) -> str:
        """Stable JSON (sorted keys) so equal manifests are equal bytes."""
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    def write(self, path: Path) -> None:
        """Write the manifest to ``path``."""
        path.write_text(self.to_json())


def manifest_path_for(image: Path) -> Path:
    """``out/NAME-VER.img.zst`` → ``out/NAME-VER.manifest.json``."""
    name = image.name
    stem = name[: -len(IMAGE_SUFFIX)] if name.endswith(IMAGE_SUFFIX) else image.stem
    return image.with_name(stem + MANIFEST_SUFFIX)


def _take(doc: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in doc:
        raise ManifestError(f"{where}: missing key {key!r}")
    value = doc[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ManifestError(f"{where}: key {key!r} has the wrong type ({type(value).__name__})")
    return value


def _digest(doc: dict[str, Any], key: str, where: str) -> FileDigest:
    part = _take(doc, key, dict, where)
    here = f"{where}.{key}"
    return FileDigest(
        _take(part, "name", str, here),
        _take(part, "size", int, here),
        _take(part, "sha256", str, here),
    )


def parse_manifest(text: str, where: str) -> Manifest:
    """Parse and check a manifest; ManifestError names the file and the key at fault."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{where}:{exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(doc, dict):
        raise ManifestError(f"{where}: expected a JSON object")
    if doc.get("format") != FORMAT:
        raise ManifestError(f"{where}: format is {doc.get('format')!r}, expected {FORMAT!r}")
    try:
        partitions = [PartitionRecord(**p) for p in _take(doc, "partitions", list, where)]
        debian = DebianRecord(**_take(doc, "debian", dict, where))
        edge = EdgeRecord(**_take(doc, "edge", dict, where))
    except TypeError as exc:
        raise ManifestError(f"{where}: {exc}") from None
    epoch = doc.get("source_date_epoch")
    if epoch is not None and not isinstance(epoch, int):
        raise ManifestError(f"{where}: key 'source_date_epoch' must be an integer or null")
    return Manifest(
        device=_take(doc, "device", str, where),
        profile=_take(doc, "profile", str, where),
        image=_digest(doc, "image", where),
        compressed=_digest(doc, "compressed", where),
        disk_id=_take(doc, "disk_id", str, where),
        partitions=partitions,
        debian=debian,
        edge=edge,
        source_date_epoch=epoch,
    )


def load_manifest(path: Path) -> Manifest:
    """Read the manifest at ``path``."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ManifestError(f"cannot read the manifest {path}: {exc.strerror}") from None
    return parse_manifest(text, str(path))

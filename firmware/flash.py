"""`firmware flash` and `firmware verify`: stream an image to a device, read it back, compare.

The manifest beside the image is the authority: the compressed file must hash
to its ``compressed.sha256`` before a byte is written, what is written must hash
to ``image.sha256``, and so must what is read back afterwards.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from firmware.errors import FlashRefused, ManifestError, VerifyError
from firmware.manifest import IMAGE_SUFFIX, Manifest, load_manifest, manifest_path_for
from firmware.stream import Progress, decompressed_chunks, file_sha256
from firmware.target import DEFAULT_MAX_BYTES, SystemPaths, probe, refusals


def _ignore(_count: int) -> None:
    return None


@dataclass(frozen=True)
class FlashOptions:
    """How `firmware flash` may treat its target."""

    to_file: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    allow_large: bool = False
    system: SystemPaths = field(default_factory=SystemPaths)


@dataclass(frozen=True)
class FlashResult:
    """What was written and that it read back right."""

    target: Path
    written: int
    sha256: str


def image_manifest(image: Path, manifest: Path | None = None) -> Manifest:
    """The manifest describing ``image``; it must name this image file."""
    path = manifest or manifest_path_for(image)
    if not path.exists():
        raise ManifestError(f"no manifest for {image}: expected {path} (or pass --manifest)")
    loaded = load_manifest(path)
    if image.name.endswith(IMAGE_SUFFIX) and loaded.compressed.name != image.name:
        raise ManifestError(f"{path} describes {loaded.compressed.name}, not {image.name}")
    return loaded


def check_compressed(image: Path, manifest: Manifest, on_progress: Progress = _ignore) -> None:
    """The compressed image must be exactly the file the manifest describes."""
    size = image.stat().st_size
    if size != manifest.compressed.size:
        raise ManifestError(
            f"{image} is {size} bytes; the manifest says {manifest.compressed.size}"
        )
    digest, _ = file_sha256(image, on_progress=on_progress)
    if digest != manifest.compressed.sha256:
        raise ManifestError(
            f"{image} has sha256 {digest}; the manifest says {manifest.compressed.sha256}"
        )


def flash(
    image: Path,
    target: Path,
    manifest: Manifest,
    options: FlashOptions,
    *,
    on_progress: Progress = _ignore,
    on_phase: Progress = _ignore,
) -> FlashResult:
    """Refuse or write: check everything first, then stream, then read back and compare."""
    facts = probe(target, options.system)
    reasons = refusals(
        facts,
        manifest.image.size,
        to_file=options.to_file,
        max_bytes=options.max_bytes,
        allow_large=options.allow_large,
    )
    if reasons:
        raise FlashRefused("\n  - ".join(reasons))
    check_compressed(image, manifest)
    on_phase(1)
    written = _write(image, target, manifest, block=facts.is_block, on_progress=on_progress)
    on_phase(2)
    digest = read_back(target, manifest.image.size, on_progress)
    if digest != manifest.image.sha256:
        raise VerifyError(
            f"read back from {target}: sha256 {digest}, expected {manifest.image.sha256}"
        )
    return FlashResult(target, written, digest)


def _write(
    image: Path, target: Path, manifest: Manifest, *, block: bool, on_progress: Progress
) -> int:
    flags = os.O_WRONLY | (os.O_EXCL if block else os.O_CREAT | os.O_TRUNC)
    digest = hashlib.sha256()
    written = 0
    # O_EXCL on a block device fails if anything has it mounted: a last guard.
    descriptor = os.open(target, flags, 0o644)
    try:
        for chunk in decompressed_chunks(image):
            view = memoryview(chunk)
            while view:
                count = os.write(descriptor, view)
                view = view[count:]
            digest.update(chunk)
            written += len(chunk)
            on_progress(len(chunk))
        os.fsync(descriptor)
        if block:
            # Drop our cached pages so the read-back comes from the device.
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(descriptor)
    if written != manifest.image.size or digest.hexdigest() != manifest.image.sha256:
        raise VerifyError(
            f"the decompressed image is {written} bytes with sha256 {digest.hexdigest()}; "
            f"the manifest says {manifest.image.size} bytes, {manifest.image.sha256}"
        )
    return written


def read_back(target: Path, size: int, on_progress: Progress = _ignore) -> str:
    """sha256 of the first ``size`` bytes of ``target``; VerifyError if it is shorter."""
    digest, count = file_sha256(target, limit=size, on_progress=on_progress)
    if count != size:
        raise VerifyError(f"{target} holds only {count} bytes, the image is {size}")
    return digest


@dataclass(frozen=True)
class VerifyResult:
    """What `firmware verify` checked."""

    path: Path
    kind: str
    sha256: str


def verify(path: Path, manifest: Manifest, on_progress: Progress = _ignore) -> VerifyResult:
    """Re-check a compressed image (both digests) or a raw image/device (the image digest)."""
    if path.name.endswith(".zst"):
        check_compressed(path, manifest)
        digest = hashlib.sha256()
        size = 0
        for chunk in decompressed_chunks(path, on_progress):
            digest.update(chunk)
            size += len(chunk)
        if size != manifest.image.size or digest.hexdigest() != manifest.image.sha256:
            raise VerifyError(
                f"{path} decompresses to {size} bytes, sha256 {digest.hexdigest()}; "
                f"expected {manifest.image.size} bytes, {manifest.image.sha256}"
            )
        return VerifyResult(path, "compressed image", digest.hexdigest())
    found = read_back(path, manifest.image.size, on_progress)
    if found != manifest.image.sha256:
        raise VerifyError(
            f"{path}: first {manifest.image.size} bytes have sha256 {found}, "
            f"expected {manifest.image.sha256}"
        )
    return VerifyResult(path, "device or raw image", found)

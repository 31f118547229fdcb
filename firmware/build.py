"""`firmware build`: base system (cached) → wheelhouse → board tree → filesystems → disk → zstd.

Each stage is reported to a :class:`~firmware.report.Reporter`; the result is
``NAME-VERSION.img.zst`` and ``NAME-VERSION.manifest.json`` in the output folder.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from firmware import disk, layout, staging
from firmware.errors import BuildError
from firmware.home_address import HomeAddress, board_home, retarget_half
from firmware.host import ensure_binfmt_arm64, require_tools
from firmware.layout import DiskLayout
from firmware.manifest import (
    DebianRecord,
    EdgeRecord,
    FileDigest,
    Manifest,
    PartitionRecord,
)
from firmware.profiles import Profile
from firmware.report import Reporter
from firmware.rootfs import CachedRootfs, RootfsSpec, ensure_rootfs
from firmware.stream import compress_file
from firmware.wheelhouse import Wheelhouse, build_wheelhouse
from shared.schema import BridgeHalf, load_bridge_half
from shared.schema.bridge_half import parse_bridge_half
from shared.yaml_source import parse_yaml

HOST_TOOLS = (
    "mmdebstrap",
    "mkfs.vfat",
    "mcopy",
    "mkfs.ext4",
    "debugfs",
    "sfdisk",
    "dd",
    "tar",
    "chroot",
    "nice",
)
BOOT_LABEL = "TETHERBOOT"
ROOT_LABEL = "tether-root"


@dataclass(frozen=True)
class BuildRequest:
    """Everything one `firmware build` is asked to do."""

    device: str
    profile: Profile
    out: Path
    source_tree: Path
    cache: Path
    exec_start: str
    bridge_half: Path | None = None
    board_key: Path | None = None
    vosk_model: Path | None = None
    voice: str | None = None
    ssh_key: Path | None = None
    mirror: str | None = None
    epoch: int | None = None
    home: HomeAddress | None = None  # where the board's half points (None: see board_home)


@dataclass(frozen=True)
class BuildResult:
    """The image, its manifest, and whether the base system came from the cache."""

    image: Path
    manifest_path: Path
    manifest: Manifest
    rootfs_cached: bool


def check_half(path: Path, device: str) -> BridgeHalf:
    """Load the edge half the board will carry; it must be this device's edge side."""
    half = load_bridge_half(path)
    if half.side != "edge":
        raise BuildError(
            "inputs", f"{path}: side is {half.side!r}; the board carries the edge half"
        )
    if half.device != device:
        raise BuildError("inputs", f"{path}: device is {half.device!r}, building for {device!r}")
    return half


def carried_half(request: BuildRequest) -> tuple[str | None, BridgeHalf | None]:
    """The edge half as the board will carry it (home address applied), and it loaded."""
    if request.bridge_half is None:
        return None, None
    source = check_half(request.bridge_half, request.device)
    home = board_home(request.profile, source, request.home)
    file = str(request.bridge_half)
    text = retarget_half(request.bridge_half.read_text(), file, home)
    return text, parse_bridge_half(parse_yaml(text, file), file)


def build(request: BuildRequest, reporter: Reporter) -> BuildResult:
    """Run every stage of the build; BuildError names the stage that failed."""
    profile = request.profile
    half_text, half = carried_half(request)
    with reporter.stage("host"):
        require_tools(*HOST_TOOLS)
        reporter.finish(f"arm64 via {ensure_binfmt_arm64()}")
    spec = RootfsSpec(profile, mirror=request.mirror)
    with reporter.stage("rootfs"):
        base = ensure_rootfs(spec, request.cache, on_line=reporter.note)
        reporter.finish(f"{'built' if base.built else 'cached'} {base.tarball.name}")
    request.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tether-build-", dir=request.cache))
    try:
        extra = [request.voice] if request.voice else []
        with reporter.stage("wheelhouse"):
            wheels = build_wheelhouse(
                request.source_tree, work / "wheelhouse", extra, request.epoch
            )
            wheel_digests = wheels.digests()
            reporter.finish(f"{len(wheel_digests)} wheels, ours {wheels.own_wheel.name}")
        disk_id = layout.disk_id_for(request.device)
        tree = work / "tree"
        with reporter.stage("stage"):
            config, content, entries = _stage_tree(
                request,
                tree=tree,
                boot=work / "boot",
                base_tarball=base.tarball,
                wheels=wheels,
                extra=extra,
                disk_id=disk_id,
                half_text=half_text,
                reporter=reporter,
            )
        plan = layout.plan_layout(disk_id, layout.root_size_for(content))
        raw = _write_disk(
            request, work=work, tree=tree, plan=plan, entries=entries, reporter=reporter
        )
        name = f"{request.device}-{wheels.version}"
        image = request.out / f"{name}.img.zst"
        with reporter.stage("compress", total=plan.size):
            partial = image.with_suffix(".zst.partial")
            digests = compress_file(raw, partial, reporter.advance)
            raw.unlink()
            os.replace(partial, image)
            reporter.finish(f"{digests.compressed_size / 2**20:.0f} MiB zstd")
    finally:
        with reporter.stage("cleanup"):
            shutil.rmtree(work, ignore_errors=True)
    manifest = _manifest(
        request,
        image=FileDigest(f"{name}.img", digests.raw_size, digests.raw_sha256),
        compressed=FileDigest(image.name, digests.compressed_size, digests.compressed_sha256),
        plan=plan,
        spec=spec,
        base=base,
        wheels=wheels,
        wheel_digests=wheel_digests,
        config=config,
        half_text=half_text,
        half=half,
    )
    manifest_path = request.out / f"{name}.manifest.json"
    with reporter.stage("manifest"):
        manifest.write(manifest_path)
        reporter.finish(manifest_path.name)
    return BuildResult(image, manifest_path, manifest, not base.built)


def _manifest(
    request: BuildRequest,
    *,
    image: FileDigest,
    compressed: FileDigest,
    plan: DiskLayout,
    spec: RootfsSpec,
    base: CachedRootfs,
    wheels: Wheelhouse,
    wheel_digests: dict[str, str],
    config: str,
    half_text: str | None,
    half: BridgeHalf | None,
) -> Manifest:
    """What the image is made of, as the manifest beside it records it."""
    half_bytes = half_text.encode() if half_text is not None else None
    return Manifest(
        device=request.device,
        profile=request.profile.name,
        image=image,
        compressed=compressed,
        disk_id=f"{plan.disk_id:08x}",
        partitions=_partition_records(plan),
        debian=DebianRecord(
            spec.suite,
            spec.arch,
            list(spec.components),
            base.key,
            dict(sorted(base.versions.items())),
        ),
        edge=EdgeRecord(
            version=wheels.version,
            wheel_sha256=wheel_digests[wheels.own_wheel.name],
            exec_start=request.exec_start,
            config=config,
            bridge_half=request.bridge_half.name if request.bridge_half else None,
            bridge_half_sha256=hashlib.sha256(half_bytes).hexdigest() if half_bytes else None,
            bridge_half_digest=half.digest() if half else None,
            board_key=request.board_key is not None,
            wheels=wheel_digests,
            home=f"{half.endpoint.host}:{half.endpoint.port}" if half else None,
        ),
        source_date_epoch=request.epoch,
    )


def _stage_tree(
    request: BuildRequest,
    *,
    tree: Path,
    boot: Path,
    base_tarball: Path,
    wheels: Wheelhouse,
    extra: list[str],
    disk_id: int,
    half_text: str | None,
    reporter: Reporter,
) -> tuple[str, int, int]:
    """Lay out the root ``tree`` (base system, venv, board files) and the ``boot`` files.

    Returns the edge config text and the tree's size in bytes and entries.
    """
    reporter.note("extracting the base system")
    staging.extract_rootfs(base_tarball, tree)
    reporter.note("installing the venv (arm64, emulated)")
    staging.install_venv(
        tree, wheels.path, [wheels.own_wheel.name.split("-")[0], *extra], request.epoch
    )
    files = staging.BoardFiles(
        device=request.device,
        profile=request.profile,
        exec_start=request.exec_start,
        bridge_half=request.bridge_half,
        board_key=request.board_key,
        vosk_model=request.vosk_model,
        voice=request.voice,
        ssh_key=request.ssh_key,
        half_text=half_text,
    )
    config = staging.write_board_files(tree, files, disk_id)
    staging.boot_files(tree, boot, request.profile, disk_id)
    if request.epoch is not None:
        staging.pin_mtimes(tree, request.epoch)
        staging.pin_mtimes(boot, request.epoch)
    content, entries = staging.tree_size(tree)
    reporter.finish(f"{content / 2**20:.0f} MiB in {entries} entries")
    return config, content, entries


def _write_disk(
    request: BuildRequest,
    *,
    work: Path,
    tree: Path,
    plan: DiskLayout,
    entries: int,
    reporter: Reporter,
) -> Path:
    """Make both filesystems from ``work`` and assemble them into ``work/disk.img``."""
    with reporter.stage("boot-fs"):
        disk.make_fat(
            work / "boot.img",
            plan.boot,
            work / "boot",
            volume_id=layout.fat_volume_id_for(request.device),
            label=BOOT_LABEL,
            epoch=request.epoch,
        )
        reporter.finish(f"FAT32 {plan.boot.size // 2**20} MiB")
    with reporter.stage("root-fs"):
        inodes = entries + entries // 4 + 4096
        disk.make_ext4(
            work / "root.img",
            plan.root,
            tree,
            fs_uuid=layout.fs_uuid_for(request.device, "root"),
            label=ROOT_LABEL,
            inodes=inodes,
            epoch=request.epoch,
        )
        # Each intermediate goes as soon as it is consumed: pages deleted while
        # still dirty are never written back, which saves most of the disk I/O.
        shutil.rmtree(tree)
        reporter.finish(f"ext4 {plan.root.size // 2**20} MiB")
    raw = work / "disk.img"
    with reporter.stage("assemble"):
        disk.assemble(raw, plan, work / "boot.img", work / "root.img")
        (work / "boot.img").unlink()
        (work / "root.img").unlink()
        reporter.finish(f"MBR, {plan.size // 2**20} MiB")
    return raw


def _partition_records(plan: DiskLayout) -> list[PartitionRecord]:
    """The manifest's record of the two partitions."""
    return [
        PartitionRecord(
            plan.boot.number,
            plan.boot.start,
            plan.boot.size,
            plan.boot.type_code,
            "vfat",
            BOOT_LABEL,
            plan.partuuid(1),
        ),
        PartitionRecord(
            plan.root.number,
            plan.root.start,
            plan.root.size,
            plan.root.type_code,
            "ext4",
            ROOT_LABEL,
            plan.partuuid(2),
        ),
    ]

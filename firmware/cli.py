"""``firmware``: build the board image, flash it, verify it, boot it under emulation."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from firmware.boottest import DEFAULT_TIMEOUT, boot_test
from firmware.build import BuildRequest, build, check_half
from firmware.errors import BuildError, FirmwareError, FlashRefused, HostToolError, ManifestError
from firmware.flash import FlashOptions, check_compressed, flash, image_manifest, verify
from firmware.host import cache_dir, source_date_epoch
from firmware.profiles import PROFILES, get_profile
from firmware.report import RichReporter, SilentReporter
from firmware.service import load_service_config
from firmware.target import DEFAULT_MAX_BYTES
from shared.errors import ContractError

app = typer.Typer(
    name="firmware",
    help="The board image: build it from Debian and PyPI, flash it, verify it, boot it in qemu.",
    no_args_is_help=True,
    add_completion=False,
)
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
DEVICE_NAME = re.compile(r"^[a-z0-9_-]+$")
err = Console(stderr=True)


def _fail(message: str, code: int) -> typer.Exit:
    err.print(f"[red]error[/red]: {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def _repo_root() -> Path:
    """The source tree our wheel is built from: the folder holding pyproject.toml."""
    here = Path(__file__).resolve().parent.parent
    if not (here / "pyproject.toml").exists():
        raise _fail(f"no pyproject.toml in {here}: build from a source checkout", EXIT_USAGE)
    return here


def _default_half(device: str, root: Path) -> Path | None:
    for candidate in (
        Path("out/bridge") / f"{device}.edge.yaml",
        root / "schemas" / "bridge" / f"{device}.edge.yaml",
    ):
        if candidate.exists():
            return candidate
    return None


@app.command("build")
def build_command(  # noqa: PLR0917 (Typer options are parameters)
    device: Annotated[str, typer.Option("--device", help="The board's name (one token).")],
    out: Annotated[Path, typer.Option("--out", help="Folder for NAME-VERSION.img.zst + manifest.")],
    profile: Annotated[
        str, typer.Option("--profile", help="rpi (Raspberry Pi 3/4) or qemu.")
    ] = "rpi",
    vosk_model: Annotated[
        Path | None, typer.Option("--vosk-model", help="A Vosk model folder to carry.")
    ] = None,
    voice: Annotated[
        str | None, typer.Option("--voice", help="A Piper voice package from PyPI.")
    ] = None,
    half: Annotated[
        Path | None,
        typer.Option(
            "--half",
            help="The edge bridge half (default: out/bridge/DEVICE.edge.yaml, "
            "else schemas/bridge/DEVICE.edge.yaml).",
        ),
    ] = None,
    key: Annotated[
        Path | None,
        typer.Option(
            "--key", help="The board's private key (default: HALF_DIR/secrets/DEVICE.edge.key)."
        ),
    ] = None,
    ssh_key: Annotated[
        Path | None, typer.Option("--ssh-key", help="A public key allowed to log in as 'tether'.")
    ] = None,
    service_config: Annotated[
        Path | None,
        typer.Option(
            "--service-config",
            help="YAML with the edge unit's exec_start (default: the packaged one).",
        ),
    ] = None,
    mirror: Annotated[
        str | None, typer.Option("--mirror", help="Debian mirror URL (default: mmdebstrap's).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON, no progress.")
    ] = False,
) -> None:
    """Build a board image from Debian and PyPI packages, without loop devices or mounts.

    Stages: a cached Debian bookworm arm64 base (mmdebstrap; cached under
    ~/.cache/tether keyed on its package list), an aarch64 wheelhouse (our
    wheel from this tree plus its dependencies), the board tree (venv, edge
    config, bridge half, board key 0600, systemd units, first boot), FAT32 +
    ext4 filesystems, an MBR disk, zstd. Set SOURCE_DATE_EPOCH for a
    reproducible image.

    Example: firmware build --device tui --profile qemu --out out/
    """
    if not DEVICE_NAME.match(device):
        raise _fail(f"--device {device!r}: one token of [a-z0-9_-]", EXIT_USAGE)
    if profile not in PROFILES:
        raise _fail(f"--profile {profile!r}: one of {', '.join(sorted(PROFILES))}", EXIT_USAGE)
    if vosk_model is not None and not vosk_model.is_dir():
        raise _fail(f"--vosk-model {vosk_model}: not a folder", EXIT_USAGE)
    root = _repo_root()
    half = half or _default_half(device, root)
    if half is not None and not half.exists():
        raise _fail(f"--half {half}: no such file", EXIT_USAGE)
    if key is None and half is not None:
        candidate = half.parent / "secrets" / f"{device}.edge.key"
        key = candidate if candidate.exists() else None
    elif key is not None and not key.exists():
        raise _fail(f"--key {key}: no such file", EXIT_USAGE)
    if ssh_key is not None and not ssh_key.exists():
        raise _fail(f"--ssh-key {ssh_key}: no such file", EXIT_USAGE)
    try:
        service = load_service_config(service_config)
        if half is not None:
            check_half(half, device)
        request = BuildRequest(
            device=device,
            profile=get_profile(profile),
            out=out,
            source_tree=root,
            cache=cache_dir(),
            exec_start=service.exec_start,
            bridge_half=half,
            board_key=key,
            vosk_model=vosk_model,
            voice=voice,
            ssh_key=ssh_key,
            mirror=mirror,
            epoch=source_date_epoch(),
        )
    except (ContractError, HostToolError, BuildError) as exc:
        raise _fail(str(exc), EXIT_USAGE) from None
    if key is None and not as_json:
        err.print(
            f"[yellow]warning[/yellow]: no board key for {device!r}: the board cannot "
            "authenticate to home (run `bridge pair` first)"
        )
    reporter = SilentReporter() if as_json else RichReporter(err)
    try:
        if isinstance(reporter, RichReporter):
            with reporter:
                result = build(request, reporter)
        else:
            result = build(request, reporter)
    except (BuildError, HostToolError, ContractError) as exc:
        raise _fail(str(exc), EXIT_FAILURE) from None
    stages = [
        {"stage": t.stage, "seconds": round(t.seconds, 1), "note": t.note} for t in reporter.times
    ]
    if as_json:
        print(
            json.dumps(
                {
                    "image": str(result.image),
                    "manifest": str(result.manifest_path),
                    "sha256": result.manifest.image.sha256,
                    "rootfs_cached": result.rootfs_cached,
                    "stages": stages,
                },
                indent=2,
            )
        )
        return
    table = Table(title=f"firmware build {device} ({profile})")
    for column in ("stage", "seconds", "result"):
        table.add_column(column)
    for row in stages:
        table.add_row(str(row["stage"]), f"{row['seconds']:.1f}", str(row["note"]))
    table.add_row("total", f"{sum(t.seconds for t in reporter.times):.1f}", "")
    Console(soft_wrap=True).print(table)
    manifest = result.manifest
    Console(soft_wrap=True).print(
        f"image    {result.image}  ({manifest.compressed.size / 2**20:.0f} MiB, "
        f"{manifest.image.size / 2**20:.0f} MiB raw)\n"
        f"sha256   {manifest.image.sha256} (raw)\nmanifest {result.manifest_path}",
        highlight=False,
    )


def _byte_progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description:<9}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=console,
    )


@app.command("flash")
def flash_command(  # noqa: PLR0917 (Typer options are parameters)
    image: Annotated[Path, typer.Argument(help="NAME-VERSION.img.zst (its manifest beside it).")],
    device: Annotated[
        Path, typer.Option("--device", help="The SD card's block device, e.g. /dev/sdX.")
    ],
    manifest: Annotated[
        Path | None, typer.Option("--manifest", help="The manifest (default: beside the image).")
    ] = None,
    to_file: Annotated[
        bool, typer.Option("--to-file", help="Allow a regular file as the target (tests).")
    ] = False,
    max_gib: Annotated[
        int, typer.Option("--max-gib", help="Refuse devices larger than this.")
    ] = DEFAULT_MAX_BYTES // 1024**3,
    allow_large: Annotated[
        bool, typer.Option("--allow-large", help="Write to a device over --max-gib.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Stream an image onto a card, then read it back and compare sha256 with the manifest.

    Refuses (exit 2) a mounted device, the disk holding '/', a device over
    --max-gib (unless --allow-large), anything but a block device (unless
    --to-file), and an image whose manifest does not match it.

    Example: firmware flash out/tui-0.1.0.img.zst --device /dev/sdb
    """
    try:
        loaded = image_manifest(image, manifest)
    except ManifestError as exc:
        raise _fail(str(exc), EXIT_USAGE) from None
    options = FlashOptions(to_file=to_file, max_bytes=max_gib * 1024**3, allow_large=allow_large)
    console = Console(stderr=True, quiet=as_json)
    progress = _byte_progress(console)
    write = progress.add_task("write", total=loaded.image.size)
    readback = progress.add_task("read back", total=loaded.image.size, start=False)
    phase = {"n": 0}

    def on_phase(step: int) -> None:
        # The bars appear only once every refusal check has passed.
        phase["n"] = step
        if step == 1:
            progress.start()
        if step == 2:
            progress.start_task(readback)

    def on_progress(count: int) -> None:
        progress.advance(write if phase["n"] < 2 else readback, count)

    try:
        result = flash(image, device, loaded, options, on_progress=on_progress, on_phase=on_phase)
    except (FlashRefused, ManifestError) as exc:
        raise _fail(f"refusing to flash {image.name} to {device}:\n  - {exc}", EXIT_USAGE) from None
    except (FirmwareError, OSError) as exc:
        raise _fail(str(exc), EXIT_FAILURE) from None
    finally:
        progress.stop()
    if as_json:
        print(
            json.dumps(
                {
                    "target": str(result.target),
                    "written": result.written,
                    "sha256": result.sha256,
                    "verified": True,
                }
            )
        )
    else:
        Console(soft_wrap=True).print(
            f"[green]flashed and verified[/green] {result.written} bytes to "
            f"{result.target}, sha256 {result.sha256}",
            highlight=False,
        )


@app.command("verify")
def verify_command(
    target: Annotated[Path, typer.Argument(help="An .img.zst, a raw image, or a flashed device.")],
    manifest: Annotated[
        Path | None, typer.Option("--manifest", help="Required for a device or raw image.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Re-check an image or a flashed card against its manifest (exit 1 on a mismatch)."""
    try:
        loaded = image_manifest(target, manifest)
    except ManifestError as exc:
        raise _fail(str(exc), EXIT_USAGE) from None
    console = Console(stderr=True, quiet=as_json)
    with _byte_progress(console) as progress:
        task = progress.add_task("verify", total=loaded.image.size)
        try:
            result = verify(target, loaded, lambda n: progress.advance(task, n))
        except (FirmwareError, OSError) as exc:
            raise _fail(str(exc), EXIT_FAILURE) from None
    if as_json:
        print(
            json.dumps(
                {"path": str(result.path), "kind": result.kind, "sha256": result.sha256, "ok": True}
            )
        )
    else:
        Console(soft_wrap=True).print(
            f"[green]ok[/green] {result.kind} {result.path}: sha256 {result.sha256}",
            highlight=False,
        )


@app.command("boot-test")
def boot_test_command(
    image: Annotated[Path, typer.Argument(help="A qemu-profile NAME-VERSION.img.zst.")],
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for readiness.")
    ] = DEFAULT_TIMEOUT,
    console_log: Annotated[
        Path | None, typer.Option("--console-log", help="Keep the serial console here.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Boot the image in qemu-system-aarch64 (virt, TCG) and wait until the edge service is ready.

    Ready: the serial console shows 'tether-edge: ready (READY=1 ...)', printed by
    the unit's ExecStartPost, which systemd runs for a Type=notify unit only after
    the service sent READY=1 on NOTIFY_SOCKET; and the forwarded
    SSH port answers with an SSH banner. Reports the seconds to each.
    """
    try:
        loaded = image_manifest(image)
        check_compressed(image, loaded)
    except ManifestError as exc:
        raise _fail(str(exc), EXIT_USAGE) from None
    if not as_json:
        err.print(f"booting {image.name} under emulation (timeout {timeout:.0f} s)...")
    try:
        report = asyncio.run(boot_test(image, loaded, limit_s=timeout, console_log=console_log))
    except FirmwareError as exc:
        raise _fail(str(exc), EXIT_FAILURE) from None
    if as_json:
        print(
            json.dumps(
                {
                    "ready": True,
                    "ready_s": report.ready_s,
                    "ssh_s": report.ssh_s,
                    "ssh_banner": report.ssh_banner,
                }
            )
        )
        return
    Console(soft_wrap=True).print(
        f"[green]edge service ready[/green] after {report.ready_s:.1f} s; "
        f"SSH answered after {report.ssh_s:.1f} s ({report.ssh_banner})",
        highlight=False,
    )


def main() -> None:
    """Console entry point."""
    app()

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

from bridge.pair import PairResult
from firmware.boottest import DEFAULT_TIMEOUT, boot_test
from firmware.build import BuildRequest, BuildResult, build, check_half
from firmware.errors import BuildError, FirmwareError, FlashRefused, HostToolError, ManifestError
from firmware.flash import FlashOptions, check_compressed, flash, image_manifest, verify
from firmware.home_address import QEMU_DEFAULT_HOME, HomeAddress, pair_board
from firmware.host import cache_dir, source_date_epoch
from firmware.profiles import PROFILES, get_profile
from firmware.report import RichReporter, SilentReporter, StageTime
from firmware.service import ServiceConfig, load_service_config
from firmware.target import DEFAULT_MAX_BYTES
from shared.cli import CommandApp
from shared.errors import UsageError
from shared.schema import load_bridge_half

app = CommandApp(
    name="firmware",
    help="The board image: build it from Debian and PyPI, flash it, verify it, boot it in qemu.",
    no_args_is_help=True,
    add_completion=False,
)
DEVICE_NAME = re.compile(r"^[a-z0-9_-]+$")
err = Console(stderr=True)


def _repo_root() -> Path:
    """The source tree our wheel is built from: the folder holding pyproject.toml."""
    here = Path(__file__).resolve().parent.parent
    if not (here / "pyproject.toml").exists():
        raise UsageError(f"no pyproject.toml in {here}: build from a source checkout")
    return here


def _default_half(device: str, out: Path, root: Path) -> Path | None:
    for candidate in (
        out / "bridge" / f"{device}.edge.yaml",
        Path("out/bridge") / f"{device}.edge.yaml",
        root / "schemas" / "bridge" / f"{device}.edge.yaml",
    ):
        if candidate.exists():
            return candidate
    return None


def _paired_half(device: str, out: Path) -> Path | None:
    """A pairing ``bridge pair --out OUT/bridge`` (or out/bridge) left: the half with its key."""
    for folder in (out / "bridge", Path("out/bridge")):
        half = folder / f"{device}.edge.yaml"
        if half.exists() and (folder / "secrets" / f"{device}.edge.key").exists():
            return half
    return None


def _pair(device: str, home: str | None, out: Path) -> PairResult | None:
    """Pair a board that has no pairing yet, when there is a home address to pair it for."""
    if home is None:
        return None
    try:
        return pair_board(device, home, out / "bridge")
    except BuildError as exc:
        # Pairing is a build input: what it cannot pair for is what the build was given.
        raise UsageError(str(exc)) from None


def paired_home(paired: PairResult) -> str:
    """HOST:PORT a fresh pairing's edge half connects to."""
    endpoint = load_bridge_half(paired.edge_half).endpoint
    return f"{endpoint.host}:{endpoint.port}"


Device = Annotated[str, typer.Option("--device", help="The board's name (one token).")]
Out = Annotated[Path, typer.Option("--out", help="Folder for NAME-VERSION.img.zst + manifest.")]
Profile = Annotated[str, typer.Option("--profile", help="rpi (Raspberry Pi 3/4) or qemu.")]
VoskModel = Annotated[
    Path | None, typer.Option("--vosk-model", help="A Vosk model folder to carry.")
]
Voice = Annotated[str | None, typer.Option("--voice", help="A Piper voice package from PyPI.")]
Half = Annotated[
    Path | None,
    typer.Option(
        "--half",
        help="The edge bridge half (default: out/bridge/DEVICE.edge.yaml, "
        "else schemas/bridge/DEVICE.edge.yaml).",
    ),
]
Key = Annotated[
    Path | None,
    typer.Option(
        "--key", help="The board's private key (default: HALF_DIR/secrets/DEVICE.edge.key)."
    ),
]
Home = Annotated[
    str | None,
    typer.Option(
        "--home",
        help="HOST[:PORT] of home's bridge endpoint, as the board reaches it. Rewrites "
        "the connect address of the half the board carries (the source half is left "
        "alone; no PORT: the half's own). Default: the half's address, except that the "
        "qemu profile turns a loopback host into 10.0.2.2, qemu's address for the "
        "machine running it. With no pairing for DEVICE, the build pairs it into "
        "OUT/bridge (bridge pair) for this home (qemu default 10.0.2.2:2222).",
    ),
]
SshKey = Annotated[
    Path | None,
    typer.Option(
        "--ssh-key",
        help="A public key allowed to log in as 'tether' (the edge's user: it reads "
        "journalctl -u tether-edge and writes the audio spool folders).",
    ),
]
ServiceConfigFile = Annotated[
    Path | None,
    typer.Option(
        "--service-config",
        help="YAML with the edge unit's exec_start (default: the packaged one).",
    ),
]
Mirror = Annotated[
    str | None, typer.Option("--mirror", help="Debian mirror URL (default: mmdebstrap's).")
]
BuildJson = Annotated[bool, typer.Option("--json", help="Print the result as JSON, no progress.")]


@app.command("build")
def build_command(  # noqa: PLR0917 (Typer options are parameters)
    device: Device,
    out: Out,
    profile: Profile = "rpi",
    vosk_model: VoskModel = None,
    voice: Voice = None,
    half: Half = None,
    key: Key = None,
    home: Home = None,
    ssh_key: SshKey = None,
    service_config: ServiceConfigFile = None,
    mirror: Mirror = None,
    as_json: BuildJson = False,
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
    root, address, service = _checked_options(
        device, profile, vosk_model=vosk_model, home=home, ssh_key=ssh_key, config=service_config
    )
    paired = None
    if half is None and key is None:
        paired = _pair_unpaired(device, profile, home, out, quiet=as_json)
        if paired is not None:
            half, key = paired.edge_half, paired.client_key
    half, key = _half_and_key(device, out, root, half, key)
    try:
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
            home=address,
        )
    except (HostToolError, BuildError) as exc:
        # Nothing has been built yet: what fails here is what the build was given.
        raise UsageError(str(exc)) from None
    if key is None and not as_json:
        err.print(
            f"[yellow]warning[/yellow]: no board key for {device!r}: the board cannot "
            "authenticate to home (run `bridge pair` first)"
        )
    result, times = _run_build(request, quiet=as_json)
    if as_json:
        print(json.dumps(_build_json(result, paired, times), indent=2))
    else:
        _print_build(result, f"firmware build {device} ({profile})", times)


def _checked_options(
    device: str,
    profile: str,
    *,
    vosk_model: Path | None,
    home: str | None,
    ssh_key: Path | None,
    config: Path | None,
) -> tuple[Path, HomeAddress | None, ServiceConfig]:
    """The source tree, the parsed ``--home`` and the service config; a bad option exits 2."""
    if not DEVICE_NAME.match(device):
        raise UsageError(f"--device {device!r}: one token of [a-z0-9_-]")
    if profile not in PROFILES:
        raise UsageError(f"--profile {profile!r}: one of {', '.join(sorted(PROFILES))}")
    if vosk_model is not None and not vosk_model.is_dir():
        raise UsageError(f"--vosk-model {vosk_model}: not a folder")
    root = _repo_root()
    address = HomeAddress.parse(home) if home is not None else None
    if ssh_key is not None and not ssh_key.exists():
        raise UsageError(f"--ssh-key {ssh_key}: no such file")
    return root, address, load_service_config(config)


def _pair_unpaired(
    device: str, profile: str, home: str | None, out: Path, *, quiet: bool
) -> PairResult | None:
    """Pair DEVICE when no earlier pairing is found under OUT (or out/) and a home is known."""
    if _paired_half(device, out) is not None:
        return None
    paired = _pair(device, home or (QEMU_DEFAULT_HOME if profile == "qemu" else None), out)
    if paired is not None and not quiet:
        err.print(
            f"paired {device!r} for home at {paired_home(paired)}: the board carries "
            f"{paired.edge_half}; give home {paired.home_half} and "
            f"{paired.host_key} (e.g. into HOME_DATA/bridge/)",
            highlight=False,
        )
    return paired


def _half_and_key(
    device: str, out: Path, root: Path, half: Path | None, key: Path | None
) -> tuple[Path | None, Path | None]:
    """The bridge half and board key the image carries: as given, else found; a given
    file that does not exist exits 2."""
    half = half or _paired_half(device, out) or _default_half(device, out, root)
    if half is not None and not half.exists():
        raise UsageError(f"--half {half}: no such file")
    if key is None and half is not None:
        candidate = half.parent / "secrets" / f"{device}.edge.key"
        key = candidate if candidate.exists() else None
    elif key is not None and not key.exists():
        raise UsageError(f"--key {key}: no such file")
    return half, key


def _run_build(request: BuildRequest, *, quiet: bool) -> tuple[BuildResult, list[StageTime]]:
    """Build the image, with progress on stderr unless ``quiet``; a stage that fails raises
    its BuildError (or HostToolError)."""
    reporter = SilentReporter() if quiet else RichReporter(err)
    if isinstance(reporter, RichReporter):
        with reporter:
            result = build(request, reporter)
    else:
        result = build(request, reporter)
    return result, reporter.times


def _stage_rows(times: list[StageTime]) -> list[dict[str, object]]:
    return [{"stage": t.stage, "seconds": round(t.seconds, 1), "note": t.note} for t in times]


def _build_json(
    result: BuildResult, paired: PairResult | None, times: list[StageTime]
) -> dict[str, object]:
    """The ``--json`` answer of a build."""
    return {
        "image": str(result.image),
        "manifest": str(result.manifest_path),
        "sha256": result.manifest.image.sha256,
        "rootfs_cached": result.rootfs_cached,
        "home": result.manifest.edge.home,
        "paired": None
        if paired is None
        else {
            "edge_half": str(paired.edge_half),
            "home_half": str(paired.home_half),
            "client_key": str(paired.client_key),
            "host_key": str(paired.host_key),
        },
        "stages": _stage_rows(times),
    }


def _print_build(result: BuildResult, title: str, times: list[StageTime]) -> None:
    """The stage table and the image's size, hash and manifest, on stdout."""
    table = Table(title=title)
    for column in ("stage", "seconds", "result"):
        table.add_column(column)
    for row in _stage_rows(times):
        table.add_row(str(row["stage"]), f"{row['seconds']:.1f}", str(row["note"]))
    table.add_row("total", f"{sum(t.seconds for t in times):.1f}", "")
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
    loaded = image_manifest(image, manifest)
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
        # Each refusal is about the target or image given: bad usage, as the help says.
        raise UsageError(f"refusing to flash {image.name} to {device}:\n  - {exc}") from None
    except OSError as exc:
        raise FirmwareError(f"cannot flash {image.name} to {device}: {exc}") from exc
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
    loaded = image_manifest(target, manifest)
    console = Console(stderr=True, quiet=as_json)
    with _byte_progress(console) as progress:
        task = progress.add_task("verify", total=loaded.image.size)
        try:
            result = verify(target, loaded, lambda n: progress.advance(task, n))
        except OSError as exc:
            raise FirmwareError(f"cannot verify {target}: {exc}") from exc
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
    its main process (edge run) sent READY=1 on NOTIFY_SOCKET; and the forwarded
    SSH port answers with an SSH banner. Reports the seconds to each, and the
    edge's own 'edge DEVICE listening on ...' line. Under TCG the edge takes
    minutes to load its models: the default timeout allows for it.
    """
    loaded = image_manifest(image)
    check_compressed(image, loaded)
    if not as_json:
        err.print(f"booting {image.name} under emulation (timeout {timeout:.0f} s)...")
    report = asyncio.run(boot_test(image, loaded, limit_s=timeout, console_log=console_log))
    if as_json:
        print(
            json.dumps(
                {
                    "ready": True,
                    "ready_s": report.ready_s,
                    "ssh_s": report.ssh_s,
                    "ssh_banner": report.ssh_banner,
                    "exec_start": loaded.edge.exec_start,
                    "edge_line": report.edge_line,
                    "edge_s": report.edge_s,
                }
            )
        )
        return
    out = Console(soft_wrap=True)
    out.print(
        f"[green]edge service ready[/green] after {report.ready_s:.1f} s "
        f"(READY=1 from {loaded.edge.exec_start}); SSH answered after "
        f"{report.ssh_s:.1f} s ({report.ssh_banner})",
        highlight=False,
    )
    if report.edge_line is not None and report.edge_s is not None:
        out.print(f"the edge said, at {report.edge_s:.1f} s: {report.edge_line}", highlight=False)


def main() -> None:
    """Console entry point."""
    app()

"""`firmware boot-test`: boot a ``qemu`` profile image under qemu-system-aarch64 and wait for it.

The image is decompressed to a scratch disk (grown a little, so first boot has
a partition to grow), the kernel, initrd and command line are read off its FAT
boot partition with mtools, and qemu boots them directly on the ``virt``
machine (TCG) with the disk on virtio and SSH forwarded to a free local port.

Ready means both: the serial console shows ``tether-edge: ready (READY=1 ...``,
which the unit's ``ExecStartPost`` prints and which systemd runs for a
``Type=notify`` unit only after the service sent READY=1 on $NOTIFY_SOCKET (the
unit's own ``Started tether-edge.service`` status line counts too, but systemd
stops printing status once a getty owns the console, so it is not relied on);
and a TCP connection to the forwarded port gets an ``SSH-2.0-`` banner from the
board's sshd.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from firmware.disk import MTOOLS_ENV
from firmware.errors import BootTestError
from firmware.host import run_tool
from firmware.manifest import Manifest
from firmware.stream import decompressed_chunks
from shared.lifecycle import cancel_and_wait
from shared.proc import free_port, terminate

READY_LINE = re.compile(r"tether-edge: ready \(READY=1|Started tether-edge\.service")
# What `edge run` itself prints once every node is up (its stderr goes to the console too).
EDGE_LINE = re.compile(r"edge (?P<device>[a-z0-9_-]+) listening on (?P<rest>\S.*)$")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
FAILED_LINE = re.compile(r"Failed to start .*tether-edge\.service")
PANIC_LINE = re.compile(r"Kernel panic|end Kernel panic|Gave up waiting for root")
GROW_BYTES = 512 * 1024 * 1024
DEFAULT_TIMEOUT = 900.0
# The edge holds the Vosk model (~600 MiB for the Korean one) and the Piper voice.
MEMORY_MIB = 2048


@dataclass
class BootReport:
    """When each milestone was reached, in seconds after qemu started."""

    ready_s: float | None = None
    ssh_s: float | None = None
    ssh_banner: str = ""
    edge_line: str | None = None  # "edge DEVICE listening on ...", as the edge printed it
    edge_s: float | None = None
    console_log: Path | None = None
    lines: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BootedBoard:
    """A board running under emulation: where its SSH answers and its console log."""

    ssh_port: int
    console_log: Path
    report: BootReport


def prepare_disk(image: Path, manifest: Manifest, work: Path) -> tuple[Path, Path, Path, str]:
    """Decompress the image, grow it, and pull kernel, initrd and cmdline off its boot partition."""
    raw = work / "disk.img"
    with raw.open("wb") as out:
        for chunk in decompressed_chunks(image):
            out.write(chunk)
        out.truncate(manifest.image.size + GROW_BYTES)
    boot = next((p for p in manifest.partitions if p.filesystem == "vfat"), None)
    if boot is None:
        raise BootTestError(f"the manifest of {image} lists no boot partition")
    source = f"{raw}@@{boot.start}"
    files = {}
    for name in ("vmlinuz", "initrd.img", "cmdline.txt"):
        target = work / name
        run_tool(
            "boot-test", ["mcopy", "-n", "-i", source, f"::/{name}", str(target)], env=MTOOLS_ENV
        )
        files[name] = target
    cmdline = files["cmdline.txt"].read_text().strip()
    return raw, files["vmlinuz"], files["initrd.img"], cmdline


def qemu_command(
    raw: Path,
    kernel: Path,
    initrd: Path,
    cmdline: str,
    ssh_port: int,
    *,
    memory_mib: int = MEMORY_MIB,
    cpus: int = 2,
) -> list[str]:
    """The qemu-system-aarch64 command line: virt, TCG, virtio disk and net, serial on stdio."""
    return [
        "nice",
        "-n",
        "10",
        "qemu-system-aarch64",
        "-machine",
        "virt",
        "-accel",
        "tcg,thread=multi",
        "-cpu",
        "cortex-a72",
        "-smp",
        str(cpus),
        "-m",
        str(memory_mib),
        "-kernel",
        str(kernel),
        "-initrd",
        str(initrd),
        "-append",
        cmdline,
        "-drive",
        f"file={raw},format=raw,if=none,id=disk0,cache=unsafe",
        "-device",
        "virtio-blk-pci,drive=disk0",
        "-netdev",
        f"user,id=net0,hostfwd=tcp:127.0.0.1:{ssh_port}-:22",
        "-device",
        "virtio-net-pci,netdev=net0",
        "-display",
        "none",
        "-monitor",
        "none",
        "-serial",
        "stdio",
        "-no-reboot",
    ]


async def ssh_banner(port: int, wait_s: float = 5.0) -> str | None:
    """The SSH identification line on ``port``, or None if nothing answers with one."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), wait_s)
    except (OSError, TimeoutError):
        return None
    try:
        line = await asyncio.wait_for(reader.readline(), wait_s)
    except (OSError, TimeoutError):
        return None
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    text = line.decode("ascii", "replace").strip()
    return text if text.startswith("SSH-2.0-") else None


@contextlib.asynccontextmanager
async def booted(
    image: Path,
    manifest: Manifest,
    *,
    limit_s: float = DEFAULT_TIMEOUT,
    console_log: Path | None = None,
    seed: Callable[[Path], None] | None = None,
) -> AsyncIterator[BootedBoard]:
    """Boot ``image`` and yield once the edge service is ready and SSH answers; stop qemu after.

    ``seed``, when given, is called with the scratch disk (a copy; the image is
    untouched) before qemu starts: hil puts its login and host keys there.
    """
    if manifest.profile != "qemu":
        raise BootTestError(f"{image} is a {manifest.profile!r} image; boot-test needs 'qemu'")
    if shutil.which("qemu-system-aarch64") is None:
        raise BootTestError("qemu-system-aarch64 is missing: apt-get install qemu-system-arm")
    with tempfile.TemporaryDirectory(prefix="tether-boot-") as work_dir:
        work = Path(work_dir)
        raw, kernel, initrd, cmdline = prepare_disk(image, manifest, work)
        if seed is not None:
            seed(raw)
        port = free_port()
        log_path = console_log or work / "console.log"
        report = BootReport(console_log=log_path)
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            *qemu_command(raw, kernel, initrd, cmdline, port),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        console = asyncio.create_task(_read_console(process, log_path, report, started))
        try:
            await asyncio.wait_for(_wait_ready(process, console, report, port, started), limit_s)
            yield BootedBoard(port, log_path, report)
        except TimeoutError:
            tail = "\n".join(report.lines[-15:])
            raise BootTestError(
                f"not ready after {limit_s:.0f} s (ready line "
                f"{'seen' if report.ready_s else 'not seen'}, SSH "
                f"{'answering' if report.ssh_s else 'silent'}); console tail:\n{tail}"
            ) from None
        finally:
            await terminate(process, 10)
            await cancel_and_wait(console)


async def _read_console(
    process: asyncio.subprocess.Process, log: Path, report: BootReport, started: float
) -> None:
    if process.stdout is None:
        return
    with log.open("w", errors="replace") as sink:
        while line_bytes := await process.stdout.readline():
            line = ANSI.sub("", line_bytes.decode("utf-8", "replace")).rstrip()
            sink.write(line + "\n")
            sink.flush()
            report.lines = [*report.lines[-199:], line]
            if report.ready_s is None and READY_LINE.search(line):
                report.ready_s = time.monotonic() - started
            if report.edge_line is None and (found := EDGE_LINE.search(line)):
                report.edge_line = found.group(0)
                report.edge_s = time.monotonic() - started


async def _wait_ready(
    process: asyncio.subprocess.Process,
    console: asyncio.Task[None],
    report: BootReport,
    port: int,
    started: float,
) -> None:
    while True:
        for line in report.lines[-50:]:
            if FAILED_LINE.search(line) or PANIC_LINE.search(line):
                raise BootTestError(
                    f"the board failed to boot: {line.strip()}; console tail:\n"
                    + "\n".join(report.lines[-15:])
                )
        if process.returncode is not None or console.done():
            raise BootTestError(
                f"qemu exited ({process.returncode}) before readiness; tail:\n"
                + "\n".join(report.lines[-15:])
            )
        if report.ready_s is not None and report.ssh_s is None:
            banner = await ssh_banner(port)
            if banner:
                report.ssh_s = time.monotonic() - started
                report.ssh_banner = banner
        if report.ready_s is not None and report.ssh_s is not None:
            return
        await asyncio.sleep(1.0)


async def boot_test(
    image: Path,
    manifest: Manifest,
    *,
    limit_s: float = DEFAULT_TIMEOUT,
    console_log: Path | None = None,
) -> BootReport:
    """Boot, wait for readiness and SSH, shut down; the report says when each came."""
    async with booted(image, manifest, limit_s=limit_s, console_log=console_log) as board:
        return board.report

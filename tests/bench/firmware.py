"""Benchmark: a warm `firmware build` (qemu profile, base system from the cache) and its boot.

Figures: each build stage's seconds, the raw and compressed image sizes, the
seconds to the edge service's readiness and to SSH under emulation. Peer: the
zstd command line (`zstd -3 -T1`) on the same raw image, against our streaming
compressor. A cold build (base system rebuilt) runs when FIRMWARE_BENCH_COLD=1,
in a throwaway cache so the real one is kept.

Run: make bench NAME=firmware
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from firmware.boottest import boot_test
from firmware.build import BuildRequest, build
from firmware.host import cache_dir
from firmware.manifest import load_manifest
from firmware.profiles import get_profile
from firmware.report import SilentReporter
from firmware.service import load_service_config
from firmware.stream import decompressed_chunks
from tests.bench.report import Result, publish

REPO = Path(__file__).resolve().parents[2]


def _build(out: Path, cache: Path) -> tuple[BuildRequest, SilentReporter, float]:
    request = BuildRequest(
        device="tui",
        profile=get_profile("qemu"),
        out=out,
        source_tree=REPO,
        cache=cache,
        exec_start=load_service_config(None).exec_start,
        bridge_half=REPO / "schemas/bridge/tui.edge.yaml",
        epoch=1_700_000_000,
    )
    reporter = SilentReporter()
    started = time.monotonic()
    build(request, reporter)
    return request, reporter, time.monotonic() - started


def main() -> None:
    """Build warm (and cold if asked), compress with the peer, boot; publish the figures."""
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as work_dir:
        work = Path(work_dir)
        if os.environ.get("FIRMWARE_BENCH_COLD") == "1":
            _, cold, cold_s = _build(work / "cold", work / "cache")
            results.append(Result("build, cold (rootfs rebuilt)", cold_s, "s", 1))
            rootfs = next(t for t in cold.times if t.stage == "rootfs")
            results.append(Result("rootfs stage, cold", rootfs.seconds, "s", 1))
        _, warm, warm_s = _build(work / "warm", cache_dir())
        results.append(Result("build, warm (rootfs cached)", warm_s, "s", 1))
        for stage in warm.times:
            results.append(Result(f"stage {stage.stage}", stage.seconds, "s", 1, note=stage.note))
        image = next((work / "warm").glob("*.img.zst"))
        manifest_path = next((work / "warm").glob("*.manifest.json"))
        manifest = load_manifest(manifest_path)
        raw = work / "disk.img"
        with raw.open("wb") as out:
            for chunk in decompressed_chunks(image):
                out.write(chunk)
        ours = next(t for t in warm.times if t.stage == "compress").seconds
        peer_started = time.monotonic()
        subprocess.run(
            ["zstd", "-q", "-3", "-T1", "-f", str(raw), "-o", str(work / "peer.zst")], check=True
        )
        peer_s = time.monotonic() - peer_started
        results.append(
            Result(
                "compress (zstandard streaming, level 3)",
                ours,
                "s",
                1,
                peer="zstd -3 -T1 CLI",
                peer_value=peer_s,
            )
        )
        results.append(
            Result(
                "compressed size",
                manifest.compressed.size / 2**20,
                "MiB",
                1,
                peer="zstd -3 -T1 CLI",
                peer_value=(work / "peer.zst").stat().st_size / 2**20,
            )
        )
        results.append(Result("raw image size", manifest.image.size / 2**20, "MiB", 1))
        report = asyncio.run(boot_test(image, manifest, limit_s=900))
        results.append(
            Result(
                "boot to edge service ready",
                report.ready_s or -1,
                "s",
                1,
                note="qemu virt, TCG, 2 vCPU",
            )
        )
        results.append(Result("boot to SSH banner", report.ssh_s or -1, "s", 1))
        shutil.rmtree(work / "cache", ignore_errors=True)
    publish("firmware", results)

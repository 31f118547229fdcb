"""One qemu-profile board image per test session, built as `firmware build` builds it.

``build_qemu_image`` is what the ``built_qemu_image`` fixture (tests/conftest.py)
yields: firmware's slow boot test and HIL's ``qemu:IMAGE`` target share the one
image instead of building their own (a warm build is about a minute here; the
base system comes from the ``~/.cache/tether`` cache, built once cold).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from firmware.build import BuildRequest, BuildResult, build
from firmware.host import cache_dir
from firmware.profiles import get_profile
from firmware.report import SilentReporter
from firmware.service import load_service_config

REPO = Path(__file__).resolve().parents[2]
EPOCH = 1_700_000_000


@dataclass(frozen=True)
class BuiltQemuImage:
    """A built ``qemu`` image, the build's inputs and its stage timings."""

    image: Path  # DEVICE-VERSION.img.zst, its manifest beside it
    device: str
    request: BuildRequest
    result: BuildResult
    reporter: SilentReporter


def build_qemu_image(work: Path, device: str = "tui") -> BuiltQemuImage:
    """Build ``device``'s qemu image into ``work/out``."""
    request = BuildRequest(
        device=device,
        profile=get_profile("qemu"),
        out=work / "out",
        source_tree=REPO,
        cache=cache_dir(),
        exec_start=load_service_config(None).exec_start,
        bridge_half=REPO / f"schemas/bridge/{device}.edge.yaml",
        epoch=EPOCH,
    )
    reporter = SilentReporter()
    result = build(request, reporter)
    return BuiltQemuImage(result.image, device, request, result, reporter)

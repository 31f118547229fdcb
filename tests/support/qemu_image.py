"""One qemu-profile firmware image per test session, built as `firmware build` builds it.

The firmware boot test and the HIL qemu target both boot it, so CI builds the
image once (a warm build is about a minute; the base system comes from the
cache under ~/.cache/tether).
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
class QemuBuild:
    """The request, the result, and the stage timings of the session's image build."""

    request: BuildRequest
    result: BuildResult
    reporter: SilentReporter


def build_qemu_image(out: Path) -> QemuBuild:
    """Build the ``tui`` device's qemu image into ``out``."""
    request = BuildRequest(
        device="tui",
        profile=get_profile("qemu"),
        out=out,
        source_tree=REPO,
        cache=cache_dir(),
        exec_start=load_service_config(None).exec_start,
        bridge_half=REPO / "schemas/bridge/tui.edge.yaml",
        epoch=EPOCH,
    )
    reporter = SilentReporter()
    return QemuBuild(request, build(request, reporter), reporter)

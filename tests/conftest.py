"""Fixtures shared across test packages."""

from __future__ import annotations

import pytest

from tests.support.qemu_image import QemuBuild, build_qemu_image


@pytest.fixture(scope="session")
def qemu_build(tmp_path_factory: pytest.TempPathFactory) -> QemuBuild:
    """The session's one qemu-profile image (tests/firmware and tests/hil boot it)."""
    return build_qemu_image(tmp_path_factory.mktemp("qemu-image") / "out")

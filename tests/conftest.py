"""Fixtures shared across test packages."""

from __future__ import annotations

import pytest

from tests.support.board_image import BuiltQemuImage, build_qemu_image


@pytest.fixture(scope="session")
def built_qemu_image(tmp_path_factory: pytest.TempPathFactory) -> BuiltQemuImage:
    """A ``qemu`` board image, built once per session (see tests/support/board_image.py).

    Slow: about a minute warm, plus the base system on a cold cache.
    """
    return build_qemu_image(tmp_path_factory.mktemp("qemu-image"))

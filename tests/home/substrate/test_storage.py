"""The storage component: a full or read-only data directory is unhealthy, naming the path."""

from __future__ import annotations

from pathlib import Path

import pytest

from home.substrate.errors import ComponentError
from home.substrate.storage import StorageComponent
from tests.support.small_fs import small_filesystem

# Small, and the threshold below it, so filling takes a moment.
SIZE_KIB = 4096
MIN_FREE = 1024 * 1024


async def test_a_full_then_read_only_data_dir_is_unhealthy_naming_the_path(tmp_path: Path) -> None:
    data_dir = tmp_path / "home"
    (data_dir / "jmfts").mkdir(parents=True)
    storage = StorageComponent(data_dir, MIN_FREE)
    assert (await storage.health()).ok
    with small_filesystem(data_dir / "jmfts", SIZE_KIB, can_fail=True) as small:
        await storage.start()
        healthy = await storage.health()
        assert healthy.ok, healthy
        small.fill()
        full = await storage.health()
        assert not full.ok
        assert str(data_dir / "jmfts") in full.detail and "KiB free" in full.detail
        # The data directory's own filesystem has room: only the full one is named.
        assert f"{data_dir}:" not in full.detail
        with pytest.raises(ComponentError, match=r"cannot take writes.*jmfts"):
            await storage.start()
        small.free()
        assert (await storage.health()).ok
        with (data_dir / "jmfts" / "index.faiss").open("wb") as held_open:
            small.turn_read_only()
            read_only = await storage.health()
            assert not held_open.closed
        assert not read_only.ok
        assert read_only.detail == f"{data_dir / 'jmfts'}: the filesystem is read-only"


async def test_a_data_dir_that_is_gone_is_unhealthy_not_a_crash(tmp_path: Path) -> None:
    health = await StorageComponent(tmp_path / "never-made").health()
    assert not health.ok and "never-made" in health.detail

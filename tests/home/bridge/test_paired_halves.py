"""PairedHalves: every paired half, parsed again only when its file changed."""

from __future__ import annotations

import os
from pathlib import Path

from bridge.pair import pair
from home.bridge.component import BRIDGE_DIR, PairedHalves


def test_halves_are_parsed_once_until_their_file_changes(tmp_path: Path) -> None:
    bridge_dir = tmp_path / BRIDGE_DIR
    for device in ("kitchen", "hall"):
        pair(device, "127.0.0.1:2222", bridge_dir)
    paired = PairedHalves(tmp_path)

    first, unusable = paired.load()
    assert unusable == []
    assert [h.device for h in first] == ["hall", "kitchen"]
    again, _ = paired.load()
    assert all(a is b for a, b in zip(first, again, strict=True))

    kitchen = bridge_dir / "kitchen.home.yaml"
    text = kitchen.read_text()
    kitchen.write_text(text + "\n")
    os.utime(kitchen, ns=(1, 1))  # a changed stamp even on a coarse clock
    changed, _ = paired.load()
    assert changed[0] is first[0]
    assert changed[1] is not first[1]
    assert changed[1].device == "kitchen"


def test_a_broken_half_is_named_and_a_removed_one_is_gone(tmp_path: Path) -> None:
    bridge_dir = tmp_path / BRIDGE_DIR
    for device in ("kitchen", "hall"):
        pair(device, "127.0.0.1:2222", bridge_dir)
    paired = PairedHalves(tmp_path)
    paired.load()

    hall = bridge_dir / "hall.home.yaml"
    hall.write_text("bridge: [unclosed\n")
    halves, unusable = paired.load()
    assert [h.device for h in halves] == ["kitchen"]
    assert [path for path, _ in unusable] == [hall]
    assert "hall.home.yaml" in str(unusable[0][1])

    hall.unlink()
    halves, unusable = paired.load()
    assert [h.device for h in halves] == ["kitchen"]
    assert unusable == []

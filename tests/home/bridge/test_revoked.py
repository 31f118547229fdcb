"""The revocation record: a revoked key is left out of the paired halves for good, and a
record that cannot be read leaves every half out rather than letting a revoked key in."""

from __future__ import annotations

import shutil
from pathlib import Path

from bridge.pair import pair
from home.bridge.component import BRIDGE_DIR, PairedHalves, key_fingerprint
from home.bridge.revoked import REVOKED_FILE, RevokedKey, RevokedKeys


def _revoke(paired: PairedHalves, device: str) -> RevokedKey:
    half = next(h for h in paired.load()[0] if h.device == device)
    record = RevokedKey(device, key_fingerprint(half), half.endpoint.client_key or "", "now")
    paired.revoked.add(record)
    return record


def test_a_half_restored_after_its_key_was_revoked_is_never_served(tmp_path: Path) -> None:
    bridge_dir = tmp_path / BRIDGE_DIR
    for device in ("kitchen", "hall"):
        pair(device, "127.0.0.1:2222", bridge_dir)
    backup = tmp_path / "kitchen.home.yaml.bak"
    shutil.copy(bridge_dir / "kitchen.home.yaml", backup)
    paired = PairedHalves(tmp_path)
    record = _revoke(paired, "kitchen")
    (bridge_dir / "kitchen.home.yaml").unlink()
    shutil.copy(backup, bridge_dir / "kitchen.home.yaml")  # as if from a backup

    halves, unusable = paired.load()
    assert [h.device for h in halves] == ["hall"] and unusable == []
    assert [h.device for h in paired.refused] == ["kitchen"]
    # Read anew, as another process (the bus users) reads it.
    assert RevokedKeys(bridge_dir).load() == (record,)
    assert [h.device for h in PairedHalves(tmp_path).load()[0]] == ["hall"]


def test_an_unreadable_record_leaves_every_half_out_and_names_the_file(tmp_path: Path) -> None:
    bridge_dir = tmp_path / BRIDGE_DIR
    pair("hall", "127.0.0.1:2222", bridge_dir)
    for text in ("{not json", '{"revoked": [{"device": "kitchen"}]}', "[]"):
        (bridge_dir / REVOKED_FILE).write_text(text)
        halves, unusable = PairedHalves(tmp_path).load()
        assert halves == []
        [(path, exc)] = unusable
        assert path == bridge_dir / REVOKED_FILE and REVOKED_FILE in str(exc)

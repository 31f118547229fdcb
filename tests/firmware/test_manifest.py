"""The manifest: round trip, and errors that name the file and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firmware.errors import ManifestError
from firmware.manifest import Manifest, load_manifest, manifest_path_for, parse_manifest


def test_round_trip(small_image: tuple[Path, Path, Manifest], tmp_path: Path) -> None:
    _, _, manifest = small_image
    path = tmp_path / "m.json"
    manifest.write(path)
    assert load_manifest(path) == manifest
    assert manifest.to_json() == load_manifest(path).to_json()


def test_records_what_the_image_carries(small_image: tuple[Path, Path, Manifest]) -> None:
    _, compressed, manifest = small_image
    doc = json.loads(manifest.to_json())
    assert doc["compressed"]["name"] == compressed.name
    assert doc["compressed"]["size"] == compressed.stat().st_size
    assert set(doc["image"]) == {"name", "size", "sha256"}
    assert doc["debian"]["suite"] == "bookworm" and doc["debian"]["packages"]
    assert {"version", "config", "exec_start", "bridge_half_digest"} <= set(doc["edge"])
    assert [p["filesystem"] for p in doc["partitions"]] == ["vfat", "ext4"]


def test_path_beside_the_image() -> None:
    assert manifest_path_for(Path("out/tui-0.1.0.img.zst")) == Path("out/tui-0.1.0.manifest.json")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("image"), "missing key 'image'"),
        (lambda d: d["image"].update(size="big"), "'size' has the wrong type"),
        (lambda d: d.update(format="other/9"), "format is 'other/9'"),
        (lambda d: d["edge"].update(surprise=1), "surprise"),
        (lambda d: d.update(source_date_epoch="yesterday"), "source_date_epoch"),
    ],
)
def test_bad_manifests_name_the_key(
    small_image: tuple[Path, Path, Manifest], change: object, message: str
) -> None:
    _, _, manifest = small_image
    doc = json.loads(manifest.to_json())
    change(doc)  # type: ignore[operator]
    with pytest.raises(ManifestError, match=message) as caught:
        parse_manifest(json.dumps(doc), "out/x.manifest.json")
    assert "out/x.manifest.json" in str(caught.value)


def test_not_json_names_the_line() -> None:
    with pytest.raises(ManifestError, match=r"m.json:2: not JSON"):
        parse_manifest('{\n  "device": ,\n}', "m.json")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(tmp_path / "absent.json")

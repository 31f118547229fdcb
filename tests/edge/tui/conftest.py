"""A real nats-server per test, the test playing the agent side on it, and a private tmux.

:class:`PlayedAgent` is not a double of any tether component: it is the test
itself, publishing real envelopes on the real subjects an agent and the edge
bridge publish on, and reading what the TUI sends.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from edge.natsd import LocalNatsServer
from shared.event import Event
from shared.subjects import (
    bridge_status_subject,
    memorize_subject,
    recall_subject,
    reply_subject,
    sensation_turn_subject,
    speak_subject,
)

WAIT_S = 10.0
AGENT = "edge_asr"
DEVICE = "tui"


async def until(predicate: Callable[[], bool], what: str, within_s: float = WAIT_S) -> None:
    """Poll ``predicate`` until it holds; fail naming ``what`` after ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {within_s:g} s waiting for {what}")
        await asyncio.sleep(0.02)


class PlayedAgent:
    """The agent side, played by the test on a real NATS: reads turns and acks, answers."""

    def __init__(self, nc: Client, device: str = DEVICE, agent: str = AGENT) -> None:
        self.nc = nc
        self.device = device
        self.agent = agent
        self.turns: asyncio.Queue[Event] = asyncio.Queue()
        self.acks: asyncio.Queue[tuple[str, Event]] = asyncio.Queue()
        self._seq = 0

    async def start(self) -> None:
        """Subscribe the device's turns and every speech.completed ack."""

        async def on_turn(msg: Msg) -> None:
            await self.turns.put(Event.from_json(msg.data))

        async def on_ack(msg: Msg) -> None:
            await self.acks.put((msg.subject, Event.from_json(msg.data)))

        await self.nc.subscribe(sensation_turn_subject(self.device), cb=on_turn)
        await self.nc.subscribe("events.action.speech.completed.*", cb=on_ack)
        await self.nc.flush()

    async def next_turn(self) -> Event:
        """The next turn the TUI published."""
        return await asyncio.wait_for(self.turns.get(), WAIT_S)

    async def next_ack(self) -> tuple[str, Event]:
        """The next speech.completed ack (subject, event)."""
        return await asyncio.wait_for(self.acks.get(), WAIT_S)

    async def _publish(
        self, subject: str, event_type: str, payload: dict[str, Any], bid: str | None
    ) -> None:
        self._seq += 1
        event = Event.new(
            event_type,
            payload,
            source=f"agent.{self.agent}",
            sequence_number=self._seq,
            binding_id=bid,
        )
        await self.nc.publish(subject, event.to_json())
        await self.nc.flush()

    async def speak(self, binding_id: str, text: str, *, more: bool = False) -> None:
        """Publish a speak for the device, as the handset extension does (``more``: a part
        of an answer that more parts follow)."""
        payload: dict[str, Any] = {"text": text, "more": True} if more else {"text": text}
        await self._publish(speak_subject(self.agent, self.device), "speak", payload, binding_id)

    async def reply(self, binding_id: str, text: str, *, reason: str | None) -> None:
        """Publish a reply-rail line; with a reason it is an unspeakable answer."""
        payload: dict[str, Any] = {"text": text, "spoken": False}
        if reason is not None:
            payload["reason"] = reason
        await self._publish(reply_subject(self.agent, self.device), "reply", payload, binding_id)

    async def recall(self, binding_id: str, **payload: Any) -> None:
        """Publish a memory reflex recall report."""
        await self._publish(
            recall_subject(self.agent, self.device), "recall", dict(payload), binding_id
        )

    async def memorize(self, binding_id: str, **payload: Any) -> None:
        """Publish a memory reflex memorize report."""
        await self._publish(
            memorize_subject(self.agent, self.device), "memorize", dict(payload), binding_id
        )

    async def bridge_status(self, **payload: Any) -> None:
        """Publish a bridge.status event as the edge bridge node does on its own NATS."""
        payload.setdefault("bridge", self.device)
        await self._publish(
            bridge_status_subject(payload["bridge"]), "bridge.status", payload, None
        )


@pytest.fixture
async def nats_server() -> AsyncIterator[LocalNatsServer]:
    """A real nats-server on a free loopback port, stopped after the test."""
    async with LocalNatsServer() as server:
        yield server


@pytest.fixture
async def agent(nats_server: LocalNatsServer) -> AsyncIterator[PlayedAgent]:
    """The test's own NATS client playing the agent side."""
    nc = await nats.connect(nats_server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.25)
    played = PlayedAgent(nc)
    await played.start()
    try:
        yield played
    finally:
        await nc.close()


class Tmux:
    """One private tmux server (its own socket), killed when the test ends."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket

    async def run(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            "tmux",
            "-S",
            str(self.socket),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), WAIT_S)
        if proc.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)} failed: {err.decode().strip()}")
        return out.decode()

    async def screen(self) -> str:
        return await self.run("capture-pane", "-p", "-t", "tui")

    async def wait_for_text(self, text: str) -> str:
        deadline = time.monotonic() + WAIT_S * 2
        screen = ""
        while time.monotonic() < deadline:
            screen = await self.screen()
            if text in screen:
                return screen
            await asyncio.sleep(0.1)
        pytest.fail(f"{text!r} never appeared on the screen; last screen:\n{screen}")


@pytest.fixture
async def tmux(tmp_path: Path) -> AsyncIterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (make test installs it: DEB_PACKAGES in the Makefile)")
    server = Tmux(tmp_path / "tmux.sock")
    try:
        yield server
    finally:
        proc = await asyncio.create_subprocess_exec(
            "tmux",
            "-S",
            str(server.socket),
            "kill-server",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await proc.wait()

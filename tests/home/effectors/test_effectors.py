"""Effectors on a real nats-server: every verb event acked, failures as ``ok: false``.

The success paths write into a real JMFTS; the failure paths cover JMFTS unreachable,
no token for the agent, and events that cannot be acked.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import nats
import pytest

from home.effectors import jmfts_write
from home.effectors.effector import Effector
from home.effectors.journal_append import SPEC as JOURNAL_APPEND
from home.jmfts.client import JmftsClient
from home.jmfts.testing import RunningJmfts
from shared.event import Event, new_binding_id
from shared.subjects import journal_append_ack_subject, verb_subject
from tests.support.home_fixtures import REPO_ROOT


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A loopback URL whose port is held, bound but not listening: every connect is refused."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"


@pytest.fixture
def token_dir(tmp_path: Path) -> Path:
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    (tokens / "edge_asr.token").write_text("tok-edge-asr\n")
    return tokens


@pytest.fixture
async def bus(nats_url: str) -> AsyncIterator[Any]:
    nc = await nats.connect(nats_url)
    try:
        yield nc
    finally:
        await nc.drain()


def verb_event(text: str | None, binding_id: str | None, agent: str = "edge_asr") -> Event:
    payload: dict[str, Any] = {"agent": agent}
    if text is not None:
        payload["text"] = text
    return Event.new(
        "journal_append", payload, source=f"agent.{agent}", sequence_number=1, binding_id=binding_id
    )


async def publish_and_ack(
    nc: Any, agent: str, event: Event, timeout_s: float = 15.0
) -> dict[str, Any]:
    assert event.binding_id is not None
    sub = await nc.subscribe(journal_append_ack_subject(event.binding_id))
    await nc.publish(verb_subject(agent, "journal_append"), event.to_json())
    msg = await sub.next_msg(timeout=timeout_s)
    await sub.unsubscribe()
    ack = Event.from_json(msg.data)
    assert ack.binding_id == event.binding_id
    assert ack.source == "effector.journal_append"
    return ack.payload


async def test_unreachable_jmfts_is_acked_as_a_failure(
    nats_url: str, bus: Any, token_dir: Path, refused_url: str
) -> None:
    url = refused_url
    async with Effector(
        JOURNAL_APPEND, nats_url=nats_url, jmfts_url=url, token_dir=token_dir
    ) as effector:
        ack = await publish_and_ack(bus, "edge_asr", verb_event("a note", new_binding_id()))
    assert ack["ok"] is False
    assert "unreachable" in ack["error"] and url in ack["error"]
    assert ack["agent"] == "edge_asr"
    assert "tok-edge-asr" not in str(ack)
    assert (effector.stats.received, effector.stats.failed) == (1, 1)


async def test_an_agent_without_a_token_is_acked_as_a_failure(
    nats_url: str, bus: Any, token_dir: Path, refused_url: str
) -> None:
    async with Effector(
        JOURNAL_APPEND, nats_url=nats_url, jmfts_url=refused_url, token_dir=token_dir
    ):
        ack = await publish_and_ack(bus, "stranger", verb_event("hi", new_binding_id(), "stranger"))
    assert ack["ok"] is False
    assert "no JMFTS token for agent 'stranger'" in ack["error"]


async def test_events_that_cannot_be_acked_are_counted_and_duplicates_acked_once(
    nats_url: str, bus: Any, token_dir: Path, refused_url: str
) -> None:
    async with Effector(
        JOURNAL_APPEND, nats_url=nats_url, jmfts_url=refused_url, token_dir=token_dir
    ) as effector:
        subject = verb_subject("edge_asr", "journal_append")
        await bus.publish(subject, b"not an event")
        await bus.publish(subject, verb_event("no binding", None).to_json())
        event = verb_event("twice", new_binding_id())
        assert event.binding_id is not None
        acks = await bus.subscribe(journal_append_ack_subject(event.binding_id))
        await bus.publish(subject, event.to_json())
        await bus.publish(subject, event.to_json())
        await acks.next_msg(timeout=15)
        async with asyncio.timeout(15):
            while effector.stats.received < 4:
                await asyncio.sleep(0.02)
        with pytest.raises(nats.errors.TimeoutError):
            await acks.next_msg(timeout=0.3)
    assert effector.stats.unackable == 2
    assert effector.stats.duplicates == 1
    assert effector.stats.failed == 1


async def test_the_effector_runs_as_a_process(
    nats_url: str, bus: Any, token_dir: Path, refused_url: str
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "home.effectors.journal_append",
        "--nats",
        nats_url,
        "--jmfts-url",
        refused_url,
        "--token-dir",
        str(token_dir),
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        # Publish until the process has subscribed: each try carries a fresh binding.
        ack: dict[str, Any] | None = None
        async with asyncio.timeout(30):
            while ack is None:
                try:
                    ack = await publish_and_ack(
                        bus, "edge_asr", verb_event("hi", new_binding_id()), timeout_s=0.5
                    )
                except nats.errors.TimeoutError:
                    continue
    finally:
        proc.terminate()
        async with asyncio.timeout(10):
            await proc.wait()
    assert ack["ok"] is False and "unreachable" in ack["error"]
    assert proc.returncode == 0


def test_effector_cli_usage_errors_exit_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "home.effectors.jmfts_write", "--nats", "nats://x"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 2
    assert "--jmfts-url" in done.stderr


# --- with a real JMFTS ------------------------------------------------------------


async def test_journal_append_lands_under_the_agents_own_principal(
    nats_url: str,
    bus: Any,
    tmp_path: Path,
    jmfts: RunningJmfts,
) -> None:
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    token = await jmfts.principal("edge_asr", ["journal/edge_asr", "workspace/edge_asr"])
    (tokens / "edge_asr.token").write_text(token)
    other = await jmfts.principal("someone_else", ["journal/someone_else"])
    async with Effector(JOURNAL_APPEND, nats_url=nats_url, jmfts_url=jmfts.url, token_dir=tokens):
        ack = await publish_and_ack(bus, "edge_asr", verb_event("kettle on", new_binding_id()))
    assert ack["ok"] is True, ack
    async with JmftsClient(jmfts.url, token=token) as as_agent:
        doc = await as_agent.get(ack["doc_id"])
        parent = await as_agent.get(doc.parent_id or -1)
    assert doc.content == "kettle on"
    assert parent.title == "edge_asr"
    assert parent.id == await jmfts.ensure_path("journal/edge_asr")
    async with JmftsClient(jmfts.url, token=other) as as_other:
        with pytest.raises(Exception, match="404"):
            await as_other.get(ack["doc_id"])


async def test_a_written_note_and_its_ack_carry_the_turn_and_the_schema(
    nats_url: str,
    bus: Any,
    tmp_path: Path,
    jmfts: RunningJmfts,
) -> None:
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    token = await jmfts.principal("edge_asr", ["journal/edge_asr", "workspace/edge_asr"])
    (tokens / "edge_asr.token").write_text(token)
    event = replace(verb_event("kettle on", new_binding_id()), produced_by_schema="edge_asr")
    sub = await bus.subscribe(journal_append_ack_subject(str(event.binding_id)))
    async with Effector(JOURNAL_APPEND, nats_url=nats_url, jmfts_url=jmfts.url, token_dir=tokens):
        await bus.publish(verb_subject("edge_asr", "journal_append"), event.to_json())
        ack = Event.from_json((await sub.next_msg(timeout=15)).data)
    assert ack.payload["ok"] is True and ack.produced_by_schema == "edge_asr"
    doc = await jmfts._call("GET", f"/documents/{ack.payload['doc_id']}")  # as the admin
    thread = doc["structured_content"]["provenance"]
    assert thread == {
        "agent": "edge_asr",
        "written_by": "effector.journal_append",
        "binding_id": event.binding_id,
        "produced_by_schema": "edge_asr",
        "evaluation_id": None,
    }


async def test_jmfts_write_lands_in_the_agents_workspace(
    nats_url: str,
    bus: Any,
    tmp_path: Path,
    jmfts: RunningJmfts,
) -> None:
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    token = await jmfts.principal("edge_asr", ["journal/edge_asr", "workspace/edge_asr"])
    (tokens / "edge_asr.token").write_text(token)
    binding_id = new_binding_id()
    async with Effector(jmfts_write.SPEC, nats_url=nats_url, jmfts_url=jmfts.url, token_dir=tokens):
        sub = await bus.subscribe(jmfts_write.SPEC.ack_subject(binding_id))
        event = Event.new(
            "jmfts_write",
            {"agent": "edge_asr", "text": "kettle: on", "title": "kettle"},
            source="agent.edge_asr",
            sequence_number=1,
            binding_id=binding_id,
        )
        await bus.publish(verb_subject("edge_asr", "jmfts_write"), event.to_json())
        ack = Event.from_json((await sub.next_msg(timeout=15)).data).payload
    assert ack["ok"] is True, ack
    async with JmftsClient(jmfts.url, token=token) as as_agent:
        doc = await as_agent.get(ack["doc_id"])
    assert (doc.title, doc.content) == ("kettle", "kettle: on")
    # Where, not only what: before, the record went to journal/edge_asr, the first root
    # titled edge_asr the agent saw, and was neither findable there nor append-only.
    assert doc.parent_id == await jmfts.ensure_path("workspace/edge_asr")

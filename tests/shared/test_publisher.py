"""A sender's publisher stamps and sends each message's own event; a receiver gets it typed."""

from __future__ import annotations

import asyncio

import nats
import pytest

from shared.errors import EnvelopeError, NotTextOnly, SubjectError
from shared.event import EnvelopeLimits, Event, new_binding_id
from shared.messages.voice import Reply
from shared.publisher import Publisher, receive
from shared.subjects import reply_subject

BID = new_binding_id()


def test_the_stamp_counts_from_one_for_its_source() -> None:
    publisher = Publisher("agent.a1")
    first = publisher.stamp(binding_id=BID, hops=("agent.a1",), produced_by_schema="s")
    second = publisher.stamp()
    assert (first["source"], first["sequence_number"], first["binding_id"]) == ("agent.a1", 1, BID)
    assert (first["hops"], first["produced_by_schema"]) == (("agent.a1",), "s")
    assert second["sequence_number"] == 2 and second["binding_id"] is None


def test_a_receiver_gets_the_message_what_the_subject_names_and_the_ids() -> None:
    event = Reply("hi").to_event(source="s", sequence_number=1, binding_id=BID)
    received = receive(Reply.from_event, reply_subject("a1", "board"), event)
    assert received.message == Reply("hi")
    assert (received.subject.kind, received.subject.agent, received.subject.device) == (
        "reply",
        "a1",
        "board",
    )
    assert (received.binding_id, received.event_id) == (BID, event.event_id)
    with pytest.raises(EnvelopeError, match=r"payload\.spoken"):
        receive(Reply.from_event, reply_subject("a1", "board"), _bad_reply())
    with pytest.raises(SubjectError):
        receive(Reply.from_event, "events.nowhere", event)


def _bad_reply() -> Event:
    return Event.new("reply", {"text": "x", "spoken": "no"}, source="s", sequence_number=0)


async def test_a_detached_publisher_sends_nothing_and_an_attached_one_sends_within_limits(
    nats_url: str,
) -> None:
    publisher = Publisher("agent.a1", limits=EnvelopeLimits(max_string_bytes=64))
    subject = reply_subject("a1", "board")
    assert not publisher.attached
    assert await publisher.publish(subject, Reply("unsent")) is None
    nc = await nats.connect(nats_url)
    try:
        sub = await nc.subscribe(subject)
        await nc.flush()
        publisher.attach(nc)
        sent = await publisher.publish(subject, Reply("sent"), binding_id=BID)
        assert sent is not None
        msg = await asyncio.wait_for(sub.next_msg(), timeout=5)
        got = receive(Reply.from_event, msg.subject, Event.from_json(msg.data))
        assert got.message == Reply("sent") and got.event_id == sent.event_id
        assert sent.sequence_number == 1  # the detached publish took no number
        with pytest.raises(NotTextOnly):
            await publisher.publish(subject, Reply("x" * 100))
        assert publisher.detach() is nc and not publisher.attached
    finally:
        await nc.close()

"""The bridge frame protocol: typed frames, hello, delivery state, half policy. Pure, no I/O.

See ``bridge/PROTOCOL.md`` for the wire format.
"""

from bridge.protocol.clock import ClockReading, PeerClock, measure
from bridge.protocol.delivery import Deduper, Outbox, OutboxEntry, ReceiveState, new_stream_id
from bridge.protocol.frames import (
    Ack,
    EventRecord,
    Events,
    Frame,
    FrameDecoder,
    FrameEncoder,
    FrameType,
    HelloFrame,
    Ping,
    Pong,
    Refuse,
)
from bridge.protocol.hello import (
    PROTOCOL_VERSION,
    Hello,
    Resume,
    bounded_findings,
    check_hello,
)
from bridge.protocol.policy import Crossing, HalfPolicy, hop_name

__all__ = [
    "PROTOCOL_VERSION",
    "Ack",
    "ClockReading",
    "Crossing",
    "Deduper",
    "EventRecord",
    "Events",
    "Frame",
    "FrameDecoder",
    "FrameEncoder",
    "FrameType",
    "HalfPolicy",
    "Hello",
    "HelloFrame",
    "Outbox",
    "OutboxEntry",
    "PeerClock",
    "Ping",
    "Pong",
    "ReceiveState",
    "Refuse",
    "Resume",
    "bounded_findings",
    "check_hello",
    "hop_name",
    "measure",
    "new_stream_id",
]

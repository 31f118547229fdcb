"""Hand an event that must cross to home to the edge bridge half, and know it was taken.

Core NATS acknowledges no publisher: an event published while the half restarts, or
still in its socket when it is killed, is gone and nobody knows. So every event the
edge sends home (a turn, a speech ack) is asked of the half instead
(:func:`bridge.node.intake.publish_taken`), which answers once the event is in its
outbox; it is asked again while nobody answers, for as long as the event lives (its
TTL). What the half refuses, drops as expired, or never takes in that time is a
:class:`~edge.errors.NotTaken` the producer shows or speaks (docs/architecture.md,
"Bridge: the durable outbox").

Both the board's runtime (:class:`edge.bus.Bus`) and ``edge tui`` / ``edge say``
(:class:`edge.tui.session.EdgeSession`) hand over through :func:`hand_to_bridge`.
"""

from __future__ import annotations

from nats.aio.client import Client
from nats.errors import Error as NatsError

from bridge.node.intake import IntakeRefused, publish_taken
from edge.errors import NotTaken
from shared.event import EnvelopeLimits, Event

#: No half took the event within its TTL.
UNANSWERED = "unanswered"
#: The local NATS client would not carry the request (closed, say).
UNSENT = "unsent"


def deadline_s(event: Event) -> float:
    """How long to keep asking: the event's TTL; after it the half would drop it anyway."""
    return event.ttl_ms / 1000


async def hand_to_bridge(
    nc: Client, subject: str, event: Event, *, limits: EnvelopeLimits | None = None
) -> None:
    """Ask the edge bridge half on ``nc`` to take ``event`` for home.

    Returns once the half answered that the event is in its outbox; raises
    :class:`NotTaken` (with the verdict and why) when it refused or dropped it, or
    when no half took it within the event's TTL.
    """
    data = event.to_json(limits or EnvelopeLimits())
    try:
        await publish_taken(nc, subject, data, timeout_s=deadline_s(event))
    except IntakeRefused as exc:
        raise NotTaken(subject, event.event_id, event.binding_id, exc.verdict, str(exc)) from exc
    except TimeoutError as exc:
        raise NotTaken(subject, event.event_id, event.binding_id, UNANSWERED, str(exc)) from exc
    except NatsError as exc:
        reason = f"the local NATS would not carry it: {exc}"
        raise NotTaken(subject, event.event_id, event.binding_id, UNSENT, reason) from exc

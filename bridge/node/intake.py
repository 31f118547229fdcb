"""A bridge half's answer to a producer: the event is in its outbox, or why it is not.

Core NATS acknowledges no publisher. An event published while a half is down, or
still in its socket when it is killed, is gone, and its producer cannot tell. A
producer that must know publishes with a reply subject (a NATS request): the half
answers once the event is in its outbox (committed to the outbox file, when the
half has one), or says why it refused or dropped it, in the ``Tether-Intake``
header (docs/architecture.md, "Bridge: the durable outbox").

:func:`publish_taken` is that producer's side: it asks again while nobody answers
(the half restarting) until its deadline. An event asked twice is in the outbox
twice at most, and the receiving half's dedupe window delivers it once.
"""

from __future__ import annotations

from collections.abc import Sequence

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError

from bridge.errors import BridgeError
from bridge.node.session import Action, DropExpired, RefuseEvent
from shared.lifecycle import Pacing, retry_until_deadline

INTAKE_HEADER = "Tether-Intake"
TAKEN = "taken"
REFUSED = "refused"
EXPIRED = "expired"
#: One attempt's wait for the answer; a half takes an event in well under a millisecond.
ATTEMPT_TIMEOUT_S = 1.0
RETRY_FIRST_S = 0.05
RETRY_MAX_S = 0.5


class IntakeRefused(BridgeError):
    """The bridge half refused the event or dropped it as expired: asking again is futile."""

    def __init__(self, verdict: str, message: str) -> None:
        super().__init__(f"the bridge {verdict} the event: {message}")
        self.verdict = verdict


def verdict(actions: Sequence[Action]) -> tuple[str, str]:
    """``(verdict, message)`` for what the session answered to one local event."""
    for action in actions:
        match action:
            case RefuseEvent(_, where, message):  # the message starts with its reason
                return REFUSED, f"{message} ({where})"
            case DropExpired(event_id, where):
                return EXPIRED, f"{event_id} {where} is past its expiry"
    return TAKEN, ""


async def publish_taken(
    nc: NATS,
    subject: str,
    data: bytes,
    *,
    timeout_s: float,
    attempt_timeout_s: float = ATTEMPT_TIMEOUT_S,
) -> None:
    """Publish ``data`` on ``subject`` until a bridge half answers that it took it.

    Raises :class:`IntakeRefused` on a refusal and :class:`TimeoutError` when no half
    took it within ``timeout_s``.
    """

    async def ask(left_s: float) -> Msg:
        return await nc.request(subject, data, timeout=min(attempt_timeout_s, left_s))

    def give_up(exc: Exception) -> TimeoutError:
        return TimeoutError(f"no bridge half took the event on {subject} in {timeout_s:g} s")

    answer = await retry_until_deadline(
        ask,
        within_s=timeout_s,
        retry_on=(NoRespondersError, NatsTimeoutError),
        give_up=give_up,
        pacing=Pacing(RETRY_FIRST_S, factor=2, max_s=RETRY_MAX_S),
    )
    said = (answer.headers or {}).get(INTAKE_HEADER)
    if said == TAKEN:
        return
    raise IntakeRefused(said or "did not answer", answer.data.decode(errors="replace"))

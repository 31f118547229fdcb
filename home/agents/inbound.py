"""An inbound event on ``events.workspace.<agent>.in``, as the prompt it becomes (pure).

The router delivers the sensation event with its ``binding_id`` (minted once,
preserved on every hop). The device the answer goes back to is the sensation's:
read from ``payload.device``, else from the subject the router recorded, else
from the publishing edge node's name (``edge.audio.<device>``).

Two inbound events are not the user's words (docs/architecture.md "Delegation"):
a task another agent delegated (event type ``delegate``: prompted with the question,
its asker remembered) and a delegation's answer coming back (``delegate.answer``:
prompted with :func:`home.agents.delegation.answer_prompt`).
"""

from __future__ import annotations

from dataclasses import dataclass

from home.agents.delegation import Delegated, answer_prompt
from home.agents.errors import InboundError
from shared.errors import ContractError
from shared.event import EnvelopeLimits, Event, new_binding_id
from shared.messages.verbs import DelegateAnswer, VerbRequest
from shared.messages.voice import Utterance
from shared.subjects import NAME_TOKEN, check_name, device_of

# Keys under which a router may record the subject an event arrived on.
_SUBJECT_KEYS = ("subject", "from_subject", "original_subject")


@dataclass(frozen=True)
class Inbound:
    """One utterance to prompt with, and where its answer goes."""

    event: Event
    text: str
    binding_id: str
    device: str | None
    # A task another agent handed this one (its ack and answer go back to the asker).
    delegated: Delegated | None = None
    # A delegation's answer (or its absence) coming back to the agent that asked.
    answer: DelegateAnswer | None = None

    @property
    def from_user(self) -> bool:
        """Whether the text is what a user said (not a task or an answer between agents)."""
        return self.delegated is None and self.answer is None


def parse_inbound(raw: bytes, limits: EnvelopeLimits | None = None) -> Inbound:
    """Parse and check one inbound event; raise InboundError saying what is wrong."""
    try:
        event = Event.from_json(raw, limits or EnvelopeLimits())
    except ContractError as exc:
        raise InboundError(f"inbound event refused: {exc}") from exc
    binding_id = event.binding_id or new_binding_id()
    try:
        if DelegateAnswer.is_type(event.event_type):
            answer = DelegateAnswer.from_event(event)
            return Inbound(event, answer_prompt(answer), binding_id, answer.device, answer=answer)
        utterance = Utterance.from_event(event)
        delegated = None
        if VerbRequest.is_type(event.event_type):
            request = VerbRequest.from_event(event)
            asker = request.agent or event.source.removeprefix("agent.")
            delegated = Delegated(check_name(asker, "asker"), request.text.strip())
    except ContractError as exc:
        raise InboundError(f"inbound event {event.event_id}: {exc}") from exc
    device = device_for(event, utterance)
    return Inbound(event, utterance.text, binding_id, device, delegated=delegated)


def device_for(event: Event, utterance: Utterance) -> str | None:
    """The device a sensation came from, or None when nothing names one."""
    if utterance.device is not None:
        return utterance.device
    for holder in (event.extra, event.audit):
        for key in _SUBJECT_KEYS:
            subject = holder.get(key)
            if isinstance(subject, str):
                try:
                    found = device_of(subject)
                except ContractError:
                    continue
                if found is not None:
                    return found
    for name in (event.origin_node, event.source):
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == "edge" and NAME_TOKEN.fullmatch(parts[2]):
            return parts[2]
    return None

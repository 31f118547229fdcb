"""The agent node's parts driven alone, with the few things each is handed faked:
the output watch (re-prompt, unheard speech, wire fan-out), the delegation desk
(timing an answer, answering an operator's task) and answers (which rail).

No τ and no NATS: the publisher is attached to a recorder of what it publishes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from home.agents.admission import Admission, Admit, Arrival, PendingTurn
from home.agents.answers import AgentPublisher, Answers
from home.agents.delegation import Delegated
from home.agents.delegation_desk import DelegationDesk
from home.agents.node_stats import NodeStats
from home.agents.output_watch import OutputWatch, WatchParts
from home.agents.protocol import WireEvent
from shared.event import EnvelopeLimits, Event, utc_now
from shared.messages.verbs import DelegateAnswer, VerbAck
from shared.messages.voice import Reply

LIMITS = EnvelopeLimits()
OUT = "events.workspace.edge_asr.out"


@dataclass
class Msg:
    """What a NATS callback reads of a core message."""

    subject: str
    data: bytes


@dataclass
class Recorder:
    """Stands in for the NATS client: keeps what is published, as events."""

    sent: list[tuple[str, Event]] = field(default_factory=list)

    async def publish(self, subject: str, payload: bytes) -> None:
        self.sent.append((subject, Event.from_json(payload, LIMITS)))


@dataclass
class Turns:
    """Stands in for the worker: records what the watch tells it."""

    rulings: list[Admit] = field(default_factory=list)
    gave_way: int = 0

    def admitted(self, ruling: Admit) -> None:
        self.rulings.append(ruling)

    def give_way(self) -> None:
        self.gave_way += 1


@dataclass
class Desk:
    delegated: list[Event] = field(default_factory=list)

    def delegated_out(self, event: Event) -> None:
        self.delegated.append(event)


@dataclass
class Reader:
    read: list[WireEvent] = field(default_factory=list)

    def on_wire_event(self, event: WireEvent) -> None:
        self.read.append(event)


def publisher() -> tuple[AgentPublisher, Recorder]:
    out, recorder = AgentPublisher("agent.edge_asr", LIMITS), Recorder()
    out.attach(recorder)  # type: ignore[arg-type]
    return out, recorder


def arrive(admission: Admission, binding_id: str, device: str) -> Admit:
    ruling = admission.arrive(
        Arrival(text="hi", binding_id=binding_id, device=device, event_id=f"e-{binding_id}",
                schema="voice", subject="s", expires_at=utc_now() + timedelta(minutes=1),
                received_at=0.0),
        utc_now(),
    )  # fmt: skip
    assert isinstance(ruling, Admit)
    return ruling


def event(event_type: str, payload: dict[str, Any], binding_id: str | None = "b1") -> bytes:
    made = Event.new(event_type, payload, source="agent.edge_asr", sequence_number=1,
                     binding_id=binding_id)  # fmt: skip
    return made.to_json(LIMITS)


@dataclass
class Watched:
    """An output watch and the fakes it was handed."""

    admission: Admission = field(default_factory=Admission)
    turns: Turns = field(default_factory=Turns)
    desk: Desk = field(default_factory=Desk)
    reader: Reader = field(default_factory=Reader)
    stats: NodeStats = field(default_factory=NodeStats)

    def __post_init__(self) -> None:
        parts = WatchParts(self.admission, self.turns, self.desk, (self.reader,), self.stats)
        self.out = OutputWatch("agent.edge_asr", parts, limits=LIMITS, speech_ack_timeout_s=0.01)


async def test_a_refusal_to_speak_queues_one_reprompt_and_wakes_the_worker() -> None:
    w = Watched()
    out, admission, turns, stats = w.out, w.admission, w.turns, w.stats
    arrive(admission, "b1", "kitchen")
    admission.begin()
    refusal = event("reply", {"text": "", "spoken": False, "kind": "refusal", "reason": "a list"})
    for _ in range(2):
        await out.on_out(Msg(f"{OUT}.reply.kitchen", refusal))  # type: ignore[arg-type]
    assert stats.reprompts == 1 and len(turns.rulings) == 1
    assert turns.rulings[0].turn.reprompt and len(admission) == 1


async def test_unheard_speech_serves_the_device_last_and_the_turn_gives_way() -> None:
    w = Watched()
    out, admission, turns, stats = w.out, w.admission, w.turns, w.stats
    arrive(admission, "b1", "kitchen")
    admission.begin()
    arrive(admission, "b2", "hall")  # another device waits
    await out.on_out(Msg(f"{OUT}.speak.kitchen", event("speak", {"text": "hi"})))  # type: ignore[arg-type]
    async with asyncio.timeout(5):
        while stats.unacked_speech == 0:
            await asyncio.sleep(0.01)
    assert turns.gave_way == 1


async def test_acked_speech_is_never_unheard() -> None:
    w = Watched()
    out, admission, turns, stats = w.out, w.admission, w.turns, w.stats
    arrive(admission, "b1", "kitchen")
    await out.on_out(Msg(f"{OUT}.speak.kitchen", event("speak", {"text": "hi"})))  # type: ignore[arg-type]
    await out.on_speech_completed(Msg("events.action.speech.completed.b1", b""))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    assert stats.unacked_speech == 0 and turns.gave_way == 0


async def test_a_delegated_task_goes_to_the_desk_and_wire_events_to_listeners_first() -> None:
    w = Watched()
    out, desk, reader, stats = w.out, w.desk, w.reader, w.stats
    await out.on_out(Msg(f"{OUT}.delegate", event("delegate", {"text": "ask"})))  # type: ignore[arg-type]
    assert len(desk.delegated) == 1
    order: list[str] = []
    out.watch_wire(lambda _: order.append("listener"))
    wire = WireEvent(type="agent_end", submission_id="s1")
    out.on_wire_event(wire)
    assert order == ["listener"] and reader.read == [wire]
    assert stats.internal_errors == 0


async def test_a_taken_task_unanswered_in_time_is_answered_into_the_askers_inbox() -> None:
    out, recorder = publisher()
    stats = NodeStats()
    desk = DelegationDesk("edge_asr", out, stats, timeout_s=0.01, cannot_take=None)
    desk.delegated_out(
        Event.from_json(event("delegate", {"text": "ask", "device": "kitchen"}), LIMITS)
    )
    ack = VerbAck(agent="edge_asr", verb="delegate", ok=True)
    raw = Event.new(ack.event_type, ack.to_payload(), source="ops", sequence_number=1).to_json(
        LIMITS
    )
    await desk.on_ack(Msg("events.journal.delegate.b1", raw))  # type: ignore[arg-type]
    async with asyncio.timeout(5):
        while not recorder.sent:
            await asyncio.sleep(0.01)
    await desk.close()
    ((subject, sent),) = recorder.sent
    assert subject == "events.workspace.edge_asr.in" and sent.binding_id == "b1"
    answer = DelegateAnswer.from_event(sent)
    assert not answer.ok and answer.question == "ask"
    assert stats.delegations_timed_out == 1 and stats.internal_errors == 0


async def test_answers_go_to_the_device_or_back_to_the_asker() -> None:
    out, recorder = publisher()
    desk = DelegationDesk("ops", out, NodeStats(), timeout_s=1.0, cannot_take=None)
    answers = Answers("ops", out, desk)
    admission = Admission()
    turn: PendingTurn = arrive(admission, "b1", "kitchen").turn

    class Tau:
        async def request(self, method: str, params: dict[str, Any] | None = None, *,
                          timeout_s: float = 30.0) -> dict[str, Any]:  # fmt: skip
            return {"text": " green "}

    await answers.answer(Tau(), turn)
    await answers.report(turn, "aborted", "too slow")
    turn.delegated = Delegated(asker="edge_asr", question="what colour")
    await answers.answer(Tau(), turn)
    subjects = [subject for subject, _ in recorder.sent]
    assert subjects == [
        "events.workspace.ops.out.reply.kitchen",
        "events.workspace.ops.out.reply.kitchen",
        "events.workspace.ops.out.answer.edge_asr",
    ]
    assert Reply.from_event(recorder.sent[0][1]).text == "green"
    assert Reply.from_event(recorder.sent[1][1]).kind == "aborted"
    assert DelegateAnswer.from_event(recorder.sent[2][1]).text == "green"
    assert [e.sequence_number for _, e in recorder.sent] == [1, 2, 3]

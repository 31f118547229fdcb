"""The verb desk: a turn the intent step reads as a verb is carried out here, before τ.

A 135M model answers in prose and never names a tool, so what a turn asks of home is
decided by :mod:`home.intent.step` and done by the node itself, with a fixed spoken
confirmation (docs/architecture.md "The intent step"):

- ``note``: the note goes to ``effector.journal_append`` as the ``journal_append`` verb
  would put it, and waits for its ack;
- ``forget``: "forget that" retracts what the device's last turn kept (or, when it
  kept nothing, the memory its recall put first); "forget what I said about X" finds
  the memory and asks first, and a "yes" as the next turn retracts it;
- ``remind``: a reminder or timer scheduled in the agent's :class:`ReminderBook`; one
  that names no time is asked about, never dropped;
- ``cancel_reminder`` and ``list_reminders``: on the same book;
- ``ask_operator``: the question goes to the operator as the ``delegate`` verb would
  send it, and the operator's answer, when it comes back as a turn of its own, is
  said as it came ("The operator says: …").

Everything else (conversation, "remember", "correct") goes to τ, whose memory reflex
keeps and corrects what was said. A turn the desk takes never
reaches τ: it is answered by one speak on the device's rail under the turn's binding
id, and acked when that is published. The desk's decisions (what a turn asks, what
to say) are the pure functions below; :class:`VerbDesk` does the I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError

from home.agents.admission import PendingTurn
from home.agents.answers import AgentPublisher
from home.intent.calls import CallWriter, VerbCall
from home.intent.errors import IntentError
from home.intent.frames import framed_call, naming_words, unframed_call
from home.intent.step import IntentStep, Verb, load_intent_step, spoken_form
from home.jmfts.errors import JmftsError
from home.llm.endpoint import ModelEndpoint
from home.memory.memories import MemoryStore
from home.memory.provenance import Provenance
from home.reminders.book import Reminder, ReminderBook
from home.reminders.errors import NoTimeSaid, ReminderError
from home.reminders.when import task_words, when_said
from home.tau_extensions.speakable import speakable_text
from shared.errors import EnvelopeError
from shared.event import Event
from shared.messages.memory import MemorizeReport
from shared.messages.verbs import DelegateAnswer, VerbAck, VerbRequest
from shared.messages.voice import Speak
from shared.schema import NodeSpec
from shared.subjects import (
    agent_out_prefix,
    delegate_ack_subject,
    journal_append_ack_subject,
    speak_subject,
    verb_subject,
)

log = logging.getLogger(__name__)

# Below this probability the turn is left to τ: a verb carried out by mistake costs
# more than a request answered in prose.
MIN_SCORE = 0.6
# The verbs the desk carries out; the rest go to τ.
CARRIED = frozenset({Verb.NOTE, Verb.FORGET, Verb.REMIND, Verb.CANCEL_REMINDER,
                     Verb.LIST_REMINDERS, Verb.ASK_OPERATOR})  # fmt: skip
# How long "forget that" waits for the memory reflex's report on the turn before it.
MEMORIZE_WAIT_S = 20.0
ACK_TIMEOUT_S = 10.0
# A memory to forget found by search: at least this close to what was named. A short
# topic sits low against the sentence it is in ("my car" against "my car is a blue
# volvo": 0.42 with MiniLM), and nothing is retracted before a spoken "yes".
FORGET_MATCH = 0.35
# How long a "forget this?" question waits for its "yes".
CONFIRM_WINDOW = timedelta(minutes=2)
LISTED = 3

_YES = re.compile(
    r"^(?:yes|yeah|yep|yup|sure|ok|okay|please|do\s+it|go\s+ahead|correct|right)"
    r"(?:\s+(?:please|do\s+it|forget\s+it|go\s+ahead|thanks|thank\s+you))*$"
)
_ALL = re.compile(r"\b(?:all|every|everything)\b")
_TIMER = re.compile(r"\btimers?\b")


#: What is said when the model wrote no valid call for a verb: the verb is asked about
#: again with an example, never dropped in silence.
CLARIFY: dict[Verb, str] = {
    Verb.NOTE: "What should I note? Say it like: note that the boiler was serviced.",
    Verb.ASK_OPERATOR: "What should I ask the operator? Say it like: ask the operator "
    "what I said about the car.",
    Verb.REMIND: "When should I remind you? Say it with the time, like: remind me in ten "
    "minutes to check the oven.",
    Verb.FORGET: "What should I forget? Say forget that, or forget what I said about the car.",
    Verb.CANCEL_REMINDER: "Which reminder should I cancel?",
}


def operator_words(answer: DelegateAnswer) -> str:
    """What is said when the operator's answer (or its absence) comes back."""
    if answer.ok and answer.text.strip():
        return f"The operator says: {answer.text.strip()}"
    return f"I could not find out: {answer.error or 'the operator had no answer'}."


def is_yes(text: str) -> bool:
    """A short agreeing answer."""
    return bool(_YES.match(spoken_form(text)))


def when_words(due: datetime, now: datetime) -> str:
    """``due`` as a person says it from ``now``: "in 10 minutes", "at 5:30 PM", "tomorrow
    at 7:00 AM", "on Monday 7 December at 9:00 AM"."""
    ahead = due - now
    if ahead < timedelta(minutes=1, seconds=30):
        seconds = max(1, round(ahead.total_seconds()))
        return "in 1 minute" if seconds >= 55 else f"in {seconds} seconds"
    if ahead < timedelta(hours=1):
        return f"in {round(ahead.total_seconds() / 60)} minutes"
    clock = due.strftime("%I:%M %p").lstrip("0")
    if due.date() == now.date():
        return f"at {clock}"
    if due.date() == now.date() + timedelta(days=1):
        return f"tomorrow at {clock}"
    return f"on {due.strftime('%A')} {due.day} {due.strftime('%B')} at {clock}"


def confirm_reminder(reminder: Reminder, now: datetime) -> str:
    """What is said when a reminder is set."""
    when = when_words(reminder.due.astimezone(now.tzinfo), now)
    if reminder.timer:
        return f"Timer set. It goes off {when}."
    return f"Okay, I will remind you {when} to {reminder.text}."


def choose_to_cancel(text: str, pending: list[Reminder]) -> list[Reminder]:
    """Which of ``pending`` a request to cancel means: all of them, the timers, the one
    whose words it shares most, or the only one."""
    spoken = spoken_form(text)
    timers = [r for r in pending if r.timer]
    chosen = pending if _ALL.search(spoken) else []
    if not chosen and _TIMER.search(spoken) and timers:
        chosen = timers[-1:] if len(timers) > 1 else timers
    if not chosen:
        said = set(naming_words(spoken))
        overlap = [(len(said & set(r.text.split())), r) for r in pending if r.text]
        best = max(overlap, key=lambda pair: pair[0], default=(0, None))
        if best[1] is not None and best[0] > 0:
            chosen = [best[1]]
    if not chosen and len(pending) == 1:
        chosen = pending
    return chosen


def list_words(pending: list[Reminder], now: datetime) -> str:
    """The pending reminders, soonest first, as one spoken answer."""
    if not pending:
        return "You have no reminders set."
    parts = [
        ("a timer" if r.timer else r.text) + " " + when_words(r.due.astimezone(now.tzinfo), now)
        for r in pending[:LISTED]
    ]
    head = "You have one reminder" if len(pending) == 1 else f"You have {len(pending)} reminders"
    more = f", and {len(pending) - LISTED} more" if len(pending) > LISTED else ""
    return f"{head}: {'; '.join(parts)}{more}."


@dataclass
class DeviceMemory:
    """What the desk knows of one device's last turns: the τ turn before, what its
    evaluation kept, and a forget waiting for its "yes"."""

    last_binding: str | None = None
    kept: dict[str, tuple[int, ...]] = field(default_factory=dict)
    reported: dict[str, asyncio.Event] = field(default_factory=dict)
    to_confirm: tuple[int, str, datetime] | None = None

    def trim(self, keep: int = 8) -> None:
        """Forget all but the last ``keep`` turns' reports."""
        for table in (self.kept, self.reported):
            for old in list(table)[:-keep]:
                del table[old]


@dataclass
class VerbStats:
    """What the desk did: turns taken per verb, and failures (each also logged)."""

    taken: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)


class VerbDesk:
    """Carries out the verbs of :data:`CARRIED` for one agent's node."""

    def __init__(
        self,
        agent: str,
        publisher: AgentPublisher,
        *,
        memory: MemoryStore | None,
        memory_root: str,
        delegates: bool = False,
        calls: CallWriter | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now().astimezone(),
    ) -> None:
        self.agent = agent
        # Who writes a verb's call: the embedded model under a grammar; without one
        # (a model that takes no grammar) the call is read by the verb's frame.
        self.calls = calls
        # Whether a schema may route this agent's tasks to the operator (its verbs
        # extension offers `delegate`); without, "ask the operator" goes to τ.
        self.delegates = delegates
        # Set by :meth:`load`; until then every turn goes to τ.
        self.step: IntentStep | None = None
        self.publisher = publisher
        self.memory = memory
        self.memory_root = memory_root
        self.clock = clock
        self.stats = VerbStats()
        self._nc: NatsClient | None = None
        self._devices: dict[str, DeviceMemory] = {}
        self._subs: list[Subscription] = []

    async def load(self) -> None:
        """Fit the intent step (some seconds: it embeds its labelled utterances)."""
        self.step = await asyncio.to_thread(load_intent_step)

    async def attach(self, nc: NatsClient) -> None:
        """Read the memory reflex's reports on the node's connection."""
        self._nc = nc
        reports = f"{agent_out_prefix(self.agent)}.memorize.*"
        self._subs.append(await nc.subscribe(reports, cb=self._on_memorize))

    async def close(self) -> None:
        """Stop reading reports; close the memory client."""
        for sub in self._subs:
            with contextlib.suppress(NatsError):
                await sub.unsubscribe()
        self._subs.clear()
        if self.memory is not None:
            await self.memory.close()
        if self.calls is not None:
            await self.calls.close()

    def book(self) -> ReminderBook:
        """The agent's reminders, on the node's connection."""
        if self._nc is None:
            raise ReminderError("the verb desk is not attached to the bus")
        return ReminderBook(self._nc, self.agent)

    def _device(self, device: str) -> DeviceMemory:
        return self._devices.setdefault(device, DeviceMemory())

    async def _on_memorize(self, msg: Msg) -> None:
        try:
            event = Event.from_json(msg.data)
            report = MemorizeReport.from_event(event)
        except EnvelopeError as exc:
            log.warning("%s: verb desk: unreadable memorize report on %s: %s", self.agent,
                        msg.subject, exc)  # fmt: skip
            return
        device = msg.subject.rsplit(".", 1)[-1]
        binding = event.binding_id or ""
        memory = self._device(device)
        kept = tuple(d.id for d in report.deposits)
        memory.kept[binding] = kept or memory.kept.get(binding, ())
        memory.reported.setdefault(binding, asyncio.Event()).set()
        memory.trim()

    def passed(self, turn: PendingTurn) -> None:
        """``turn`` goes to τ: the one "forget that" would mean next."""
        device = turn.binding.device
        if device is not None and not turn.binding.reprompt:
            memory = self._device(device)
            memory.last_binding = turn.binding.binding_id
            memory.reported.setdefault(turn.binding.binding_id, asyncio.Event())
            memory.to_confirm = None
            memory.trim()

    async def take(self, turn: PendingTurn) -> bool:
        """Carry ``turn`` out if it is a verb the desk does; False leaves it to τ."""
        device = turn.binding.device
        if turn.answer is not None and device is not None:
            # The operator's answer to a question asked here: said as it came.
            self.stats.taken["operator_answer"] += 1
            await self.say(turn, operator_words(turn.answer))
            return True
        step = self.step
        if step is None or device is None or turn.delegated is not None or turn.binding.reprompt:
            return False
        memory = self._device(device)
        if memory.to_confirm is not None and await self._confirm(turn, memory):
            return True
        (decision,) = await asyncio.to_thread(step.decide, [turn.text])
        if decision.verb not in CARRIED or decision.score < MIN_SCORE:
            return False
        if decision.verb is Verb.ASK_OPERATOR and not self.delegates:
            return False
        verb = decision.verb
        log.info("%s: turn %s is %s (%.2f): carried out without the model", self.agent,
                 turn.binding.binding_id, verb.value, decision.score)  # fmt: skip
        try:
            said = await self._carry_out(verb, turn, device, memory)
        except (ReminderError, JmftsError, NatsError, EnvelopeError, TimeoutError,
                IntentError) as exc:  # fmt: skip
            self.stats.failed[verb.value] += 1
            log.warning("%s: %s failed for turn %s: %s", self.agent, verb.value,
                        turn.binding.binding_id, exc)  # fmt: skip
            said = f"Sorry, I could not do that: {_short(exc)}."
        self.stats.taken[verb.value] += 1
        await self.say(turn, said)
        return True

    async def _carry_out(
        self, verb: Verb, turn: PendingTurn, device: str, memory: DeviceMemory
    ) -> str:
        if verb is Verb.LIST_REMINDERS:
            return list_words(await self._pending(device), self.clock())
        call = await self.call(verb, turn.text)
        if call is None or not call.complete:
            self.stats.failed[f"{verb.value}_call"] += 1
            log.info("%s: no valid %s call for turn %s: asked again", self.agent, verb.value,
                     turn.binding.binding_id)  # fmt: skip
            return CLARIFY[verb]
        actions: dict[Verb, Callable[[], Awaitable[str]]] = {
            Verb.NOTE: lambda: self._note(turn, call),
            Verb.FORGET: lambda: self._forget(turn, call, memory),
            Verb.REMIND: lambda: self._remind(turn, call, device),
            Verb.ASK_OPERATOR: lambda: self._ask_operator(turn, call),
            Verb.CANCEL_REMINDER: lambda: self._cancel(turn, call, device),
        }
        return await actions[verb]()

    async def call(self, verb: Verb, text: str) -> VerbCall | None:
        """``verb``'s arguments in ``text``: read by the verb's frame when it is one the desk
        knows, else written by the model under a grammar (with a desk that has one), else
        all of the turn; None when the model wrote no valid call."""
        if (framed := framed_call(verb, text)) is not None:
            return framed
        if self.calls is None:
            return unframed_call(verb, text)
        return await self.calls.write(verb, text)

    async def say(self, turn: PendingTurn, text: str) -> None:
        """Speak ``text`` on the turn's device, under its binding id."""
        device = turn.binding.device
        if device is None:
            return
        await self.publisher.publish(
            speak_subject(self.agent, device),
            Speak(speakable_text(text) or text, self.agent, device, False),
            binding_id=turn.binding.binding_id,
            produced_by_schema=turn.binding.schema,
        )

    async def _verb(self, turn: PendingTurn, verb: str, text: str, ack_subject: str) -> VerbAck:
        """Send ``verb`` as the verbs extension would, under the turn's binding id; its ack."""
        if self._nc is None:
            raise ReminderError("the verb desk is not attached to the bus")
        binding = turn.binding
        sub = await self._nc.subscribe(ack_subject)
        try:
            request = VerbRequest(text, agent=self.agent, device=binding.device)
            event = request.to_event(
                verb,
                **self.publisher.stamp(
                    binding_id=binding.binding_id, produced_by_schema=binding.schema
                ),
            )
            await self.publisher.send(verb_subject(self.agent, verb), event)
            msg = await sub.next_msg(timeout=ACK_TIMEOUT_S)
        finally:
            with contextlib.suppress(NatsError):
                await sub.unsubscribe()
        return VerbAck.from_event(Event.from_json(msg.data))

    async def _note(self, turn: PendingTurn, call: VerbCall) -> str:
        note = call["text"]
        ack_subject = journal_append_ack_subject(turn.binding.binding_id)
        ack = await self._verb(turn, "journal_append", note, ack_subject)
        if not ack.ok:
            raise ReminderError(f"the journal refused it: {ack.error}")
        return f"Noted: {note}."

    async def _ask_operator(self, turn: PendingTurn, call: VerbCall) -> str:
        question = call["text"]
        ack_subject = delegate_ack_subject(turn.binding.binding_id)
        ack = await self._verb(turn, "delegate", question, ack_subject)
        if not ack.ok:
            return f"The operator cannot answer now: {ack.error}."
        return "I have asked the operator. The answer will follow."

    async def _forget(self, turn: PendingTurn, call: VerbCall, memory: DeviceMemory) -> str:
        if self.memory is None:
            return "I keep no memories in this setup, so there is nothing to forget."
        target = call["about"]
        if not target:
            kept = await self._last_kept(memory)
            if not kept:
                return "I did not keep anything from what you just said."
            for doc_id in kept:
                await self._retract(doc_id, turn)
            return "Done, I have forgotten it." if len(kept) == 1 else (
                f"Done, I have forgotten those {len(kept)} things.")  # fmt: skip
        root = await self.memory.resolve(self.memory_root)
        hits = [
            h for h in await self.memory.vector_search(target, root, 3) if h.score >= FORGET_MATCH
        ]
        if not hits:
            return f"I do not remember anything about {target}."
        best = hits[0]
        memory.to_confirm = (best.id, best.content, self.clock() + CONFIRM_WINDOW)
        return f"Should I forget this: {best.content}? Say yes to forget it."

    async def _confirm(self, turn: PendingTurn, memory: DeviceMemory) -> bool:
        """A "yes" to "should I forget this?" retracts it; anything else drops the question
        and the turn is judged as any other."""
        doc_id, content, until = memory.to_confirm or (0, "", self.clock())
        memory.to_confirm = None
        if self.clock() > until or not is_yes(turn.text):
            return False
        try:
            await self._retract(doc_id, turn)
            said = f"Done, I have forgotten that {content}."
        except JmftsError as exc:
            self.stats.failed[Verb.FORGET.value] += 1
            said = f"Sorry, I could not forget it: {_short(exc)}."
        self.stats.taken[Verb.FORGET.value] += 1
        await self.say(turn, said)
        return True

    async def _last_kept(self, memory: DeviceMemory) -> tuple[int, ...]:
        binding = memory.last_binding
        if binding is None:
            return ()
        reported = memory.reported.setdefault(binding, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(reported.wait(), MEMORIZE_WAIT_S)
        return memory.kept.get(binding, ())

    async def _retract(self, doc_id: int, turn: PendingTurn) -> None:
        assert self.memory is not None
        origin = Provenance(
            agent=self.agent,
            written_by=self.publisher.source,
            binding_id=turn.binding.binding_id,
            produced_by_schema=turn.binding.schema,
        )
        reason = f"forgotten by voice on {turn.binding.device}: {turn.text[:200]}"
        await self.memory.retract(await self.memory.get(doc_id), reason, origin)

    async def _remind(self, turn: PendingTurn, call: VerbCall, device: str) -> str:
        now = self.clock()
        try:
            said = when_said(call["when"], now)
            task = task_words(call["text"]) if call["text"] else said.task
            reminder = Reminder.new(
                self.agent, device, task, said.due, now=now, binding_id=turn.binding.binding_id
            )
        except NoTimeSaid as exc:
            log.info("%s: a reminder without a time (%s): asked when", self.agent, exc)
            return CLARIFY[Verb.REMIND]
        await self.book().schedule(reminder)
        return confirm_reminder(reminder, now)

    async def _pending(self, device: str) -> list[Reminder]:
        return [r for r in await self.book().pending() if r.device == device]

    async def _cancel(self, turn: PendingTurn, call: VerbCall, device: str) -> str:
        pending = await self._pending(device)
        if not pending:
            return "You have no reminders to cancel."
        chosen = choose_to_cancel(turn.text, pending)
        if not chosen:
            return list_words(pending, self.clock()) + " Which one should I cancel?"
        book = self.book()
        cancelled = [r for c in chosen for r in await book.cancel(c.id)]
        if not cancelled:
            return "That reminder has already gone off."
        if len(cancelled) == 1:
            what = "the timer" if cancelled[0].timer else f"the reminder to {cancelled[0].text}"
            return f"Cancelled {what}."
        return f"Cancelled {len(cancelled)} reminders."


def _short(exc: BaseException) -> str:
    return str(exc).split(":")[0][:80] or type(exc).__name__


def call_writer(model: ModelEndpoint) -> CallWriter | None:
    """Who writes the desk's verb calls for an agent on ``model``: the model itself when it
    takes a GBNF grammar (the embedded one), else nobody (the calls are read by frame)."""
    if model.grammar != "gbnf":
        return None
    seed = model.extra_body.get("seed", 0)
    return CallWriter(model.base_url, model.model, seed=seed if isinstance(seed, int) else 0)


def memory_root(spec: NodeSpec) -> str:
    """Where the agent's memory reflex keeps its memories (``workspace/<agent>`` unless its
    config names another ``memory_root``)."""
    for ext in spec.extensions:
        if ext.name == "memory_reflex":
            root = ext.config.get("memory_root")
            if isinstance(root, str) and root.strip():
                return root.strip()
    return f"workspace/{spec.agent}"

"""The agent node: one persistent τ process, fed one prompt per inbound event.

Lifecycle: ``async with AgentNode(...) as node`` connects to NATS, starts τ
(handshake first), reads ``events.workspace.<agent>.in`` through the agent's
durable consumer on home's event log (:mod:`home.agents.inbox`: what is routed
while no node runs waits, and a message is acked only when its turn is over),
subscribes the node's own ``events.workspace.<agent>.out.>`` and the speech acks,
and runs one worker task that takes turns from per-device queues
(:mod:`home.agents.turn_queue`: devices round robin, one whose last speech went
unacknowledged served last, so a silent board cannot hold up the others):

1. write the turn's binding (id, device) to the per-run binding file, which the
   extensions re-read on every publish;
2. ``prompt`` τ (acceptance), then wait for the ``agent_end`` with the same
   submission id (completion), under the node's wall clock;
3. over the wall clock: ``abort``, wait for the turn to unwind, report it;
4. τ dead mid-turn: restart it under the restart policy
   (:mod:`home.agents.tau_supervisor`) and deliver the same utterance once more
   (never a lost utterance).

Events arriving mid-turn wait in their device's queue, so τ never sees a second
prompt while one is in flight, and its ``-32000`` never reaches a user. A turn's
TTL is checked when it arrives and again when it is taken off the queue. A refusal to
speak that the node reads off its own ``out.>`` queues one follow-up prompt
asking for a speakable rewrite, ahead of anything else waiting. Each of these
choices is made by :mod:`home.agents.admission`, which does no I/O; the node
does the I/O around it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from home.agents.admission import (
    DUPLICATE,
    INVALID,
    Admission,
    Admit,
    Arrival,
    PendingTurn,
    Refuse,
    abort_reason,
    judge_end,
    may_redeliver,
    outlived,
)
from home.agents.compaction import CompactionOutcome, CompactionPolicy, context_tokens
from home.agents.conversations import Conversations, Entered
from home.agents.delegation import (
    DELEGATE_ACKS,
    Pending,
    PendingDelegations,
    delegate_timeout,
    delegates,
    delegation_ack,
    memory_refusal,
    timed_out,
)
from home.agents.errors import (
    AgentError,
    InboundError,
    RestartBudgetExhausted,
    SessionError,
    TauExited,
    TauRpcError,
)
from home.agents.inbound import Inbound, parse_inbound
from home.agents.inbox import Inbox, open_inbox, settle
from home.agents.protocol import (
    COMPACTION_END,
    SUBMISSION_REJECTED,
    TURN_STILL_RUNNING,
    WireEvent,
    prompt_params,
)
from home.agents.sessions import (
    JmftsStore,
    SessionBook,
    SessionStore,
    TurnRecord,
    file_store,
    jmfts_store_config,
)
from home.agents.tau_command import RunContext, TauLaunch, build_launch
from home.agents.tau_process import TauProcess
from home.agents.tau_supervisor import TauSupervisor
from home.agents.transcript import device_history
from home.llm.endpoint import ModelEndpoint
from home.substrate.launchers import node_health_subject
from home.tau_extensions.binding import write_binding
from home.tau_extensions.handset import DEFAULT_ACK_TIMEOUT_S as HANDSET_ACK_TIMEOUT_S
from shared.errors import ContractError
from shared.event import EnvelopeLimits, Event, utc_now
from shared.messages.history import HistoryReply, HistoryRequest, history_subject
from shared.messages.verbs import DELEGATE_ANSWER_EVENT_TYPE, DelegateAnswer, VerbAck, VerbRequest
from shared.messages.voice import REPLY_EVENT_TYPE, Reply
from shared.nats_confirm import confirm_subscriptions
from shared.schema.catalog import NodeSpec
from shared.subjects import (
    agent_out_prefix,
    delegate_ack_subject,
    delegate_answer_subject,
    parse_subject,
    private_inbox_prefix,
    reply_subject,
    workspace_in_subject,
)

log = logging.getLogger(__name__)

# How long an aborted turn may take to unwind before τ is killed and restarted.
ABORT_GRACE_S = 10.0
# Backoff while τ unwinds the previous turn after its agent_end.
BUSY_RETRY_FIRST_S = 0.001
BUSY_RETRY_MAX_S = 0.05
# How often ``compact`` is asked while τ's last turn still holds the conversation.
COMPACT_TRIES = 3
# How long a stopping node lets the turn in flight finish.
STOP_GRACE_S = 5.0
# Every device's playback acks (docs/architecture.md "Acks"): whose speech went unheard.
SPEECH_ACKS = "events.action.speech.completed.*"


@dataclass(frozen=True)
class TurnOutcome:
    """How one prompt ended."""

    binding_id: str
    submission_id: str
    end_reason: str
    reprompt: bool
    error: str | None
    elapsed_s: float
    # Monotonic instants: the event arrived, the prompt was written to τ, agent_end came.
    received_at: float = 0.0
    prompted_at: float = 0.0
    ended_at: float = 0.0
    # Time spent moving τ onto the device's conversation (0 when it was already on it).
    switch_s: float = 0.0
    switched: bool = False


@dataclass
class NodeStats:
    """Counters a supervisor or a test reads; every refusal and failure is counted here."""

    received: int = 0
    duplicates: int = 0
    invalid: int = 0
    stale: int = 0
    prompts: int = 0
    completed: int = 0
    aborted: int = 0
    failed: int = 0
    redelivered: int = 0
    reprompts: int = 0
    restarts: int = 0
    busy_retries: int = 0
    dropped_at_stop: int = 0
    compactions: int = 0
    compaction_failures: int = 0
    # Compactions the node asked for to keep a conversation bounded, and those that
    # folded nothing, failed or timed out (home/agents/compaction.py).
    compactions_asked: int = 0
    compactions_unperformed: int = 0
    # Moves onto a device's conversation, conversations started, and turns that ran
    # without theirs because the store could not give it (docs/architecture.md "Sessions").
    session_switches: int = 0
    sessions_created: int = 0
    session_failures: int = 0
    # Turns whose speech the device never acknowledged (the device is then served last).
    unacked_speech: int = 0
    # Turns stopped because their device did not listen while another device's turn waited.
    yielded: int = 0
    # Delegated tasks refused (this agent cannot answer them, or they came too late).
    delegations_refused: int = 0
    # Tasks this agent delegated whose answer did not come within its delegate_timeout_s.
    delegations_timed_out: int = 0
    # Inbound or own-output messages a handler failed on unexpectedly (logged, then skipped).
    internal_errors: int = 0
    outcomes: list[TurnOutcome] = field(default_factory=list)


def speech_ack_timeout(spec: NodeSpec) -> float:
    """How long the node's handset waits for a playback ack (its ``ack_timeout_s``)."""
    for ext in spec.extensions:
        if ext.name == "handset":
            return float(ext.config.get("ack_timeout_s", HANDSET_ACK_TIMEOUT_S))
    return HANDSET_ACK_TIMEOUT_S


class AgentNode:
    """One τ-backed agent on the bus. Use as an async context manager."""

    def __init__(
        self,
        spec: NodeSpec,
        *,
        nats_url: str,
        data_dir: Path,
        model: ModelEndpoint,
        repo_root: Path,
        jmfts_url: str | None = None,
        jmfts_token_file: Path | None = None,
        system_prompt: str | None = None,
        wall_clock_s: float | None = None,
        sessions: SessionStore | None = None,
    ) -> None:
        agent = spec.agent
        if agent is None:
            raise AgentError(f"{spec.name}: not an agent node (kind {spec.kind!r})")
        self.spec = spec
        self.agent = agent
        self.nats_url = nats_url
        self.model = model
        self.run_dir = data_dir / "agents" / agent
        self.binding_file = self.run_dir / "binding.json"
        self.wall_clock_s = wall_clock_s if wall_clock_s is not None else spec.wall_clock_s
        # One persisted conversation per device (docs/architecture.md "Sessions"); τ's own
        # builtin nats_bus drives its turns itself, so that posture keeps τ's scratch one.
        self.sessions: SessionStore | None = (
            (sessions or file_store(self.run_dir)) if spec.kind == "tau_agent" else None
        )
        self.book = SessionBook(self.run_dir, agent)
        self._conversations = Conversations(self.book, self.sessions)
        self._compaction = CompactionPolicy.for_endpoint(model)
        self._compaction_end: asyncio.Future[WireEvent] | None = None
        self.launch: TauLaunch = build_launch(
            spec,
            repo_root=repo_root,
            run_dir=self.run_dir,
            context=RunContext(
                agent=agent,
                nats_url=nats_url,
                binding_file=self.binding_file,
                jmfts_url=jmfts_url,
                jmfts_token_file=jmfts_token_file,
            ),
            system_prompt=system_prompt,
            sessions=self.sessions,
        )
        # A handset speaks the model's answers; without one the node publishes them.
        self.answers_aloud = any(ext.name == "handset" for ext in spec.extensions)
        self.stats = NodeStats()
        self.limits = EnvelopeLimits()
        self._nc: NatsClient | None = None
        self._subs: list[Any] = []
        self._inbox: Inbox | None = None
        self._tau = TauSupervisor(
            self.launch,
            model,
            self._on_wire_event,
            name=spec.name,
            stderr_path=self.run_dir / "tau.stderr.log",
            policy=spec.restart_policy,
            on_restart=self._restarted,
        )
        self._admission = Admission()
        self.speech_ack_timeout_s = speech_ack_timeout(spec)
        # Delegation, both ways (docs/architecture.md "Delegation").
        self.delegate_timeout_s = delegate_timeout(spec)
        self._delegations = PendingDelegations()
        self._delegation_timers: set[asyncio.Task[None]] = set()
        self._cannot_take = memory_refusal(
            (ext.run_context for ext in self.launch.extensions),
            has_memory=jmfts_url is not None and jmfts_token_file is not None,
        )
        # Set when the turn in flight should give way (Admission.should_yield).
        self._yield = asyncio.Event()
        self._queued = asyncio.Event()
        self._ends: dict[str, asyncio.Future[WireEvent]] = {}
        self._turn_over = asyncio.Event()
        self._draining = False
        self._last_prompt_written = 0.0
        self._out_seq = 0
        self._worker: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._failed = asyncio.Event()
        self.failure: BaseException | None = None
        self._listeners: list[Callable[[WireEvent], None]] = []

    # --- lifecycle -------------------------------------------------------------

    async def __aenter__(self) -> AgentNode:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect, start τ, subscribe, and start the worker."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._nc = await nats.connect(
                self.nats_url,
                name=self.spec.name,
                max_reconnect_attempts=-1,
                # Its replies and its inbox's deliveries, where only it may subscribe.
                inbox_prefix=private_inbox_prefix(self.spec.name),
            )
            self.book.load()
            if isinstance(self.sessions, JmftsStore):
                self._tau.session_store = await jmfts_store_config(self.sessions)
            await self._tau.start()
            self._watcher = asyncio.create_task(self._watch_tau(), name=f"{self.spec.name}-watch")
            if self.spec.kind == "tau_bus_agent":
                # τ's builtin nats_bus subscribes and prompts itself; the node only supervises.
                self._subs.append(
                    await self._nc.subscribe(
                        node_health_subject(self.spec.name), cb=self._on_health
                    )
                )
                return
            self._inbox = await open_inbox(
                self._nc, workspace_in_subject(self.agent), self.agent, self._on_inbound
            )
            self._subs.append(
                await self._nc.subscribe(f"{agent_out_prefix(self.agent)}.>", cb=self._on_out)
            )
            self._subs.append(await self._nc.subscribe(SPEECH_ACKS, cb=self._on_speech_completed))
            if delegates(self.spec):
                self._subs.append(await self._nc.subscribe(DELEGATE_ACKS, cb=self._on_delegate_ack))
            if self.sessions is not None:
                self._subs.append(
                    await self._nc.subscribe(history_subject(self.agent), cb=self._on_history)
                )
            # Answered only from here on: the substrate counts the node ready once τ is up
            # and the inbound rail is subscribed, so no routed utterance finds nobody.
            self._subs.append(
                await self._nc.subscribe(node_health_subject(self.spec.name), cb=self._on_health)
            )
            await confirm_subscriptions(self._nc)
            self._worker = asyncio.create_task(self._work(), name=f"{self.spec.name}-worker")
        except BaseException:
            await self.close()
            raise

    async def _on_health(self, msg: Msg) -> None:
        await msg.respond(b"ok")

    async def _on_history(self, msg: Msg) -> None:
        """Answer for a device's conversation (``edge tui`` on home's NATS asks)."""
        device, sessions = "?", self.sessions
        if sessions is None:
            return
        try:
            request = HistoryRequest.from_json(msg.data)
            device = request.device
            reply = await asyncio.to_thread(
                device_history, self.book, sessions, request.device, request.turns
            )
        except (ContractError, AgentError, OSError) as exc:
            reply = HistoryReply(self.agent, device, None, error=str(exc))
        except Exception as exc:
            self._internal_error("history", msg, exc)
            reply = HistoryReply(self.agent, device, None, error="internal error")
        if msg.reply:
            await msg.respond(reply.to_json())

    async def close(self, grace_s: float = STOP_GRACE_S) -> None:
        """Let the turn in flight finish (up to ``grace_s``), then stop the worker, τ and NATS.

        Queued utterances that have not started are counted and, on a durable rail,
        handed back to the stream for the node's next life.
        """
        self._draining = True
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
        worker = self._worker
        if self._admission.current is not None and worker is not None and not worker.done():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace_s):
                    await self._turn_over.wait()
        self.stats.dropped_at_stop = len(self._admission)
        if self._inbox is not None:
            # Not started: handed back, so the next life of this node answers them at once.
            for turn in self._admission.queue:
                if turn.msg is not None:
                    await self._inbox.done(turn.msg, "nak")
            await self._inbox.close()
            self._inbox = None
        for timer in list(self._delegation_timers):
            timer.cancel()
        await asyncio.gather(*self._delegation_timers, return_exceptions=True)
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        try:
            await self._tau.close()
            await self._conversations.close()
        finally:
            nc, self._nc = self._nc, None
            if nc is not None:
                with contextlib.suppress(Exception):
                    await nc.drain()

    async def wait_failed(self) -> BaseException:
        """Block until the node gives up (restart budget spent); return why."""
        await self._failed.wait()
        return self.failure or AgentError("the node stopped")

    @property
    def tau_pid(self) -> int | None:
        """The pid of the current τ process (for a supervisor's hard kill, and tests)."""
        return self._tau.pid

    @property
    def queued(self) -> int:
        """How many prompts wait behind the one in flight."""
        return len(self._admission)

    # --- τ ---------------------------------------------------------------------

    def _restarted(self) -> None:
        self.stats.restarts += 1

    def watch_wire(self, listener: Callable[[WireEvent], None]) -> None:
        """Call ``listener`` with every event τ writes (monitors, benchmarks, tests)."""
        self._listeners.append(listener)

    def _on_wire_event(self, event: WireEvent) -> None:
        for listener in self._listeners:
            listener(event)
        if event.type == "side_completion_end" and event.raw.get("purpose") == "compaction":
            if event.is_error:
                self.stats.compaction_failures += 1
                log.warning("%s: τ could not compact: %s", self.spec.name, event.error)
            else:
                self.stats.compactions += 1
        if event.type == COMPACTION_END:
            ended = self._compaction_end
            if ended is not None and not ended.done():
                ended.set_result(event)
        if event.type == "agent_end" and event.submission_id is not None:
            future = self._ends.get(event.submission_id)
            if future is not None and not future.done():
                future.set_result(event)

    # --- inbound ---------------------------------------------------------------

    async def _on_inbound(self, msg: Msg) -> None:
        """The inbound rail's boundary: whatever arrives is queued or counted, never raised."""
        self.stats.received += 1
        try:
            await self._take_inbound(msg)
        except Exception as exc:
            self._internal_error("inbound", msg, exc)
            await settle(msg, "term")

    def _internal_error(self, handler: str, msg: Msg, exc: Exception) -> None:
        """A bug of ours met by outside input: counted and logged in one line, then skipped."""
        self.stats.internal_errors += 1
        log.error(
            "%s: %s handler failed on %s (%d bytes): %r",
            self.spec.name, handler, msg.subject, len(msg.data), exc,
        )  # fmt: skip

    async def _take_inbound(self, msg: Msg) -> None:
        try:
            inbound = parse_inbound(msg.data, self.limits)
        except InboundError as exc:
            log.warning("%s: %s (subject %s)", self.spec.name, exc, msg.subject)
            await self._refuse(msg, INVALID)  # never redelivered: it cannot get better
            return
        if inbound.delegated is not None and self._cannot_take is not None:
            self.stats.delegations_refused += 1
            await self._ack_delegation(inbound, self._cannot_take)
            await settle(msg, "term")
            return
        if inbound.answer is not None:
            self._delegations.answered(inbound.binding_id)
        ruling = self._admission.arrive(
            Arrival(
                text=inbound.text,
                binding_id=inbound.binding_id,
                device=inbound.device,
                event_id=inbound.event.event_id,
                schema=inbound.event.routed_by_schema or inbound.event.produced_by_schema,
                subject=msg.subject,
                expires_at=inbound.event.expires_at,
                received_at=time.monotonic(),
                msg=msg,
                delegated=inbound.delegated,
                from_user=inbound.from_user,
            ),
            utc_now(),
        )
        if inbound.delegated is not None and ruling != DUPLICATE:
            # Taken once admitted; a duplicate's first copy was acked already.
            refusal = None if isinstance(ruling, Admit) else "the task came after its time to live"
            if refusal is not None:
                self.stats.delegations_refused += 1
            await self._ack_delegation(inbound, refusal)
        if isinstance(ruling, Refuse):
            if ruling.reason == "stale":
                log.warning(
                    "%s: utterance %s is past its TTL (%d ms); not answered",
                    self.spec.name, inbound.event.event_id, inbound.event.ttl_ms,
                )  # fmt: skip
            await self._refuse(msg, ruling)
            return
        if self._inbox is not None:
            self._inbox.hold(msg)
        self._admitted(ruling)

    async def _refuse(self, msg: Msg, ruling: Refuse) -> None:
        """Count an utterance that is not answered under its reason, and settle it."""
        if ruling.reason == "invalid":
            self.stats.invalid += 1
        elif ruling.reason == "duplicate":
            self.stats.duplicates += 1
        else:
            self.stats.stale += 1
        await settle(msg, ruling.settle)

    def _admitted(self, ruling: Admit) -> None:
        """Wake the worker for a queued turn, and stop the one in flight if it must give way."""
        self._queued.set()
        if ruling.supersede:
            self._yield.set()

    async def _on_out(self, msg: Msg) -> None:
        """Read the node's own output: a refusal to speak earns one re-prompt, and a
        speak is remembered until its device acks it. Any local client can publish
        there, so nothing it sends escapes uncounted."""
        try:
            await self._read_out(msg)
        except Exception as exc:
            self._internal_error("out", msg, exc)

    async def _read_out(self, msg: Msg) -> None:
        try:
            info = parse_subject(msg.subject)
            if info.kind not in ("reply", "speak", "verb"):
                return
            event = Event.from_json(msg.data, self.limits)
        except ContractError:
            return
        if info.kind == "verb":
            if info.verb == "delegate":
                self._delegated_out(event)
            return
        if info.kind == "speak":
            watched = self._admission.speak_seen(event.binding_id)
            if watched is not None:
                asyncio.get_running_loop().call_later(
                    self.speech_ack_timeout_s, self._speech_unheard, watched
                )
            return
        try:
            reply = Reply.from_event(event)
        except ContractError:
            return
        if reply.kind != "refusal" or event.binding_id is None:
            return
        reason = reply.reason or "it could not be spoken"
        ruling = self._admission.refused(event.binding_id, reason, time.monotonic())
        if ruling is not None:
            self.stats.reprompts += 1
            self._admitted(ruling)

    async def _on_speech_completed(self, msg: Msg) -> None:
        """Any ack, ok or not, shows the device is there: serve it in its turn again.

        Only the subject is read (its last token, a dictionary key): nothing here can fail
        on what a sender puts in it."""
        self._admission.speech_acked(msg.subject.rsplit(".", 1)[-1])

    def _speech_unheard(self, binding_id: str) -> None:
        """No ack within the speak timeout: the device goes to the back of the round."""
        unheard = self._admission.speech_unheard(binding_id)
        if unheard is None:
            return  # acked in time
        self.stats.unacked_speech += 1
        if unheard.newly:
            log.warning(
                "%s: device %s did not acknowledge speech for %s; its turns now wait for "
                "the other devices'",
                self.spec.name, unheard.device, binding_id,
            )  # fmt: skip
        if unheard.supersede:
            self._yield.set()

    # --- delegation (docs/architecture.md "Delegation") -------------------------

    async def _ack_delegation(self, inbound: Inbound, refusal: str | None) -> None:
        """Tell the asker its task was taken, or why it was not."""
        if inbound.delegated is None or self._nc is None:
            return
        if refusal is not None:
            log.warning("%s: refused a delegated task: %s", self.spec.name, refusal)
        self._out_seq += 1
        event = delegation_ack(
            inbound.delegated, inbound.binding_id, refusal, source=self.spec.name,
            seq=self._out_seq, schema=inbound.event.routed_by_schema,
        )  # fmt: skip
        await self._nc.publish(delegate_ack_subject(inbound.binding_id), event.to_json(self.limits))

    def _delegated_out(self, event: Event) -> None:
        """This agent handed a task off: time its answer once the operator has taken it."""
        if event.binding_id is None:
            return
        try:
            request = VerbRequest.from_event(event)
        except ContractError:
            return
        pending = Pending(
            event.binding_id, request.device, request.text.strip(), event.produced_by_schema
        )
        self._time_answer(self._delegations.asked(pending))

    async def _on_delegate_ack(self, msg: Msg) -> None:
        """An operator's ack: a refused task is forgotten, a taken one is timed. Any local
        client can publish there: what does not parse is skipped, a failure counted."""
        try:
            ack = VerbAck.from_event(Event.from_json(msg.data, self.limits))
            if ack.agent == self.agent:
                binding_id = msg.subject.rsplit(".", 1)[-1]
                self._time_answer(self._delegations.acked(binding_id, ok=ack.ok))
        except ContractError:
            return
        except Exception as exc:
            self._internal_error("delegate ack", msg, exc)

    def _time_answer(self, pending: Pending | None) -> None:
        if pending is None or self._draining:
            return
        timer = asyncio.create_task(self._await_answer(pending), name=f"{self.spec.name}-delegate")
        self._delegation_timers.add(timer)
        timer.add_done_callback(self._delegation_timers.discard)

    async def _await_answer(self, pending: Pending) -> None:
        """No answer in time: the agent is told so, through its own inbox, as a new turn."""
        await asyncio.sleep(self.delegate_timeout_s)
        if self._delegations.due(pending.binding_id) is None or self._nc is None:
            return  # answered, or never taken
        self.stats.delegations_timed_out += 1
        log.warning(
            "%s: no answer to delegated task %s within %gs",
            self.spec.name, pending.binding_id, self.delegate_timeout_s,
        )  # fmt: skip
        answer = timed_out(pending, self.delegate_timeout_s, self.agent)
        try:
            await self._publish_to(
                workspace_in_subject(self.agent), DELEGATE_ANSWER_EVENT_TYPE,
                answer.to_payload(), pending.binding_id, pending.schema,
            )  # fmt: skip
        except Exception as exc:
            self.stats.internal_errors += 1
            log.error("%s: could not tell the agent of %s: %r", self.spec.name, pending, exc)

    async def _answer_delegation(self, turn: PendingTurn, text: str, error: str | None) -> None:
        """The operator's answer (or why it has none) on its answer rail, back to the asker."""
        delegated = turn.delegated
        if delegated is None:
            return
        answer = DelegateAnswer(
            question=delegated.question, asker=delegated.asker, device=turn.binding.device,
            ok=error is None, text=text, error=error, operator=self.agent,
        )  # fmt: skip
        await self._publish_to(
            delegate_answer_subject(self.agent, delegated.asker), DELEGATE_ANSWER_EVENT_TYPE,
            answer.to_payload(), turn.binding.binding_id, turn.binding.schema,
        )  # fmt: skip

    async def _publish_to(
        self, subject: str, event_type: str, payload: dict[str, Any], binding_id: str,
        schema: str | None,
    ) -> None:  # fmt: skip
        if self._nc is None:
            return
        self._out_seq += 1
        event = Event.new(
            event_type, payload, source=self.spec.name, sequence_number=self._out_seq,
            binding_id=binding_id, produced_by_schema=schema,
        )  # fmt: skip
        await self._nc.publish(subject, event.to_json(self.limits))

    # --- the worker ------------------------------------------------------------

    async def _next(self) -> PendingTurn:
        while not self._admission:
            self._queued.clear()
            await self._queued.wait()
        return self._admission.begin()

    async def _work(self) -> None:
        try:
            while True:
                turn = await self._next()
                self._turn_over.clear()
                try:
                    if not self._outlived(turn):
                        await self._run_turn(turn)
                except RestartBudgetExhausted:
                    raise
                except AgentError as exc:
                    # One turn's failure is counted and reported; the node takes the next.
                    self.stats.failed += 1
                    log.error(
                        "%s: turn %s failed: %s", self.spec.name, turn.binding.binding_id, exc
                    )
                    await self._report(turn, "failed", str(exc))
                finally:
                    self._admission.end()
                    self._turn_over.set()
                # Over (answered, or failed and reported): the stream may forget it.
                if turn.msg is not None and self._inbox is not None:
                    await self._inbox.done(turn.msg)
                if self._draining:
                    return
        except RestartBudgetExhausted as exc:
            self._fail(exc)

    def _outlived(self, turn: PendingTurn) -> bool:
        """Whether ``turn`` expired while it waited in the queue (counted as stale)."""
        expired_at = outlived(turn, utc_now())
        if expired_at is None:
            return False
        self.stats.stale += 1
        log.warning(
            "%s: utterance %s expired while queued (at %s); not answered",
            self.spec.name, turn.binding.event_id, expired_at.isoformat(),
        )  # fmt: skip
        return True

    async def _watch_tau(self) -> None:
        """Restart τ when it dies, whether or not a turn needed it at that moment."""
        try:
            await self._tau.watch()
        except RestartBudgetExhausted as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
            log.error("%s: giving up: %s", self.spec.name, exc)
        self._failed.set()

    async def _run_turn(self, turn: PendingTurn) -> None:
        while True:
            try:
                tau = await self._tau.ensure()
            except RestartBudgetExhausted:
                raise
            except AgentError as exc:
                log.warning("%s: τ did not start: %s", self.spec.name, exc)
                continue
            turn.deliveries += 1
            try:
                outcome = await self._prompt_once(tau, turn)
            except TauExited as exc:
                if not may_redeliver(turn):
                    self.stats.failed += 1
                    log.error(
                        "%s: τ died twice on binding %s; dropping it: %s",
                        self.spec.name,
                        turn.binding.binding_id,
                        exc,
                    )
                    await self._report(turn, "failed", f"the agent process died: {exc}")
                    return
                self.stats.redelivered += 1
                continue
            self.stats.outcomes.append(outcome)
            return

    async def _enter_conversation(self, tau: TauProcess, turn: PendingTurn) -> Entered | None:
        """Put τ on the turn's device's conversation, and log the prompt against it."""
        if self.sessions is None:
            return None
        try:
            entered = await self._conversations.enter(tau, turn.binding.device)
        except SessionError as exc:
            # Answered without history rather than not at all, and never in another
            # device's conversation; a τ that cannot even do that fails the turn.
            self.stats.session_failures += 1
            log.error(
                "%s: turn %s runs without its conversation: %s",
                self.spec.name, turn.binding.binding_id, exc,
            )  # fmt: skip
            await self._conversations.isolate(tau)
            return None
        self.stats.session_switches += entered.switched
        self.stats.sessions_created += entered.created
        if entered.session is not None:
            record = TurnRecord(
                session_id=entered.session.session_id,
                binding_id=turn.binding.binding_id,
                device=entered.session.device,
                at=utc_now().isoformat(),
                text=turn.text,
            )
            try:
                self.book.record_turn(record)
            except OSError as exc:
                log.error("%s: could not log the turn: %s", self.spec.name, exc)
        return entered

    async def _prompt_once(self, tau: TauProcess, turn: PendingTurn) -> TurnOutcome:
        entered = await self._enter_conversation(tau, turn)
        write_binding(self.binding_file, turn.binding)
        submission_id = str(uuid.uuid4())
        ended: asyncio.Future[WireEvent] = asyncio.get_running_loop().create_future()
        self._ends[submission_id] = ended
        started = time.monotonic()
        try:
            await self._submit(tau, turn, submission_id)
            prompted = self._last_prompt_written
            self.stats.prompts += 1
            end = await self._await_end(tau, ended, turn)
        finally:
            self._ends.pop(submission_id, None)
        ending = judge_end(end, answers_aloud=self.answers_aloud)
        if ending.publish_answer:
            await self._publish_answer(tau, turn)
        if ending.counted == "aborted":
            self.stats.aborted += 1
        elif ending.failure is not None:
            self.stats.failed += 1
            log.warning("%s: turn ended in error: %s", self.spec.name, end.error)
            await self._report(turn, "failed", ending.failure)
        else:
            self.stats.completed += 1
        outcome = TurnOutcome(
            binding_id=turn.binding.binding_id,
            submission_id=submission_id,
            end_reason=ending.reason,
            reprompt=turn.reprompt,
            error=end.error,
            elapsed_s=time.monotonic() - started,
            received_at=turn.received_at,
            prompted_at=prompted,
            ended_at=time.monotonic(),
            switch_s=entered.elapsed_s if entered is not None else 0.0,
            switched=entered is not None and entered.switched,
        )
        if entered is not None and entered.session is not None and ending.counted != "aborted":
            await self._keep_bounded(tau, entered.session.session_id)
        return outcome

    async def _keep_bounded(self, tau: TauProcess, session_id: str) -> None:
        """Compact the conversation the turn ran in once it has grown past the policy.

        After the turn's answer, before the next turn: a failure here is logged and
        counted, never the turn's (docs/architecture.md "Sessions").
        """
        try:
            tokens = await self._context_tokens(tau)
            if not self._compaction.due(session_id, tokens):
                return
            outcome = await self._compact(tau)
            after = await self._context_tokens(tau)
        except AgentError as exc:
            self.stats.compactions_unperformed += 1
            log.warning(
                "%s: could not compact conversation %s: %s", self.spec.name, session_id, exc
            )
            return
        self._compaction.settled(session_id, after)
        if outcome.performed:
            log.info(
                "%s: compacted conversation %s from %d to %d tokens",
                self.spec.name, session_id, tokens, after,
            )  # fmt: skip
            return
        if after < tokens:
            # τ's own auto-compaction folded it first, as the turn ended: the context is
            # bounded, and our ``compact`` found the conversation ending in that summary.
            log.info(
                "%s: τ had compacted conversation %s itself, from %d to %d tokens",
                self.spec.name, session_id, tokens, after,
            )  # fmt: skip
            return
        self.stats.compactions_unperformed += 1
        log.warning(
            "%s: compacting conversation %s at %d tokens folded nothing%s",
            self.spec.name, session_id, tokens,
            f": {outcome.error}" if outcome.error else "",
        )  # fmt: skip

    async def _context_tokens(self, tau: TauProcess) -> int:
        messages = (await tau.request("get_messages", {})).get("messages")
        return context_tokens(messages if isinstance(messages, list) else [])

    async def _compact(self, tau: TauProcess) -> CompactionOutcome:
        """``compact``, then wait for its ``compaction_end`` under the turn wall clock."""
        ended: asyncio.Future[WireEvent] = asyncio.get_running_loop().create_future()
        self._compaction_end = ended
        exited: asyncio.Future[Any] = asyncio.ensure_future(tau.exited.wait())
        self.stats.compactions_asked += 1
        try:
            for attempt in range(1, COMPACT_TRIES + 1):
                try:
                    await tau.request("compact", {})
                    break
                except TauRpcError as exc:
                    # τ waits 5 s for the last turn to let go of the conversation; on a
                    # loaded machine the turn's end (its speech acks) can take longer.
                    if exc.code != TURN_STILL_RUNNING or attempt == COMPACT_TRIES:
                        return CompactionOutcome(performed=False, error=f"τ refused: {exc.message}")
            done, _ = await asyncio.wait(
                {ended, exited}, timeout=self.wall_clock_s, return_when=asyncio.FIRST_COMPLETED
            )
            if ended in done:
                return CompactionOutcome.from_params(ended.result().raw)
            if exited in done:
                raise TauExited(tau.returncode, tau.stderr_tail())
            with contextlib.suppress(AgentError):
                await tau.request("abort", {}, timeout_s=ABORT_GRACE_S)
            return CompactionOutcome(
                performed=False, error=f"not over within {self.wall_clock_s:g} s, aborted"
            )
        finally:
            self._compaction_end = None
            exited.cancel()

    async def _submit(self, tau: TauProcess, turn: PendingTurn, submission_id: str) -> None:
        params = prompt_params(turn.text, submission_id, turn.correlation)
        for attempt in itertools.count():
            try:
                self._last_prompt_written = time.monotonic()
                await tau.request("prompt", params)
                return
            except TauRpcError as exc:
                # Only this node prompts, so "a turn is already in flight" is τ still
                # unwinding the last turn after its agent_end (a few ms); wait it out,
                # never surface it.
                if exc.code != SUBMISSION_REJECTED:
                    raise
                self.stats.busy_retries += 1
                await asyncio.sleep(min(BUSY_RETRY_FIRST_S * 2**attempt, BUSY_RETRY_MAX_S))

    async def _await_end(
        self, tau: TauProcess, ended: asyncio.Future[WireEvent], turn: PendingTurn
    ) -> WireEvent:
        exited: asyncio.Future[Any] = asyncio.ensure_future(tau.exited.wait())
        self._yield = asyncio.Event()
        if self._admission.should_yield():
            self._yield.set()
        yielded: asyncio.Future[Any] = asyncio.ensure_future(self._yield.wait())
        try:
            waiting: set[asyncio.Future[Any]] = {ended, exited}
            done, _ = await asyncio.wait(
                waiting | {yielded},
                timeout=self.wall_clock_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if ended in done:
                return ended.result()
            if exited in done:
                raise TauExited(tau.returncode, tau.stderr_tail())
            # Over the wall clock, or speaking to a device that does not listen while
            # others wait: interrupt the turn, never abandon it in flight.
            if yielded in done:
                self.stats.yielded += 1
            why = abort_reason(
                yielded=yielded in done, device=turn.binding.device, wall_clock_s=self.wall_clock_s
            )
            log.warning("%s: turn %s aborted: %s", self.spec.name, turn.binding.binding_id, why)
            with contextlib.suppress(AgentError):
                await tau.request("abort", {}, timeout_s=ABORT_GRACE_S)
            done, _ = await asyncio.wait(
                waiting, timeout=ABORT_GRACE_S, return_when=asyncio.FIRST_COMPLETED
            )
            await self._report(turn, "aborted", f"{why}, so it was stopped")
            if ended in done:
                end = ended.result()
                return end if end.end_reason == "aborted" else _aborted(end)
            # The turn would not unwind: a hard kill; the supervisor restarts τ.
            tau.kill()
            await tau.exited.wait()
            return WireEvent(type="agent_end", end_reason="aborted", is_error=True)
        finally:
            exited.cancel()
            yielded.cancel()

    async def _publish_answer(self, tau: TauProcess, turn: PendingTurn) -> None:
        """An agent without a handset answers in prose: a delegated task's answer goes to
        its asker on the answer rail; any other answer on the reply rail."""
        try:
            text = (await tau.request("get_last_assistant_text", {})).get("text")
        except AgentError as exc:
            log.warning("%s: could not read the answer: %s", self.spec.name, exc)
            text = None
        if turn.delegated is not None:
            said = text.strip() if isinstance(text, str) else ""
            await self._answer_delegation(turn, said, None if said else "it gave no answer")
            return
        device = turn.binding.device
        if not isinstance(text, str) or not text.strip() or self._nc is None or device is None:
            return
        self._out_seq += 1
        event = Event.new(
            REPLY_EVENT_TYPE,
            Reply(text.strip(), spoken=False, kind="answer", agent=self.agent).to_payload(),
            source=self.spec.name,
            sequence_number=self._out_seq,
            binding_id=turn.binding.binding_id,
            produced_by_schema=turn.binding.schema,
        )
        await self._nc.publish(reply_subject(self.agent, device), event.to_json(self.limits))

    async def _report(self, turn: PendingTurn, kind: str, reason: str) -> None:
        """Put a turn that did not finish normally on the reply rail (not spoken); a
        delegated task's asker is told instead."""
        if turn.delegated is not None:
            with contextlib.suppress(Exception):
                await self._answer_delegation(turn, "", f"its turn {kind}: {reason}")
            return
        device = turn.binding.device
        if self._nc is None or device is None:
            return
        self._out_seq += 1
        event = Event.new(
            REPLY_EVENT_TYPE,
            Reply("", spoken=False, kind=kind, reason=reason, agent=self.agent).to_payload(),
            source=self.spec.name,
            sequence_number=self._out_seq,
            binding_id=turn.binding.binding_id,
            produced_by_schema=turn.binding.schema,
        )
        with contextlib.suppress(Exception):
            await self._nc.publish(reply_subject(self.agent, device), event.to_json(self.limits))


def _aborted(end: WireEvent) -> WireEvent:
    return WireEvent(
        type=end.type,
        submission_id=end.submission_id,
        end_reason="aborted",
        is_error=end.is_error,
        error=end.error,
        raw=end.raw,
    )

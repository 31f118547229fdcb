"""The agent node: one persistent τ process, fed one prompt per inbound event.

Lifecycle: ``async with AgentNode(...) as node`` connects to NATS, starts τ
(handshake first), reads ``events.workspace.<agent>.in`` through the agent's
durable consumer on home's event log (:mod:`home.agents.inbox`: what is routed
while no node runs waits, and a message is acked only when its turn is over),
subscribes the node's own ``events.workspace.<agent>.out.>`` and the speech acks,
and runs one worker task. Events arriving mid-turn wait in their device's queue
(:mod:`home.agents.turn_queue`), so τ never sees a second prompt while one is in
flight, and its ``-32000`` never reaches a user.

The node is the lifecycle, the wiring and the door (each inbound event admitted
or refused by :mod:`home.agents.admission`); each other job is a part beside it,
with its decisions in a pure module: the worker (:mod:`home.agents.turn_runner`),
the output watch (:mod:`home.agents.output_watch`), the delegation desk
(:mod:`home.agents.delegation_desk`), the conversation book
(:mod:`home.agents.conversation_book`), the compactor
(:mod:`home.agents.compactor`), answers and reports (:mod:`home.agents.answers`), and
on an agent with the intent step the verb desk (:mod:`home.agents.verb_desk`) and its
reminders (:mod:`home.agents.due_reminders`), on a small model's operator its
search (:mod:`home.agents.operator_search`), or on the curator its watch
(:mod:`home.agents.curator_watch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from home.agents.admission import DUPLICATE, INVALID, Admission, Admit, Arrival, Refuse
from home.agents.answers import AgentPublisher, Answers
from home.agents.compaction import CompactionPolicy
from home.agents.compactor import Compactor
from home.agents.conversation_book import ConversationBook
from home.agents.curator_watch import CuratorWatch, curates
from home.agents.delegation import DELEGATE_ACKS, delegate_timeout, delegates, memory_refusal
from home.agents.delegation_desk import DelegationDesk
from home.agents.due_reminders import DueReminders
from home.agents.errors import AgentError, InboundError, RestartBudgetExhausted
from home.agents.inbound import Inbound, parse_inbound
from home.agents.inbox import Inbox, open_inbox, settle
from home.agents.node_stats import NodeStats
from home.agents.operator_search import OperatorSearch, searches_for_small_model
from home.agents.output_watch import SPEECH_ACKS, OutputWatch, WatchParts, speech_ack_timeout
from home.agents.protocol import WireEvent
from home.agents.sessions import JmftsStore, SessionStore, file_store, jmfts_store_config
from home.agents.tau_command import RunContext, TauLaunch, build_launch, system_prompt_for
from home.agents.tau_supervisor import TauSupervisor
from home.agents.turn_runner import Desk, TurnParts, TurnRunner
from home.agents.verb_desk import VerbDesk, call_writer, memory_root
from home.jmfts.client import JmftsClient, read_token_file
from home.llm.endpoint import ModelEndpoint
from home.memory.memories import MemoryStore
from home.substrate.launchers import node_health_subject
from home.substrate.reminder_streams import keeps_reminders
from shared.event import EnvelopeLimits, utc_now
from shared.lifecycle import Service
from shared.messages.history import history_subject
from shared.nats_confirm import confirm_subscriptions
from shared.schema.catalog import NodeSpec
from shared.subjects import agent_out_prefix, private_inbox_prefix, workspace_in_subject

log = logging.getLogger(__name__)

# How long a stopping node lets the turn in flight finish.
STOP_GRACE_S = 5.0


class AgentNode(Service):
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
            system_prompt=system_prompt
            or system_prompt_for(
                spec, calls_tools=model.grammar is None, before_model=keeps_reminders(spec)
            ),
            sessions=self.sessions,
        )
        self.stats = NodeStats()
        self.limits = EnvelopeLimits()
        self._subs: list[Any] = []
        self._inbox: Inbox | None = None
        self._worker: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._failed = asyncio.Event()
        self.failure: BaseException | None = None
        has_memory = jmfts_url is not None and jmfts_token_file is not None
        memory = searcher = None
        if jmfts_url is not None and jmfts_token_file is not None:
            if keeps_reminders(spec) or curates(spec):
                memory = MemoryStore(jmfts_url, token=read_token_file(jmfts_token_file))
            elif searches_for_small_model(spec, model):
                searcher = JmftsClient.from_token_file(jmfts_url, jmfts_token_file)
        self._wire(has_memory=has_memory, memory=memory, searcher=searcher)

    def _wire(
        self,
        *,
        has_memory: bool,
        memory: MemoryStore | None = None,
        searcher: JmftsClient | None = None,
    ) -> None:
        """Build the node's parts, each handed the few things it works with."""
        spec, stats = self.spec, self.stats
        self._publisher = AgentPublisher(spec.name, self.limits)
        self._admission = Admission()
        self._delegations = DelegationDesk(
            self.agent, self._publisher, stats, timeout_s=delegate_timeout(spec),
            cannot_take=memory_refusal(
                (ext.run_context for ext in self.launch.extensions), has_memory=has_memory
            ),
        )  # fmt: skip
        self._conversations = ConversationBook(
            spec.name, self.agent, self.run_dir, self.sessions, stats
        )
        self.book = self._conversations.book
        self._compactor = compactor = Compactor(
            spec.name, CompactionPolicy.for_endpoint(self.model), stats,
            wall_clock_s=self.wall_clock_s,
        )  # fmt: skip
        self._tau = TauSupervisor(
            self.launch, self.model, self._on_wire_event, name=spec.name,
            stderr_path=self.run_dir / "tau.stderr.log", policy=spec.restart_policy,
            on_restart=self._restarted,
        )  # fmt: skip
        # A handset speaks the model's answers; without one the node publishes them.
        self.answers_aloud = any(ext.name == "handset" for ext in spec.extensions)
        answers = Answers(self.agent, self._publisher, self._delegations)
        # An agent with the intent step carries its verbs out before τ, and says its
        # reminders when they fall due (docs/architecture.md "The intent step"); an
        # operator served by a model that calls no tools searches for it.
        self.verbs: VerbDesk | None = None
        self.reminders: DueReminders | None = None
        self.search: OperatorSearch | None = None
        self.curator: CuratorWatch | None = None
        desk: Desk | None = None
        if curates(spec) and memory is not None:
            self.curator = CuratorWatch(spec, memory, self.run_dir)
        elif keeps_reminders(spec):
            self.verbs = desk = VerbDesk(
                self.agent, self._publisher, memory=memory, memory_root=memory_root(spec),
                delegates=delegates(spec), calls=call_writer(self.model),
            )  # fmt: skip
            self.reminders = DueReminders(self.agent, self._publisher)
        elif searcher is not None:
            self.search = desk = OperatorSearch(spec.name, searcher, self._delegations)
        self._runner = TurnRunner(
            spec.name, self._tau,
            TurnParts(self._admission, self._conversations, compactor, answers, stats, desk),
            binding_file=self.binding_file, wall_clock_s=self.wall_clock_s,
            answers_aloud=self.answers_aloud,
        )  # fmt: skip
        self._watch = OutputWatch(
            spec.name,
            WatchParts(self._admission, self._runner, self._delegations,
                       (compactor, self._runner), stats),
            limits=self.limits, speech_ack_timeout_s=speech_ack_timeout(spec),
        )  # fmt: skip

    # --- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        """Connect, start τ, subscribe, and start the worker."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            nc = await nats.connect(
                self.nats_url,
                name=self.spec.name,
                max_reconnect_attempts=-1,
                # Its replies and its inbox's deliveries, where only it may subscribe.
                inbox_prefix=private_inbox_prefix(self.spec.name),
            )
            self._publisher.attach(nc)
            self._conversations.load()
            if isinstance(self.sessions, JmftsStore):
                self._tau.session_store = await jmfts_store_config(self.sessions)
            await asyncio.gather(
                self._tau.start(), *([self.verbs.load()] if self.verbs is not None else [])
            )
            self._watcher = asyncio.create_task(self._watch_tau(), name=f"{self.spec.name}-watch")
            if self.spec.kind == "tau_bus_agent":
                # τ's builtin nats_bus subscribes and prompts itself; the node only supervises.
                self._subs.append(
                    await nc.subscribe(node_health_subject(self.spec.name), cb=self._on_health)
                )
                return
            self._inbox = await open_inbox(
                nc, workspace_in_subject(self.agent), self.agent, self._on_inbound
            )
            self._runner.inbox = self._inbox
            if self.verbs is not None and self.reminders is not None:
                await self.verbs.attach(nc)
                await self.reminders.start(nc)
            await self._subscribe(nc)
            if self.curator is not None:
                await self.curator.start(nc)
            await confirm_subscriptions(nc)
            self._worker = asyncio.create_task(self._work(), name=f"{self.spec.name}-worker")
        except BaseException:
            await self.close()
            raise

    async def _subscribe(self, nc: NatsClient) -> None:
        """The node's own output, the speech acks, the history rail and, last, its health."""
        subscribe = nc.subscribe
        self._subs.append(await subscribe(f"{agent_out_prefix(self.agent)}.>", cb=self._on_out))
        self._subs.append(await subscribe(SPEECH_ACKS, cb=self._on_speech_completed))
        if delegates(self.spec):
            self._subs.append(await subscribe(DELEGATE_ACKS, cb=self._delegations.on_ack))
        if self.sessions is not None:
            self._subs.append(await subscribe(history_subject(self.agent), cb=self._on_history))
        # Answered only from here on: the substrate counts the node ready once τ is up
        # and the inbound rail is subscribed, so no routed utterance finds nobody.
        self._subs.append(await subscribe(node_health_subject(self.spec.name), cb=self._on_health))

    async def _on_health(self, msg: Msg) -> None:
        await msg.respond(b"ok")

    async def _on_history(self, msg: Msg) -> None:
        """Answer for a device's conversation (``edge tui`` on home's NATS asks)."""
        await self._conversations.on_history(msg)

    async def close(self, grace_s: float = STOP_GRACE_S) -> None:
        """Let the turn in flight finish (up to ``grace_s``), then stop the worker, τ and NATS.

        Queued utterances that have not started are counted and, on a durable rail,
        handed back to the stream for the node's next life.
        """
        self._runner.draining = True
        self._delegations.stop_timing()
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
        worker = self._worker
        if self._admission.current is not None and worker is not None and not worker.done():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace_s):
                    await self._runner.wait_turn_over()
        self.stats.dropped_at_stop = len(self._admission)
        if self._inbox is not None:
            # Not started: handed back, so the next life of this node answers them at once.
            for turn in self._admission.queue:
                if turn.msg is not None:
                    await self._inbox.done(turn.msg, "nak")
            await self._inbox.close()
            self._inbox = self._runner.inbox = None
        await self._delegations.close()
        if self.reminders is not None:
            await self.reminders.close()
        if self.verbs is not None:
            await self.verbs.close()
        if self.search is not None:
            await self.search.close()
        if self.curator is not None:
            await self.curator.close()
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        try:
            # τ may be compacting the conversation as its last turn ended: let it finish.
            await self._compactor.settle(grace_s)
            await self._tau.close()
            await self._conversations.close()
        finally:
            nc = self._publisher.detach()
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

    async def _work(self) -> None:
        try:
            await self._runner.work()
        except RestartBudgetExhausted as exc:
            self._fail(exc)

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

    # --- τ and the node's own output ---------------------------------------------

    def _restarted(self) -> None:
        self.stats.restarts += 1

    def watch_wire(self, listener: Callable[[WireEvent], None]) -> None:
        """Call ``listener`` with every event τ writes (monitors, benchmarks, tests)."""
        self._watch.watch_wire(listener)

    def _on_wire_event(self, event: WireEvent) -> None:
        self._watch.on_wire_event(event)

    async def _on_out(self, msg: Msg) -> None:
        await self._watch.on_out(msg)

    async def _on_speech_completed(self, msg: Msg) -> None:
        await self._watch.on_speech_completed(msg)

    # --- inbound ---------------------------------------------------------------

    async def _on_inbound(self, msg: Msg) -> None:
        """The inbound rail's boundary: whatever arrives is queued or counted, never raised."""
        self.stats.received += 1
        try:
            await self._take_inbound(msg)
        # The inbound rail's boundary: counted as an internal error; the node goes on.
        except Exception as exc:  # noqa: BLE001
            self.stats.internal_error(self.spec.name, "inbound", msg, exc)
            await settle(msg, "term")

    async def _take_inbound(self, msg: Msg) -> None:
        try:
            inbound = parse_inbound(msg.data, self.limits)
        except InboundError as exc:
            log.warning("%s: %s (subject %s)", self.spec.name, exc, msg.subject)
            await self._refuse(msg, INVALID)  # never redelivered: it cannot get better
            return
        desk = self._delegations
        if inbound.delegated is not None and desk.cannot_take is not None:
            self.stats.delegations_refused += 1
            await desk.ack(inbound, desk.cannot_take)
            await settle(msg, "term")
            return
        if inbound.answer is not None:
            desk.answered(inbound.binding_id)
        ruling = self._admission.arrive(_arrival(inbound, msg), utc_now())
        if inbound.delegated is not None and ruling != DUPLICATE:
            # Taken once admitted; a duplicate's first copy was acked already.
            refusal = None if isinstance(ruling, Admit) else "the task came after its time to live"
            if refusal is not None:
                self.stats.delegations_refused += 1
            await desk.ack(inbound, refusal)
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
        self._runner.admitted(ruling)

    async def _refuse(self, msg: Msg, ruling: Refuse) -> None:
        """Count an utterance that is not answered under its reason, and settle it."""
        if ruling.reason == "invalid":
            self.stats.invalid += 1
        elif ruling.reason == "duplicate":
            self.stats.duplicates += 1
        else:
            self.stats.stale += 1
        await settle(msg, ruling.settle)


def _arrival(inbound: Inbound, msg: Msg) -> Arrival:
    """What admission is asked about: the parsed utterance and the delivery it came in."""
    return Arrival(
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
        answer=inbound.answer,
    )

"""The substrate component: control surface, router, node supervision, event log, status.

It connects to the home's nats-server (the component registered before it),
makes sure the event-log stream exists, answers ``home.control.<verb>``,
routes the active schemas' bindings, supervises their nodes, and publishes
every change of state on ``home.status.<kind>.<name>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError
from nats.js.errors import NotFoundError

from home.substrate.agent_inboxes import AgentInboxes, reads_inbox
from home.substrate.bus_auth import ROUTER_USER, SUBSTRATE_USER, BusAuthority
from home.substrate.component import BusAddress, ComponentInfo, Health, until_answered
from home.substrate.config import HomeConfig
from home.substrate.errors import ComponentError, HomeConfigError, SchemaRuntimeError
from home.substrate.eventlog import ensure_stream, stream_stats
from home.substrate.launchers import (
    LAUNCHERS,
    FixedServices,
    LaunchContext,
    Launcher,
    NodeServices,
)
from home.substrate.reminder_streams import ensure_reminders, keeps_reminders
from home.substrate.router import Router
from home.substrate.schema_runtime import SAVED_FILE, SchemaRuntime, SchemaSource
from shared import control
from shared.bus_credentials import redact
from shared.control import ControlReply, ControlRequest, StatusChange
from shared.errors import ControlError, SchemaError
from shared.lifecycle import Service, cancel_and_wait
from shared.nats_confirm import confirm_subscriptions
from shared.schema import NodeCatalog, NodeSpec, load_node_catalog

log = logging.getLogger(__name__)

LOG_RATE_PERIOD_S = 2.0
# nats-server is restarted in place by home up; come back soon after it does.
RECONNECT_WAIT_S = 0.25
LOG_RATE_SAMPLES = 6
CONTROL_QUEUE = "home.control"
QUORUM_TIMEOUT_S = 300.0

Handler = Callable[[ControlRequest], Awaitable[Any]]
StatusExtra = Callable[[], Awaitable[dict[str, Any]]]


class Substrate(Service):
    """The substrate; a :class:`~home.substrate.component.Component`."""

    name = "substrate"

    def __init__(
        self,
        config: HomeConfig,
        bus: BusAddress,
        *,
        launchers: Mapping[str, Launcher] | None = None,
        status_extra: StatusExtra | None = None,
        services: NodeServices | None = None,
        handlers: Mapping[str, Handler] | None = None,
        authority: BusAuthority | None = None,
    ) -> None:
        self.config = config
        # The bus's users; None: a bus without authorization (no credentials anywhere).
        self._authority = authority
        # Control verbs other components answer (e.g. the bridge's bridge.pair).
        self._extra_handlers = dict(handlers or {})
        self._bus = bus
        self._launchers = dict(LAUNCHERS if launchers is None else launchers)
        self._status_extra = status_extra
        self._services = services or FixedServices()
        self.nc: NatsClient | None = None
        # The router's own connection, as its own bus user (the substrate's when no authority).
        self._router_nc: NatsClient | None = None
        self.router: Router | None = None
        self.runtime: SchemaRuntime | None = None
        self.catalog: NodeCatalog | None = None
        self._control_subs: list[Subscription] = []
        self._started_at = time.time()
        self.last_error: str | None = None
        # (monotonic time, stream last_seq) samples for the event log's rate.
        self._log_samples: deque[tuple[float, int]] = deque(maxlen=LOG_RATE_SAMPLES)
        self._sampler: asyncio.Task[None] | None = None
        # Times the event log stream was found missing (deleted) and made again.
        self.log_recreated = 0
        # The agents' durable inbox consumers, made here and never by the agents.
        self.inboxes = AgentInboxes(config.event_log.stream)
        # Control requests by outcome: "ok", an error code (bad_request, internal, ...),
        # or "unanswered" (the reply could not be sent).
        self.control_answers: Counter[str] = Counter()

    # --- lifecycle -------------------------------------------------------------------

    def _url(self, user: str) -> str:
        """The bus URL with ``user``'s credentials (the bare URL without an authority)."""
        if self._authority is None:
            return self._bus.url
        return self._authority.url(user, self._bus.url)

    async def _connect(self, user: str) -> NatsClient:
        try:
            return await nats.connect(
                self._url(user),
                name=f"home.{user}",
                max_reconnect_attempts=-1,
                reconnect_time_wait=RECONNECT_WAIT_S,
            )
        except (NatsError, OSError) as exc:
            raise ComponentError(
                f"substrate cannot connect to {redact(self._bus.url)} as {user}: {exc}"
            ) from exc

    async def start(self) -> None:
        """Load the catalog, connect, make the stream, answer control, restore schemas."""
        try:
            self.catalog = load_node_catalog(self.config.catalog)
        except SchemaError as exc:
            raise HomeConfigError(f"the node catalog is invalid:\n{exc}") from exc
        self.nc = await self._connect(SUBSTRATE_USER)
        await self._ensure_log(self.nc)
        if self._authority is not None:
            self._router_nc = await self._connect(ROUTER_USER)
        self.router = Router(
            self._router_nc or self.nc,
            self.config.router_name,
            log_nc=self.nc,
            stream=self.config.event_log.stream,
        )
        await self.router.start()
        nodes_dir = self.config.data_dir / "nodes"
        nc = self.nc

        def launch_context(node: str) -> LaunchContext:
            return LaunchContext(self._url(node), nc, nodes_dir / node, self._services)

        self.runtime = SchemaRuntime(
            catalog=self.catalog,
            schema_dir=self.config.schema_dir,
            launchers=self._launchers,
            router=self.router,
            launch_context=launch_context,
            publish_status=self.publish_status,
            saved_file=self.config.data_dir / SAVED_FILE,
            health_interval_s=self.config.health_interval_s,
            authorize=None if self._authority is None else self._authority.authorize,
            prepare=self._prepare_node,
        )
        handlers: dict[str, Handler] = {
            control.PING: self._ping,
            control.STATUS: self._status,
            control.SCHEMA_APPLY: self._apply,
            control.SCHEMA_UNAPPLY: self._unapply,
            control.SCHEMA_LIST: self._list,
            **self._extra_handlers,
        }
        member = self.config.cluster.member if self.config.cluster is not None else None
        for verb, handler in handlers.items():
            # A queue group: on a clustered home one member answers each request.
            self._control_subs.append(
                await self.nc.subscribe(
                    control.control_subject(verb), queue=CONTROL_QUEUE, cb=self._answer(handler)
                )
            )
            if member is not None:
                self._control_subs.append(
                    await self.nc.subscribe(
                        control.member_control_subject(member, verb), cb=self._answer(handler)
                    )
                )
        await confirm_subscriptions(self.nc)
        self._sampler = asyncio.create_task(self._sample_log(), name="event log rate")
        if self.config.restore_schemas:
            await self.runtime.restore_saved()
        for name in self.config.apply_at_start:
            if name in self.runtime.active:
                continue
            try:
                await self.runtime.apply(self.runtime.source_by_name(name))
            except (SchemaError, SchemaRuntimeError) as exc:
                raise HomeConfigError(f"cannot apply schema {name!r} at start: {exc}") from exc

    async def _ensure_log(self, nc: NatsClient) -> None:
        """Make the event log; a clustered home's JetStream answers once a quorum of its
        members is up, so a member waits for that (docs/architecture.md "Growing past one
        machine")."""
        if self.config.cluster is None:
            await ensure_stream(nc, self.config.event_log)
            return
        await until_answered(
            lambda: ensure_stream(nc, self.config.event_log),
            within_s=QUORUM_TIMEOUT_S,
            interval_s=1.0,
            asking="the cluster's JetStream",
            hint=" (are a majority of the members up?)",
        )

    async def _prepare_node(self, spec: NodeSpec) -> None:
        """Make an agent's durable inbox before its node first starts (on a member that
        takes over a lost one's schemas too: the consumer is kept as that one left it).

        A failure is logged, not raised: the node then finds no consumer and is restarted
        under its policy, and the next health check makes it.
        """
        if self.nc is None or spec.agent is None or not reads_inbox(spec):
            return
        try:
            await self.inboxes.prepare(self.nc, spec.agent)
        except (NatsError, TimeoutError) as exc:
            self.last_error = f"durable inbox of {spec.name}: {exc!r}"
            log.error("cannot make the durable inbox of %s: %r", spec.name, exc)
        if not keeps_reminders(spec):
            return
        try:
            await ensure_reminders(self.nc, spec.agent)
        except (NatsError, TimeoutError) as exc:
            self.last_error = f"reminders of {spec.name}: {exc!r}"
            log.error("cannot make the reminders stream of %s: %r", spec.name, exc)

    async def health(self) -> Health:
        """Connected to NATS (or reconnecting by itself: restarting would not help), the
        event log stream exists, and so does each running agent's durable inbox.

        A missing stream (any local client can delete it, and its consumers with it) is
        a silent outage: turns time out while everything looks green. It is reported
        unhealthy for one check, counted, and made again at once, and so are the inboxes.
        """
        if self.nc is None or self.nc.is_closed:
            return Health(False, "the NATS connection is closed")
        if not self.nc.is_connected:
            return Health(True, "reconnecting to nats-server")
        stream = self.config.event_log.stream
        missing: list[str] = []
        try:
            await self.nc.jetstream().stream_info(stream)
        except NotFoundError:
            self.log_recreated += 1
            log.warning("the event log stream %s is missing; recreating it", stream)
            await ensure_stream(self.nc, self.config.event_log)
            missing.append(f"the event log stream {stream}")
        except (NatsError, TimeoutError) as exc:
            return Health(False, f"the event log stream {stream} cannot be read: {exc!r}")
        runners = self.runtime.runners.values() if self.runtime is not None else ()
        agents = [r.spec.agent for r in runners if r.spec.agent and reads_inbox(r.spec)]
        try:
            made = await self.inboxes.check(self.nc, agents)
        except (NatsError, TimeoutError) as exc:
            return Health(False, f"the agents' durable inboxes cannot be read: {exc!r}")
        missing += [f"the durable inbox of agent {agent}" for agent in made]
        if missing:
            return Health(False, "; ".join(f"{m} was missing" for m in missing) + "; recreated")
        return Health(True)

    async def close(self) -> None:
        """Stop every node, then drop the control surface and the connection."""
        sampler, self._sampler = self._sampler, None
        await cancel_and_wait(sampler, reraise=False)
        if self.runtime is not None:
            await self.runtime.close()
        if self.router is not None:
            await self.router.close()
        if self._router_nc is not None:
            with contextlib.suppress(NatsError):
                await self._router_nc.drain()
            self._router_nc = None
        if self.nc is not None:
            for sub in self._control_subs:
                with contextlib.suppress(NatsError):
                    await sub.unsubscribe()
            self._control_subs.clear()
            with contextlib.suppress(NatsError):
                await self.nc.drain()
            self.nc = None

    def info(self) -> ComponentInfo:
        """The control subject tree and our own pid."""
        return ComponentInfo(f"{control.CONTROL_PREFIX}.>", os.getpid())

    # --- event log rate -----------------------------------------------------------------

    async def _sample_log(self) -> None:
        while True:
            if self.nc is not None and self.nc.is_connected:
                try:
                    stats = await stream_stats(self.nc, self.config.event_log.stream)
                except (NatsError, TimeoutError) as exc:
                    self.last_error = f"event log stats: {exc!r}"
                else:
                    self._log_samples.append((time.monotonic(), int(stats["last_seq"])))
            await asyncio.sleep(LOG_RATE_PERIOD_S)

    def _log_rate(self) -> float:
        """Events per second recorded over the last samples (about ten seconds)."""
        if len(self._log_samples) < 2:
            return 0.0
        (t0, seq0), (t1, seq1) = self._log_samples[0], self._log_samples[-1]
        return (seq1 - seq0) / (t1 - t0) if t1 > t0 else 0.0

    # --- status events ----------------------------------------------------------------

    async def publish_status(self, kind: str, name: str, state: str, reason: str) -> None:
        """Publish one change of state on ``home.status.<kind>.<name>``."""
        if self.nc is None or self.nc.is_closed:
            return
        change = StatusChange(kind, name, state, reason, time.time())
        with contextlib.suppress(NatsError):
            await self.nc.publish(change.subject, change.to_json())

    # --- control handlers ---------------------------------------------------------------

    def _answer(self, handler: Handler) -> Callable[[Msg], Awaitable[None]]:
        async def answer(msg: Msg) -> None:
            """The control surface's boundary: every request is answered, or refused under
            its error code and counted; nothing escapes."""
            try:
                reply = ControlReply.success(await handler(ControlRequest.from_json(msg.data)))
            except ControlError as exc:
                reply = ControlReply.failure(exc.code, exc.message)
            except SchemaRuntimeError as exc:
                reply = ControlReply.failure(exc.code, str(exc))
            except SchemaError as exc:
                reply = ControlReply.failure(control.BAD_REQUEST, str(exc))
            # The control boundary: answered as an internal error, and kept.
            except Exception as exc:  # noqa: BLE001
                self.last_error = f"{msg.subject}: {exc!r}"
                reply = ControlReply.failure(control.INTERNAL, repr(exc))
            self.control_answers[reply.code or "ok"] += 1
            if not reply.ok:
                log.log(
                    logging.ERROR if reply.code == control.INTERNAL else logging.INFO,
                    "control %s refused (%s): %.200s", msg.subject, reply.code, reply.message,
                )  # fmt: skip
            if msg.reply:
                try:
                    await msg.respond(reply.to_json())
                except (NatsError, TypeError, ValueError) as exc:
                    # Gone requester, or a result that is not JSON (a bug of ours).
                    self.control_answers["unanswered"] += 1
                    log.error("control %s: could not answer: %r", msg.subject, exc)

        return answer

    def _runtime(self) -> SchemaRuntime:
        if self.runtime is None:
            raise ControlError(control.INTERNAL, "the substrate is not started")
        return self.runtime

    async def _ping(self, request: ControlRequest) -> Any:
        return {"pong": True, "pid": os.getpid()}

    async def _apply(self, request: ControlRequest) -> Any:
        runtime = self._runtime()
        name = request.text("name", required=False)
        text = request.text("text", required=False)
        if text is not None:
            source = SchemaSource(request.text("file", required=False) or "<request>", text)
        elif name is not None:
            source = runtime.source_by_name(name)
        else:
            raise ControlError(control.BAD_REQUEST, "give either 'name' or 'text' (+ 'file')")
        return await runtime.apply(source, request.flag("allow_overlap"))

    async def _unapply(self, request: ControlRequest) -> Any:
        return await self._runtime().unapply(request.text("name") or "")

    async def _list(self, request: ControlRequest) -> Any:
        return self._runtime().list()

    async def _status(self, request: ControlRequest) -> Any:
        runtime = self._runtime()
        router = runtime.router
        extra = await self._status_extra() if self._status_extra is not None else {}
        nc = self.nc
        log_stats: dict[str, Any] = {}
        if nc is not None:
            try:
                log_stats = await stream_stats(nc, self.config.event_log.stream)
                log_stats["events_per_s"] = self._log_rate()
            except NatsError as exc:
                log_stats = {"error": str(exc)}
            log_stats["recreated"] = self.log_recreated
            log_stats["inboxes_recreated"] = self.inboxes.recreated
            log_stats["inboxes_replaced"] = self.inboxes.replaced
        return {
            "pid": os.getpid(),
            "uptime_s": round(time.time() - self._started_at, 3),
            "data_dir": str(self.config.data_dir),
            "catalog": str(self.config.catalog),
            **extra,
            "nodes": [r.view().to_dict() for r in runtime.runners.values()],
            "node_refs": {node: sorted(s) for node, s in runtime.refs.items()},
            "schemas": runtime.list(),
            "router": {
                **router.counters.to_dict(),
                "routed_per_s": router.rate.rate(time.monotonic()),
                "bindings_remembered": len(router.memory),
            },
            "event_log": log_stats,
            "control": dict(self.control_answers),
            "last_error": self.last_error,
        }

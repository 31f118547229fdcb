"""The component registry of ``home up``: each long-lived part is one :class:`Component`.

A component is anything ``home up`` starts, health-checks and stops: the
nats-server, the language model, JMFTS, the substrate (which hosts the agent
nodes and effectors) and the home bridge, registered in that start order by
:mod:`home.up`. The interface::

    class MyComponent:
        name = "jmfts"                       # unique, shown in `home status`
        async def start(self) -> None: ...   # return once it serves; raise ComponentError
        async def health(self) -> Health: ...# cheap; called every health interval
        async def close(self) -> None: ...   # idempotent; nothing of it left running
        def info(self) -> ComponentInfo: ... # address and pid, for the table and home.json

Register it with :meth:`ComponentRegistry.register` in dependency order (a
component may read the ones registered before it, e.g. the NATS address).
:meth:`ComponentRegistry.start_all` starts them in that order and, if one
fails, stops it and the ones started before it;
:meth:`ComponentRegistry.stop_all` stops them in reverse.
:meth:`ComponentRegistry.watch` runs the health checks and reports every
change of state through a callback (``home up`` publishes it on
``home.status.component.<name>``); a component that fails three checks in a
row is stopped and started again in place.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from nats.errors import Error as NatsError
from nats.js.client import JetStreamContext
from nats.js.errors import BucketNotFoundError
from nats.js.kv import KeyValue

from home.substrate.errors import ComponentError
from shared.lifecycle import Pacing, retry_until_deadline

log = logging.getLogger(__name__)

T = TypeVar("T")


async def open_bucket(js: JetStreamContext, bucket: str) -> KeyValue:
    """The replicated key-value ``bucket``, made (one value a key) by the first member
    that asks; a component of a clustered home keeps its shared state in one."""
    try:
        return await js.key_value(bucket)
    except BucketNotFoundError:
        return await js.create_key_value(bucket=bucket, history=1)


async def until_answered(
    attempt: Callable[[], Awaitable[T]],
    *,
    within_s: float,
    interval_s: float,
    asking: str,
    hint: str = "",
) -> T:
    """``attempt()`` again every ``interval_s`` while NATS fails or times out, for up to
    ``within_s``; then ComponentError says ``asking`` did not answer (and ``hint``).

    For a starting component of a clustered home: JetStream answers once a quorum of
    members is up, and not while a stream widens its replicas or elects a leader.
    """

    async def ask(_left_s: float) -> T:
        return await attempt()

    def give_up(exc: Exception) -> ComponentError:
        return ComponentError(f"{asking} did not answer within {within_s:.0f} s{hint}: {exc!r}")

    def waiting(exc: Exception) -> None:
        log.info("waiting for %s (%s)", asking, type(exc).__name__)

    return await retry_until_deadline(
        ask,
        within_s=within_s,
        retry_on=(NatsError, TimeoutError),
        give_up=give_up,
        pacing=Pacing(interval_s),
        on_retry=waiting,
    )


HEALTH_TIMEOUT_S = 5.0

# Component states, in the order a healthy life passes through them.
STOPPED, STARTING, HEALTHY, UNHEALTHY, STOPPING, RESTARTING = (
    "stopped",
    "starting",
    "healthy",
    "unhealthy",
    "stopping",
    "restarting",
)
# Consecutive failed health checks after which a component is restarted in place.
FAILED_CHECKS_TO_RESTART = 3


@dataclass(frozen=True)
class Health:
    """One health check's answer."""

    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class ComponentInfo:
    """Where a component runs: its address (URL or subject tree) and pid."""

    address: str
    pid: int | None


class Component(Protocol):
    """One thing ``home up`` starts, health-checks and stops (see the module docstring)."""

    name: str

    async def start(self) -> None:
        """Start serving; raise ComponentError if it cannot."""

    async def health(self) -> Health:
        """A cheap check of whether it still serves."""

    async def close(self) -> None:
        """Stop; idempotent, and nothing of the component is left running."""

    def info(self) -> ComponentInfo:
        """Its address and pid."""


class BusAddress(Protocol):
    """Where the home's nats-server listens (known once it has started): what a component
    that connects to the bus is given, instead of the server itself."""

    @property
    def url(self) -> str:
        """The bus URL, without credentials."""


@dataclass(frozen=True)
class FixedBusAddress:
    """A :class:`BusAddress` known from the start (a bus started elsewhere, in a test)."""

    url: str


@dataclass
class ComponentStatus:
    """The registry's view of one component."""

    name: str
    state: str = STOPPED
    detail: str = ""
    last_error: str | None = None
    since: float = field(default_factory=time.time)
    restarts: int = 0
    failed_checks: int = 0


StatusCallback = Callable[[ComponentStatus], Awaitable[None]]


class ComponentRegistry:
    """The ordered set of components of one home."""

    def __init__(self) -> None:
        self._components: list[Component] = []
        self.status: dict[str, ComponentStatus] = {}
        self._started: list[Component] = []
        self._on_change: StatusCallback | None = None
        self._watching = False

    def register(self, component: Component) -> None:
        """Add ``component`` after those already registered."""
        if component.name in self.status:
            raise ComponentError(f"component {component.name!r} is registered twice")
        self._components.append(component)
        self.status[component.name] = ComponentStatus(component.name)

    @property
    def components(self) -> tuple[Component, ...]:
        """Registered components, in start order."""
        return tuple(self._components)

    def on_change(self, callback: StatusCallback) -> None:
        """Call ``callback`` after every change of a component's state."""
        self._on_change = callback

    async def _set(self, name: str, state: str, detail: str = "", error: str | None = None) -> None:
        status = self.status[name]
        changed = (status.state, status.detail) != (state, detail)
        status.state, status.detail, status.since = state, detail, time.time()
        if error is not None:
            status.last_error = error
        if changed and self._on_change is not None:
            await self._on_change(status)

    async def start_all(self) -> None:
        """Start every component in order; on a failure stop those started and re-raise."""
        for component in self._components:
            await self._set(component.name, STARTING)
            try:
                await component.start()
            except BaseException as exc:
                # A half-started component may own processes or connections already.
                try:
                    await component.close()
                except Exception:
                    log.exception("stopping %s after its failed start failed", component.name)
                await self._set(component.name, STOPPED, "failed to start", str(exc))
                await self.stop_all()
                raise
            self._started.append(component)
            await self._set(component.name, HEALTHY)

    async def stop_all(self) -> None:
        """Stop the started components in reverse order; report but survive failures."""
        while self._started:
            component = self._started.pop()
            await self._set(component.name, STOPPING)
            try:
                await component.close()
            except Exception as exc:
                log.exception("stopping %s failed", component.name)
                await self._set(component.name, STOPPED, "stop failed", str(exc))
                continue
            await self._set(component.name, STOPPED)

    async def check_all(self) -> None:
        """Run every started component's health check once and record the answers.

        A component that fails :data:`FAILED_CHECKS_TO_RESTART` checks in a row is
        stopped and started again in place (components after it keep running:
        they reconnect, as a NATS client does). While one is down, those after it,
        which may need it, are checked but not restarted: a restart that waits on it
        would hold this loop, and with it the next restart of the one they need (a
        clustered member's pairing waited a minute for its bucket while its
        nats-server, whose restart had failed once, waited behind it).
        """
        upstream_down = False
        for component in list(self._started):
            status = self.status[component.name]
            try:
                # asyncio.timeout, not wait_for: in Python 3.11 wait_for drops a
                # cancellation that lands as the check finishes, and the watch then
                # outlives `home up`'s stop forever.
                async with asyncio.timeout(HEALTH_TIMEOUT_S):
                    health = await component.health()
            # A component's health check is its own code: any failure is unhealthy.
            except Exception as exc:  # noqa: BLE001
                health = Health(False, f"health check raised {type(exc).__name__}: {exc}")
            if health.ok:
                status.failed_checks = 0
                await self._set(component.name, HEALTHY, health.detail)
                continue
            status.failed_checks += 1
            await self._set(component.name, UNHEALTHY, health.detail, health.detail)
            if upstream_down:
                continue
            if status.failed_checks >= FAILED_CHECKS_TO_RESTART:
                await self._restart(component)
            upstream_down = self.status[component.name].state != HEALTHY

    async def _restart(self, component: Component) -> None:
        status = self.status[component.name]
        status.restarts += 1
        status.failed_checks = 0
        await self._set(component.name, RESTARTING, f"restart {status.restarts}")
        try:
            await component.close()
            await component.start()
        except Exception as exc:
            log.exception("restarting %s failed", component.name)
            await self._set(component.name, UNHEALTHY, "restart failed", str(exc))
            return
        await self._set(component.name, HEALTHY)

    async def watch(self, interval_s: float) -> None:
        """Health-check every ``interval_s`` until :meth:`stop_watching`, or cancel.

        The flag as well as the cancel: a health check or a restart awaits library code
        (nats-py's flush and connect use ``wait_for``) that in Python 3.11 can drop a
        cancellation arriving as it finishes, and the watch must still end with ``home up``.
        """
        self._watching = True
        while self._watching:
            await asyncio.sleep(interval_s)
            if self._watching:
                await self.check_all()

    def stop_watching(self) -> None:
        """End :meth:`watch` after the check in progress, if any."""
        self._watching = False

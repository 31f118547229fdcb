"""``home up``: lock the data directory, start the components, serve until a signal, stop.

The composition root of home: the one module that wires every part of home
(substrate, language model, JMFTS, agents, bridge) into one registry, so that
none of those packages needs to know the others. Components are started in
registration order and stopped in reverse; the state file (``home.json``)
exists exactly while everything is up.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from home.agents.launchers import TOKENS_DIR, EffectorLauncher, TauAgentLauncher
from home.bridge import BRIDGE_DIR, HomeBridgeComponent
from home.bridge.component import PairedHalves
from home.bridge.replica import BUCKET as PAIRING_BUCKET
from home.bridge.replica import PairingReplica
from home.jmfts.component import JmftsComponent
from home.jmfts.locate import HOME_SUBDIR as JMFTS_HOME_SUBDIR
from home.jmfts.replicated_log import STREAM as MEMORY_LOG_STREAM
from home.llm.choice import ModelChoice
from home.substrate.bus_auth import BusAuthority
from home.substrate.component import Component, ComponentRegistry, ComponentStatus
from home.substrate.config import HomeConfig
from home.substrate.datadir import DataDirLock, HomeState
from home.substrate.errors import HomeConfigError
from home.substrate.launchers import LAUNCHERS, Launcher
from home.substrate.membership import Membership
from home.substrate.nats_server import NatsServer
from home.substrate.storage import StorageComponent
from home.substrate.substrate_component import Substrate
from shared import control
from shared.errors import SchemaError
from shared.lifecycle import cancel_and_wait, stop_on_signals
from shared.schema import BridgeHalf, load_node_catalog

log = logging.getLogger(__name__)

GIL_SWITCH_INTERVAL_S = 0.0005

ReadyCallback = Callable[[HomeState, ComponentRegistry], None]


def build_registry(config: HomeConfig) -> tuple[ComponentRegistry, NatsServer, Substrate]:
    """The components of a home, in start order."""
    registry = ComponentRegistry()
    authority = bus_authority(config)
    nats_server = NatsServer(
        config.data_dir / "nats",
        config.host,
        config.nats_port,
        authority=authority,
        cluster=config.cluster,
    )
    membership: Membership | None = None

    async def components_view() -> dict[str, Any]:
        bus = {
            "authorization": authority is not None,
            "users": authority.view() if authority is not None else [],
            "violations": nats_server.violations_view(),
        }
        view: dict[str, Any] = {"components": components_table(registry), "bus": bus}
        if membership is not None:
            view["cluster"] = {
                "member": membership.cluster.member,
                "members": await membership.view(),
                "jetstream_peers": await asyncio.to_thread(nats_server.jetstream_peers),
                "adopted": dict(membership.adopted),
            }
        return view

    bridge = HomeBridgeComponent(
        config.data_dir,
        nats_server,
        host=config.host,
        port=config.bridge_port,
        authority=authority,
    )
    model = ModelChoice.from_option(config.llm_url, config.llm_model)
    llm = model.component(config.data_dir / "logs" / "llm.log", config.host)
    jmfts = None
    if config.memory:
        jmfts = JmftsComponent(
            config.data_dir / JMFTS_HOME_SUBDIR,
            catalog_agents(config.catalog),
            config.data_dir / TOKENS_DIR,
            # Clustered, every member's memory is a view of one replicated log of writes.
            log_url=None if config.cluster is None else lambda: nats_server.probe_url,
        )
    substrate = Substrate(
        config,
        nats_server,
        launchers=node_launchers(config, model),
        status_extra=components_view,
        services=RunningServices(llm, jmfts),
        handlers={
            control.BRIDGE_PAIR: bridge.pair_device,
            control.BRIDGE_DEVICES: bridge.list_devices,
            control.BRIDGE_UNPAIR: bridge.unpair_device,
            control.BRIDGE_REVOKE: bridge.revoke_device,
        },
        authority=authority,
    )
    # First: a data directory that cannot take writes is named before anything fails on it.
    registry.register(StorageComponent(config.data_dir))
    registry.register(nats_server)
    for component in (llm, jmfts):
        if component is not None:
            registry.register(component)
    registry.register(substrate)
    if config.cluster is None:
        registry.register(bridge)
    else:
        membership = register_member(registry, config, substrate, nats_server, bridge)
    return registry, nats_server, substrate


def register_member(
    registry: ComponentRegistry,
    config: HomeConfig,
    substrate: Substrate,
    nats_server: NatsServer,
    bridge: HomeBridgeComponent,
) -> Membership:
    """Register the bridge with what a member of a clustered home adds around it: its
    membership before it (the cluster is joined first), the pairing it shares after it
    (the endpoint serves what the pairing applies)."""
    assert config.cluster is not None
    membership = Membership(
        config.cluster,
        substrate,
        nats_server,
        str(config.data_dir),
        stream=config.event_log.stream,
        also=(f"KV_{PAIRING_BUCKET}", MEMORY_LOG_STREAM),
    )
    registry.register(membership)
    registry.register(bridge)
    # Every member serves every board paired on any of them (home.bridge.replica).
    registry.register(
        PairingReplica(
            config.data_dir / BRIDGE_DIR, substrate, config.cluster.secret, bridge.files_changed
        )
    )
    return membership


class RunningServices:
    """The model's and the memory server's addresses as their components report them,
    read each time a node is launched (None: not configured, or not serving yet)."""

    def __init__(self, llm: Component | None, jmfts: Component | None) -> None:
        self._llm = llm
        self._jmfts = jmfts

    @property
    def llm_url(self) -> str | None:
        """The running model's OpenAI-compatible base URL."""
        return None if self._llm is None else self._llm.info().address or None

    @property
    def jmfts_url(self) -> str | None:
        """The running JMFTS's base URL."""
        return None if self._jmfts is None else self._jmfts.info().address or None


def bus_authority(config: HomeConfig) -> BusAuthority | None:
    """The bus's users for this home (None: a bus without authorization)."""
    if not config.bus_auth:
        return None
    return BusAuthority(
        config.data_dir,
        config.data_dir / "nats" / "authorization.conf",
        halves=usable_halves(PairedHalves(config.data_dir)),
    )


def usable_halves(paired: PairedHalves) -> Callable[[], list[BridgeHalf]]:
    """The paired home halves that load; the bridge component reports the others."""

    def halves() -> list[BridgeHalf]:
        usable, unusable = paired.load()
        for path, exc in unusable:
            log.warning("bus authorization: skipping unusable half %s: %s", path, exc)
        return usable

    return halves


def catalog_agents(catalog: Path) -> dict[str, tuple[tuple[str, str], ...]]:
    """Every τ agent in the catalog (each gets a JMFTS principal), with the grants beyond
    its own subtrees: ``(path, "read")`` for its ``memory_reads``, ``(path, "write")`` for
    its ``memory_writes``."""
    try:
        nodes = load_node_catalog(catalog).nodes.values()
    except SchemaError as exc:
        raise HomeConfigError(str(exc)) from exc
    return {
        node.agent: (
            *((path, "read") for path in node.memory_reads),
            *((path, "write") for path in node.memory_writes),
        )
        for node in nodes
        if node.agent is not None
    }


def node_launchers(config: HomeConfig, model: ModelChoice) -> dict[str, Launcher]:
    """Every node kind home can run: services, τ agents and effectors."""
    agents = TauAgentLauncher(config.catalog, config.data_dir, model)
    return {
        **LAUNCHERS,
        "tau_agent": agents,
        "tau_bus_agent": agents,
        "effector": EffectorLauncher(config.data_dir),
    }


def components_table(registry: ComponentRegistry) -> list[dict[str, Any]]:
    """One row per component: name, address, pid, state, detail, last error."""
    rows = []
    for component in registry.components:
        info = component.info()
        status = registry.status[component.name]
        rows.append(
            {
                "name": component.name,
                "address": info.address,
                "pid": info.pid,
                "state": status.state,
                "detail": status.detail,
                "restarts": status.restarts,
                "last_error": status.last_error,
            }
        )
    return rows


async def run_home(
    config: HomeConfig,
    on_ready: ReadyCallback | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run a home until SIGINT, SIGTERM or ``stop`` is set.

    Raises HomeAlreadyRunning, HomeConfigError or ComponentError when it cannot start.
    """
    lock = DataDirLock(config.data_dir)
    lock.acquire()
    # JMFTS serves on a thread of this process: with the default 5 ms switch interval a
    # request it parses could hold the GIL, and the router with it, for 5 ms at a time
    # (docs/architecture.md "Home"). Restored on return, for in-process callers.
    previous_switch = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    # Everything home and its children create from here on (logs, the event log,
    # databases) is private to its owner; restored on return, for in-process callers.
    previous_umask = os.umask(0o077)
    try:
        registry, nats_server, substrate = build_registry(config)

        async def report(status: ComponentStatus) -> None:
            log.info(
                "component %s: %s%s",
                status.name,
                status.state,
                f" ({status.detail})" if status.detail else "",
            )
            await substrate.publish_status("component", status.name, status.state, status.detail)

        registry.on_change(report)
        with stop_on_signals(stop) as stopping:
            await registry.start_all()
            try:
                state = HomeState(
                    pid=os.getpid(),
                    data_dir=str(config.data_dir),
                    nats_url=nats_server.url,
                    monitor_url=nats_server.monitor_url,
                    started_at=datetime.now(UTC).isoformat(),
                    components={row["name"]: row for row in components_table(registry)},
                    member=None if config.cluster is None else config.cluster.member,
                )
                lock.write_state(state)
                if on_ready is not None:
                    on_ready(state, registry)
                watcher = asyncio.create_task(registry.watch(config.health_interval_s))
                try:
                    await stopping.wait()
                    log.info("stopping")
                finally:
                    registry.stop_watching()
                    await cancel_and_wait(watcher, reraise=False)
            finally:
                await registry.stop_all()
    finally:
        os.umask(previous_umask)
        sys.setswitchinterval(previous_switch)
        lock.release()

"""Who may do what on home's bus: one nats-server user per node, permissions from the catalog.

nats-server enforces all of it (docs/architecture.md "Security"); this module only
decides, as pure functions, and writes what it decided:

- :func:`node_user`: a catalog node publishes what the catalog says it publishes
  (an agent: its own ``events.workspace.<agent>.out.>``, whatever else it declares,
  plus the look-up, fetch and ack of its own durable inbox consumer, which the
  substrate makes, and nothing else of JetStream) and subscribes what it declares,
  its own rails, its health subjects (an agent: and its private ``_INBOX.<node>.>``);
  it may answer requests made to it (``allow_responses``) and its health requests
  (``_HEALTH.<health subject>.>``), nothing more.
- :func:`bridge_user`: a device's bridge half publishes that device's imports and
  its link status, and subscribes that device's exports.
- :func:`router_user`: the router subscribes the active bindings and the
  device-less speak rail, and publishes the deliveries and the resolved speaks.
- ``substrate`` (the control surface and the event log) and ``admin`` (the CLI)
  may do anything, ``home.control.>`` and ``$JS.API.>`` included; nobody else may.

:class:`BusAuthority` keeps the passwords (new ones every start, one 0600 file per
user under ``DATA_DIR/nats/users``), renders the ``authorization`` block for
nats-server and has it reloaded whenever the set of users or their rights changes.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt

from home.substrate.launchers import health_reply_prefix, node_health_subject
from home.substrate.reminder_streams import keeps_reminders
from home.substrate.routing import Route
from shared.bus_credentials import ADMIN_USER, USERS_DIR, BusCredentials, credentials_file
from shared.files import write_atomic
from shared.messages.history import history_subject
from shared.schema import BridgeHalf, NodeSpec
from shared.subjects import (
    DEVICELESS_SPEAK_PATTERN,
    SPEECH_COMPLETED_PATTERN,
    agent_inbox_durable,
    agent_out_prefix,
    bridge_status_subject,
    private_inbox_prefix,
    rail_pattern,
    reminder_schedule_subject,
    reminders_durable,
    reminders_stream,
    workspace_in_subject,
)

log = logging.getLogger(__name__)

SUBSTRATE_USER = "substrate"
ROUTER_USER = "router"
EVERYTHING = (">",)
DEVICELESS_SPEAK = DEVICELESS_SPEAK_PATTERN
RESOLVED_SPEAK = rail_pattern("speak")
SPEECH_ACKS = SPEECH_COMPLETED_PATTERN


@dataclass(frozen=True)
class BusUser:
    """One bus user and what the server lets it publish and subscribe."""

    name: str
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    # May publish to the reply subject of a request it received (health checks).
    allow_responses: bool = False

    def permissions(self) -> dict[str, Any]:
        """The user's ``permissions`` block in nats-server's configuration."""
        return {
            "publish": _allow(self.publish),
            "subscribe": _allow(self.subscribe),
            **({"allow_responses": True} if self.allow_responses else {}),
        }

    def counts(self) -> dict[str, int]:
        """How many patterns it may publish and subscribe, for `home status`."""
        return {"publish": len(self.publish), "subscribe": len(self.subscribe)}


def _allow(patterns: tuple[str, ...]) -> dict[str, list[str]]:
    # An empty allow list is no restriction at all to nats-server; deny everything instead.
    return {"allow": list(patterns)} if patterns else {"deny": [">"]}


def _unique(patterns: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(patterns))


def durable_inbox_rights(agent: str) -> list[str]:
    """What an agent node publishes to read its rail through its own durable consumer
    (``home/agents/inbox.py``): find the stream, look that consumer up, fetch from it and
    ack its messages. Never make or change one: a consumer's maker chooses its filter,
    so the substrate makes it (``home/substrate/agent_inboxes.py``)."""
    durable = agent_inbox_durable(agent)
    return [
        "$JS.API.STREAM.NAMES",
        f"$JS.API.CONSUMER.INFO.*.{durable}",
        f"$JS.API.CONSUMER.MSG.NEXT.*.{durable}",
        f"$JS.ACK.*.{durable}.>",
    ]


def reminder_rights(agent: str) -> list[str]:
    """What an agent node with the intent step publishes to keep its reminders
    (``home/reminders/book.py``): schedule and cancel on its own subjects, list its own
    stream, read and ack its consumer of fired reminders. Its stream and that consumer
    are the substrate's to make, as its inbox is."""
    stream, durable = reminders_stream(agent), reminders_durable(agent)
    return [
        reminder_schedule_subject(agent, ">"),
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.STREAM.MSG.GET.{stream}",
        f"$JS.API.CONSUMER.INFO.{stream}.{durable}",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}",
        f"$JS.ACK.{stream}.{durable}.>",
    ]


def node_user(spec: NodeSpec) -> BusUser:
    """A catalog node's user, named after the node."""
    publish = list(spec.publishes)
    own = list(spec.publishes)
    replies: list[str] = []
    if spec.agent is not None:
        own = [f"{agent_out_prefix(spec.agent)}.>"]
        # Beyond its own rails, what its catalog entry declares (the operator: the delegate
        # acks) and its own inbox (a delegation that timed out is told there, in turn order).
        inbox = workspace_in_subject(spec.agent)
        publish = [*own, *spec.publishes, inbox, *durable_inbox_rights(spec.agent)]
        if keeps_reminders(spec):
            publish += reminder_rights(spec.agent)
        # Every agent node watches the speech acks (which device has gone silent), reads
        # its replies and its inbox's deliveries under its own prefix, and answers for its
        # conversations (docs/architecture.md "Sessions").
        replies = [
            SPEECH_ACKS,
            f"{private_inbox_prefix(spec.name)}.>",
            history_subject(spec.agent),
        ]
    health = [node_health_subject(spec.name)]
    declared = spec.config.get("health_subject")  # a service node may name its own
    if isinstance(declared, str):
        health.append(declared)
    subscribe = [*spec.subscribes, *own, *health, *replies]
    # Its health answers go where only it may publish, whatever reloads came between.
    publish += [f"{health_reply_prefix(subject)}.>" for subject in health]
    return BusUser(spec.name, _unique(publish), _unique(subscribe), allow_responses=True)


def bridge_user_name(device: str) -> str:
    """The bus user of ``device``'s bridge half at home."""
    return f"bridge.{device}"


def bridge_user(half: BridgeHalf) -> BusUser:
    """A device's bridge half: publishes its imports, subscribes its exports."""
    return BusUser(
        bridge_user_name(half.device),
        _unique([*half.import_patterns, bridge_status_subject(half.bridge)]),
        _unique(half.export_patterns),
    )


def router_user(routes: Iterable[Route]) -> BusUser:
    """The router: the active bindings' deliveries (and resolved speaks) out, the
    device-less speaks in. It reads the bindings themselves from their consumers on the
    event log, on the substrate's connection (home/substrate/route_consumers.py)."""
    delivering = [r for r in routes if r.deliver_to is not None]
    return BusUser(
        ROUTER_USER,
        _unique([*(r.deliver_to for r in delivering if r.deliver_to), RESOLVED_SPEAK]),
        _unique([DEVICELESS_SPEAK]),
    )


def derive_users(
    nodes: Iterable[NodeSpec], routes: Iterable[Route], halves: Iterable[BridgeHalf]
) -> list[BusUser]:
    """Every user of a home running ``nodes`` and ``routes`` for the paired ``halves``."""
    users = [
        BusUser(ADMIN_USER, EVERYTHING, EVERYTHING),
        BusUser(SUBSTRATE_USER, EVERYTHING, EVERYTHING),
        router_user(routes),
    ]
    users += [node_user(spec) for spec in nodes]
    users += [bridge_user(half) for half in halves]
    return users


# bcrypt's work factor slows the guessing of a password a person chose; these are
# random (shared/bus_credentials.py), so the lowest cost keeps a connect cheap and
# the hash still keeps the secret out of the server's configuration file.
BCRYPT_ROUNDS = 4


def hash_password(password: str) -> str:
    """``password`` as nats-server checks it without holding it (bcrypt)."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=BCRYPT_ROUNDS)).decode()


def render_authorization(users: Iterable[BusUser], hashes: dict[str, str]) -> str:
    """The ``authorization`` block of nats-server's configuration (JSON is valid there);
    each user's password only as its bcrypt hash."""
    entries = [
        {"user": u.name, "password": hashes[u.name], "permissions": u.permissions()} for u in users
    ]
    return json.dumps({"authorization": {"users": entries}}, indent=2) + "\n"


Reload = Callable[[], Awaitable[None]]


Halves = Callable[[], list[BridgeHalf]]


class BusAuthority:
    """The users of one home's bus, their credentials files, and the server's config file.

    The users follow what runs: the nodes and routes of the active schemas
    (:meth:`authorize`, called by the schema runtime before it starts nodes and
    after it stops them) and the paired devices (``halves``, looked at on every
    :meth:`refresh`). ``reload`` asks the running nats-server to read the file
    again; it is called only when the rendered users changed.
    """

    def __init__(self, data_dir: Path, config_file: Path, halves: Halves | None = None) -> None:
        self.data_dir = data_dir
        self.config_file = config_file
        self.users: dict[str, BusUser] = {}
        self._halves = halves or list
        self._nodes: tuple[NodeSpec, ...] = ()
        self._routes: tuple[Route, ...] = ()
        self._passwords: dict[str, BusCredentials] = {}
        self._hashes: dict[str, str] = {}
        self._reload: Reload | None = None
        self._changing = asyncio.Lock()
        # Files of an earlier run name passwords no server knows any more; gone at first write.
        self._stale_files = True

    def attach(self, reload: Reload) -> None:
        """Reload the server through ``reload`` on every later change."""
        self._reload = reload

    def credentials(self, user: str) -> BusCredentials:
        """``user``'s credentials (made, and written to its file, on first ask)."""
        found = self._passwords.get(user)
        if found is None:
            found = BusCredentials.generate(user)
            found.write(credentials_file(self.data_dir, user))
            self._passwords[user] = found
            self._hashes[user] = hash_password(found.password)
        return found

    def url(self, user: str, base_url: str) -> str:
        """``base_url`` with ``user``'s credentials."""
        return self.credentials(user).url(base_url)

    async def authorize(self, nodes: Sequence[NodeSpec], routes: Sequence[Route]) -> None:
        """Give exactly ``nodes`` (and the router exactly ``routes``) their rights."""
        self._nodes, self._routes = tuple(nodes), tuple(routes)
        await self.refresh()

    async def refresh(self) -> None:
        """Bring the server's users up to date with the nodes, routes and paired devices."""
        async with self._changing:
            await self._update(derive_users(self._nodes, self._routes, self._halves()))

    async def _update(self, users: Iterable[BusUser]) -> None:
        wanted = {u.name: u for u in users}
        if wanted == self.users and self.config_file.exists():
            return
        if self._stale_files:
            for stale in (self.data_dir / USERS_DIR).glob("*.json"):
                stale.unlink()
            self._stale_files = False
        for name in wanted:
            self.credentials(name)
        for gone in set(self._passwords) - set(wanted):
            del self._passwords[gone], self._hashes[gone]
            credentials_file(self.data_dir, gone).unlink(missing_ok=True)
        text = render_authorization(wanted.values(), self._hashes)
        write_atomic(self.config_file, text, private=True)
        self.users = wanted
        if self._reload is not None:
            await self._reload()
        log.info("bus authorization: %d users", len(wanted))

    def view(self) -> list[dict[str, Any]]:
        """Each user and its permission counts, for `home status`."""
        return [{"user": name, **user.counts()} for name, user in sorted(self.users.items())]

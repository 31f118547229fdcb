"""Bus authorization over a live home: who may publish and subscribe what, refused by nats-server.

One home (the shipped catalog, schema ``edge_asr`` applied, two devices paired)
and every user it creates. For each user and each class of subject, the test
publishes and subscribes with that user's own credentials from the data dir:
what must be refused draws a permissions violation from the server (seen by
the client's error callback and counted by home), what must work is delivered.
The expectations are written out here by role, not derived from the code under test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError
from nats.js.api import AckPolicy, ConsumerConfig

from home.substrate.client import HomeClient
from home.substrate.config import DEFAULT_CATALOG, DEFAULT_SCHEMA_DIR, HomeConfig
from home.substrate.datadir import STATE_FILE
from home.substrate.launchers import health_reply_prefix, node_health_subject
from home.up import run_home
from shared import control
from shared.bus_credentials import BusCredentials, credentials_file
from shared.subjects import agent_inbox_durable, private_inbox_prefix, workspace_in_subject
from tests.home.substrate.conftest import wait_for

DEVICES = ("board", "tui")
# Either outcome ends the wait at once; this bounds only a machine under heavy load.
DELIVERY_S = 10.0
RESEND_EVERY = 50  # polls of 10 ms
JETSTREAM_API = "$JS.API."


@dataclass
class LiveHome:
    """A running home in this process: its config, its bare bus URL, and how to stop it."""

    config: HomeConfig
    url: str
    task: asyncio.Task[None]
    stop: asyncio.Event

    def url_as(self, user: str) -> str:
        return BusCredentials.read(credentials_file(self.config.data_dir, user)).url(self.url)

    async def request(self, verb: str, **args: object) -> object:
        async with HomeClient(self.config.data_dir) as client:
            return await client.request(verb, **args)


async def start_home(tmp_path: Path, *, bus_auth: bool) -> LiveHome:
    config = HomeConfig(
        data_dir=tmp_path / "data",
        catalog=DEFAULT_CATALOG,
        schema_dir=DEFAULT_SCHEMA_DIR,
        health_interval_s=0.2,
        llm_url="none",  # the agents' users exist whether or not their nodes can start
        memory=False,
        bridge_port=0,
        bus_auth=bus_auth,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_home(config, stop=stop))
    state = config.data_dir / STATE_FILE

    async def up() -> bool:
        if task.done():
            task.result()
        return state.exists()

    await wait_for(up, "home up to write its state file", 30)
    return LiveHome(config, json.loads(state.read_text())["nats_url"], task, stop)


async def stop_home(live: LiveHome) -> None:
    live.stop.set()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(live.task, 30)


@pytest.fixture
async def home(tmp_path: Path) -> AsyncIterator[LiveHome]:
    live = await start_home(tmp_path, bus_auth=True)
    try:
        await live.request(control.SCHEMA_APPLY, name="edge_asr")
        for device in DEVICES:
            await live.request(control.BRIDGE_PAIR, device=device)
        yield live
    finally:
        await stop_home(live)


class Probe:
    """One user's connection, with the permissions violations the server sent it."""

    def __init__(self, nc: NatsClient, refusals: list[str]) -> None:
        self.nc = nc
        self.refusals = refusals

    @classmethod
    async def connect(cls, url: str, *, inbox_prefix: str | None = None) -> Probe:
        refusals: list[str] = []

        async def on_error(exc: Exception) -> None:
            refusals.append(str(exc))

        prefix = {"inbox_prefix": inbox_prefix} if inbox_prefix is not None else {}
        nc = await nats.connect(url, error_cb=on_error, max_reconnect_attempts=0, **prefix)
        return cls(nc, refusals)

    def refused(self, kind: str, subject: str) -> bool:
        """Whether the server has refused this connection's ``kind`` on ``subject``."""
        word = {"publish": "publish", "subscribe": "subscription"}[kind]
        # nats-py hands the server's message over lower-cased.
        needle = f'permissions violation for {word} to "{subject}"'.lower()
        return any(needle in refusal.lower() for refusal in self.refusals)

    async def outcome(
        self, kind: str, subject: str, received: list[Msg], send: Callable[[], Awaitable[None]]
    ) -> bool:
        """``send``, then True once a message is ``received``, False once the server
        refuses ``kind``, whichever comes first.

        The server's -ERR travels apart from the traffic a flush waits for, so neither
        can be waited for alone. ``send`` is repeated until one of them shows: on a
        loaded machine a core NATS message on ``events.>`` is now and then not delivered
        at all, with or without authorization, and a lost probe must not read as a refusal.
        """
        try:
            async with asyncio.timeout(DELIVERY_S):
                while True:
                    await send()
                    for _ in range(RESEND_EVERY):
                        if self.refused(kind, subject):
                            return False
                        if received:
                            return True
                        await asyncio.sleep(0.01)
        except TimeoutError:
            pytest.fail(f"{kind} {subject}: neither delivered nor refused ({self.refusals})")


def publisher(nc: NatsClient, subject: str) -> Callable[[], Awaitable[None]]:
    """Publish an empty event on ``subject`` and flush."""

    async def send() -> None:
        await nc.publish(subject, b"{}")
        await nc.flush()

    return send


async def collecting(nc: NatsClient, subject: str) -> tuple[Subscription, list[Msg]]:
    """A subscription that keeps what it receives in a list (no polling that could lose one)."""
    received: list[Msg] = []

    async def keep(msg: Msg) -> None:
        received.append(msg)

    return await nc.subscribe(subject, cb=keep), received


async def can_publish(user: Probe, admin: NatsClient, subject: str) -> bool:
    """Publish as ``user``; True if it was delivered (to the admin), False if refused."""
    if subject.startswith(JETSTREAM_API):
        return await can_ask_jetstream(user, admin, subject)
    sub, received = await collecting(admin, subject)
    await admin.flush()

    async def send() -> None:
        await user.nc.publish(subject, b"{}")
        await user.nc.flush()

    try:
        return await user.outcome("publish", subject, received, send)
    finally:
        await sub.unsubscribe()


async def can_ask_jetstream(user: Probe, admin: NatsClient, subject: str) -> bool:
    """JetStream's API answers requests and no plain subscriber sees them: ask it as
    ``user``, with the answer sent to the admin, and see whether it answers."""
    inbox = admin.new_inbox()
    answers, received = await collecting(admin, inbox)
    await admin.flush()

    async def send() -> None:
        await user.nc.publish(subject, b"", reply=inbox)
        await user.nc.flush()

    try:
        return await user.outcome("publish", subject, received, send)
    finally:
        await answers.unsubscribe()


async def can_subscribe(user: Probe, admin: NatsClient, subject: str) -> bool:
    """Subscribe ``subject`` as ``user``; True if what the admin publishes there arrives."""
    sub, received = await collecting(user.nc, subject)
    await user.nc.flush()
    if subject.startswith(JETSTREAM_API):
        # What is published there goes to JetStream, never to a subscriber: the refusal
        # (or its absence, after a moment) is all there is to see.
        await asyncio.sleep(0.3)
        return not user.refused("subscribe", subject)

    async def send() -> None:
        await admin.publish(subject, b"{}")
        await admin.flush()

    try:
        return await user.outcome("subscribe", subject, received, send)
    finally:
        with contextlib.suppress(NatsError):
            await sub.unsubscribe()


# Subject classes: (name -> (a subject to publish on, a subject to subscribe)). Subscriptions
# are concrete: nats-server admits a wildcard that overlaps a user's rights and then
# delivers only what the rights cover, which is enforcement too, but not a refusal.
def classes(agent: str | None, device: str | None) -> dict[str, tuple[str, str]]:
    own_agent = agent or "edge_asr"
    other_agent = "edge_asr" if own_agent == "jmfts_operator" else "jmfts_operator"
    own_device = device or "board"
    other_device = "tui" if own_device == "board" else "board"
    return {
        # A report rail: no device's bridge half, router or effector takes it.
        "own out": (
            f"events.workspace.{own_agent}.out.memorize.{own_device}",
            f"events.workspace.{own_agent}.out.memorize.{own_device}",
        ),
        "other agent's out": (
            f"events.workspace.{other_agent}.out.journal_append",
            f"events.workspace.{other_agent}.out.memorize.{own_device}",
        ),
        "own device's rails": (
            f"events.sensation.{own_device}.turn",
            f"events.workspace.visitor.out.speak.{own_device}",
        ),
        "other device's rails": (
            f"events.sensation.{other_device}.turn",
            f"events.workspace.visitor.out.speak.{other_device}",
        ),
        "control": ("home.control.ping", "home.control.ping"),
        "jetstream": ("$JS.API.STREAM.INFO.EVENTS", "$JS.API.STREAM.INFO.EVENTS"),
        "journal": ("events.journal.append.b1", "events.journal.append.b1"),
    }


ALL = {"own out", "other agent's out", "own device's rails", "other device's rails",
       "control", "jetstream", "journal"}  # fmt: skip
# user -> (agent, device, classes it may publish, classes it may subscribe)
EXPECTED: dict[str, tuple[str | None, str | None, set[str], set[str]]] = {
    "admin": (None, None, ALL, ALL),
    "substrate": (None, None, ALL, ALL),
    # The router's rights (deliveries out, device-less speaks in) are in no class here.
    "router": (None, None, set(), set()),
    "agent.edge_asr": ("edge_asr", None, {"own out"}, {"own out", "journal"}),
    "agent.jmfts_operator": ("jmfts_operator", None, {"own out"}, {"own out", "journal"}),
    "effector.journal_append": (None, None, {"journal"}, {"journal"}),
    "effector.jmfts_write": (None, None, set(), set()),
    "bridge.board": (None, "board", {"own device's rails"}, {"own device's rails"}),
    "bridge.tui": (None, "tui", {"own device's rails"}, {"own device's rails"}),
}


async def test_every_user_may_do_exactly_what_it_owns(home: LiveHome) -> None:
    status = await home.request(control.STATUS)
    assert isinstance(status, dict)
    users = {u["user"]: u for u in status["bus"]["users"]}
    assert set(users) == set(EXPECTED), "home up creates one user per node, device and role"
    assert all(u["publish"] >= 1 and u["subscribe"] >= 1 for u in users.values())
    admin = await nats.connect(home.url_as("admin"))
    try:
        for user, (agent, device, publish, subscribe) in EXPECTED.items():
            probe = await Probe.connect(home.url_as(user))
            try:
                for name, (to_publish, to_subscribe) in classes(agent, device).items():
                    assert await can_publish(probe, admin, to_publish) == (name in publish), (
                        f"{user} publish {name} ({to_publish})"
                    )
                    assert await can_subscribe(probe, admin, to_subscribe) == (name in subscribe), (
                        f"{user} subscribe {name} ({to_subscribe})"
                    )
            finally:
                await probe.nc.close()
    finally:
        await admin.close()

    async def counted() -> bool:
        view = await home.request(control.STATUS)
        assert isinstance(view, dict)
        seen = {(v["user"], v["kind"], v["subject"]) for v in view["bus"]["violations"]}
        return ("agent.edge_asr", "publish", "home.control.ping") in seen

    await wait_for(counted, "home status to count the server's violations")


async def refused_connection(url: str) -> None:
    """The server answers a CONNECT with ``url``'s credentials (or none) by refusing it.

    Spoken in NATS's own text protocol over a plain socket: nats-py leaves the socket
    of a refused connection open for the collector to find.
    """
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        info = await asyncio.wait_for(reader.readline(), 5)
        assert info.startswith(b"INFO ")
        options: dict[str, object] = {"verbose": False, "pedantic": False}
        if parts.username:
            options |= {"user": parts.username, "pass": parts.password}
        writer.write(b"CONNECT " + json.dumps(options).encode() + b"\r\nPING\r\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.readline(), 5)
        assert answer.strip() == b"-ERR 'Authorization Violation'", answer
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def test_a_client_without_credentials_cannot_connect(home: LiveHome) -> None:
    await refused_connection(home.url)
    await refused_connection(BusCredentials("admin", "not-the-password").url(home.url))


async def test_agent_a_cannot_make_the_effector_write_into_agent_b_journal(
    home: LiveHome,
) -> None:
    # What the effector subscribes, and takes the agent from: events.workspace.*.out.<verb>.
    effector = await nats.connect(home.url_as("effector.journal_append"))
    a = await Probe.connect(home.url_as("agent.edge_asr"))
    try:
        _, rail = await collecting(effector, "events.workspace.*.out.journal_append")
        await effector.flush()
        as_b = "events.workspace.jmfts_operator.out.journal_append"
        assert not await a.outcome("publish", as_b, rail, publisher(a.nc, as_b))
        as_a = "events.workspace.edge_asr.out.journal_append"
        assert await a.outcome("publish", as_a, rail, publisher(a.nc, as_a))
        await asyncio.sleep(0.3)  # anything late would show now
        assert {m.subject for m in rail} == {as_a}, "nothing ever arrived as agent B"
    finally:
        await a.nc.close()
        await effector.close()


async def test_unapplying_a_schema_removes_its_users_without_restarting_the_server(
    home: LiveHome,
) -> None:
    before = await home.request(control.STATUS)
    assert isinstance(before, dict)
    pid = {c["name"]: c for c in before["components"]}["nats-server"]["pid"]
    agent_url = home.url_as("agent.edge_asr")
    await home.request(control.SCHEMA_UNAPPLY, name="edge_asr")
    after = await home.request(control.STATUS)
    assert isinstance(after, dict)
    users = {u["user"] for u in after["bus"]["users"]}
    assert users == {"admin", "substrate", "router", "bridge.board", "bridge.tui"}
    assert {c["name"]: c for c in after["components"]}["nats-server"]["pid"] == pid
    await refused_connection(agent_url)
    assert not credentials_file(home.config.data_dir, "agent.edge_asr").exists()


async def test_with_authorization_off_anyone_may_write_as_any_agent_and_control_home(
    tmp_path: Path,
) -> None:
    """What the authorization prevents: the one test that runs a home with it off."""
    live = await start_home(tmp_path, bus_auth=False)
    try:
        anyone = await nats.connect(live.url)
        try:
            effector_rail = await anyone.subscribe("events.workspace.*.out.journal_append")
            await anyone.publish("events.workspace.edge_asr.out.journal_append", b"{}")
            assert (await effector_rail.next_msg(timeout=DELIVERY_S)).data == b"{}"
            pong = await anyone.request(control.control_subject(control.PING), b"{}", timeout=5)
            assert json.loads(pong.data)["ok"]
        finally:
            await anyone.close()
    finally:
        await stop_home(live)


async def edge_say(*args: str) -> tuple[int, str]:
    """``edge say ARGS``: its exit code and everything it printed."""
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("edge")), "say", "hello", *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()


async def test_direct_without_credentials_is_refused_with_what_to_give_instead(
    home: LiveHome, tmp_path: Path
) -> None:
    code, out = await edge_say("--direct", home.url, "--data-dir", str(tmp_path / "elsewhere"))
    assert code == 1
    assert "carries no credentials" in out and "--data-dir" in out
    # With the home's own data dir, the admin's credentials get it onto the bus: it
    # then waits for an answer no agent gives (no model here), and says so.
    code, out = await edge_say(
        "--direct", home.url, "--data-dir", str(home.config.data_dir), "--timeout", "0.5"
    )
    assert code == 1
    assert "timeout" in out and "credentials" not in out


async def test_a_health_answer_after_a_reload_of_the_users_is_delivered(home: LiveHome) -> None:
    """nats-server forgets which requests a user may answer when its users are reloaded
    (a device paired): an answer to an ``_INBOX`` request is then refused, while a health
    answer goes where the node may publish by a grant of its own."""
    node = await Probe.connect(home.url_as("agent.edge_asr"))
    asker = await nats.connect(home.url_as("substrate"))
    try:
        health = node_health_subject("agent.edge_asr")
        _, asked = await collecting(node.nc, health)
        await node.nc.flush()
        health_reply = f"{health_reply_prefix(health)}.probe"
        _, answers = await collecting(asker, health_reply)
        plain_reply = f"{asker.new_inbox()}"
        _, plain_answers = await collecting(asker, plain_reply)
        await asker.publish(health, b"", reply=plain_reply)
        await asker.publish(health, b"", reply=health_reply)
        await asker.flush()

        async def both_asked() -> bool:
            return len(asked) == 2

        await wait_for(both_asked, "both requests to reach the node", DELIVERY_S)
        await home.request(control.BRIDGE_PAIR, device="hall")
        await asyncio.sleep(0.5)  # nats-server has read the reloaded users
        for request in asked:
            await request.respond(b"ok")
        await node.nc.flush()

        async def answered() -> bool:
            return bool(answers) and node.refused("publish", plain_reply)

        await wait_for(answered, "the health answer, and the plain one refused", DELIVERY_S)
        assert not node.refused("publish", health_reply)
        assert plain_answers == []
    finally:
        await node.nc.close()
        await asker.close()


async def test_an_agent_reads_its_own_inbox_but_can_neither_make_nor_widen_it(
    home: LiveHome,
) -> None:
    """Before: an agent's user could make its durable consumer with any filter (another
    device's turns, the whole event log) and read that through its private inbox."""
    stream = home.config.event_log.stream
    durable = agent_inbox_durable("edge_asr")
    rail = workspace_in_subject("edge_asr")
    agent = await Probe.connect(
        home.url_as("agent.edge_asr"), inbox_prefix=private_inbox_prefix("agent.edge_asr")
    )
    admin = await nats.connect(home.url_as("admin"))
    try:
        for make in (
            f"$JS.API.CONSUMER.CREATE.{stream}.{durable}",
            f"$JS.API.CONSUMER.CREATE.{stream}.{durable}.events.>",
            f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{durable}",
        ):
            assert not await can_ask_jetstream(agent, admin, make), f"{make} is not refused"
        # As a client library would try it: the request is refused and nothing changes.
        widened = ConsumerConfig(
            name=durable, durable_name=durable, filter_subject="events.>",
            ack_policy=AckPolicy.EXPLICIT,
        )  # fmt: skip
        with pytest.raises((NatsError, TimeoutError)):
            await agent.nc.jetstream().add_consumer(stream, widened, timeout=2)
        assert agent.refused("publish", f"$JS.API.CONSUMER.CREATE.{stream}.{durable}.events.>")
        # The substrate made the consumer when the schema was applied, on the rail alone.
        js = agent.nc.jetstream()
        assert (await js.consumer_info(stream, durable)).config.filter_subject == rail

        await admin.jetstream().publish(workspace_in_subject("jmfts_operator"), b"not yours")
        await admin.jetstream().publish(rail, b"for edge_asr")
        sub = await js.pull_subscribe_bind(durable, stream=stream)
        (msg,) = await sub.fetch(1, timeout=DELIVERY_S)
        assert (msg.subject, msg.data) == (rail, b"for edge_asr")
        await msg.ack_sync(timeout=DELIVERY_S)
        info = await admin.jetstream().consumer_info(stream, durable)
        assert (
            info.ack_floor is not None and info.ack_floor.stream_seq == msg.metadata.sequence.stream
        )
        assert info.num_ack_pending == 0 and info.num_pending == 0
        assert not any("next" in r.lower() or "$js.ack" in r.lower() for r in agent.refusals)
    finally:
        await agent.nc.close()
        await admin.close()

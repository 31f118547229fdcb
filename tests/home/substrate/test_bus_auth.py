"""Bus users and their rights, derived from the catalog, the routes and the paired halves."""

from __future__ import annotations

import json
from pathlib import Path

import bcrypt

from bridge.pair import pair
from home.substrate.bus_auth import (
    BusAuthority,
    BusUser,
    derive_users,
    hash_password,
    node_user,
    render_authorization,
    router_user,
)
from home.substrate.nats_server import NatsServer
from home.substrate.routing import Route
from shared.schema import NodeCatalog, load_bridge_half, load_node_catalog

REPO = Path(__file__).resolve().parents[3]


def shipped() -> NodeCatalog:
    return load_node_catalog(REPO / "schemas" / "nodes.yaml")


def test_an_agent_publishes_only_its_own_out_rail() -> None:
    user = node_user(shipped()["agent.edge_asr"])
    assert user.publish[0] == "events.workspace.edge_asr.out.>"
    # Besides its out rail, only its own inbox (a timed-out delegation is told there).
    others = [p for p in user.publish[1:] if p.startswith("events.")]
    assert others == ["events.workspace.edge_asr.in"]
    assert "events.workspace.edge_asr.in" in user.subscribe
    assert "home.node.agent.edge_asr.health" in user.subscribe
    assert user.allow_responses
    assert not any(p.startswith(("home.control", "$JS")) for p in user.subscribe)
    # Of JetStream, only its own durable inbox consumer, and its own replies.
    jetstream = [p for p in user.publish if p.startswith("$JS")]
    assert all("agent_edge_asr_inbox" in p for p in jetstream if "CONSUMER" in p or "ACK" in p)
    assert not any(".DELETE." in p or p.startswith("$JS.API.STREAM.INFO") for p in jetstream)
    assert "_INBOX.agent.edge_asr.>" in user.subscribe and "_INBOX.>" not in user.subscribe
    # Its health answers, under its own health subject only.
    health = [p for p in user.publish if p.startswith("_HEALTH.")]
    assert health == ["_HEALTH.home.node.agent.edge_asr.health.>"]


def test_the_operator_may_ack_delegations_and_the_asker_read_the_acks() -> None:
    operator = node_user(shipped()["agent.jmfts_operator"])
    asker = node_user(shipped()["agent.edge_asr"])
    assert "events.journal.delegate.*" in operator.publish
    assert "events.journal.delegate.*" not in asker.publish
    assert "events.journal.delegate.*" in asker.subscribe
    assert "home.history.edge_asr" in asker.subscribe


def test_an_effector_publishes_only_its_acks_and_its_health_answers() -> None:
    user = node_user(shipped()["effector.journal_append"])
    assert user.publish == (
        "events.journal.append.*",
        "_HEALTH.home.node.effector.journal_append.health.>",
    )
    assert "events.workspace.*.out.journal_append" in user.subscribe


def test_the_router_publishes_exactly_the_active_deliveries_and_reads_no_binding() -> None:
    routes = [
        Route("s", "events.sensation.*.turn", "agent.edge_asr", "events.workspace.edge_asr.in"),
        Route("s", "events.workspace.*.out.journal_append", "effector.journal_append", None),
    ]
    user = router_user(routes)
    # The bindings come from their consumers on the event log, on the substrate's connection.
    assert user.subscribe == ("events.workspace.*.out.speak",)
    assert user.publish == ("events.workspace.edge_asr.in", "events.workspace.*.out.speak.*")


def test_a_bridge_half_publishes_its_imports_and_subscribes_its_exports(tmp_path: Path) -> None:
    pair("board", "127.0.0.1:2222", tmp_path)
    half = load_bridge_half(tmp_path / "board.home.yaml")
    (user,) = (u for u in derive_users([], [], [half]) if u.name == "bridge.board")
    assert set(user.publish) == {*half.import_patterns, "events.bridge.board.status"}
    assert "events.sensation.board.turn" in user.publish
    assert set(user.subscribe) == set(half.export_patterns)
    assert "events.workspace.*.out.speak.board" in user.subscribe


def test_only_admin_and_substrate_reach_control_and_jetstream() -> None:
    catalog = shipped()
    users = derive_users(catalog.nodes.values(), [], [])
    wide = {u.name for u in users if ">" in u.publish}
    assert wide == {"admin", "substrate"}


def test_an_empty_right_denies_everything_rather_than_allowing_it() -> None:
    perms = BusUser("quiet", (), ()).permissions()
    assert perms["publish"] == {"deny": [">"]} and perms["subscribe"] == {"deny": [">"]}


def test_the_rendered_block_names_every_user_with_its_password_hash() -> None:
    users = [BusUser("a", ("x",), ("y",), allow_responses=True)]
    # Long enough that a random bcrypt salt cannot contain it by chance (a
    # two-letter password once did, about one run in eighty).
    secret = "plain-text-secret-never-rendered"
    text = render_authorization(users, {"a": hash_password(secret)})
    (entry,) = json.loads(text)["authorization"]["users"]
    assert secret not in entry["password"] and entry["password"].startswith("$2")
    assert bcrypt.checkpw(secret.encode(), entry.pop("password").encode())
    assert entry == {
        "user": "a",
        "permissions": {
            "publish": {"allow": ["x"]},
            "subscribe": {"allow": ["y"]},
            "allow_responses": True,
        },
    }


async def test_the_authority_writes_files_and_reloads_only_on_change(tmp_path: Path) -> None:
    reloads: list[int] = []

    async def reload() -> None:
        reloads.append(1)

    authority = BusAuthority(tmp_path, tmp_path / "auth.conf")
    authority.attach(reload)
    spec = shipped()["agent.edge_asr"]
    await authority.authorize([spec], [])
    await authority.authorize([spec], [])
    assert len(reloads) == 1
    assert (tmp_path / "nats" / "users" / "agent.edge_asr.json").is_file()
    await authority.authorize([], [])
    assert len(reloads) == 2
    assert not (tmp_path / "nats" / "users" / "agent.edge_asr.json").exists()
    assert {u["user"] for u in authority.view()} == {"admin", "substrate", "router"}


def test_violations_are_read_from_the_server_log_once_each(tmp_path: Path) -> None:
    server = NatsServer(tmp_path)
    log = tmp_path / "nats-server.log"
    lines = [
        '[1] 2026/12/01 21:41:08.274692 [ERR] 127.0.0.1:49794 - cid:5 - "v2.16.0:python3" - '
        '"$G/user:agent.edge_asr" - Publish Violation - Subject "home.control.ping"',
        '[1] 2026/12/01 21:41:08.274712 [ERR] 127.0.0.1:49794 - cid:5 - "v2.16.0:python3" - '
        '"$G/user:bridge.board" - Subscription Violation - '
        'Subject "events.sensation.tui.turn", SID 1',
    ]
    log.write_text(lines[0] + "\n" + lines[1])  # the second line is still being written
    assert server.scan_violations() == [("agent.edge_asr", "publish", "home.control.ping")]
    with log.open("a") as more:
        more.write("\n" + lines[0] + "\n")
    assert server.scan_violations() == [
        ("bridge.board", "subscribe", "events.sensation.tui.turn"),
        ("agent.edge_asr", "publish", "home.control.ping"),
    ]
    assert server.scan_violations() == []
    assert server.violations_view()[0] == {
        "user": "agent.edge_asr", "kind": "publish", "subject": "home.control.ping", "count": 2,
    }  # fmt: skip


def test_an_agent_may_fetch_from_and_ack_its_inbox_but_not_make_one() -> None:
    """Before: it might make its own durable consumer, and so choose the consumer's filter."""
    user = node_user(shipped()["agent.edge_asr"])
    jetstream = [p for p in user.publish if p.startswith("$JS")]
    assert not any("CREATE" in p or "UPDATE" in p for p in jetstream), jetstream
    assert "$JS.API.CONSUMER.MSG.NEXT.*.agent_edge_asr_inbox" in jetstream
    assert "$JS.ACK.*.agent_edge_asr_inbox.>" in jetstream

"""A cluster member's configuration: the options of `home up`, the nats-server file, the
members' records; and two real nats-servers that form a JetStream cluster from them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nats
import pytest

from home.substrate.config import CLUSTER_SECRET_ENV, ClusterConfig
from home.substrate.errors import ComponentError, HomeConfigError, MemberRecordError
from home.substrate.membership import MemberRecord
from home.substrate.nats_server import NatsServer, route_url
from home.substrate.schema_runtime import SchemaSource
from home.up_command import cluster_config
from shared import control
from shared.proc import free_port


def test_no_cluster_option_is_a_home_on_one_machine(tmp_path: Path) -> None:
    assert cluster_config(tmp_path / "home", None, None, ()) is None


def test_a_member_is_named_after_its_data_dir_and_reads_the_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CLUSTER_SECRET_ENV, "pw")
    config = cluster_config(tmp_path / "m2", None, 6251, ("nats://127.0.0.1:6250",))
    assert config == ClusterConfig("m2", 6251, ("nats://127.0.0.1:6250",), "pw")


@pytest.mark.parametrize(
    ("member", "port", "join", "secret", "names"),
    [
        (None, None, ("nats://127.0.0.1:6250",), "pw", "--cluster-port"),
        (None, 6251, (), None, CLUSTER_SECRET_ENV),
        ("m 1", 6251, (), "pw", "--member"),
        (None, 6251, ("127.0.0.1:6250",), "pw", "--join"),
        (None, 6251, ("nats://u:p@127.0.0.1:6250",), "pw", "--join"),
    ],
)
def test_a_bad_cluster_option_is_named(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    member: str | None,
    port: int | None,
    join: tuple[str, ...],
    secret: str | None,
    names: str,
) -> None:
    monkeypatch.delenv(CLUSTER_SECRET_ENV, raising=False)
    if secret is not None:
        monkeypatch.setenv(CLUSTER_SECRET_ENV, secret)
    with pytest.raises(HomeConfigError, match=names):
        cluster_config(tmp_path / "m1", member, port, join)


def test_route_urls_carry_the_route_user() -> None:
    assert route_url("nats://10.0.0.2:6250", "pw") == "nats://route:pw@10.0.0.2:6250"
    with pytest.raises(ComponentError, match="nats://HOST:PORT"):
        route_url("10.0.0.2:6250", "pw")


def test_a_member_record_round_trips_and_a_broken_one_is_named() -> None:
    record = MemberRecord(
        "m1", "nats://127.0.0.1:4222", 42, "/tmp/m1", (SchemaSource("a.yaml", "schema: a"),),
        ({"name": "agent.x", "state": "running"},),
    )  # fmt: skip
    assert MemberRecord.from_json(record.to_json(), "m1") == record
    broken = json.dumps({"member": "m1"}).encode()
    with pytest.raises(MemberRecordError, match=r"HOME_MEMBERS/m1.*nats_url"):
        MemberRecord.from_json(broken, "m1")


async def test_two_members_servers_form_a_jetstream_cluster_and_replicate(
    tmp_path: Path,
) -> None:
    ports = [free_port(), free_port()]
    first = ClusterConfig("a", ports[0], (), "pw")
    second = ClusterConfig("b", ports[1], (f"nats://127.0.0.1:{ports[0]}",), "pw")
    servers = [
        NatsServer(tmp_path / "a", cluster=first),
        NatsServer(tmp_path / "b", cluster=second),
    ]
    await asyncio.gather(*(s.start() for s in servers))
    try:
        assert (tmp_path / "a" / "server.conf").stat().st_mode & 0o077 == 0
        async with asyncio.timeout(30):
            while servers[0].jetstream_peers() != ["a", "b"]:
                await asyncio.sleep(0.2)
        nc = await nats.connect(servers[1].url)
        try:
            js = nc.jetstream()
            await js.add_stream(name="T", subjects=["t.>"], num_replicas=2)
            # A new replicated stream answers once its replicas have elected a leader.
            async with asyncio.timeout(30):
                while (await js.stream_info("T")).cluster.leader is None:  # type: ignore[union-attr]
                    await asyncio.sleep(0.1)
            ack = await js.publish("t.x", b"1")
            info = await js.stream_info("T")
            assert info.config.num_replicas == 2 and ack.seq == 1
            assert info.cluster is not None and {info.cluster.leader} | {
                r.name for r in info.cluster.replicas or []
            } == {"a", "b"}
        finally:
            await nc.close()
    finally:
        await asyncio.gather(*(s.close() for s in servers))


def test_a_member_has_control_subjects_of_its_own() -> None:
    assert control.member_control_subject("m1", "status") == "home.member.m1.control.status"
    with pytest.raises(ValueError, match="unknown control verb"):
        control.member_control_subject("m1", "reboot")

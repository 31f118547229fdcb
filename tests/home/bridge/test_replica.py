"""Two members' pairing folders kept the same through the ``HOME_PAIRING`` bucket.

A real nats-server with JetStream; two :class:`PairingReplica` over two data
directories stand in for two members of one home (their buckets are one, as a
cluster's replicated bucket is). Pairings are made with the real ``bridge pair``.
"""

from __future__ import annotations

import json
import stat
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.js.kv import KeyValue

from bridge.pair import PairingFiles, pair
from home.bridge.component import PairedHalves, key_fingerprint
from home.bridge.replica import BUCKET, DEVICE_PREFIX, HOST_KEY, PairingReplica, Seal
from home.bridge.revoked import RevokedKey
from home.substrate.nats_server import NatsServer
from shared.schema import load_bridge_half

SECRET = "the-routes-password"


class Member:
    """One member's bridge folder and its replica; counts the endpoint's refreshes."""

    def __init__(self, root: Path, nc: NatsClient, secret: str = SECRET) -> None:
        self.dir = root / "bridge"
        self.nc = nc
        self.refreshed = 0
        self.replica = PairingReplica(self.dir, self, secret, self._refresh)

    async def _refresh(self) -> None:
        self.refreshed += 1

    def files(self, device: str) -> PairingFiles:
        return PairingFiles.of(self.dir, device)

    async def bucket(self) -> KeyValue:
        return await self.nc.jetstream().key_value(BUCKET)


@pytest.fixture
async def nc(tmp_path: Path) -> AsyncIterator[NatsClient]:
    server = NatsServer(tmp_path / "nats")
    await server.start()
    client = await nats.connect(server.url)
    try:
        yield client
    finally:
        await client.close()
        await server.close()


@pytest.fixture
async def members(tmp_path: Path, nc: NatsClient) -> AsyncIterator[tuple[Member, Member]]:
    one, two = Member(tmp_path / "m1", nc), Member(tmp_path / "m2", nc)
    for member in (one, two):
        await member.replica.start()
    try:
        yield one, two
    finally:
        for member in (one, two):
            await member.replica.close()


async def settle(*members: Member) -> None:
    """Each member looks twice: what one wrote, the others have applied."""
    for _ in range(2):
        for member in members:
            await member.replica.sync()


async def test_a_device_paired_on_one_member_is_served_by_the_other(
    members: tuple[Member, Member],
) -> None:
    one, two = members
    pair("kitchen", "127.0.0.1:2222", one.dir)
    await settle(one, two)
    mine, theirs = one.files("kitchen"), two.files("kitchen")
    for path, copy in (
        (mine.home_half, theirs.home_half),
        (mine.edge_half, theirs.edge_half),
        (mine.client_key, theirs.client_key),
        (one.replica.folder.host_key_path, two.replica.folder.host_key_path),
    ):
        assert copy.read_text() == path.read_text(), copy
    for secret in (theirs.client_key, two.replica.folder.host_key_path):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600, secret
    assert two.refreshed >= 1
    assert not two.replica.host_key_differs
    halves, unusable = PairedHalves(two.dir.parent).load()
    assert [h.device for h in halves] == ["kitchen"] and not unusable
    # The bucket never holds a private key in the clear.
    kv = await two.bucket()
    for key in ("device.kitchen", HOST_KEY):
        raw = (await kv.get(key)).value or b""
        assert b"PRIVATE KEY" not in raw, key
    assert "1 device(s) shared" in (await two.replica.health()).detail


async def test_unpairing_on_one_member_unpairs_everywhere(members: tuple[Member, Member]) -> None:
    one, two = members
    pair("hall", "127.0.0.1:2222", one.dir)
    pair("porch", "127.0.0.1:2222", one.dir)
    await settle(one, two)
    assert two.files("hall").home_half.is_file()
    one.replica.folder.remove("hall")  # as `home devices unpair hall` leaves the files
    await settle(one, two)
    assert not two.files("hall").home_half.exists()
    assert not two.files("hall").client_key.exists()
    assert two.files("porch").home_half.is_file()  # the other device stays


async def test_a_key_revoked_on_one_member_is_refused_on_the_other(
    members: tuple[Member, Member],
) -> None:
    one, two = members
    pair("shed", "127.0.0.1:2222", one.dir)
    await settle(one, two)
    half_text = one.files("shed").home_half.read_text()
    half = load_bridge_half(one.files("shed").home_half)
    record = RevokedKey(
        "shed", key_fingerprint(half), half.endpoint.client_key or "", datetime.now(UTC).isoformat()
    )
    one.replica.folder.revoked.add(record)
    one.replica.folder.remove("shed")
    await settle(one, two)
    assert two.replica.folder.revoked.fingerprints() == {record.fingerprint}
    assert not two.files("shed").home_half.exists()
    # A backup of the half copied back on the second member does not serve the key.
    two.files("shed").home_half.write_text(half_text)
    halves, _ = (paired := PairedHalves(two.dir.parent)).load()
    assert not halves and [h.device for h in paired.refused] == ["shed"]


async def test_a_member_with_its_own_host_key_keeps_it_and_says_so(
    tmp_path: Path, nc: NatsClient
) -> None:
    one = Member(tmp_path / "m1", nc)
    pair("kitchen", "127.0.0.1:2222", one.dir)
    await one.replica.start()
    two = Member(tmp_path / "m2", nc)
    pair("garage", "127.0.0.1:2223", two.dir)  # paired alone, with a host key of its own
    own = two.replica.folder.host_key()
    await two.replica.start()
    try:
        await settle(one, two)
        assert two.replica.folder.host_key() == own != one.replica.folder.host_key()
        assert two.replica.host_key_differs
        assert "host key differs" in (await two.replica.health()).detail
        # Each member's device is served by both.
        assert two.files("kitchen").home_half.is_file()
        assert one.files("garage").home_half.is_file()
        # Nor does a member's host key made anew replace the home's in the bucket.
        home_key = one.replica.folder.host_key()
        pair("porch", "127.0.0.1:2222", one.dir)  # makes no host key: one exists
        one.replica.folder.host_key_path.unlink()
        pair("shed", "127.0.0.1:2222", one.dir)  # a host key made anew
        await settle(one, two)
        raw = json.loads((await (await one.bucket()).get(HOST_KEY)).value or b"{}")
        assert Seal(SECRET).open(raw["key"], HOST_KEY) == home_key
        assert one.replica.host_key_differs
    finally:
        await one.replica.close()
        await two.replica.close()


HOSTILE = {
    "not JSON": b"{nope",
    "not an object": b"[1, 2]",
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "a number for a half": json.dumps({"home_half": 7}).encode(),
    "no half": json.dumps({"edge_half": "x"}).encode(),
    "a half that does not load": json.dumps({"home_half": "bridge: [\n"}).encode(),
    "odd unicode": json.dumps({"home_half": "\u202e\udcff" * 50}, ensure_ascii=True).encode(),
}


async def test_hostile_entries_are_refused_by_name_and_the_next_good_one_is_applied(
    members: tuple[Member, Member], tmp_path: Path
) -> None:
    one, two = members
    kv = await two.bucket()
    for i, raw in enumerate(HOSTILE.values()):
        await kv.put(f"{DEVICE_PREFIX}bad{i}", raw)
    await kv.put("somebody.else", b"{}")
    # A good pairing sealed under another password, and another device's half by name.
    stranger = Member(tmp_path / "stranger", one.nc, secret="another-password")
    pair("attic", "127.0.0.1:2222", stranger.dir)
    pairing = stranger.replica.folder.read("attic")
    assert pairing is not None
    await kv.put("device.attic", stranger.replica.encode("device.attic", pairing))
    await kv.put("device.cellar", json.dumps({"home_half": pairing.home_half}).encode())
    await kv.put("device.x=y", json.dumps({"home_half": pairing.home_half}).encode())
    started = time.monotonic()
    await settle(two)
    assert time.monotonic() - started < 30
    refusals = two.replica.refusals
    assert refusals.count == len(HOSTILE) + 4, refusals
    assert not list(two.dir.glob("*.home.yaml"))  # nothing applied
    assert (await two.replica.health()).ok
    await settle(two)
    assert two.replica.refusals.count == len(HOSTILE) + 4  # counted once, not every look
    # The next good pairing is served.
    pair("kitchen", "127.0.0.1:2222", one.dir)
    await settle(one, two)
    assert two.files("kitchen").home_half.is_file()
    detail = (await two.replica.health()).detail
    assert f"{BUCKET}/" in detail and "refused" in detail


def test_a_seal_opens_only_under_its_own_password() -> None:
    sealed = Seal(SECRET).seal("private")
    assert Seal(SECRET).open(sealed, "k") == "private"
    with pytest.raises(Exception, match="another TETHER_CLUSTER_SECRET"):
        Seal("other").open(sealed, "k")

"""The members of a home spread over machines, and the rescheduling of a lost member's nodes.

Each member of a clustered home (docs/architecture.md "Growing past one
machine") keeps one record in the replicated key-value bucket
:data:`BUCKET`: its name, bus URL, pid, the schemas it runs (their text, so
another member can run them) and its nodes with their state. It writes the
record every :data:`HEARTBEAT_S`; a record whose revision has not moved for
:data:`GONE_AFTER_S` belongs to a member that is gone. The surviving member
with the lowest name then claims the record by deleting it at the revision it
saw (compare-and-set: one claimant wins) and applies the gone member's schemas:
their agents start again here and read the turns still queued in their durable
inboxes, which the event log keeps on every member.

The member also widens the event log and the bucket to ``replicas`` copies as
soon as that many JetStream servers are current, and never narrows them: a
replica lost with a member is what keeps the log whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.errors import Error as NatsError
from nats.js.errors import (
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NoKeysError,
)
from nats.js.errors import NotFoundError as JsNotFound
from nats.js.kv import KeyValue

from home.substrate.component import ComponentInfo, Health, open_bucket, until_answered
from home.substrate.config import ClusterConfig
from home.substrate.errors import ComponentError, MemberRecordError, SchemaRuntimeError
from home.substrate.nats_server import NatsServer
from home.substrate.schema_runtime import SchemaRuntime, SchemaSource
from home.substrate.substrate_component import Substrate
from shared.errors import SchemaError
from shared.lifecycle import Service, cancel_and_wait

log = logging.getLogger(__name__)

BUCKET = "HOME_MEMBERS"
HEARTBEAT_S = 1.0
# Longer than one heartbeat whose put times out (JetStream's 5 s request timeout while
# a stream elects a leader): a slow beat is not a lost member.
GONE_AFTER_S = 12.0
# A member whose record has not been renewed for this long stops its schemas itself (it
# is fenced): no other member may take it for lost sooner than GONE_AFTER_S after a
# renewal it saw, which came after this member sent it, so its nodes are killed with
# five seconds to spare and its agents never run beside the adopter's, even when it is
# cut off from the others. Longer than the leader elections after a loss, during which
# every member's beats fail for a few seconds.
FENCE_AFTER_S = 7.0
# How often a member checks whether it must fence itself (apart from its beats, which
# may each wait out a request timeout).
FENCE_CHECK_S = 0.25
# How long a starting member keeps asking the bucket before it gives up.
START_WAIT_S = 60.0


@dataclass(frozen=True)
class MemberRecord:
    """What one member says of itself in :data:`BUCKET`."""

    member: str
    nats_url: str
    pid: int
    data_dir: str
    schemas: tuple[SchemaSource, ...] = ()
    nodes: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> bytes:
        """The record as stored."""
        body = {
            "member": self.member,
            "nats_url": self.nats_url,
            "pid": self.pid,
            "data_dir": self.data_dir,
            "schemas": [{"file": s.file, "text": s.text} for s in self.schemas],
            "nodes": list(self.nodes),
        }
        return json.dumps(body).encode()

    @classmethod
    def from_json(cls, data: bytes, key: str) -> MemberRecord:
        """Parse a stored record; MemberRecordError names the key and what is wrong."""
        try:
            body = json.loads(data)
            return cls(
                member=str(body["member"]),
                nats_url=str(body["nats_url"]),
                pid=int(body["pid"]),
                data_dir=str(body["data_dir"]),
                schemas=tuple(
                    SchemaSource(str(s["file"]), str(s["text"])) for s in body["schemas"]
                ),
                nodes=tuple(dict(n) for n in body["nodes"]),
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise MemberRecordError(f"{BUCKET}/{key}: not a member record: {exc!r}") from exc


@dataclass
class Sighting:
    """A member as this member last saw it in the bucket."""

    record: MemberRecord
    revision: int
    moved_at: float = field(default_factory=time.monotonic)


class Membership(Service):
    """This member's record, its view of the others, and rescheduling; a component."""

    name = "membership"

    def __init__(
        self,
        cluster: ClusterConfig,
        substrate: Substrate,
        server: NatsServer,
        data_dir: str,
        *,
        stream: str,
        also: tuple[str, ...] = (),
    ) -> None:
        self.cluster = cluster
        # The substrate's connection and schema runtime, which exist once it has started.
        self._substrate = substrate
        self._server = server
        self._data_dir = data_dir
        self._stream = stream
        # More streams replicated as widely as the log (the buckets of other components).
        self._also = also
        self.seen: dict[str, Sighting] = {}
        # Member -> the member that took over its schemas, as this member saw it happen.
        self.adopted: dict[str, str] = {}
        self.last_error: str | None = None
        # When this member last failed to beat: it saw no record move before then, so
        # silence up to then is its own blindness, not the others' (see _gone).
        self._blind_at = time.monotonic()
        self._kv: KeyValue | None = None
        # The revision of this member's record as it last wrote it, and the schemas in it.
        self._revision: int | None = None
        self._written: tuple[SchemaSource, ...] = ()
        # When the last renewal of this member's record that succeeded was sent, and the
        # schemas it stopped because no renewal succeeded since (docs/architecture.md
        # "Growing past one machine"); they start again once one does.
        self._renewed_at = time.monotonic()
        self.fenced: tuple[SchemaSource, ...] = ()
        self._task: asyncio.Task[None] | None = None
        self._guard: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Open the bucket, give up what others took over, write the first record and begin
        the heartbeat."""
        # While members join, the bucket's stream widens its replicas and elects a
        # leader; a request in between times out (seen: a member's first beat).
        await until_answered(
            self._join,
            within_s=START_WAIT_S,
            interval_s=HEARTBEAT_S,
            asking=f"membership: the {BUCKET} bucket",
        )
        self._task = asyncio.create_task(self._run(), name="membership")
        self._guard = asyncio.create_task(self._fence_when_late(), name="membership fence")

    async def _join(self) -> None:
        """Open the bucket, read it, give up what others took over, beat once."""
        try:
            self._kv = await self._bucket()
            await self._read(self._kv)
            await self._give_up_taken_over()
            await self._beat()
        except (NatsError, TimeoutError):
            self._blind_at = time.monotonic()
            raise

    async def _give_up_taken_over(self) -> None:
        """Unapply the restored schemas another member runs: it took them over while this
        member was lost, and one agent reads each durable inbox."""
        runtime = self._substrate.runtime
        if runtime is None:
            return
        elsewhere: dict[str, str] = {}
        for key, sighting in self.seen.items():
            if key == self.cluster.member:
                continue
            for source in sighting.record.schemas:
                try:
                    elsewhere[runtime.parse(source).name] = key
                except SchemaError as exc:
                    log.warning("membership: %s lists an unusable schema: %s", key, exc)
        for name in [n for n in runtime.active if n in elsewhere]:
            log.warning(
                "membership: schema %s runs on member %s (taken over while this member was "
                "lost); not running it here", name, elsewhere[name],
            )  # fmt: skip
            await runtime.unapply(name, forget=False)

    async def close(self) -> None:
        """Stop the heartbeat and take this member's record out (it left; it is not lost)."""
        task, self._task = self._task, None
        await cancel_and_wait(task, reraise=False)
        guard, self._guard = self._guard, None
        await cancel_and_wait(guard, reraise=False)
        if self._kv is not None:
            try:
                await self._kv.delete(self.cluster.member)
            except (NatsError, TimeoutError) as exc:
                log.warning("membership: could not remove this member's record: %r", exc)

    async def health(self) -> Health:
        """Healthy while the heartbeat runs."""
        if self._task is None or self._task.done():
            return Health(False, "the membership heartbeat stopped")
        if self._guard is None or self._guard.done():
            return Health(False, "the membership's fence watch stopped")
        if self.fenced:
            # Healthy: fencing is membership doing its job. An unhealthy component is
            # restarted, and a restart takes the record out as a clean stop does, which
            # would leave the fenced schemas to nobody.
            return Health(True, self._fenced_detail())
        return Health(True, self.last_error or "")

    def _fenced_detail(self) -> str:
        late = time.monotonic() - self._renewed_at
        files = ", ".join(source.file for source in self.fenced)
        return (
            f"fenced: this member's record was not renewed for {late:.0f} s, so its schemas "
            f"({files}) are stopped until it is, or another member runs them"
        )

    def info(self) -> ComponentInfo:
        """The bucket and the member's name."""
        return ComponentInfo(f"kv {BUCKET} as {self.cluster.member}", os.getpid())

    # --- the heartbeat ------------------------------------------------------------------

    def _js_nc(self) -> NatsClient:
        nc = self._substrate.nc
        if nc is None:
            raise SchemaRuntimeError("membership runs only while the substrate is connected")
        return nc

    async def _bucket(self) -> KeyValue:
        return await open_bucket(self._js_nc().jetstream(), BUCKET)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                await self._beat()
                self.last_error = None
            except (NatsError, TimeoutError, MemberRecordError, SchemaRuntimeError) as exc:
                # A stream leader lost with a member is elected again within seconds.
                self._blind_at = time.monotonic()
                self.last_error = f"membership: {exc!r}"
                log.warning("%s", self.last_error)

    async def _beat(self) -> None:
        if self._kv is None:
            return
        await self._write(self._kv)
        await self._look(self._kv)
        await self._widen()

    async def _write(self, kv: KeyValue) -> None:
        """Write this member's record over the one it last wrote. Gone from the bucket, it
        was claimed: another member took this one for lost while its beats stalled and
        runs its schemas now, so it gives them up before it writes afresh."""
        sent = time.monotonic()
        record = self._record()
        key = self.cluster.member
        if self._revision is not None:
            try:
                self._revision = await kv.update(key, record.to_json(), last=self._revision)
                self._written = record.schemas
                await self._renewed(sent)
                return
            except KeyWrongLastSequenceError:
                try:
                    # A put of its own that timed out and still landed moved the revision.
                    self._revision = (await kv.get(key)).revision
                except KeyNotFoundError:
                    await self._give_up_claimed()
                    record = self._record()
                else:
                    self._revision = await kv.update(key, record.to_json(), last=self._revision)
                    self._written = record.schemas
                    await self._renewed(sent)
                    return
        self._revision = await kv.put(key, record.to_json())
        self._written = record.schemas
        self._renewed_at = sent

    async def _renewed(self, sent: float) -> None:
        """The record written over this member's own revision: nobody took it for lost, so
        what it stopped while it could not renew starts again here (its bindings from
        where their consumers stood, as an adopter's do)."""
        self._renewed_at = sent
        if not self.fenced:
            return
        log.warning("membership: the record is renewed; starting the fenced schemas again")
        fenced, self.fenced = self.fenced, ()
        await self._run_schemas(fenced, self.cluster.member)

    async def _fence_when_late(self) -> None:
        """Fence this member once its record has gone FENCE_AFTER_S without a renewal."""
        while True:
            await asyncio.sleep(FENCE_CHECK_S)
            late = time.monotonic() - self._renewed_at
            runtime = self._substrate.runtime
            if late > FENCE_AFTER_S and runtime is not None and runtime.active:
                await self._fence(runtime)

    async def _fence(self, runtime: SchemaRuntime) -> None:
        """Kill this member's nodes now and stop its schemas; they stay in its record."""
        self.fenced = tuple(a.source for a in runtime.active.values()) + self.fenced
        log.error("membership: %s", self._fenced_detail())
        for runner in runtime.runners.values():
            runner.kill()
        for name in list(runtime.active):
            try:
                await runtime.unapply(name, forget=False)
            except (SchemaError, SchemaRuntimeError, ComponentError, NatsError, OSError) as exc:
                # Its nodes are dead already; what is left (the bus's users, the status
                # event) waits for the bus, which a fenced member may not have.
                log.warning("membership: fencing %s: %r", name, exc)

    async def _give_up_claimed(self) -> None:
        """Unapply the schemas of the record another member claimed: it runs them now."""
        log.warning(
            "membership: another member took %s for lost (its heartbeat stalled for %.0f s)"
            " and runs its schemas; not running them here",
            self.cluster.member, GONE_AFTER_S,
        )  # fmt: skip
        runtime = self._substrate.runtime
        self.fenced = ()  # another member runs them now
        if runtime is None:
            return
        claimed = set()
        for source in self._written:
            with contextlib.suppress(SchemaError):
                claimed.add(runtime.parse(source).name)
        for name in [n for n in runtime.active if n in claimed]:
            await runtime.unapply(name, forget=False)

    def _record(self) -> MemberRecord:
        runtime = self._substrate.runtime
        schemas: tuple[SchemaSource, ...] = ()
        nodes: tuple[dict[str, Any], ...] = ()
        if runtime is not None:
            # A fenced schema is still this member's: it runs it again once it renews.
            schemas = tuple(a.source for a in runtime.active.values()) + self.fenced
            nodes = tuple(r.view().to_dict() for r in runtime.runners.values())
        return MemberRecord(
            self.cluster.member,
            self._server.url,
            os.getpid(),
            self._data_dir,
            schemas,
            nodes,
        )

    async def _read(self, kv: KeyValue) -> None:
        """Read every record and note which moved since the last read."""
        try:
            keys = await kv.keys()
        except NoKeysError:
            keys = []
        now = time.monotonic()
        for key in keys:
            try:
                entry = await kv.get(key)
            except (JsNotFound, NoKeysError):
                continue
            if entry.value is None or entry.revision is None:
                continue
            seen = self.seen.get(key)
            if seen is None or seen.revision != entry.revision:
                record = MemberRecord.from_json(entry.value, key)
                self.seen[key] = Sighting(record, entry.revision, now)
        for key in set(self.seen) - set(keys):
            self.seen.pop(key)

    async def _look(self, kv: KeyValue) -> None:
        """Read every record; reschedule the gone members' schemas."""
        await self._read(kv)
        gone = [s for k, s in self.seen.items() if k != self.cluster.member and self._gone(s)]
        alive = sorted(k for k, s in self.seen.items() if not self._gone(s))
        if gone and alive and alive[0] == self.cluster.member:
            for sighting in gone:
                await self._adopt(kv, sighting)

    def _gone(self, sighting: Sighting) -> bool:
        """No move of its record for GONE_AFTER_S while this member was watching: after
        this member's own failed beats (the streams electing leaders once a member is
        lost) every other record looks still, and the living must not be taken over."""
        watched_since = max(sighting.moved_at, self._blind_at)
        return time.monotonic() - watched_since > GONE_AFTER_S

    async def _adopt(self, kv: KeyValue, sighting: Sighting) -> None:
        """Claim a gone member's record; if the claim wins, run its schemas here."""
        gone = sighting.record.member
        try:
            await kv.delete(gone, last=sighting.revision)
        except KeyWrongLastSequenceError:
            log.info("membership: %s came back or was claimed by another member", gone)
            self.seen.pop(gone, None)
            return
        self.seen.pop(gone, None)
        self.adopted[gone] = self.cluster.member
        log.warning(
            "membership: member %s is gone (no heartbeat for %.0f s); running its schemas here",
            gone, GONE_AFTER_S,
        )  # fmt: skip
        await self._run_schemas(sighting.record.schemas, gone)

    async def _run_schemas(self, sources: tuple[SchemaSource, ...], whose: str) -> None:
        """Apply ``sources`` here (those not active yet): their bindings are routed from
        where their consumers on the event log stand, what ``whose`` routed acked."""
        runtime = self._substrate.runtime
        if runtime is None:
            return
        for source in sources:
            try:
                schema = runtime.parse(source)
                if schema.name in runtime.active:
                    continue
                await runtime.apply(source)
                log.info("membership: running %s for %s", schema.name, whose)
            except (SchemaError, SchemaRuntimeError, NatsError, TimeoutError) as exc:
                self.last_error = f"could not run {source.file} for {whose}: {exc}"
                log.error("membership: %s", self.last_error)

    async def _widen(self) -> None:
        """Replicate the event log and the buckets on as many members as asked and current."""
        peers = await asyncio.to_thread(self._server.jetstream_peers)
        want = min(self.cluster.replicas, len(peers))
        js = self._js_nc().jetstream()
        for stream in (self._stream, f"KV_{BUCKET}", *self._also):
            try:
                info = await js.stream_info(stream)
            except JsNotFound:
                continue  # its component has not made it yet
            if (info.config.num_replicas or 1) < want:
                info.config.num_replicas = want
                await js.update_stream(info.config)
                log.info("membership: %s now has %d replicas", stream, want)

    # --- status -------------------------------------------------------------------------

    async def view(self) -> list[dict[str, Any]]:
        """Every member this member sees: where it runs, its schemas and nodes, and whether
        it is alive (read afresh, so a member that just wrote its record is in it)."""
        if self._kv is not None:
            try:
                await self._read(self._kv)
            except (NatsError, TimeoutError, MemberRecordError) as exc:
                self.last_error = f"membership: {exc!r}"
        now = time.monotonic()
        rows = []
        for key, sighting in sorted(self.seen.items()):
            record = sighting.record
            rows.append(
                {
                    "member": record.member,
                    "self": key == self.cluster.member,
                    "alive": not self._gone(sighting),
                    "last_heartbeat_s": round(now - sighting.moved_at, 1),
                    "nats_url": record.nats_url,
                    "pid": record.pid,
                    "data_dir": record.data_dir,
                    "schemas": [s.file for s in record.schemas],
                    # The schemas this member stopped because it could not renew its record.
                    "fenced": [s.file for s in self.fenced] if key == self.cluster.member else [],
                    "nodes": list(record.nodes),
                }
            )
        return rows

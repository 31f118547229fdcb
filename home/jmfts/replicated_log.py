"""A store's write log as a replicated JetStream stream: every member's store a view of it.

In a clustered home (docs/architecture.md "Growing past one machine") each member's
JMFTS commits its writes here instead of applying them at once. ``commit`` publishes
the entry (:mod:`home.jmfts.write_log`) to the ``JMFTS_LOG`` stream, replicated
like the event log, and returns once the stream has it on a majority *and* this
member's own store has applied it: a document is findable at ack on the member
that wrote it, as on a single home. Every member applies the stream in order, on a
thread of its own: each entry in one SQLite transaction that also records its
stream sequence (``meta.log_sequence``), so an entry is applied once, after
restarts and crashes too, and the stores agree row for row. An entry the store
refuses (a parent deleted meanwhile) is refused on every member alike; it is still
applied (as nothing) and its error goes back to its writer.

A member that starts (or joins, wiped) applies everything after its recorded
sequence before it serves. The stream keeps every entry (no limits): a snapshot
to start from when it is trimmed is not built yet, and a member whose store is
behind the stream's first entry refuses to start, saying so.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sqlite3
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.errors import MaxPayloadError
from nats.js.api import ConsumerConfig, DeliverPolicy, StreamConfig, StreamInfo
from nats.js.errors import NotFoundError

from home.jmfts.errors import InvalidInput, JmftsError, LogUnavailable
from home.jmfts.store import DocumentStore
from home.jmfts.write_log import Entry, from_wire
from home.substrate.component import until_answered

log = logging.getLogger(__name__)

STREAM = "JMFTS_LOG"
SUBJECT = "jmfts.log"
WRITE_ID = "Tether-Write-Id"
SEQUENCE_KEY = "log_sequence"
#: How long a writer waits for the stream's ack and then for its own store to apply.
COMMIT_TIMEOUT_S = 30.0
#: One attempt to publish; a write is published again (same id) until the commit's time.
PUBLISH_TIMEOUT_S = 5.0
#: How long a starting member may take to apply what the stream holds.
CATCH_UP_TIMEOUT_S = 600.0
CONNECT_TIMEOUT_S = 10.0
#: How long a starting member waits for a clustered JetStream's quorum.
QUORUM_TIMEOUT_S = 300.0
T = TypeVar("T")


def stream_config(replicas: int = 1) -> StreamConfig:
    """The log's stream: every entry kept, ``replicas`` copies (a floor the cluster widens)."""
    return StreamConfig(name=STREAM, subjects=[SUBJECT], num_replicas=replicas)


def applied_sequence(store: DocumentStore) -> int:
    """The stream sequence of the last entry ``store`` applied (0: none)."""
    with store.lock:
        row = store.conn.execute("SELECT value FROM meta WHERE key = ?", (SEQUENCE_KEY,)).fetchone()
    return 0 if row is None else int(row[0])


def apply_at(store: DocumentStore, entry: Entry | None, sequence: int) -> Any:
    """Apply ``entry`` (None: an entry that did not parse) and record ``sequence`` in one
    transaction; the entry's result, or the error it was refused with."""
    result: Any = None
    with store.transaction() as conn:
        if entry is not None:
            try:
                result = store.apply(entry)
            except JmftsError as exc:
                result = exc
            # Values SQLite cannot hold (an id past 64 bits, text with a lone surrogate),
            # which the HTTP boundary refuses before they are ever logged.
            except (OverflowError, UnicodeEncodeError) as exc:
                result = InvalidInput(f"log entry {sequence}: {exc}")
        conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (SEQUENCE_KEY, str(sequence)),
        )
    return result


def _has_rows(store: DocumentStore) -> bool:
    with store.lock:
        return store.conn.execute("SELECT 1 FROM principals LIMIT 1").fetchone() is not None


class ReplicatedLog:
    """``store``'s log on the bus at ``url`` (a :class:`~home.jmfts.write_log.WriteLog`)."""

    def __init__(self, store: DocumentStore, url: Callable[[], str], replicas: int = 1) -> None:
        self.store = store
        self._url = url
        self._replicas = replicas
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._nc: NatsClient | None = None
        self._applier: asyncio.Task[None] | None = None
        self._pending: dict[str, concurrent.futures.Future[Any]] = {}
        self._lock = threading.Lock()
        self._applied = threading.Condition()
        #: The last sequence applied here; entries by outcome (applied, refused, malformed).
        self.sequence = applied_sequence(store)
        self.counts: Counter[str] = Counter()
        self.last_error = ""

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Connect, make the stream, apply what it holds beyond this store; then commits
        go through it. Blocking (call it off the event loop)."""
        ready: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="jmfts-log", daemon=True
        )
        self._thread.start()
        target = ready.result(timeout=CONNECT_TIMEOUT_S + QUORUM_TIMEOUT_S + 30)
        self.wait_applied(target, CATCH_UP_TIMEOUT_S)
        log.info("jmfts log: applied to sequence %d", self.sequence)

    def _run(self, ready: concurrent.futures.Future[int]) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            last = loop.run_until_complete(self._open())
        # Reported to start(), which owns the thread.
        except BaseException as exc:  # noqa: BLE001
            ready.set_exception(exc)
            loop.run_until_complete(self._close())
            loop.close()
            return
        ready.set_result(last)
        loop.run_forever()
        loop.close()

    async def _open(self) -> int:
        """Connect, make or check the stream, start applying; the stream's last sequence
        as it was found (what this store has to reach before it serves)."""
        self._nc = await nats.connect(
            self._url(),
            name="home.jmfts-log",
            connect_timeout=CONNECT_TIMEOUT_S,
            max_reconnect_attempts=-1,
        )
        info = await until_answered(
            self._ensure_stream,
            within_s=QUORUM_TIMEOUT_S,
            interval_s=1.0,
            asking="the memory log's JetStream",
            hint=" (are a majority of the members up?)",
        )
        if self.sequence == 0 and _has_rows(self.store):
            raise LogUnavailable(
                f"{self.store.data_dir} holds a memory written outside the home's log (a"
                " home that ran alone); it cannot join the shared memory as it is: move that"
                " directory aside to start this member from the log"
            )
        first = info.state.first_seq
        if info.state.messages and first > self.sequence + 1:
            raise LogUnavailable(
                f"the memory log starts at entry {first} and this store has applied"
                f" up to {self.sequence}: it cannot catch up from the log alone"
                " (start it with an empty memory directory)"
            )
        self._applier = asyncio.create_task(self._apply_forever())
        return int(info.state.last_seq)

    async def _ensure_stream(self) -> StreamInfo:
        assert self._nc is not None
        js = self._nc.jetstream()
        try:
            return await js.stream_info(STREAM)
        except NotFoundError:
            return await js.add_stream(stream_config(self._replicas))

    def close(self) -> None:
        """Stop applying and disconnect; commits after this fail."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._close(), loop).result(timeout=15)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=15)

    async def _close(self) -> None:
        if self._nc is not None:
            await self._nc.close()
        # The applier and nats-py's own watchers of the ordered consumer.
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    # -- writing -----------------------------------------------------------------------

    def commit(self, entry: Entry) -> Any:
        """Publish ``entry`` and return its result once this store applied it."""
        write_id = uuid.uuid4().hex
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            self._pending[write_id] = answer
        try:
            self._call(self._publish(entry.to_wire(), write_id), COMMIT_TIMEOUT_S + 5)
            result = answer.result(timeout=COMMIT_TIMEOUT_S)
        except concurrent.futures.TimeoutError as exc:
            raise LogUnavailable(
                "the memory log took the write but this member has not applied it yet"
            ) from exc
        finally:
            with self._lock:
                self._pending.pop(write_id, None)
        if isinstance(result, JmftsError):
            raise result
        return result

    async def _publish(self, data: bytes, write_id: str) -> int:
        """Publish until the stream acks, within :data:`COMMIT_TIMEOUT_S`: while a cluster
        elects a leader or a member joins, a publish may go unanswered. Every attempt
        carries the write's id as ``Nats-Msg-Id``, so the stream keeps one copy."""
        nc = self._nc
        assert nc is not None
        headers = {WRITE_ID: write_id, "Nats-Msg-Id": write_id}
        deadline = asyncio.get_running_loop().time() + COMMIT_TIMEOUT_S
        while True:
            try:
                ack = await nc.jetstream().publish(
                    SUBJECT, data, stream=STREAM, headers=headers, timeout=PUBLISH_TIMEOUT_S
                )
            except MaxPayloadError as exc:
                raise InvalidInput(
                    f"the write is {len(data)} bytes as a log entry; a clustered memory"
                    f" takes at most {nc.max_payload} per write"
                ) from exc
            except (NatsError, TimeoutError) as exc:
                if asyncio.get_running_loop().time() + PUBLISH_TIMEOUT_S > deadline:
                    raise LogUnavailable(f"the memory log did not take the write: {exc!r}") from exc
                self.counts["publish_retried"] += 1
                await asyncio.sleep(0.5)
                continue
            return int(ack.seq)

    def _call(self, coroutine: Coroutine[Any, Any, T], timeout: float = COMMIT_TIMEOUT_S) -> T:
        if self._loop is None:
            raise LogUnavailable("the memory log is not started")
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout=timeout)

    # -- applying ----------------------------------------------------------------------

    async def _apply_forever(self) -> None:
        assert self._nc is not None
        sub = await self._nc.jetstream().subscribe(
            SUBJECT,
            stream=STREAM,
            ordered_consumer=True,
            config=ConsumerConfig(
                deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=self.sequence + 1
            ),
        )
        while True:
            try:
                msg = await sub.next_msg(timeout=None)
            except NatsError as exc:
                self.last_error = f"reading the log: {exc!r}"
                await asyncio.sleep(0.5)
                continue
            await self._apply_one(msg)

    async def _apply_one(self, msg: Msg) -> None:
        sequence = int(msg.metadata.sequence.stream)
        if sequence <= self.sequence:
            return  # applied before (a consumer that started over)
        try:
            entry: Entry | None = from_wire(msg.data)
        except InvalidInput as exc:
            entry = None
            self.counts["malformed"] += 1
            self.last_error = f"entry {sequence}: {exc}"
            log.error("jmfts log: entry %d refused: %s", sequence, exc)
        while True:
            try:
                result = await asyncio.to_thread(apply_at, self.store, entry, sequence)
                break
            # The store cannot write at all (disk full, locked): retried, in order.
            except sqlite3.OperationalError as exc:
                self.last_error = f"entry {sequence} not applied: {exc!r}"
                log.error("jmfts log: %s; retrying", self.last_error)
                await asyncio.sleep(1.0)
        if entry is not None:
            self.counts["refused" if isinstance(result, JmftsError) else "applied"] += 1
        with self._applied:
            self.sequence = sequence
            self._applied.notify_all()
        write_id = (msg.headers or {}).get(WRITE_ID)
        with self._lock:
            answer = self._pending.get(write_id or "")
        if answer is not None and not answer.done():
            answer.set_result(result)

    def wait_applied(self, sequence: int, timeout: float) -> None:
        """Block until this store has applied up to ``sequence``."""
        with self._applied:
            if not self._applied.wait_for(lambda: self.sequence >= sequence, timeout):
                raise LogUnavailable(
                    f"this member applied the memory log to {self.sequence} of {sequence}"
                    f" within {timeout:.0f} s"
                )

    def view(self) -> dict[str, Any]:
        """For ``home status``: where this store stands in the log, and its counts."""
        return {"sequence": self.sequence, **self.counts, "last_error": self.last_error}

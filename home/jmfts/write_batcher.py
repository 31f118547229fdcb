"""Group commit for single-document writes: concurrent ``POST /documents`` share one
embedder call and one SQLite commit, and each is still acked only once findable.

A write with no other in flight runs in its caller's thread, as before. Writes that
overlap go through a pipeline of two worker threads. The embedder takes whatever writes
are waiting — nothing is held back to wait for company unless ``window_s`` asks for
it — and embeds them in one call; the committer takes every embedded batch that is
ready, commits them in one transaction (:meth:`DocumentStore.create_each`) and answers
each caller with its own document or its own error. While one group commits, the next
is being embedded, and writes that arrive meanwhile form the group after, so batch
sizes follow the load by themselves.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from home.jmfts.access import Principal
from home.jmfts.chunk_embedding import Embedded
from home.jmfts.errors import JmftsError
from home.jmfts.models import DocumentCreate, DocumentResponse
from shared.errors import UnavailableError

MAX_BATCH = 64


class GroupCommitStore(Protocol):
    """What the batcher needs of the document store: embed a group, commit a group."""

    def prepare_each(self, requests: list[DocumentCreate]) -> list[Embedded | JmftsError]:
        """Embed every request's document at once; a request that cannot be, its error."""

    def create_each(
        self,
        writes: list[tuple[Principal, DocumentCreate]],
        prepared: list[Embedded | JmftsError] | None = None,
    ) -> list[DocumentResponse | JmftsError]:
        """Commit every write in one transaction; each answered with its document or error."""


class BatcherClosed(JmftsError, UnavailableError):
    """A write arrived after the batcher was closed."""

    status_code = 503


@dataclass
class _Write:
    principal: Principal
    request: DocumentCreate
    answer: Future[DocumentResponse] = field(default_factory=Future)


@dataclass
class _Embedded:
    writes: list[_Write]
    prepared: list[Embedded | JmftsError]


def _fail(writes: list[_Write], exc: BaseException) -> None:
    for write in writes:
        if not write.answer.done():
            write.answer.set_exception(exc)


class WriteBatcher:
    """Collects single writes from many threads and commits them together."""

    def __init__(
        self, store: GroupCommitStore, *, max_batch: int = MAX_BATCH, window_s: float = 0.0
    ) -> None:
        self.store = store
        self.max_batch = max_batch
        self.window_s = window_s
        #: Sizes of the groups committed so far (for tests and the benchmark).
        self.batch_sizes: list[int] = []
        self._incoming: queue.SimpleQueue[_Write | None] = queue.SimpleQueue()
        self._embedded: queue.SimpleQueue[_Embedded | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._workers: list[threading.Thread] = []
        self._in_flight = 0
        self._closed = False

    def submit(self, principal: Principal, request: DocumentCreate) -> DocumentResponse:
        """Create one document; returns once it is committed and findable, or raises the
        error that write alone met.

        A write that finds no other in flight runs in the caller's thread: handing it to
        the workers and back would only add thread switches (measured: p50 15 ms against
        10 ms for a lone client). Writes that overlap it go through the pipeline."""
        write = _Write(principal, request)
        with self._lock:
            if self._closed:
                raise BatcherClosed("the document store is closing; retry the write")
            alone = self._in_flight == 0
            self._in_flight += 1
            if not alone:
                self._start_workers()
                self._incoming.put(write)
        try:
            if not alone:
                return write.answer.result()
            self.batch_sizes.append(1)
            (outcome,) = self.store.create_each([(principal, request)])
            if isinstance(outcome, JmftsError):
                raise outcome
            return outcome
        finally:
            with self._lock:
                self._in_flight -= 1

    def _start_workers(self) -> None:
        if not self._workers:
            self._workers = [
                threading.Thread(target=self._embed_loop, name="jmfts-embed", daemon=True),
                threading.Thread(target=self._commit_loop, name="jmfts-commit", daemon=True),
            ]
            for worker in self._workers:
                worker.start()

    def close(self) -> None:
        """Finish the writes already queued, then stop the workers."""
        with self._lock:
            self._closed = True
            workers = self._workers
            if workers:
                self._incoming.put(None)
        for worker in workers:
            worker.join()

    def _embed_loop(self) -> None:
        stopping = False
        while not stopping:
            first = self._incoming.get()
            if first is None:
                break
            batch = [first]
            deadline = time.monotonic() + self.window_s
            while len(batch) < self.max_batch:
                try:
                    item = self._next(deadline)
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            try:
                prepared = self.store.prepare_each([w.request for w in batch])
            # The embedder failed: every write of the batch did.
            except Exception as exc:  # noqa: BLE001
                _fail(batch, exc)
                continue
            self._embedded.put(_Embedded(batch, prepared))
        self._embedded.put(None)

    def _next(self, deadline: float) -> _Write | None:
        """The next queued write, waiting until ``deadline`` at most (raises Empty)."""
        remaining = deadline - time.monotonic()
        if remaining > 0:
            return self._incoming.get(timeout=remaining)
        return self._incoming.get_nowait()

    def _commit_loop(self) -> None:
        stopping = False
        while not stopping:
            first = self._embedded.get()
            if first is None:
                break
            groups = [first]
            while True:  # every embedded batch that is ready joins this commit
                try:
                    more = self._embedded.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stopping = True
                    break
                groups.append(more)
            writes = [w for g in groups for w in g.writes]
            self._commit(writes, [p for g in groups for p in g.prepared])

    def _commit(self, writes: list[_Write], prepared: list[Embedded | JmftsError]) -> None:
        self.batch_sizes.append(len(writes))
        try:
            outcomes = self.store.create_each([(w.principal, w.request) for w in writes], prepared)
        # The whole group failed (disk full, ...): tell everyone.
        except Exception as exc:  # noqa: BLE001
            _fail(writes, exc)
            return
        for write, outcome in zip(writes, outcomes, strict=True):
            if isinstance(outcome, JmftsError):
                write.answer.set_exception(outcome)
            else:
                write.answer.set_result(outcome)

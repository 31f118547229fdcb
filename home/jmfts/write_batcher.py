"""Group commit for single-document writes: concurrent ``POST /documents`` share one
embedder call and one SQLite commit, and each is still acked only once findable.

One worker thread takes whatever writes are waiting — nothing is held back to wait for
company unless ``window_s`` asks for it, so a lone client pays no extra latency — runs
them through :meth:`DocumentStore.create_each` and answers each caller with its own
document or its own error. Writes that arrive while a batch commits form the next one,
so the batch size follows the load by itself.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from home.jmfts.access import Principal
from home.jmfts.errors import JmftsError
from home.jmfts.models import DocumentCreate, DocumentResponse

if TYPE_CHECKING:
    from home.jmfts.store import DocumentStore

MAX_BATCH = 64


class BatcherClosed(JmftsError):
    """A write arrived after the batcher was closed."""

    status_code = 503


@dataclass
class _Write:
    principal: Principal
    request: DocumentCreate
    answer: Future[DocumentResponse] = field(default_factory=Future)


class WriteBatcher:
    """Collects single writes from many threads and commits them together."""

    def __init__(
        self, store: DocumentStore, *, max_batch: int = MAX_BATCH, window_s: float = 0.0
    ) -> None:
        self.store = store
        self.max_batch = max_batch
        self.window_s = window_s
        #: Sizes of the batches committed so far (for tests and the benchmark).
        self.batch_sizes: list[int] = []
        self._queue: queue.SimpleQueue[_Write | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._closed = False

    def submit(self, principal: Principal, request: DocumentCreate) -> DocumentResponse:
        """Create one document; returns once it is committed and findable, or raises the
        error that write alone met."""
        write = _Write(principal, request)
        with self._lock:
            if self._closed:
                raise BatcherClosed("the document store is closing; retry the write")
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="jmfts-writes", daemon=True)
                self._worker.start()
            self._queue.put(write)
        return write.answer.result()

    def close(self) -> None:
        """Finish the writes already queued, then stop the worker."""
        with self._lock:
            self._closed = True
            worker = self._worker
            if worker is not None:
                self._queue.put(None)
        if worker is not None:
            worker.join()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
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
            self._commit(batch)

    def _next(self, deadline: float) -> _Write | None:
        """The next queued write, waiting until ``deadline`` at most (raises Empty)."""
        remaining = deadline - time.monotonic()
        if remaining > 0:
            return self._queue.get(timeout=remaining)
        return self._queue.get_nowait()

    def _commit(self, batch: list[_Write]) -> None:
        self.batch_sizes.append(len(batch))
        try:
            outcomes = self.store.create_each([(w.principal, w.request) for w in batch])
        except BaseException as exc:  # the whole batch failed (disk full, ...): tell everyone
            for write in batch:
                write.answer.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for write, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, JmftsError):
                write.answer.set_exception(outcome)
            else:
                write.answer.set_result(outcome)

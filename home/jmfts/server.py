"""``JmftsServer``: the JMFTS component with an explicit lifecycle, for ``home up`` to supervise.

Self-contained: it needs only a :class:`~home.jmfts.config.JmftsConfig`. ::

    async with JmftsServer(JmftsConfig(data_dir=Path("state/jmfts"), port=0)) as server:
        print(server.url, server.admin_token_file)
        assert await server.health()

``start()`` opens the store (checking or rebuilding the FAISS index), bootstraps the admin
token file, binds the socket (port 0 picks a free port; :attr:`address` tells which) and
serves uvicorn on a thread of its own, with its own event loop, beside the periodic index
saver. ``close()`` asks uvicorn to exit, joins the thread, saves the index and closes the
database. Signal handling stays with the caller (the supervisor owns Ctrl-C).

Its own loop because ``home up`` runs it in-process beside the router: request parsing,
JSON, SQLite and the embedder's Python side would otherwise hold the router's loop for
milliseconds at a time (docs/architecture.md "Home").
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import faiss
import httpx
import uvicorn

from home.jmfts.app import create_app
from home.jmfts.config import JmftsConfig, build_embedder
from home.jmfts.errors import JmftsError
from home.jmfts.replicated_log import ReplicatedLog
from home.jmfts.store import DocumentStore
from home.substrate.http_probe import HttpProbe
from shared.lifecycle import Service, cancel_and_wait

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
HEALTH_TIMEOUT_S = 2.0


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the owner of the process decides."""

    @contextlib.contextmanager
    def capture_signals(self):  # type: ignore[no-untyped-def]
        yield


class JmftsServer(Service):
    """One JMFTS HTTP server over one data directory."""

    def __init__(self, config: JmftsConfig, *, log_url: Callable[[], str] | None = None) -> None:
        """``log_url``: a clustered home's bus, where the store's writes are replicated
        (:mod:`home.jmfts.replicated_log`); without it each write is applied at once."""
        self.config = config
        self.store: DocumentStore | None = None
        self._log_url = log_url
        self.log: ReplicatedLog | None = None
        self.admin_token_file: Path | None = None
        self._server: _QuietServer | None = None
        self._thread: threading.Thread | None = None
        self._serve_error: BaseException | None = None
        self._probe = HttpProbe(HEALTH_TIMEOUT_S)
        self._address: tuple[str, int] | None = None

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); only after :meth:`start`."""
        if self._address is None:
            raise JmftsError("JMFTS server is not started")
        return self._address

    @property
    def url(self) -> str:
        """``http://host:port`` of the running server."""
        host, port = self.address
        return f"http://{host}:{port}"

    async def start(self) -> None:
        """Open the store, bind, serve; returns once the server accepts connections."""
        config = self.config
        faiss.omp_set_num_threads(config.faiss_threads)
        self.store = await asyncio.to_thread(_open_store, config)
        if self._log_url is not None:
            self.log = ReplicatedLog(self.store, self._log_url)
            try:
                await asyncio.to_thread(self.log.start)
            except BaseException:
                await self.close()
                raise
            self.store.log = self.log
        _, self.admin_token_file = await asyncio.to_thread(self.store.bootstrap_admin)
        sock = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted sockets inherit this: without it Nagle holds the response body behind the
        # headers until the client's delayed ACK, ~40 ms on every request (asyncio's loop
        # does not set it; uvloop does).
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.bind((config.host, config.port))
        except OSError:
            sock.close()
            await asyncio.to_thread(self.store.close)
            raise
        self._address = (config.host, sock.getsockname()[1])
        uv_config = uvicorn.Config(
            create_app(self.store), log_level="warning", access_log=False, lifespan="off"
        )
        server = self._server = _QuietServer(uv_config)
        self._thread = threading.Thread(
            target=self._serve_thread, args=(server, self.store, sock), name="jmfts", daemon=True
        )
        self._thread.start()
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                while not server.started:
                    if not self._thread.is_alive():
                        raise JmftsError(f"uvicorn exited during start: {self._serve_error!r}")
                    await asyncio.sleep(0.02)
        except BaseException:
            await self.close()
            raise

    def _serve_thread(
        self, server: _QuietServer, store: DocumentStore, sock: socket.socket
    ) -> None:
        """The server's thread: its own loop runs uvicorn and the index saver until exit."""
        try:
            asyncio.run(self._serve(server, store, sock))
        # Reported to start() and close(), which own the thread.
        except BaseException as exc:  # noqa: BLE001
            self._serve_error = exc

    async def _serve(self, server: _QuietServer, store: DocumentStore, sock: socket.socket) -> None:
        saver = asyncio.create_task(self._save_periodically(store))
        try:
            await server.serve(sockets=[sock])
        finally:
            await cancel_and_wait(saver)

    async def _save_periodically(self, store: DocumentStore) -> None:
        while True:
            await asyncio.sleep(self.config.save_interval_s)
            await asyncio.to_thread(store.save_if_dirty)

    async def health(self) -> bool:
        """Whether ``GET /`` answers ok within two seconds."""
        try:
            response = await self._probe.get(self.url + "/")
            return response.status_code == 200 and response.json().get("status") == "ok"
        except (httpx.HTTPError, JmftsError, ValueError):
            return False

    async def close(self) -> None:
        """Stop serving, save the index, close the database. Safe to call twice."""
        thread, self._thread = self._thread, None
        if self._server is not None and thread is not None:
            self._server.should_exit = True
            await asyncio.to_thread(thread.join, STOP_TIMEOUT_S)
            if thread.is_alive():
                self._server.force_exit = True
                await asyncio.to_thread(thread.join, STOP_TIMEOUT_S)
        await self._probe.close()
        if self.store is not None and self.log is not None:
            await asyncio.to_thread(self.store.writes.close)  # the last writes, logged
            await asyncio.to_thread(self.log.close)
            self.log = None
        if self.store is not None:
            await asyncio.to_thread(self.store.close)
            self.store = None


def _open_store(config: JmftsConfig) -> DocumentStore:
    embedder = build_embedder(config)
    # The first inference pays onnxruntime's allocations (measured 1.8 s on a loaded
    # 2-core box against ~10 ms after): pay them while starting, not on a client's write.
    embedder.embed(["warm-up"])
    return DocumentStore(
        config.data_dir,
        embedder,
        index_kind=config.index_kind,
        synchronous=config.synchronous,
    )

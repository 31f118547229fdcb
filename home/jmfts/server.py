"""``JmftsServer``: the JMFTS component with an explicit lifecycle, for ``home up`` to supervise.

Self-contained: it needs only a :class:`~home.jmfts.config.JmftsConfig`. ::

    async with JmftsServer(JmftsConfig(data_dir=Path("state/jmfts"), port=0)) as server:
        print(server.url, server.admin_token_file)
        assert await server.health()

``start()`` opens the store (checking or rebuilding the FAISS index), bootstraps the admin
token file, binds the socket (port 0 picks a free port; :attr:`address` tells which) and
serves uvicorn in a task it owns. ``stop()`` asks uvicorn to exit, awaits it, cancels the
periodic index saver, saves the index and closes the database. Signal handling stays with
the caller (the supervisor owns Ctrl-C).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path
from types import TracebackType

import faiss
import httpx
import uvicorn

from home.jmfts.app import create_app
from home.jmfts.config import JmftsConfig, build_embedder
from home.jmfts.errors import JmftsError
from home.jmfts.store import DocumentStore

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the owner of the process decides."""

    @contextlib.contextmanager
    def capture_signals(self):  # type: ignore[no-untyped-def]
        yield


class JmftsServer:
    """One JMFTS HTTP server over one data directory."""

    def __init__(self, config: JmftsConfig) -> None:
        self.config = config
        self.store: DocumentStore | None = None
        self.admin_token_file: Path | None = None
        self._server: _QuietServer | None = None
        self._serve_task: asyncio.Task[None] | None = None
        self._saver_task: asyncio.Task[None] | None = None
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
        with self.store.lock:
            _, self.admin_token_file = self.store.access.bootstrap_admin(config.data_dir)
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
        self._server = _QuietServer(uv_config)
        self._serve_task = asyncio.create_task(self._server.serve(sockets=[sock]))
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                while not self._server.started:
                    if self._serve_task.done():
                        await self._serve_task
                        raise JmftsError("uvicorn exited during start")
                    await asyncio.sleep(0.02)
        except BaseException:
            await self.stop()
            raise
        self._saver_task = asyncio.create_task(self._save_periodically())

    async def _save_periodically(self) -> None:
        store = self.store
        if store is None:
            return
        while True:
            await asyncio.sleep(self.config.save_interval_s)
            await asyncio.to_thread(store.save_if_dirty)

    async def health(self) -> bool:
        """Whether ``GET /`` answers ok within two seconds."""
        try:
            async with httpx.AsyncClient(timeout=2.0) as client:
                response = await client.get(self.url + "/")
            return response.status_code == 200 and response.json().get("status") == "ok"
        except (httpx.HTTPError, JmftsError, ValueError):
            return False

    async def stop(self) -> None:
        """Stop serving, save the index, close the database. Safe to call twice."""
        if self._saver_task is not None:
            self._saver_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._saver_task
            self._saver_task = None
        if self._server is not None and self._serve_task is not None:
            self._server.should_exit = True
            try:
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await self._serve_task
            except TimeoutError:
                self._server.force_exit = True
                self._serve_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._serve_task
            self._serve_task = None
        if self.store is not None:
            await asyncio.to_thread(self.store.close)
            self.store = None

    async def __aenter__(self) -> JmftsServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


def _open_store(config: JmftsConfig) -> DocumentStore:
    return DocumentStore(config.data_dir, build_embedder(config), index_kind=config.index_kind)

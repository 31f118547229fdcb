"""One running ``tau --mode rpc`` process: its stdio, its requests, its events.

:class:`TauProcess` is an async context manager that owns the subprocess and
its reader task; the process is terminated (then killed) in ``finally``. It
always drains stdout, because τ applies backpressure to its own turn when
nobody reads its events. Requests are correlated by id; events go to one
callback in arrival order. When the process dies, every pending request fails
with :class:`TauExited` and :attr:`TauProcess.exited` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from home.agents import protocol
from home.agents.errors import TauExited, TauProtocolError, TauRpcError
from home.agents.protocol import Capabilities, RpcResponse, WireEvent
from home.agents.tau_command import TauLaunch, write_tau_home
from home.llm.endpoint import ModelEndpoint
from shared.lifecycle import Service, cancel_and_wait
from shared.proc import terminate

log = logging.getLogger(__name__)

EventCallback = Callable[[WireEvent], None]

_TERMINATE_GRACE_S = 3.0


class TauProcess(Service):
    """A started τ process; ``async with TauProcess(...) as tau`` handshakes and yields it."""

    def __init__(
        self,
        launch: TauLaunch,
        model: ModelEndpoint,
        on_event: EventCallback,
        *,
        stderr_path: Path,
        handshake_timeout_s: float = 60.0,
        session_store: dict[str, Any] | None = None,
    ) -> None:
        self.launch = launch
        self.session_store = session_store
        self.model = model
        self._on_event = on_event
        self._stderr_path = stderr_path
        self._handshake_timeout_s = handshake_timeout_s
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, tuple[str, asyncio.Future[RpcResponse]]] = {}
        self._ids = itertools.count(1)
        self.exited = asyncio.Event()
        self.capabilities: Capabilities | None = None
        self.protocol_errors = 0

    @property
    def pid(self) -> int | None:
        """The process id, once started."""
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        """The exit code, once the process has exited."""
        return self._proc.returncode if self._proc is not None else None

    async def __aenter__(self) -> TauProcess:
        await self.start()
        try:
            await self.handshake()
        except BaseException:
            await self.close()
            raise
        return self

    async def start(self) -> None:
        """Start the process and its reader task."""
        write_tau_home(
            self.launch.tau_home, self.model, self.launch.extensions_config, self.session_store
        )
        self.launch.cwd.mkdir(parents=True, exist_ok=True)
        self._stderr_path.parent.mkdir(parents=True, exist_ok=True)
        with self._stderr_path.open("ab") as stderr:
            self._proc = await asyncio.create_subprocess_exec(
                *self.launch.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                env=self.launch.env,
                cwd=self.launch.cwd,
                limit=protocol.STDIO_READER_LIMIT,
                start_new_session=True,
            )
        self._reader = asyncio.create_task(self._read(), name=f"tau-reader-{self._proc.pid}")

    async def handshake(self) -> Capabilities:
        """``get_capabilities`` first, before anything else; checks the protocol major."""
        result = await self.request("get_capabilities", timeout_s=self._handshake_timeout_s)
        self.capabilities = protocol.check_capabilities(result)
        return self.capabilities

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, timeout_s: float = 30.0
    ) -> dict[str, Any]:
        """Send one request and return its result; a JSON-RPC error raises TauRpcError."""
        proc = self._proc
        if proc is None or proc.stdin is None or self.exited.is_set():
            raise TauExited(self.returncode, self.stderr_tail())
        request_id = next(self._ids)
        future: asyncio.Future[RpcResponse] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (method, future)
        try:
            proc.stdin.write(protocol.encode_request(request_id, method, params))
            await proc.stdin.drain()
            async with asyncio.timeout(timeout_s):
                response = await future
        except (ConnectionError, BrokenPipeError) as exc:
            # The pipe broke before the reader saw τ's end: wait for it, so that whoever
            # catches this finds ``exited`` set and starts another τ instead of asking
            # this one again (a turn redelivered to the same corpse fails twice).
            await self._until_gone()
            raise TauExited(self.returncode, self.stderr_tail()) from exc
        finally:
            self._pending.pop(request_id, None)
        if not response.ok or response.result is None:
            raise TauRpcError(method, response.error_code or 0, response.error_message or "")
        return response.result

    async def _until_gone(self) -> None:
        """Wait for the reader to see τ's end; SIGKILL a τ that outlives its broken pipe."""
        try:
            await asyncio.wait_for(self.exited.wait(), _TERMINATE_GRACE_S)
        except TimeoutError:
            self.kill()
            await self.exited.wait()

    def kill(self) -> None:
        """SIGKILL the process (the supervisor's hard stop)."""
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()

    async def close(self) -> None:
        """Close stdin (τ's clean shutdown), then terminate, then kill; cancel the reader."""
        proc = self._proc
        try:
            if proc is not None and proc.returncode is None:
                if proc.stdin is not None:
                    with contextlib.suppress(Exception):
                        proc.stdin.close()
                try:
                    await asyncio.wait_for(proc.wait(), _TERMINATE_GRACE_S)
                except TimeoutError:
                    await terminate(proc, _TERMINATE_GRACE_S)
        finally:
            if self._reader is not None:
                await cancel_and_wait(self._reader)
            self._fail_pending()
            self.exited.set()

    def stderr_tail(self, limit: int = 2000) -> str:
        """The last ``limit`` bytes of τ's stderr log."""
        try:
            data = self._stderr_path.read_bytes()
        except OSError:
            return ""
        return data[-limit:].decode("utf-8", errors="replace")

    async def _read(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        try:
            while True:
                line = await proc.stdout.readline()
                if not line:
                    break
                if not line.strip():
                    continue
                try:
                    message = protocol.parse_line(line)
                except TauProtocolError as exc:
                    # A bad line is counted and logged; the connection stays usable.
                    self.protocol_errors += 1
                    log.warning("τ pid %s: %s", proc.pid, exc)
                    continue
                if isinstance(message, WireEvent):
                    self._on_event(message)
                else:
                    pending = self._pending.get(message.id)
                    if pending is not None and not pending[1].done():
                        pending[1].set_result(message)
            await proc.wait()
        finally:
            self._fail_pending()
            self.exited.set()

    def _fail_pending(self) -> None:
        for _method, future in list(self._pending.values()):
            if not future.done():
                future.set_exception(TauExited(self.returncode, self.stderr_tail()))
        self._pending.clear()

"""The embedded llama.cpp server as a component ``home up`` supervises.

:class:`LlamaServer` starts llama-cpp-python's server on loopback with the
packaged GGUF, waits until ``GET /v1/models`` answers, and terminates the
process (then kills it) on :meth:`LlamaServer.stop`. Thread counts are set for
the machine: llama.cpp's throughput collapses once its threads exceed the free
cores, and on a 2-core home machine NATS, τ and JMFTS want a core too.

The server runs with ``chat_format=chatml-function-calling``: when a request
names one tool in ``tool_choice``, llama-cpp-python turns that tool's JSON
schema into a grammar and the arguments are valid by construction (see
:mod:`home.llm.endpoint`). The server runs through :mod:`home.llm.serve`, which
first stops that chat format from HTML-escaping every message in the prompt.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from home.llm.errors import LlmServerError
from home.llm.model_file import EMBEDDED_MODEL_ID, packaged_gguf
from home.substrate.http_probe import HttpProbe
from shared.lifecycle import Service
from shared.proc import die_with_parent, free_port, terminate

CHAT_FORMAT = "chatml-function-calling"
log = logging.getLogger(__name__)

# home.llm.serve's own option: how many turns before the current one the model sees.
HISTORY_TURNS_FLAG = "--history_turns"
_STOP_GRACE_S = 5.0
HEALTH_TIMEOUT_S = 2.0


def default_threads() -> int:
    """Leave one core to the rest of home: 1 thread on 2 cores, at most 4.

    Measured on the 2-core machine under load, one-sentence turns (p50):
    n_threads=1 gave 1.9 s and 1.7 s; n_threads=2 gave 1.45 s once and 10.4 s
    when the other core was busy. Reading the prompt (``n_threads_batch``) on both
    cores of an idle machine cut a virtual-board turn by 300 ms (87 tokens at 230
    against 130 tok/s), but under `make test` the embedded model's tests ran 2 to 4
    times slower: the same rule holds for it.
    """
    return max(1, min(4, (os.cpu_count() or 2) - 1))


@dataclass
class LlamaServerConfig:
    """How to run the server; every default works on this machine."""

    model_path: Path | None = None
    model_alias: str = EMBEDDED_MODEL_ID
    host: str = "127.0.0.1"
    port: int = 0
    n_threads: int = field(default_factory=default_threads)
    n_threads_batch: int = field(default_factory=default_threads)
    n_ctx: int = 4096
    # Turns before the current one the model sees (home.llm.serve); None: serve's default.
    history_turns: int | None = None
    log_path: Path | None = None
    start_timeout_s: float = 120.0
    # One tiny completion before the server counts as started: the first turn then finds
    # the weights paged in and the chat handler ready (docs/architecture.md "Home").
    warm_up: bool = True


def process_cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of process ``pid`` (all its threads), from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class LlamaServer(Service):
    """The embedded model server. ``async with LlamaServer(config) as llm: llm.url``."""

    def __init__(self, config: LlamaServerConfig | None = None) -> None:
        self.config = config or LlamaServerConfig()
        self._proc: asyncio.subprocess.Process | None = None
        self._port = self.config.port
        self._probe = HttpProbe(HEALTH_TIMEOUT_S)

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL (``.../v1``)."""
        return f"http://{self.config.host}:{self._port}/v1"

    @property
    def pid(self) -> int | None:
        """The server's process id, once started."""
        return self._proc.pid if self._proc is not None else None

    def argv(self) -> list[str]:
        """The server's command line."""
        model = self.config.model_path or packaged_gguf()
        history = self.config.history_turns
        return [
            sys.executable,
            "-m",
            "home.llm.serve",
            "--model",
            str(model),
            "--model_alias",
            self.config.model_alias,
            "--host",
            self.config.host,
            "--port",
            str(self._port),
            "--n_threads",
            str(self.config.n_threads),
            "--n_threads_batch",
            str(self.config.n_threads_batch),
            "--n_ctx",
            str(self.config.n_ctx),
            "--chat_format",
            CHAT_FORMAT,
            "--verbose",
            "False",
            # On by default, a streamed answer ends at its first token whenever another
            # request waits for the model, and the health check's GET /v1/models does.
            "--interrupt_requests",
            "False",
            *([] if history is None else [HISTORY_TURNS_FLAG, str(history)]),
        ]

    async def start(self) -> None:
        """Start the process and wait until it serves; raise LlmServerError if it will not."""
        if self._port == 0:
            self._port = free_port(self.config.host)
        argv = self.argv()
        log_path = self.config.log_path
        log = log_path.open("ab") if log_path is not None else None
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log or asyncio.subprocess.DEVNULL,
                stderr=log or asyncio.subprocess.DEVNULL,
                start_new_session=True,
                # Even a kill -9 of home up must leave no model server behind.
                preexec_fn=die_with_parent,
            )
        finally:
            if log is not None:
                log.close()
        try:
            await self._wait_ready()
            if self.config.warm_up:
                await self._warm_up()
        except BaseException:
            await self.close()
            raise

    async def _warm_up(self) -> None:
        """Ask for one token; a failure here is the first turn's to report, not start's."""
        body = {
            "model": self.config.model_alias,
            "messages": [{"role": "user", "content": "Hello."}],
            "max_tokens": 1,
        }
        try:
            response = await self._probe.post_json(
                f"{self.url}/chat/completions", body, self.config.start_timeout_s
            )
        except httpx.HTTPError as exc:
            log.warning("the model's warm-up request failed: %r", exc)
            return
        if response.status_code != 200:
            log.warning("the model's warm-up request answered %s", response.status_code)

    async def _wait_ready(self) -> None:
        deadline = asyncio.get_running_loop().time() + self.config.start_timeout_s
        while True:
            if self._proc is None or self._proc.returncode is not None:
                code = None if self._proc is None else self._proc.returncode
                raise LlmServerError(f"llama.cpp server exited with code {code} while starting")
            if await self.health():
                return
            if asyncio.get_running_loop().time() > deadline:
                raise LlmServerError(
                    f"llama.cpp server not healthy at {self.url} "
                    f"after {self.config.start_timeout_s:g}s"
                )
            await asyncio.sleep(0.2)

    @property
    def running(self) -> bool:
        """Whether the server process has been started and has not exited."""
        return self._proc is not None and self._proc.returncode is None

    def cpu_seconds(self) -> float | None:
        """CPU time the server process has used so far (None when it is not running)."""
        if self._proc is None or self._proc.returncode is not None:
            return None
        return process_cpu_seconds(self._proc.pid)

    async def health(self) -> bool:
        """True when the process runs and ``GET /v1/models`` lists the model."""
        if self._proc is None or self._proc.returncode is not None:
            return False
        try:
            response = await self._probe.get(f"{self.url}/models")
        except httpx.HTTPError:
            return False
        if response.status_code != 200:
            return False
        models = response.json().get("data", [])
        return any(m.get("id") == self.config.model_alias for m in models)

    async def close(self) -> None:
        """Terminate the process, then kill it if it lingers."""
        proc, self._proc = self._proc, None
        await self._probe.close()
        if proc is not None:
            await terminate(proc, _STOP_GRACE_S)

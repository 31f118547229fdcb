"""The language model as a ``home up`` component (name ``llm``; its address is the model URL).

By default ``home up`` runs the embedded llama.cpp server with the packaged
SmolLM2 model; with ``--llm-url`` it runs nothing and health-checks the given
OpenAI-compatible endpoint instead, so ``home status`` says whether it answers.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from home.llm.errors import LlmError
from home.llm.server import LlamaServer, LlamaServerConfig
from home.substrate.component import ComponentInfo, Health
from home.substrate.errors import ComponentError
from home.substrate.http_probe import HttpProbe
from shared.lifecycle import Service

HEALTH_TIMEOUT_S = 2.0
# CPU the server must have used since the previous check to count as busy, not dead.
BUSY_CPU_S = 0.1


class EmbeddedLlmComponent(Service):
    """The embedded llama.cpp server, started and supervised by ``home up``."""

    name = "llm"

    def __init__(self, log_path: Path, host: str = "127.0.0.1") -> None:
        self._log_path = log_path
        self._server = LlamaServer(LlamaServerConfig(host=host, log_path=log_path))
        self._cpu_at_last_check: float | None = None

    async def start(self) -> None:
        """Start llama.cpp and wait until the model is loaded."""
        try:
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
            await self._server.start()
        except (LlmError, OSError) as exc:
            raise ComponentError(f"llm: the embedded model server did not start: {exc}") from exc
        self._cpu_at_last_check = self._server.cpu_seconds()

    async def health(self) -> Health:
        """Healthy while the server lists the model, or while it works on an answer.

        llama.cpp's server cannot answer ``/v1/models`` while it generates: a long
        answer used to fail three checks and get the server restarted mid-turn. A
        server that does not answer but has used CPU since the last check is busy,
        not dead; only one that has exited, or answers nothing and does nothing, is
        unhealthy.
        """
        answered = await self._server.health()
        cpu = self._server.cpu_seconds()
        before, self._cpu_at_last_check = self._cpu_at_last_check, cpu
        if answered:
            return Health(True)
        if not self._server.running or cpu is None:
            return Health(False, "the model server has exited")
        if before is not None and cpu - before >= BUSY_CPU_S:
            return Health(True, "busy: generating, so not answering /v1/models")
        return Health(False, "the model server does not answer and is not working")

    async def close(self) -> None:
        """Stop the server; idempotent."""
        await self._server.close()

    def info(self) -> ComponentInfo:
        """The OpenAI-compatible base URL and the server's pid."""
        return ComponentInfo(self._server.url, self._server.pid)


class ExternalLlmComponent(Service):
    """A model served elsewhere (ollama, vLLM, a hosted API): nothing to run, only to check."""

    name = "llm"

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._probe = HttpProbe(HEALTH_TIMEOUT_S)

    async def start(self) -> None:
        """Nothing to start; the first health check says whether the endpoint answers."""

    async def health(self) -> Health:
        """Healthy when ``GET {url}/models`` answers 200."""
        try:
            response = await self._probe.get(f"{self.url}/models")
        except httpx.HTTPError as exc:
            return Health(False, f"{self.url} does not answer: {type(exc).__name__}")
        if response.status_code != 200:
            return Health(False, f"{self.url}/models answered {response.status_code}")
        return Health(True)

    async def close(self) -> None:
        """Close the health probe's client."""
        await self._probe.close()

    def info(self) -> ComponentInfo:
        """The configured URL."""
        return ComponentInfo(self.url, None)

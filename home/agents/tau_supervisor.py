"""An agent's one τ process, kept alive under its node's restart policy.

:class:`TauSupervisor` starts τ (handshake first), hands the live process to
whoever needs it (:meth:`TauSupervisor.ensure`), starting a dead one again after
the policy's backoff (:class:`home.agents.restart.RestartTracker`), and watches
it between turns (:meth:`TauSupervisor.watch`), so τ comes back whether or not a
turn needs it at that moment. A spent budget raises
:class:`~home.agents.errors.RestartBudgetExhausted` to the caller.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from home.agents.errors import AgentError, RestartBudgetExhausted
from home.agents.restart import RestartTracker
from home.agents.tau_command import TauLaunch
from home.agents.tau_process import EventCallback, TauProcess
from home.llm.endpoint import ModelEndpoint
from shared.schema.catalog import RestartPolicy

log = logging.getLogger(__name__)


class TauSupervisor:
    """One τ process at a time, started again when it dies; ``name`` labels the log."""

    def __init__(
        self,
        launch: TauLaunch,
        model: ModelEndpoint,
        on_event: EventCallback,
        *,
        name: str,
        stderr_path: Path,
        policy: RestartPolicy,
        on_restart: Callable[[], None],
    ) -> None:
        self.name = name
        self._launch = launch
        self._model = model
        self._on_event = on_event
        self._stderr_path = stderr_path
        self._on_restart = on_restart
        self._restarts = RestartTracker(policy)
        self._tau: TauProcess | None = None
        self._lock = asyncio.Lock()
        # τ's config.json session_store section, when it is not the file store.
        self.session_store: dict[str, Any] | None = None

    @property
    def current(self) -> TauProcess | None:
        """The current τ process, if one runs (it may have just died)."""
        return self._tau

    @property
    def pid(self) -> int | None:
        """The pid of the current τ process, if one runs."""
        return self._tau.pid if self._tau is not None else None

    async def start(self) -> TauProcess:
        """Start τ and wait for its handshake."""
        tau = TauProcess(
            self._launch,
            self._model,
            self._on_event,
            stderr_path=self._stderr_path,
            session_store=self.session_store,
        )
        await tau.__aenter__()
        self._tau = tau
        log.info("%s: τ started, pid %s", self.name, tau.pid)
        return tau

    async def ensure(self) -> TauProcess:
        """The live τ, starting a dead one again under the restart policy."""
        async with self._lock:
            tau = self._tau
            if tau is not None and not tau.exited.is_set():
                return tau
            if tau is not None:
                log.warning(
                    "%s: τ pid %s exited (%s); restarting", self.name, tau.pid, tau.returncode
                )
                self._tau = None
                await tau.close()
            delay = self._restarts.next_delay(time.monotonic())
            await asyncio.sleep(delay)
            tau = await self.start()
            self._on_restart()
            return tau

    async def watch(self) -> None:
        """Start τ again whenever it dies; return only by raising ``RestartBudgetExhausted``."""
        while True:
            try:
                tau = await self.ensure()
            except RestartBudgetExhausted:
                raise
            except AgentError as exc:
                # A start that failed counts against the policy; try again under it.
                log.warning("%s: τ did not start: %s", self.name, exc)
                continue
            await tau.exited.wait()

    async def close(self) -> None:
        """Stop the current τ, if one runs."""
        tau, self._tau = self._tau, None
        if tau is not None:
            await tau.close()

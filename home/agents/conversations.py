"""Moving τ onto a device's conversation before its turn (docs/architecture.md "Sessions").

:class:`Conversations` keeps, for the one τ process the node runs, which
conversation it is on. Before a turn it makes that the turn's device's:

- already on it (the same device spoke last, to the same τ): nothing is sent;
- the device has a conversation in the :class:`~home.agents.sessions.SessionBook`:
  ``switch_session`` with its ref, which τ loads straight from its store;
- it has none (or its store no longer has it): ``new_session {"persist": true}``,
  one look in the store for the new conversation's ref
  (:func:`~home.agents.sessions.locate_in_jmfts`, one query on a client kept
  open for the node's life; τ's ``list_sessions`` would
  load every stored conversation, so a device's first turn would grow slower with
  each device), ``set_session_name`` ``"<agent> <device>"``, and the book remembers it.

Neither move reads another device's conversation: ``switch_session`` with a JMFTS
document id or a ``.jsonl`` path loads that one conversation only.

A τ that was started again begins on a scratch conversation of its own
(``--no-session``), so the first turn after a restart always switches: the
restart resumes every device where it was. When the store cannot give a device
its conversation, :meth:`Conversations.isolate` puts τ on a fresh in-memory one,
so that turn is answered without history and never inside another device's.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

from home.agents.errors import AgentError, SessionError, TauExited, TauRpcError
from home.agents.sessions import (
    DeviceSession,
    FileStore,
    SessionBook,
    SessionStore,
    device_key,
    locate_in_files,
    locate_in_jmfts,
)
from home.jmfts.client import JmftsClient
from shared.event import utc_now

log = logging.getLogger(__name__)

# JSON-RPC "invalid params": switch_session's answer for a ref its store does not hold.
INVALID_PARAMS = -32602


class TauRequester(Protocol):
    """What the switch needs of a τ process: one request, one result."""

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, timeout_s: float = 30.0
    ) -> dict[str, Any]:
        """Send ``method`` and return its result; TauRpcError on a JSON-RPC error."""
        ...


@dataclass(frozen=True)
class Entered:
    """The conversation a turn runs in, and what it took to get there."""

    session: DeviceSession | None
    switched: bool
    created: bool
    elapsed_s: float


class Conversations:
    """Which conversation τ is on, and the moves that put it on a device's."""

    def __init__(self, book: SessionBook, store: SessionStore | None) -> None:
        self.book = book
        self.store = store
        self._on: tuple[object, str] | None = None
        self._jmfts: JmftsClient | None = None

    async def close(self) -> None:
        """Close the JMFTS client the lookups of new conversations opened, if any."""
        jmfts, self._jmfts = self._jmfts, None
        if jmfts is not None:
            await jmfts.close()

    async def enter(self, tau: TauRequester, device: str | None) -> Entered:
        """Put ``tau`` on ``device``'s conversation (created on its first turn).

        Raises SessionError when the store could not give it (τ is then left where it
        was: call :meth:`isolate`), TauExited when τ died meanwhile.
        """
        started = time.perf_counter()
        known = self.book.get(device)
        if known is not None and self._on == (tau, known.ref):
            return Entered(known, switched=False, created=False, elapsed_s=0.0)
        self._on = None
        if known is not None and await self._switch(tau, known):
            return Entered(known, True, False, time.perf_counter() - started)
        session = await self._create(tau, device)
        return Entered(session, True, True, time.perf_counter() - started)

    async def isolate(self, tau: TauRequester) -> None:
        """Put ``tau`` on a fresh in-memory conversation (no store is asked)."""
        self._on = None
        try:
            await tau.request("new_session", {"persist": False})
        except TauExited:
            raise
        except AgentError as exc:
            raise SessionError(f"τ could not start an unpersisted conversation: {exc}") from exc

    async def _switch(self, tau: TauRequester, known: DeviceSession) -> bool:
        """``switch_session`` to ``known``; False when the store no longer holds it."""
        try:
            await tau.request("switch_session", {"session_id": known.ref})
        except TauRpcError as exc:
            if exc.code != INVALID_PARAMS:
                raise SessionError(
                    f"τ could not load {known.device}'s conversation {known.session_id}: "
                    f"{exc.message}"
                ) from exc
            log.warning(
                "%s: the conversation of %s (%s, ref %s) is gone from its store: %s; "
                "starting a new one",
                self.book.agent, known.device, known.session_id, known.ref, exc.message,
            )  # fmt: skip
            return False
        self._on = (tau, known.ref)
        return True

    async def _create(self, tau: TauRequester, device: str | None) -> DeviceSession:
        key = device_key(device)
        store = self.store
        if store is None:
            raise SessionError(f"{self.book.agent} keeps no conversations to put {key} in")
        try:
            created = await tau.request("new_session", {"persist": True})
            session_id = _session_id(created)
            ref = await self._locate(store, session_id)
            await tau.request("set_session_name", {"name": f"{self.book.agent} {key}"})
        except TauRpcError as exc:
            raise SessionError(
                f"τ could not start a persisted conversation for {key}: {exc.message}"
            ) from exc
        session = DeviceSession(
            agent=self.book.agent,
            device=key,
            store=store.name,
            ref=ref,
            session_id=session_id,
            created=utc_now().isoformat(),
        )
        self.book.put(session)
        self._on = (tau, ref)
        log.info("%s: new conversation %s for %s", self.book.agent, session_id, key)
        return session

    async def _locate(self, store: SessionStore, session_id: str) -> str:
        """The ref of τ's new conversation ``session_id``, from its store."""
        if isinstance(store, FileStore):
            return locate_in_files(store, session_id)
        if self._jmfts is None:
            self._jmfts = JmftsClient.from_token_file(store.url, store.token_file)
        return await locate_in_jmfts(self._jmfts, session_id)


def _session_id(result: dict[str, Any]) -> str:
    session = result.get("session")
    if result.get("cancelled") or not isinstance(session, dict):
        raise SessionError(f"new_session did not start a conversation: {result!r:.200}")
    session_id = session.get("session_id")
    if not isinstance(session_id, str) or not session.get("addressable"):
        raise SessionError(f"new_session gave no addressable conversation: {session!r:.200}")
    return session_id

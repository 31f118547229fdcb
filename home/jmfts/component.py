"""JMFTS as a ``home up`` component, and each agent's own principal and token.

At start it serves the store under ``DATA_DIR/jmfts`` and gives every τ agent
of the catalog a principal of its own, write access to its own subtrees
(``journal/<agent>``, ``workspace/<agent>``, ``knowledge/<agent>``), read access to the subtrees its
catalog entry names in ``memory_reads`` (the operator reads what it answers
questions about), write access to those in ``memory_writes`` (the curator, to the
memories it curates) and a bearer token in ``DATA_DIR/tokens/<agent>.token`` (0600).
Isolation between agents is the store's: an agent's token reaches only what it was
granted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from home.jmfts.client import PATIENT_TIMEOUT_S, JmftsClient
from home.jmfts.config import JmftsConfig
from home.jmfts.errors import JmftsError
from home.jmfts.locate import COMPONENT_NAME
from home.jmfts.server import JmftsServer
from home.substrate.component import ComponentInfo, Health
from home.substrate.errors import ComponentError
from shared.files import write_atomic
from shared.lifecycle import Service

AGENT_SUBTREES = ("journal", "workspace", "knowledge")


def agent_subtrees(agent: str) -> list[str]:
    """The subtrees an agent owns and may write: its journal, workspace and knowledge."""
    return [f"{root}/{agent}" for root in AGENT_SUBTREES]


def write_token(path: Path, token: str) -> None:
    """Write a token file readable only by its owner (created 0600 before any byte)."""
    write_atomic(path, token, private=True)


async def provision_principal(
    admin: JmftsClient, name: str, grants: Iterable[tuple[str, str]], token_file: Path | None
) -> str:
    """Ensure principal ``name`` with ``(path, level)`` grants; return a working token.

    A token file that still authenticates is kept; otherwise a new token is minted
    (and written to ``token_file`` when given).
    """
    principal = await admin.principal_id(name, create=True)
    for path, level in grants:
        await admin.grant(path, principal, level)
    existing = _stored_token(token_file)
    if existing is not None:
        async with JmftsClient(
            admin.base_url, token=existing, timeout_s=PATIENT_TIMEOUT_S
        ) as probe:
            if await probe.whoami_ok():
                return existing
    token = await admin.mint_token(principal, label=f"{name} (home up)")
    if token_file is not None:
        write_token(token_file, token)
    return token


def _stored_token(token_file: Path | None) -> str | None:
    """The token kept in ``token_file``, or None when there is no such file."""
    if token_file is None or not token_file.is_file():
        return None
    return token_file.read_text().strip()


class JmftsComponent(Service):
    """The memory server of ``home up`` (component name ``jmfts``)."""

    name = COMPONENT_NAME

    def __init__(
        self,
        data_dir: Path,
        agents: Mapping[str, Sequence[tuple[str, str]]],
        tokens_dir: Path,
        host: str = "127.0.0.1",
        *,
        log_url: Callable[[], str] | None = None,
    ) -> None:
        """``agents``: each agent, and its ``(path, level)`` grants beyond its own subtrees;
        ``log_url``: a clustered home's bus, where every member's store applies one
        replicated log of writes (:mod:`home.jmfts.replicated_log`)."""
        self._server = JmftsServer(
            JmftsConfig(data_dir=data_dir, host=host, port=0), log_url=log_url
        )
        self._agents = {agent: tuple(grants) for agent, grants in agents.items()}
        self._tokens_dir = tokens_dir

    async def start(self) -> None:
        """Serve, then give every agent its principal, grants and token."""
        try:
            await self._server.start()
            await self._provision()
        except (JmftsError, OSError) as exc:
            await self._server.close()
            raise ComponentError(f"jmfts: did not start: {exc}") from exc

    async def _provision(self) -> None:
        token_file = self._server.admin_token_file
        if token_file is None:
            raise ComponentError("jmfts: the server wrote no admin token")
        async with JmftsClient.from_token_file(
            self._server.url, token_file, timeout_s=PATIENT_TIMEOUT_S
        ) as admin:
            for agent, grants in self._agents.items():
                await provision_principal(
                    admin,
                    f"agent.{agent}",
                    [*((path, "write") for path in agent_subtrees(agent)), *grants],
                    self._tokens_dir / f"{agent}.token",
                )

    async def health(self) -> Health:
        """Healthy while the server answers (and, clustered, says where its log stands)."""
        ok = await self._server.health()
        log = self._server.log
        if not ok:
            return Health(False, "the memory server does not answer")
        if log is None:
            return Health(True, "")
        detail = f"memory log applied to {log.sequence}"
        return Health(True, detail + (f"; {log.last_error}" if log.last_error else ""))

    async def close(self) -> None:
        """Stop serving (the index is saved); idempotent."""
        await self._server.close()

    def info(self) -> ComponentInfo:
        """The server's base URL; it runs inside ``home up``."""
        try:
            return ComponentInfo(self._server.url, os.getpid())
        except JmftsError:
            return ComponentInfo("http (not started)", None)

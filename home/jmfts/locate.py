"""Which memory server ``home memory`` talks to: the running home's, or one named outright.

``home up --data-dir D`` serves JMFTS on a port of its choosing, publishes its URL in
``D/home.json`` (component ``jmfts``) and keeps the server's state, admin token
included, under ``D/jmfts``. ``--url`` and ``--token-file`` name a server outright
(a standalone ``home jmfts serve``); whatever they leave unnamed comes from ``D``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from home.jmfts.access import ADMIN_TOKEN_FILE
from home.substrate.datadir import HomeState, find_home
from shared.errors import HomeNotRunning

COMPONENT_NAME = "jmfts"  # the memory server's name among home's components
HOME_SUBDIR = "jmfts"  # its state under the home's data directory


@dataclass(frozen=True)
class MemoryServer:
    """Where a memory server answers, and the file holding the token to use there."""

    url: str
    token_file: Path


def admin_token_file(data_dir: Path) -> Path:
    """The admin token of the memory server a home on ``data_dir`` runs."""
    return data_dir / HOME_SUBDIR / ADMIN_TOKEN_FILE


def served_url(state: HomeState, data_dir: Path) -> str:
    """The URL of the memory server in a running home's state; HomeNotRunning if it has none."""
    row = state.components.get(COMPONENT_NAME) or {}
    address = str(row.get("address") or "")
    if not address.startswith(("http://", "https://")):
        raise HomeNotRunning(
            f"the home running on {data_dir} serves no memory (no {COMPONENT_NAME} URL in its "
            f"state file); restart it without --no-memory, or name a server with --url"
        )
    return address


def locate_memory_server(data_dir: Path, url: str | None, token_file: Path | None) -> MemoryServer:
    """The server to use: ``url`` and ``token_file`` when given, the home on ``data_dir`` else.

    Raises HomeNotRunning, naming ``data_dir`` and how to start a home there, when the
    URL must come from the home and none runs there (or it runs without memory).
    """
    if url is None:
        url = served_url(find_home(data_dir), data_dir)
    return MemoryServer(url, token_file or admin_token_file(data_dir))

"""The home's configuration, and the one place that reads environment variables."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# The repository's schemas/ folder: the catalog and activation schemas that ship.
SHIPPED_SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
DEFAULT_CATALOG = SHIPPED_SCHEMAS / "nodes.yaml"
DEFAULT_SCHEMA_DIR = SHIPPED_SCHEMAS / "activation"

DEFAULT_LOG_MAX_BYTES = 256 * 1024 * 1024
DEFAULT_LOG_MAX_AGE_S = 7 * 24 * 3600.0


def default_data_dir() -> Path:
    """``$TETHER_HOME_DIR``, else ``$XDG_DATA_HOME/tether/home``, else ``~/.local/share/...``."""
    explicit = os.environ.get("TETHER_HOME_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "tether" / "home"


def inherited_environment() -> dict[str, str]:
    """The allow-listed part of our environment that child processes receive."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "TZ")
    return {k: v for k, v in os.environ.items() if k in keep}


@dataclass(frozen=True)
class EventLogConfig:
    """Bounds of the JetStream stream that records ``events.>``."""

    stream: str = "EVENTS"
    max_bytes: int = DEFAULT_LOG_MAX_BYTES
    max_age_s: float = DEFAULT_LOG_MAX_AGE_S


CLUSTER_SECRET_ENV = "TETHER_CLUSTER_SECRET"
CLUSTER_NAME = "tether"


def cluster_secret() -> str | None:
    """The password every member's nats-server asks of a route (``$TETHER_CLUSTER_SECRET``)."""
    return os.environ.get(CLUSTER_SECRET_ENV) or None


@dataclass(frozen=True)
class ClusterConfig:
    """This home as one member of a home spread over machines (docs/architecture.md
    "Growing past one machine"): its nats-server routes to the other members' servers."""

    member: str
    # Where this member's nats-server listens for the other members' routes.
    port: int
    # Route URLs (``nats://host:port``) of members already running; none for the first.
    join: tuple[str, ...] = ()
    # The routes' password, shared by every member; never on a command line.
    secret: str = ""
    # The event log's replication once that many members are up.
    replicas: int = 3


@dataclass(frozen=True)
class HomeConfig:
    """Everything ``home up`` needs to know; every field has a default that works."""

    data_dir: Path
    host: str = "127.0.0.1"
    nats_port: int = 0  # 0: a free port, written to the state file for clients
    catalog: Path = DEFAULT_CATALOG
    schema_dir: Path = DEFAULT_SCHEMA_DIR
    event_log: EventLogConfig = EventLogConfig()
    router_name: str = "substrate.router"
    health_interval_s: float = 1.0
    restore_schemas: bool = True
    # The language model: None runs the embedded llama.cpp server; a URL (…/v1) uses that
    # OpenAI-compatible endpoint; "none" runs no model (agents then cannot start).
    llm_url: str | None = None
    llm_model: str = "default"
    # Run the JMFTS memory server (component jmfts) and give each agent its principal.
    memory: bool = True
    # The bridge endpoint's port; None takes the paired halves' listen port (2222).
    bridge_port: int | None = None
    # Schemas (names in schema_dir) to apply at start, after the restored ones.
    apply_at_start: tuple[str, ...] = ()
    # One bus user per node, enforced by nats-server (docs/architecture.md "Security").
    # Off only to measure what it costs, or to show what an open bus allows.
    bus_auth: bool = True
    # None: a home on one machine, its own nats-server alone.
    cluster: ClusterConfig | None = None

"""How ``home up`` starts τ agent nodes and effectors: the launchers for their node kinds.

Each node is a child process supervised by the substrate under its
``restart_policy``. The model's URL and JMFTS's come from the components
``home up`` started before the substrate (``llm``, ``jmfts``); each agent's
JMFTS token stays in ``DATA_DIR/tokens/<agent>.token`` and is handed only by
path, never on a command line. The bus URL carries the node's own bus
credentials (docs/architecture.md "Security"), so it goes by environment
(:data:`NATS_URL_ENV`), never on a command line either.
"""

from __future__ import annotations

import sys
from pathlib import Path

from home.llm.choice import ModelChoice
from home.substrate.config import inherited_environment
from home.substrate.errors import ComponentError, LaunchError
from home.substrate.launchers import (
    LaunchContext,
    NodeHandle,
    ProcessHandle,
    node_health_subject,
)
from home.substrate.process import spawn
from shared.schema import NodeSpec

TOKENS_DIR = "tokens"
# The variable the node and effector programs read their bus URL (with credentials) from.
NATS_URL_ENV = "TETHER_NATS_URL"


def token_file(data_dir: Path, agent: str) -> Path:
    """Where an agent's JMFTS bearer token lives (0600)."""
    return data_dir / TOKENS_DIR / f"{agent}.token"


async def _spawn(
    spec: NodeSpec, ctx: LaunchContext, argv: list[str], health_subject: str | None = None
) -> NodeHandle:
    env = inherited_environment()
    env[NATS_URL_ENV] = ctx.nats_url
    try:
        proc = await spawn(argv, env=env, log_path=ctx.node_dir / "node.log")
    except ComponentError as exc:
        raise LaunchError(f"node {spec.name}: {exc}") from exc
    return ProcessHandle(proc, ctx.nc, health_subject)


class TauAgentLauncher:
    """Runs ``python -m home.agents.node_process`` for a ``tau_agent`` or ``tau_bus_agent`` node."""

    def __init__(self, catalog: Path, data_dir: Path, model: ModelChoice) -> None:
        self.catalog = catalog
        self.data_dir = data_dir
        self.model = model

    async def launch(self, spec: NodeSpec, ctx: LaunchContext) -> NodeHandle:
        """Start the agent node with the model's URL and, if JMFTS runs, its own token."""
        llm_url = ctx.services.llm_url
        if not llm_url:
            raise LaunchError(f"node {spec.name}: no language model is running (component llm)")
        argv = [
            sys.executable, "-m", "home.agents.node_process", "--catalog", str(self.catalog),
            "--node", spec.name, "--data-dir", str(self.data_dir),
            *self.model.node_args(llm_url), "--json",
        ]  # fmt: skip
        jmfts_url = ctx.services.jmfts_url
        token = token_file(self.data_dir, spec.agent or "")
        if jmfts_url and token.is_file():
            argv += ["--jmfts-url", jmfts_url, "--jmfts-token-file", str(token)]
        # Ready (and healthy) only while the node answers: τ is up and its rail subscribed.
        return await _spawn(spec, ctx, argv, node_health_subject(spec.name))


class EffectorLauncher:
    """Runs ``python -m home.effectors.<verb>`` for an ``effector`` node."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    async def launch(self, spec: NodeSpec, ctx: LaunchContext) -> NodeHandle:
        """Start the effector against JMFTS with the agents' token directory."""
        verb = spec.name.removeprefix("effector.")
        if verb not in ("journal_append", "jmfts_write"):
            raise LaunchError(f"node {spec.name}: no effector program for {verb!r}")
        jmfts_url = ctx.services.jmfts_url
        if not jmfts_url:
            raise LaunchError(f"node {spec.name}: JMFTS is not running (component jmfts)")
        tokens = self.data_dir / TOKENS_DIR
        tokens.mkdir(mode=0o700, parents=True, exist_ok=True)
        argv = [
            sys.executable, "-m", f"home.effectors.{verb}",
            "--jmfts-url", jmfts_url, "--token-dir", str(tokens),
        ]  # fmt: skip
        return await _spawn(spec, ctx, argv)

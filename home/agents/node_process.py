"""Run one agent node as a process: ``python -m home.agents.node_process --node agent.NAME ...``.

The substrate's supervisor starts one of these per τ agent in the active
schemas. Without ``--llm-url`` the node starts the embedded model server itself
(``home up`` starts one for every agent and passes its URL instead).

Exit codes: 0 stopped cleanly (SIGINT/SIGTERM), 1 the node gave up (its restart
policy was spent, or it could not start), 2 bad usage or a bad catalog.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

import home
from home.agents.agent_node import AgentNode
from home.agents.errors import AgentError
from home.agents.sessions import JmftsStore, SessionStore, file_store, jmfts_sessions_path
from home.llm.choice import LlmProfile, model_endpoint
from home.llm.server import LlamaServer, LlamaServerConfig
from shared.cli import CommandApp, finish
from shared.errors import UsageError
from shared.lifecycle import cancel_and_wait, stop_on_signals
from shared.schema.catalog import NodeSpec, load_node_catalog

# Extension files in the catalog are named relative to the directory holding `home/`.
PACKAGE_ROOT = Path(home.__file__).resolve().parent.parent


app = CommandApp(add_completion=False, help=__doc__)


def answer_tool(spec: NodeSpec) -> str | None:
    """The tool an agent answers through: ``speak`` when it has a handset."""
    return "speak" if any(ext.name == "handset" for ext in spec.extensions) else None


@app.command()
def run(
    *,
    node: Annotated[str, typer.Option("--node", help="Catalog name, e.g. agent.edge_asr.")],
    nats_url: Annotated[
        str,
        typer.Option(
            "--nats",
            envvar="TETHER_NATS_URL",
            help="NATS server URL, with this node's bus credentials (nats://USER:PASSWORD@HOST:PORT).",
        ),
    ],
    data_dir: Annotated[
        Path, typer.Option("--data-dir", help="Where the node keeps its run state and logs.")
    ],
    catalog: Annotated[
        Path, typer.Option("--catalog", help="The node catalog YAML.", exists=True, dir_okay=False)
    ] = Path("schemas/nodes.yaml"),
    llm_url: Annotated[
        str | None,
        typer.Option(
            "--llm-url",
            help="OpenAI-compatible base URL (…/v1). Absent: start the embedded model here.",
        ),
    ] = None,
    llm_profile: Annotated[
        LlmProfile,
        typer.Option(
            "--llm-profile",
            help="embedded: llama.cpp, answers in prose that the handset speaks; "
            "openai: any other OpenAI-compatible server, tools offered freely.",
        ),
    ] = LlmProfile.embedded,
    llm_model: Annotated[
        str, typer.Option("--llm-model", help="Model id sent to an openai-profile server.")
    ] = "default",
    jmfts_url: Annotated[
        str | None,
        typer.Option(
            "--jmfts-url",
            help="JMFTS base URL: for extensions that ask, and, with --jmfts-token-file, "
            "where the agent's conversations are kept (else under --data-dir).",
        ),
    ] = None,
    jmfts_token_file: Annotated[
        Path | None,
        typer.Option(
            "--jmfts-token-file",
            help="This agent's JMFTS bearer token (a file; only extensions that name it get it).",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print status lines as JSON.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Run one τ agent node until SIGINT/SIGTERM."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr)
    console = Console(stderr=True)
    spec = agent_spec(catalog, node)
    try:
        stopped_cleanly = asyncio.run(
            _serve(
                spec,
                nats_url=nats_url,
                data_dir=data_dir,
                llm_url=llm_url,
                profile=llm_profile,
                llm_model=llm_model,
                jmfts_url=jmfts_url,
                jmfts_token_file=jmfts_token_file,
                report=lambda status: _report(console, status, as_json),
            )
        )
    except OSError as exc:
        raise AgentError(f"{node} failed: {exc}") from exc
    # A node that gave up has reported why on its status line.
    finish(ok=stopped_cleanly)


def agent_spec(catalog: Path, node: str) -> NodeSpec:
    """The catalog's entry for the τ agent ``node``; UsageError if there is none."""
    try:
        spec = load_node_catalog(catalog)[node]
    except KeyError:
        raise UsageError(f"no node {node!r} in {catalog}") from None
    if spec.agent is None:
        raise UsageError(f"{node} is a {spec.kind} node, not a τ agent")
    return spec


def _report(console: Console, status: dict[str, object], as_json: bool) -> None:
    if as_json:
        print(json.dumps(status), flush=True)
    else:
        console.print(" ".join(f"[bold]{k}[/]={v}" for k, v in status.items()))


def session_store(
    spec: NodeSpec, data_dir: Path, jmfts_url: str | None, token_file: Path | None
) -> SessionStore:
    """Where the agent's conversations go: JMFTS when the node has its memory server
    (under ``journal/<agent>/sessions``), else τ's file store under its run directory."""
    agent = spec.agent or ""
    if jmfts_url is not None and token_file is not None:
        return JmftsStore(jmfts_url, token_file, jmfts_sessions_path(agent))
    return file_store(data_dir / "agents" / agent)


async def _serve(
    spec: NodeSpec,
    *,
    nats_url: str,
    data_dir: Path,
    llm_url: str | None,
    profile: LlmProfile,
    llm_model: str,
    jmfts_url: str | None,
    jmfts_token_file: Path | None,
    report: Callable[[dict[str, object]], None],
) -> bool:
    async with contextlib.AsyncExitStack() as stack:
        # Entered first, so the signals are heard until the node has closed.
        stop = stack.enter_context(stop_on_signals())
        if llm_url is None:
            log_path = data_dir / "llm" / "llama.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            llm = await stack.enter_async_context(LlamaServer(LlamaServerConfig(log_path=log_path)))
            llm_url, profile = llm.url, LlmProfile.embedded
        agent = await stack.enter_async_context(
            AgentNode(
                spec,
                nats_url=nats_url,
                data_dir=data_dir,
                model=model_endpoint(llm_url, profile, llm_model, answer_tool(spec)),
                repo_root=PACKAGE_ROOT,
                jmfts_url=jmfts_url,
                jmfts_token_file=jmfts_token_file,
                sessions=session_store(spec, data_dir, jmfts_url, jmfts_token_file),
            )
        )
        report({"node": spec.name, "tau_pid": agent.tau_pid, "llm": llm_url, "state": "running"})
        failed = asyncio.ensure_future(agent.wait_failed())
        stopped = asyncio.ensure_future(stop.wait())
        done, pending = await asyncio.wait({failed, stopped}, return_when=asyncio.FIRST_COMPLETED)
        await cancel_and_wait(*pending)
    # Reported after the node has closed: the turn in flight has had its chance to finish.
    if failed in done:
        report({"node": spec.name, "state": "failed", "error": str(failed.result())})
        return False
    report({"node": spec.name, "state": "stopped", "turns": len(agent.stats.outcomes)})
    return True


if __name__ == "__main__":
    app()

"""The command line every effector shares: ``python -m home.effectors.<verb> --nats ...``."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from home.effectors.effector import Effector, VerbEffector
from shared.cli import CommandApp
from shared.lifecycle import stop_on_signals


def make_app(spec: VerbEffector) -> CommandApp:
    """A Typer app that runs ``spec`` until SIGINT/SIGTERM."""
    app = CommandApp(add_completion=False, help=f"Run {spec.node}: {spec.verb} into JMFTS.")

    @app.command()
    def run(
        nats_url: Annotated[
            str,
            typer.Option(
                "--nats",
                envvar="TETHER_NATS_URL",
                help="NATS server URL, with this node's bus credentials (nats://USER:PASSWORD@HOST:PORT).",
            ),
        ],
        jmfts_url: Annotated[str, typer.Option("--jmfts-url", help="JMFTS base URL.")],
        token_dir: Annotated[
            Path,
            typer.Option(
                "--token-dir",
                help="Directory of <agent>.token files: each agent's own JMFTS bearer token.",
                exists=True,
                file_okay=False,
            ),
        ],
        verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    ) -> None:
        """Subscribe the verb's rail, write each event into JMFTS as its agent, ack it."""
        logging.basicConfig(level=logging.INFO if verbose else logging.WARNING)
        console = Console(stderr=True)
        effector = Effector(spec, nats_url=nats_url, jmfts_url=jmfts_url, token_dir=token_dir)
        console.print(f"[bold]{spec.node}[/] on {effector.pattern} → {jmfts_url}")
        asyncio.run(_serve(effector))

    return app


async def _serve(effector: Effector) -> None:
    with stop_on_signals() as stop:
        async with effector:
            await stop.wait()

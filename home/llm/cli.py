"""``home llm serve``: run the embedded model server on its own (``home up`` embeds the same)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from home.llm.server import LlamaServer, LlamaServerConfig, default_threads
from shared.cli import CommandApp
from shared.lifecycle import stop_on_signals

app = CommandApp(add_completion=False, help="The embedded language model (llama.cpp).")


@app.callback()
def llm() -> None:
    """The embedded language model: SmolLM2-135M-Instruct on llama.cpp, loopback only."""


@app.command()
def serve(
    *,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1; 0 picks a free one.")] = 0,
    threads: Annotated[
        int, typer.Option(help="n_threads and n_threads_batch (default: cores - 1).")
    ] = 0,
    model: Annotated[
        Path | None,
        typer.Option(help="A GGUF file instead of the packaged SmolLM2.", exists=True),
    ] = None,
    log: Annotated[Path | None, typer.Option(help="Append the server's output here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the URL as JSON.")] = False,
) -> None:
    """Serve the model until Ctrl-C; print its OpenAI-compatible URL (give it to --llm-url)."""
    n = threads or default_threads()
    config = LlamaServerConfig(
        model_path=model, port=port, n_threads=n, n_threads_batch=n, log_path=log
    )
    asyncio.run(_serve(LlamaServer(config), as_json))


async def _serve(server: LlamaServer, as_json: bool) -> None:
    with stop_on_signals() as stop:
        async with server:
            if as_json:
                print(json.dumps({"url": server.url, "pid": server.pid}), flush=True)
            else:
                Console().print(f"model server at [bold]{server.url}[/] (pid {server.pid})")
            await stop.wait()

"""``edge``: run the board (microphone, Vosk, Piper, echo gate) on its own loopback NATS."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.logging import RichHandler

from edge.config import EdgeConfig, load_edge_config
from edge.errors import CaptureFailed
from edge.pair_through_home import pair_with_home
from edge.runtime import EdgeRuntime, RunSummary, with_audio_files
from edge.tui.cli import register as register_tui
from shared.cli import CommandApp, finish
from shared.errors import UsageError
from shared.lifecycle import cancel_and_wait, stop_on_signals

app = CommandApp(
    name="edge",
    help="The board: microphone, Vosk ASR, Piper TTS, echo gate, bridge; and its stand-ins "
    "(tui, say).",
    no_args_is_help=True,
    add_completion=False,
)
err = Console(stderr=True)


register_tui(app)


@app.callback()
def _root() -> None:
    """Run the edge of tether: ears and voice on the board, the mind at home."""


@app.command()
def run(  # noqa: PLR0917 - Typer maps each option to a parameter
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="edge.yaml (device, audio, endpointing, models, bridge half). "
            "Without it: defaults that work on a desktop.",
        ),
    ] = None,
    audio_in: Annotated[
        Path | None,
        typer.Option(
            "--audio-in",
            help="A WAV file to use as the microphone, in real time; the run ends when it "
            "is exhausted and every answer has played.",
        ),
    ] = None,
    audio_out: Annotated[
        Path | None,
        typer.Option("--audio-out", help="A WAV file to use as the speaker (at the voice's rate)."),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Pair (once) with the home running from this data directory on this machine "
            "and connect through its SSH endpoint, as a board would.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON summary (turns, acks) at the end.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every step.")] = False,
) -> None:
    """Start the loopback nats-server and every edge node; stop cleanly on SIGTERM or Ctrl-C.

    Under systemd (Type=notify) it reports READY=1 once listening and pings the
    watchdog. Exit status: 0 done, 1 a failure (or a turn left unanswered),
    2 bad configuration or usage.
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(name)s: %(message)s",
        handlers=[RichHandler(console=err, show_path=False)],
    )
    # asyncssh says two INFO lines per connection attempt: while home is away the
    # bridge retries for hours, and the bridge's own warning already says each one.
    logging.getLogger("asyncssh").setLevel(logging.WARNING)
    settings = load_edge_config(config) if config is not None else EdgeConfig()
    if audio_in is not None and not audio_in.is_file():
        raise UsageError(f"--audio-in {audio_in}: no such file")
    settings = with_audio_files(settings, audio_in, audio_out)
    if data_dir is not None:
        settings = asyncio.run(pair_with_home(settings, data_dir))
    summary = asyncio.run(_run(settings, finite=audio_in is not None))
    if as_json:
        print(json.dumps(dataclasses.asdict(summary), ensure_ascii=False, indent=2))
    else:
        for turn in summary.turns:
            err.print(f"turn {turn['binding_id']}: {turn['text']!r}", highlight=False)
    if summary.unanswered:
        err.print(
            f"[red]error[/red] no answer for {len(summary.unanswered)} turn(s): "
            + ", ".join(summary.unanswered),
            highlight=False,
        )
    finish(ok=not summary.unanswered)


async def _run(config: EdgeConfig, *, finite: bool) -> RunSummary:
    with stop_on_signals() as stop:
        async with EdgeRuntime(config) as edge:
            bridge = config.bridge.half or "none (local only)"
            err.print(
                f"edge [bold]{config.device}[/bold] listening on {edge.nats.url}; bridge: {bridge}",
                highlight=False,
            )
            signalled = asyncio.create_task(stop.wait(), name="signal")
            done: asyncio.Task[Any] = asyncio.create_task(
                edge.drain() if finite else edge.capture.exhausted.wait(), name="done"
            )
            try:
                await asyncio.wait([signalled, done], return_when=asyncio.FIRST_COMPLETED)
            finally:
                await cancel_and_wait(signalled, done)
            if edge.capture.error is not None:
                raise CaptureFailed(f"capture failed: {edge.capture.error}")
            if not finite and edge.capture.exhausted.is_set():
                raise CaptureFailed("the capture device stopped delivering audio")
            summary = edge.summary()
            # Only a run that finished its input is judged by unanswered turns.
            finished = finite and done.done() and not done.cancelled()
            summary.unanswered = done.result() if finished else []
            return summary


def main() -> None:
    """Console script entry point."""
    app()

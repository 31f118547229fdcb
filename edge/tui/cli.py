"""``edge tui`` and ``edge say``: registered onto the ``edge`` Typer app by :func:`register`.

Both talk to one NATS URL. ``--direct NATS_URL`` is a home's own NATS on this
machine; without it they go the board's way, through the edge's own loopback
nats-server and the edge bridge node (:func:`edge.tui.transport.through_bridge`),
paired with the home found in ``--data-dir`` through its ``bridge.pair`` verb
(:mod:`edge.pair_through_home`): no `bridge pair` step and no restart of home.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from bridge.node.edge import EdgeBridgeNode
from bridge.node.outbox import OUTBOX_DIR
from bridge.pair import PairingFiles
from edge.errors import BridgeUnavailable, NotTaken
from edge.pair_through_home import HomePairing, pair_through_home
from edge.tui.errors import TransportError, TuiError, TurnTimeout
from edge.tui.say import SayResult, say_once
from edge.tui.transport import direct, through_bridge
from edge.tui.wire import AgentReply
from shared.cli import CommandApp, finish
from shared.errors import HomeNotRunning, SchemaError, SubjectError, UsageError
from shared.schema import load_bridge_half
from shared.subjects import check_name

DEFAULT_DEVICE = "tui"

console = Console()


def default_data_dir() -> Path:
    """Home's data directory, by the same rule as ``home``: $TETHER_HOME_DIR, else XDG."""
    explicit = os.environ.get("TETHER_HOME_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "tether" / "home"


# How long `edge say` waits for the link home before it says why there is none.
SAY_LINK_WAIT_S = 6.0


async def pairing_for(data_dir: Path, device: str) -> tuple[HomePairing, bool]:
    """The device's pairing with the home in ``data_dir``, and whether that home runs.

    With home running, its ``bridge.pair`` verb pairs the device once and serves it at
    once. With home down, an earlier pairing still opens the link, which then says home
    is unreachable (the TUI shows it; ``edge say`` exits 1 naming the address).
    """
    try:
        return await pair_through_home(data_dir, device), True
    except HomeNotRunning as exc:
        files = PairingFiles.of(data_dir / "bridge", device)
        if files.edge_half.is_file() and files.client_key.is_file():
            return HomePairing(device, files.edge_half, files.client_key.parent), False
        raise TransportError(str(exc)) from None
    except BridgeUnavailable as exc:
        raise TransportError(str(exc)) from None


def transport_for(
    direct_url: str | None, data_dir: Path, device: str, *, wait_link_s: float | None = None
) -> tuple[AbstractAsyncContextManager[str], str]:
    """The NATS URL's context and a label for the status bar, from the CLI options."""
    if direct_url is not None:
        return direct(direct_url, data_dir), "direct"
    return _bridged(data_dir, device, wait_link_s), "bridge"


@asynccontextmanager
async def _bridged(data_dir: Path, device: str, wait_link_s: float | None) -> AsyncIterator[str]:
    pairing, home_runs = await pairing_for(data_dir, device)
    try:
        half = load_bridge_half(pairing.edge_half)
    except SchemaError as exc:
        raise TransportError(f"{pairing.edge_half} is not a usable edge half: {exc}") from exc
    hint = (
        f"check that `home up --data-dir {data_dir}` is running and serves device "
        f"{device!r} (`home status --data-dir {data_dir}`)"
    )
    # The keyboard's half keeps its delivery state beside its pairing, as a board's does: a
    # speak home sent as the last say ended is known as delivered at the next one, not
    # played again, and a turn not yet taken by home is sent when the link comes back.
    outbox = pairing.edge_half.parent / OUTBOX_DIR
    async with through_bridge(
        lambda url: EdgeBridgeNode(
            half, client_key=pairing.client_key, nats_url=url, outbox_dir=outbox
        ),
        wait_link_s=wait_link_s,
        first_failure_is_final=not home_runs,
        hint=hint,
    ) as url:
        yield url


DeviceOpt = Annotated[
    str, typer.Option("--device", help="The device this keyboard stands in for (one token).")
]
DataDirOpt = Annotated[
    Path,
    typer.Option(
        "--data-dir",
        help="The data directory of a home on this machine (its pairing lives there). "
        "Default: $TETHER_HOME_DIR, else $XDG_DATA_HOME/tether/home.",
        default_factory=default_data_dir,
        show_default=False,
    ),
]
DirectOpt = Annotated[
    str | None,
    typer.Option(
        "--direct",
        metavar="NATS_URL",
        help="Skip the bridge: talk straight to a home's NATS (e.g. nats://127.0.0.1:4222). "
        "Its bus admits only known users: the admin credentials of the home in --data-dir "
        "are used when the URL names that home, else give nats://USER:PASSWORD@HOST:PORT.",
    ),
]


def _check_device(device: str) -> str:
    try:
        return check_name(device, "device")
    except SubjectError as exc:
        raise UsageError(f"--device: {exc}") from None


def tui(
    data_dir: DataDirOpt,
    device: DeviceOpt = DEFAULT_DEVICE,
    direct_url: DirectOpt = None,
) -> None:
    """Talk to home from the keyboard, as the board would with its microphone.

    Each line you type is sent as the device's turn (events.sensation.DEVICE.turn);
    spoken answers appear as the agent's lines and are acknowledged as played;
    text the agent would not speak shows in yellow with its reason; with --direct,
    memory recalls appear as quiet notes under their turn (no memory crosses the
    bridge). The status bar shows the link (up or
    down, round trip, queued events), the active agent and the last turn's latency.

    Keys: Enter sends, Ctrl-C quits, Ctrl-R (or F2) toggles the raw event view, F3
    shows this device's earlier conversation with the active agent (with --direct:
    the history stays on home's NATS).

    Examples:

        edge tui --data-dir ~/.local/share/tether/home

        edge tui --direct nats://127.0.0.1:4222 --device tui
    """
    from edge.tui.app import TetherTui  # noqa: PLC0415 - Textual loads only for the TUI
    from edge.tui.session import EdgeSession  # noqa: PLC0415

    device = _check_device(device)
    opened, label = transport_for(direct_url, data_dir, device)

    async def run() -> int:
        async with opened as url:
            session = EdgeSession(url, device, asks_bridge=label == "bridge")
            app = TetherTui(session, transport=label)
            await app.run_async()
            return app.return_code or 0

    # The app says itself why it ended with a code other than 0.
    finish(ok=asyncio.run(run()) == 0)


def say(  # noqa: PLR0917 - Typer maps each option to a parameter
    text: Annotated[str, typer.Argument(help="What to say, as one turn.")],
    data_dir: DataDirOpt,
    device: DeviceOpt = DEFAULT_DEVICE,
    direct_url: DirectOpt = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Seconds to wait for the answer.")
    ] = 60.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")] = False,
    listen: Annotated[
        float,
        typer.Option(
            "--listen",
            min=0.0,
            help="Then stay this many seconds and print what home says to the device "
            "of its own accord (a reminder, the operator's answer), each acked as played.",
        ),
    ] = 0.0,
    until: Annotated[
        str | None,
        typer.Option("--until", help="Stop listening once home says something holding this."),
    ] = None,
) -> None:
    """Say one thing to home and print its answer, with timings (for scripts).

    Sends TEXT as the device's turn, waits for the first speak or reply of that
    turn (acknowledging a speak as played), prints it and exits 0; exits 1 if
    nothing answers within --timeout seconds, home cannot be reached, or the
    bridge does not take the turn (the reason is printed). With --listen it then
    stays, as a board would, and prints what home says later (under "later" in
    --json).

    Examples:

        edge say "hello" --direct nats://127.0.0.1:4222 --json
        edge say "remind me in one minute to check the oven" --listen 90 --until oven
    """
    # The bridge node warns at every failed attempt; a failed say sums them up in one line.
    logging.getLogger("tether.bridge").setLevel(logging.ERROR)
    device = _check_device(device)
    if not text.strip():
        raise UsageError("TEXT is empty; there is nothing to say")
    opened, label = transport_for(direct_url, data_dir, device, wait_link_s=SAY_LINK_WAIT_S)

    async def run() -> SayResult:
        async with opened as url:
            return await say_once(
                url, device, text, timeout_s=timeout, asks_bridge=label == "bridge",
                listen_s=listen, until=until,
            )  # fmt: skip

    try:
        result = asyncio.run(run())
    except TurnTimeout as exc:
        if as_json:
            print(
                json.dumps(
                    {
                        "error": "timeout",
                        "binding_id": exc.binding_id,
                        "timeout_s": exc.timeout_s,
                        "message": str(exc),
                    }
                )
            )
        raise
    except (TuiError, NotTaken) as exc:
        if as_json:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        raise
    if as_json:
        print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    else:
        _print_result(result)


def _print_result(result: SayResult) -> None:
    answer = result.answer
    color = "green" if result.kind == "speak" else "yellow"
    console.print(f"[bold {color}]{answer.agent}[/] ({result.kind}): ", end="", highlight=False)
    console.print(answer.text, markup=False, highlight=False)
    if isinstance(answer, AgentReply) and not answer.spoken:
        console.print(f"  not spoken: {answer.reason or 'no reason given'}", highlight=False)
    for note in result.notes:
        console.print(f"  · {note.summary}", style="dim", markup=False, highlight=False)
    for later in result.later:
        at = later.at.strftime("%H:%M:%S")
        console.print(f"[bold green]{later.answer.agent}[/] (later, {at} UTC): ", end="",
                      highlight=False)  # fmt: skip
        console.print(later.answer.text, markup=False, highlight=False)
    sent = result.sent_at.strftime("%H:%M:%S.%f")[:-3]
    console.print(
        f"binding {result.binding_id}, sent {sent} UTC, "
        f"first answer after {result.first_answer_ms:.0f} ms",
        style="dim",
        highlight=False,
    )


def register(app: CommandApp) -> None:
    """Add ``tui`` and ``say`` to the ``edge`` app."""
    app.command("tui")(tui)
    app.command("say")(say)

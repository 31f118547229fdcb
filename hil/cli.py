"""``hil``: prove a board (or a virtual one) works end to end, with a report a person can read."""

from __future__ import annotations

import asyncio
import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from hil.model import CaseResult, RunResult
from hil.report import write_reports
from hil.runner import HilError, Suite, TargetDown, run_suites
from hil.suites import SUITE_NAMES, build_suites, check_wake_options, parse_fleet_sizes
from hil.targets.address import (
    QemuTarget,
    RelaySpec,
    SshAddress,
    Target,
    VirtualTarget,
    parse_relay,
    parse_target,
)
from hil.targets.base import Board, HomeWatch, TargetContext
from hil.targets.home_side import HomeSide
from hil.targets.profile import load_profile
from hil.targets.proxy import CuttableRelay
from hil.targets.qemu import QemuBoard
from hil.targets.ssh import SshBoard, SshBoardOptions
from hil.targets.sshlink import HostKeyPin
from hil.targets.virtual import DEFAULT_PHRASES, VirtualBoard
from shared.cli import CommandApp, finish

app = CommandApp(
    name="hil",
    help="Hardware-in-the-loop runs: smoke, turn, linkdrop, soak, fleet and wake suites "
    "against a board.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()


@app.callback()
def _root() -> None:
    """Run HIL suites and write JUnit XML, JSON and an HTML report."""


HELP_TARGET = """Which board: 'virtual', 'ssh://user@host[:port]' or 'qemu:IMAGE'.

'virtual': the real edge code on this machine, a PulseAudio null sink as its sound card,
bridged through a cuttable relay to a fresh `home up` (--llm-url picks its model).

'ssh://tether@board.lan': a real board over SSH, key login only (--key), host key pinned
(--known-hosts or --host-key; a key never seen before is refused, never added). hil only
reads the board (service state, restarts, logs, version, /proc, its edge.yaml and bridge
half over SFTP) and writes utterances into the edge's input spool; it installs nothing
(no apt, no pip) on the board. Turns are read on the `home up` the board is bridged to
(--home-dir).

'qemu:out/tui-0.1.0.img.zst': boots a firmware image (qemu profile) under
qemu-system-aarch64 with user networking and an SSH port forward, puts a fresh host key
and a root login key on that boot's scratch copy of the disk (the image is untouched),
pins that host key, and drives it like an ssh board (with --key: as user tether, the key
the image was built with, `firmware build --ssh-key`). Inside qemu, home is 10.0.2.2."""


TargetOpt = Annotated[str, typer.Option(help=HELP_TARGET)]
SuiteOpt = Annotated[str, typer.Option(help=f"Comma-separated suites: {', '.join(SUITE_NAMES)}.")]
ReportOpt = Annotated[
    Path, typer.Option(help="Where to write junit.xml, results.json and report.html.")
]
LlmUrlOpt = Annotated[
    str | None,
    typer.Option(help="virtual: an OpenAI-compatible model for home (default: embedded)."),
]
DEFAULT_PHRASE_LIST = ",".join(DEFAULT_PHRASES)
PhrasesOpt = Annotated[
    str,
    typer.Option(help="Comma-separated Korean phrases to inject (the grammar of the test ASR)."),
]
WorkDirOpt = Annotated[
    Path | None, typer.Option(help="Keep the run's files (home data, logs) here.")
]
SoakTurnsOpt = Annotated[int, typer.Option(help="Turns in the soak suite.")]
SoakMinutesOpt = Annotated[float, typer.Option(help="Minutes the soak suite spans.")]
FleetBoardsOpt = Annotated[
    str,
    typer.Option(
        help="Comma-separated board counts, one fleet case each: that many simulated "
        "boards paired with home, each over its own SSH link."
    ),
]
FleetTurnsOpt = Annotated[int, typer.Option(help="Turns each fleet board speaks.")]
FleetIntervalOpt = Annotated[float, typer.Option(help="Seconds between one fleet board's turns.")]
WakeHoursOpt = Annotated[
    float,
    typer.Option(
        help="wake: hours of synthesised background audio (speech, music, speech over "
        "music) per half, for false accepts per hour."
    ),
]
WakeModelOpt = Annotated[
    str,
    typer.Option(
        help="wake: the model the board listens with (endpointing.wake.model); the suite "
        "judges it and measures the others."
    ),
]
KeyOpt = Annotated[
    Path | None,
    typer.Option(help="ssh/qemu: the private key to log in with (the only one used)."),
]
UseAgentOpt = Annotated[
    bool, typer.Option(help="ssh: also try your SSH agent and ~/.ssh keys (off by default).")
]
KnownHostsOpt = Annotated[
    Path | None, typer.Option(help="ssh: a known_hosts file holding the board's pinned key.")
]
HostKeyOpt = Annotated[
    str | None, typer.Option(help="ssh: the board's pinned host key, 'ssh-ed25519 AAAA...'.")
]
BoardProfileOpt = Annotated[
    Path | None,
    typer.Option(
        help="ssh/qemu: YAML overriding where edge.yaml is and the commands run on the "
        "board (defaults: systemd/journald, see hil/targets/board-systemd.yaml)."
    ),
]
HomeDirOpt = Annotated[
    Path | None,
    typer.Option(help="ssh/qemu: the --data-dir of the running `home up` the board uses."),
]
HomeHalfOpt = Annotated[
    Path | None,
    typer.Option(help="ssh/qemu: home's copy of the board's edge half (default: from --home-dir)."),
]
AcousticOpt = Annotated[
    bool,
    typer.Option(
        help="ssh/qemu: play utterances through the board's speaker for its microphone "
        "(the profile's `play` command) instead of the edge's input spool."
    ),
]
RelayOpt = Annotated[
    str | None,
    typer.Option(
        help="ssh: LISTEN_HOST:PORT=HOME_HOST:PORT, a link hil can cut for linkdrop; pair "
        "the board with home at this machine's LISTEN port."
    ),
]


@app.command()
def run(  # noqa: PLR0917 - Typer maps each option to a parameter
    target: TargetOpt,
    suite: SuiteOpt = "smoke,turn",
    report: ReportOpt = Path("hil-report"),
    llm_url: LlmUrlOpt = None,
    phrases: PhrasesOpt = DEFAULT_PHRASE_LIST,
    work_dir: WorkDirOpt = None,
    soak_turns: SoakTurnsOpt = 5,
    soak_minutes: SoakMinutesOpt = 1.0,
    fleet_boards: FleetBoardsOpt = "10",
    fleet_turns: FleetTurnsOpt = 3,
    fleet_interval: FleetIntervalOpt = 5.0,
    wake_hours: WakeHoursOpt = 1.0,
    wake_model: WakeModelOpt = "okay_nabu",
    key: KeyOpt = None,
    use_agent: UseAgentOpt = False,
    known_hosts: KnownHostsOpt = None,
    host_key: HostKeyOpt = None,
    board_profile: BoardProfileOpt = None,
    home_dir: HomeDirOpt = None,
    home_half: HomeHalfOpt = None,
    acoustic: AcousticOpt = False,
    relay: RelayOpt = None,
) -> None:
    """Run suites against a target and write the reports.

    Exit status: 0 every case passed, 1 a case failed, 2 bad usage or a target
    that could not be brought up.

    Examples:

        hil run --target virtual --suite smoke,turn,linkdrop --report out/

        hil run --target ssh://tether@board.lan --key ~/.ssh/board --known-hosts board.known
        --home-dir ~/.local/share/tether --suite smoke,turn --report out/

        hil run --target qemu:out/tui-0.1.0.img.zst --suite smoke --report out/

        hil run --target virtual --suite fleet --fleet-boards 1,10 --llm-url URL

        hil run --target virtual --suite wake --wake-model okay_nabu --wake-hours 1
    """
    names = [s.strip() for s in suite.split(",") if s.strip()]
    chosen = tuple(p.strip() for p in phrases.split(",") if p.strip())
    sizes = parse_fleet_sizes(fleet_boards)
    suites = build_suites(names, chosen, sizes)
    parsed = parse_target(target)
    relay_spec = parse_relay(relay) if relay else None
    options = SshBoardOptions(
        key=key,
        pin=HostKeyPin(known_hosts=known_hosts, host_key=host_key),
        profile=load_profile(board_profile),
        use_agent=use_agent,
        home=HomeSide(home_dir) if home_dir else None,
        home_half=home_half,
        acoustic=acoustic,
        phrases=chosen,
    )
    check_wake_options(wake_model, wake_hours)
    knobs = Knobs(
        suites, chosen, work_dir, soak_turns, soak_minutes, sizes, fleet_turns, fleet_interval,
        wake_hours, wake_model,
    )  # fmt: skip
    try:
        if isinstance(parsed, VirtualTarget):
            home_args = ("--llm-url", llm_url) if llm_url else ()
            result = asyncio.run(_run_virtual(knobs, home_args))
        else:
            result = asyncio.run(_run_remote(parsed, target, knobs, options, relay_spec))
    except HilError as exc:
        raise TargetDown(f"the target did not come up: {exc}") from exc
    paths = write_reports(result, report)
    counts = result.counts()
    verdict = "[green]PASS[/green]" if result.ok else "[red]FAIL[/red]"
    console.print(
        f"{verdict}: {counts['pass']} passed, {counts['fail']} failed, {counts['error']} errors; "
        f"reports: {paths['html']}, {paths['junit']}, {paths['json']}"
    )
    finish(ok=result.ok)


@dataclass(frozen=True)
class Knobs:
    """What every target's run takes from the command line."""

    suites: list[Suite[TargetContext]]
    phrases: tuple[str, ...]
    work_dir: Path | None
    soak_turns: int
    soak_minutes: float
    fleet_sizes: tuple[int, ...] = (10,)
    fleet_turns: int = 3
    fleet_interval_s: float = 5.0
    wake_hours: float = 1.0
    wake_model: str = "okay_nabu"

    def context(
        self, board: Board, home: HomeWatch, root: Path, home_dir: Path | None
    ) -> TargetContext:
        """What the suites get, with these knobs."""
        return TargetContext(
            board,
            home,
            root,
            soak_turns=self.soak_turns,
            soak_minutes=self.soak_minutes,
            home_dir=home_dir,
            fleet_sizes=self.fleet_sizes,
            fleet_turns=self.fleet_turns,
            fleet_interval_s=self.fleet_interval_s,
            wake_hours=self.wake_hours,
            wake_model=self.wake_model,
        )


async def _run_virtual(knobs: Knobs, home_args: tuple[str, ...]) -> RunResult:
    with tempfile.TemporaryDirectory(prefix="hil-") as tmp:
        root = knobs.work_dir or Path(tmp)
        board = VirtualBoard(root, phrases=knobs.phrases, home_args=home_args)
        async with board, board.watch() as home:
            ctx = knobs.context(board, home, root, board.data_dir)
            result = await run_suites("virtual", knobs.suites, ctx, board.logs, _show)
        result.environment = {"target": "virtual", "work_dir": str(root), "phrases": knobs.phrases}
        return result


async def _run_remote(
    parsed: Target,
    name: str,
    knobs: Knobs,
    options: SshBoardOptions,
    relay: RelaySpec | None,
) -> RunResult:
    with tempfile.TemporaryDirectory(prefix="hil-") as tmp:
        root = knobs.work_dir or Path(tmp)
        async with AsyncExitStack() as stack:
            if relay is not None:
                options = replace(
                    options,
                    relay=await stack.enter_async_context(
                        CuttableRelay(
                            relay.listen_port, relay.target_port, relay.listen_host,
                            relay.target_host,
                        )
                    ),
                )  # fmt: skip
            if isinstance(parsed, QemuTarget):
                board = await stack.enter_async_context(QemuBoard(parsed.image, root, options))
            elif isinstance(parsed, SshAddress):
                board = await stack.enter_async_context(SshBoard(parsed, root, options))
            else:
                raise HilError(f"{name} is not a remote target")
            # Without a home to watch, the cases that read home fail and say so.
            home = HomeWatch(options.home.nats_url() if options.home else "nats://127.0.0.1:1")
            if options.home is not None:
                await stack.enter_async_context(home)
            home_dir = options.home.data_dir if options.home else None
            ctx = knobs.context(board, home, root, home_dir)
            result = await run_suites(name, knobs.suites, ctx, board.logs, _show)
        result.environment = {
            "target": name,
            "work_dir": str(root),
            "phrases": knobs.phrases,
            "injection": "acoustic" if options.acoustic else "spool",
        }
        return result


def _show(case: CaseResult) -> None:
    colour = {"pass": "green", "fail": "red", "error": "red", "skip": "yellow"}[case.verdict]
    console.print(
        f"[{colour}]{case.verdict:5}[/{colour}] {case.suite}/{case.name} "
        f"({case.duration_s:.1f} s){' — ' + case.reason if case.reason else ''}",
        highlight=False,
    )


def main() -> None:
    """Console-script entry point."""
    app()

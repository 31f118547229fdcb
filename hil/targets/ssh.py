"""The ssh target: a real board over SSH (paramiko), read-only but for the audio it injects.

hil logs in with a key (never a password), checks the host key against the
pinned one (never adds one), and on the board only runs the profile's
read-only commands (service state, restarts, logs, version, ``/proc``), reads
files over SFTP, writes utterances into the edge's input spool and, with
``--acoustic``, plays them through the board's speaker. It installs nothing.

Turn events are read on home (the ``home up`` the board is bridged to); the
board's own events (link status, local notices) through a forward to the
edge's NATS when its edge.yaml gives a fixed ``nats.port``.
"""

from __future__ import annotations

import asyncio
import shlex
import time
import uuid
import wave
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import nats
from nats.aio.client import Client

from hil.runner import CaseFailed, HilError
from hil.speech import Clip, SpeechLibrary
from hil.targets.address import SshAddress
from hil.targets.base import BoardSignals, Headroom, HomeWatch, ResourceSample, close_watch
from hil.targets.edge_view import SPOOL, EdgeConfigError, EdgeView, parse_edge_view
from hil.targets.home_side import HomeSide
from hil.targets.profile import BoardProfile
from hil.targets.proxy import CuttableRelay
from hil.targets.sshlink import HostKeyPin, SshError, SshLink
from shared.errors import SchemaError
from shared.lifecycle import Service
from shared.schema import load_bridge_half
from shared.schema.bridge_half import parse_bridge_half
from shared.yaml_source import parse_yaml

LOG_LINES = 300
SPOOL_PICKUP_S = 30.0
NOTICE_SUFFIX = "-notice.wav"
DEFAULT_PHRASES = ("안녕하세요", "감사합니다")

# One round trip for all of sample(): the edge's RSS and CPU ticks twice, the hottest zone.
_SAMPLE_SCRIPT = """
pid=$({pid_cmd})
[ -n "$pid" ] && [ "$pid" != 0 ] && [ -r /proc/$pid/stat ] || {{ echo nopid; exit 0; }}
a=$(awk '{{print $14+$15}}' /proc/$pid/stat); sleep 0.5
b=$(awk '{{print $14+$15}}' /proc/$pid/stat)
echo "rss $(awk '/^VmRSS:/{{print $2}}' /proc/$pid/status)"
echo "ticks $((b - a)) $(getconf CLK_TCK)"
for z in /sys/class/thermal/thermal_zone*/temp; do [ -r "$z" ] && echo "temp $(cat "$z")"; done
true
"""


@dataclass(frozen=True)
class SshBoardOptions:
    """How to reach and drive one board."""

    key: Path | None
    pin: HostKeyPin
    profile: BoardProfile
    use_agent: bool = False
    home: HomeSide | None = None
    home_half: Path | None = None
    acoustic: bool = False
    relay: CuttableRelay | None = None
    phrases: tuple[str, ...] = DEFAULT_PHRASES


class SshBoard(Service):
    """A board over SSH; open with ``async with``. A board that cannot be reached still opens:
    the smoke suite's ``board_reachable`` case says why, and every other case fails with it."""

    def __init__(self, address: SshAddress, work_dir: Path, options: SshBoardOptions) -> None:
        self.address = address
        self.work_dir = work_dir
        self.options = options
        self.profile = options.profile
        self.phrases = options.phrases
        self.device = "board"
        self.exact_text = False
        self.edge: EdgeView | None = None
        self.unreachable: str | None = None
        self._link: SshLink | None = None
        self._stack = AsyncExitStack()
        self._speech = SpeechLibrary(work_dir / "speech")
        self._edge_nc: Client | None = None
        self._signals = BoardSignals()
        self._injected = 0

    async def start(self) -> None:
        """Open the SSH link and its forwards; what opened is closed again on failure."""
        await self.close_on_failure(self._open())

    async def close(self) -> None:
        """Close the edge's NATS connection and the SSH link."""
        nc, self._edge_nc = self._edge_nc, None
        await close_watch(nc)
        await self._stack.aclose()

    async def _open(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        link = SshLink(
            self.address, self.options.key, self.options.pin, use_agent=self.options.use_agent
        )
        try:
            self._link = await self._stack.enter_async_context(link)
        except SshError as exc:
            self.unreachable = str(exc)
            return
        config = self.profile.config
        try:
            text = (await self._link.read_bytes(config)).decode("utf-8", "replace")
            self.edge = parse_edge_view(text, f"{self.address.host}:{config}")
        except (SshError, EdgeConfigError) as exc:
            self.unreachable = f"cannot read the board's edge config: {exc}"
            return
        self.device = self.edge.device
        # Exact transcripts only when every injected phrase is in the board's grammar.
        self.exact_text = bool(self.edge.grammar) and set(self.phrases) <= set(self.edge.grammar)
        if self.edge.nats_port:
            forward = self._link.forward(self.edge.nats_port)
            await self._stack.enter_async_context(forward)
            self._edge_nc = await self._watch_board(f"nats://127.0.0.1:{forward.port}")

    async def _watch_board(self, url: str) -> Client | None:
        try:
            # No reconnects: a board NATS that went away (edge stopped) stays away for this run.
            nc = await nats.connect(
                url, name="hil-board", connect_timeout=10, allow_reconnect=False, error_cb=_quiet
            )
        # The board's bus is optional: any failure to reach it means home alone.
        except Exception:  # noqa: BLE001
            return None  # the board's events are then read on home alone

        await self._signals.watch(nc, self.device)
        return nc

    @property
    def link(self) -> SshLink:
        """The SSH session; a failed case naming why when the board could not be reached."""
        if self._link is None or self.unreachable is not None:
            raise CaseFailed(f"the board {self.address} is unreachable: {self.unreachable}")
        return self._link

    def _edge(self) -> EdgeView:
        if self.edge is None:
            raise CaseFailed(f"the board {self.address} is unreachable: {self.unreachable}")
        return self.edge

    def _home(self) -> HomeSide:
        if self.options.home is None:
            raise CaseFailed("this case reads home: give --home-dir (the board's `home up`)")
        return self.options.home

    def watch(self) -> HomeWatch:
        """A watch on the home this board is bridged to (open with ``async with``)."""
        return HomeWatch(self._home().nats_url())

    # --- the Board interface ---------------------------------------------------

    async def reachable(self) -> str | None:
        """None once logged in and the edge.yaml read; else why not."""
        return self.unreachable

    async def services(self) -> dict[str, str]:
        service = self.profile.service
        done = await self.link.run(self.profile.command("state"))
        state = done.stdout.strip() or f"unknown (exit {done.code}: {done.stderr.strip()[:200]})"
        out = {service: state}
        if self.options.home is not None:
            out.update(await asyncio.to_thread(self.options.home.components))
        return out

    async def restarts(self) -> int | None:
        done = await self.link.run(self.profile.command("restarts"))
        text = done.stdout.strip()
        return int(text) if done.code == 0 and text.isdigit() else None

    async def versions(self) -> dict[str, str]:
        board = (await self.link.check(self.profile.command("version"))).strip()
        return {"board": board, "home": version("tether")}

    async def half_digests(self) -> tuple[str, str]:
        edge = self._edge()
        if edge.half is None:
            raise CaseFailed(
                f"the board's {self.profile.config} names no bridge half (bridge.half)"
            )
        text = (await self.link.read_bytes(edge.half)).decode("utf-8", "replace")
        where = f"{self.address.host}:{edge.half}"
        try:
            carried = parse_bridge_half(parse_yaml(text, where), where).digest()
        except SchemaError as exc:
            raise CaseFailed(f"the board's bridge half is invalid: {exc}") from exc
        home_half = self.options.home_half or self._home().half(self.device)
        return carried, load_bridge_half(home_half).digest()

    async def clock(self) -> datetime:
        sent = time.time()
        out = await self.link.check("date +%s.%N")
        rtt = time.time() - sent
        # The board read its clock somewhere in the round trip; half of it is the best guess.
        return datetime.fromtimestamp(float(out.strip()) + rtt / 2, UTC)

    async def headroom(self) -> Headroom:
        edge = self._edge()
        folder = edge.input_dir or edge.output_dir or "/"
        df = await self.link.check(f"df -Pk {shlex.quote(folder)} | tail -1")
        meminfo = (await self.link.read_bytes("/proc/meminfo")).decode()
        available = next(
            (
                int(line.split()[1])
                for line in meminfo.splitlines()
                if line.startswith("MemAvailable:")
            ),
            0,
        )
        return Headroom(int(df.split()[3]) / 1024, available / 1024)

    async def inject(self, phrase: str) -> float:
        clip = await asyncio.to_thread(self._speech.korean, phrase)
        self._injected += 1
        name = f"hil-{self._injected:04d}-{uuid.uuid4().hex[:8]}.wav"
        if self.options.acoustic:
            return await self._play(clip, name)
        return await self._spool(clip, name)

    async def _play(self, clip: Clip, name: str) -> float:
        remote = await self.link.put_atomically(clip.path.read_bytes(), "/tmp", name)
        try:
            await self.link.check(self.profile.command("play", wav=shlex.quote(remote)), 120)
        finally:
            await self.link.run(f"rm -f {shlex.quote(remote)}")
        return time.monotonic() - clip.tail_s

    async def _spool(self, clip: Clip, name: str) -> float:
        edge = self._edge()
        if edge.input_kind != SPOOL or edge.input_dir is None:
            raise CaseFailed(
                f"the board's audio.input is kind {edge.input_kind!r}, not a spool: set "
                "audio.input: {kind: spool, dir: DIR} in its edge.yaml, or give --acoustic "
                "to play through its speaker"
            )
        folder = edge.input_dir
        await self.link.put_atomically(clip.path.read_bytes(), folder, name)
        # The edge feeds a spooled file in real time, then moves it to done/ (or rejected/).
        deadline = time.monotonic() + _duration_s(clip.path) + SPOOL_PICKUP_S
        while time.monotonic() < deadline:
            if name in await self.link.listdir(f"{folder}/done"):
                return time.monotonic() - clip.tail_s
            if name in await self.link.listdir(f"{folder}/rejected"):
                raise CaseFailed(f"the board's edge rejected the utterance {name}: see its logs")
            await asyncio.sleep(0.2)
        raise CaseFailed(
            f"the board's edge did not take {folder}/{name} within {SPOOL_PICKUP_S:g} s "
            "of its length (is the edge reading its spool?)"
        )

    async def playbacks(self) -> int | None:
        edge = self._edge()
        if edge.output_kind != SPOOL or edge.output_dir is None:
            return None
        return sum(n.endswith(".wav") for n in await self.link.listdir(edge.output_dir))

    async def wait_link(self, up: bool, within_s: float) -> bool:
        home = self._home()
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if up and await asyncio.to_thread(home.link_up, self.device):
                return True
            if not up:
                if self._edge_nc is not None and self._signals.link_up is False:
                    return True
                if self._edge_nc is None and not await asyncio.to_thread(home.link_up, self.device):
                    return True
            await asyncio.sleep(0.2)
        return False

    async def notices(self) -> int:
        if self._edge_nc is not None:
            return self._signals.notices
        edge = self._edge()
        if edge.output_kind == SPOOL and edge.output_dir is not None:
            # The output spool names each playback NNNNNN-LABEL.wav; the local notice's
            # label is "notice".
            names = await self.link.listdir(edge.output_dir)
            return sum(n.endswith(NOTICE_SUFFIX) for n in names)
        raise CaseFailed(
            "cannot count the board's notices: its edge.yaml gives no fixed nats.port for hil "
            "to reach over SSH, and its audio.output is not a spool"
        )

    async def cut_link(self) -> None:
        self._relay().cut()

    async def restore_link(self) -> None:
        self._relay().restore()

    def _relay(self) -> CuttableRelay:
        if self.options.relay is None:
            raise CaseFailed(
                "linkdrop on a real board needs the link to pass through hil: pair the board "
                "with home at this machine's --relay port"
            )
        return self.options.relay

    async def sample(self) -> ResourceSample:
        script = _SAMPLE_SCRIPT.format(pid_cmd=self.profile.command("pid"))
        out = await self.link.check(f"sh -c {shlex.quote(script)}")
        if out.strip() == "nopid":
            raise CaseFailed(f"the board's {self.profile.service} is not running (no pid)")
        rss_kb, ticks, hz, temps = 0.0, 0.0, 100.0, []
        for line in out.splitlines():
            fields = line.split()
            if fields[:1] == ["rss"] and len(fields) == 2:
                rss_kb = float(fields[1])
            elif fields[:1] == ["ticks"] and len(fields) == 3:
                ticks, hz = float(fields[1]), float(fields[2])
            elif fields[:1] == ["temp"] and len(fields) == 2:
                temps.append(float(fields[1]) / 1000)
        return ResourceSample(
            rss_mb=rss_kb / 1024,
            cpu_percent=ticks / hz / 0.5 * 100,
            temperature_c=max(temps) if temps else None,
        )

    async def logs(self) -> str:
        if self._link is None:
            return f"(no logs: {self.unreachable})"
        command = self.profile.command("logs", lines=LOG_LINES)
        try:
            done = await self._link.run(command)
        except HilError as exc:
            return f"(could not fetch logs: {exc})"
        return f"--- {self.address}: {command} ---\n{done.stdout}{done.stderr}"


async def _quiet(exc: Exception) -> None:
    """The board's NATS going away is seen in the cases (link, services), not here."""


def _duration_s(path: Path) -> float:
    with wave.open(str(path), "rb") as wav:
        return wav.getnframes() / wav.getframerate()

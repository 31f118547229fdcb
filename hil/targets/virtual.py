"""The virtual target: the real edge code on this machine, its sound card a real-time null sink.

It pairs a board with a fresh ``home up`` (the embedded endpoint, reached
through a relay the run can cut), starts ``edge run`` with sounddevice on a
private PulseAudio null sink, and injects utterances by playing them into that
sink, whose monitor is the board's microphone: paced in real time like a room.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import AsyncExitStack, ExitStack
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import asyncssh
import nats
import psutil
import yaml
from nats.aio.client import Client
from nats.errors import Error as NatsError

from edge.audio.null_server import pulse_daemon
from hil.runner import HilError
from hil.speech import SpeechLibrary
from hil.targets.base import BoardSignals, Headroom, HomeWatch, ResourceSample, close_watch
from hil.targets.home_side import HomeSide
from hil.targets.proxy import CuttableRelay
from shared.home_state import state_file
from shared.lifecycle import Pacing, Service, retry_until_deadline
from shared.proc import free_port, terminate_blocking
from shared.schema import load_bridge_half

DEVICE = "board"
START_TIMEOUT_S = 120.0
LINK_TIMEOUT_S = 30.0
# How many bring-ups on fresh ports before a port taken in between is the error.
PORT_TRIES = 3
PORT_TAKEN = "address already in use"
DEFAULT_PHRASES = ("안녕하세요", "감사합니다")


async def _ignore(exc: Exception) -> None:
    """Connection errors while the edge's NATS starts are expected; the loop retries."""


def _tool(name: str) -> str:
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else name


class VirtualBoard(Service):
    """A board made of this machine's processes; open it with ``async with``."""

    def __init__(
        self,
        work_dir: Path,
        *,
        phrases: tuple[str, ...] = DEFAULT_PHRASES,
        home_args: tuple[str, ...] = (),
        schema: str = "edge_asr",
        wrong_host_key: bool = False,
        audio: str = "pulse",
        vad: dict[str, Any] | None = None,
        tts: dict[str, Any] | None = None,
    ) -> None:
        self.device = DEVICE
        self.phrases = phrases
        self.exact_text = True  # its edge.yaml sets the phrase grammar
        self.work_dir = work_dir
        self.data_dir = work_dir / "home"
        self._home_args = home_args
        self._schema = schema
        self._wrong_host_key = wrong_host_key
        # "pulse": a null sink as sound card; "spool": the edge's file spool folders
        # (audio.input/output kind spool), as a board driven over ssh without --acoustic.
        self._audio = audio
        # Overrides of the edge's endpointing.vad and tts (a benchmark switches options).
        self._vad = vad or {}
        self._tts = tts or {}
        self.spool_in = work_dir / "spool" / "in"
        self.spool_out = work_dir / "spool" / "out"
        # The board keeps its own copy of its half and key, as a flashed board does.
        self.board_dir = work_dir / "board"
        self.linked = False
        self._speech = SpeechLibrary(work_dir / "speech")
        self._stack = AsyncExitStack()
        self._sync = ExitStack()
        self._home: subprocess.Popen[bytes] | None = None
        self._edge: subprocess.Popen[bytes] | None = None
        self._relay: CuttableRelay | None = None
        self._edge_nc: Client | None = None
        self._pulse_env: dict[str, str] = {}
        self._signals = BoardSignals()
        self.home_url = ""

    # --- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        """Start the home and the edge; what started is stopped again on failure.

        The loopback ports are picked free and bound a moment later by the processes
        started here; a port another program took in between is a bring-up on fresh
        ports, not a finding about the board.
        """
        for attempt in range(1, PORT_TRIES + 1):
            try:
                await self.close_on_failure(self._start())
                return
            except (HilError, OSError) as exc:
                if PORT_TAKEN not in str(exc).lower() or attempt == PORT_TRIES:
                    raise

    async def close(self) -> None:
        """Close the edge's NATS connection, terminate the edge and the home."""
        nc, self._edge_nc = self._edge_nc, None
        await close_watch(nc)
        for proc in (self._edge, self._home):
            if proc is not None:
                await asyncio.to_thread(terminate_blocking, proc, 30)
        await self._stack.aclose()
        self._sync.close()

    async def _start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        home_port, relay_port, edge_nats = free_port(), free_port(), free_port()
        bridge_dir = self.data_dir / "bridge"
        paired = await asyncio.to_thread(
            subprocess.run,
            [_tool("bridge"), "pair", "--device", DEVICE, "--home", f"127.0.0.1:{relay_port}",
             "--out", str(bridge_dir), "--force"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if paired.returncode != 0:
            raise HilError(f"bridge pair failed: {paired.stderr.strip()}")
        self._relay = await self._stack.enter_async_context(CuttableRelay(relay_port, home_port))
        self._home = self._spawn(
            "home-up",
            [_tool("home"), "up", "--data-dir", str(self.data_dir), "--bridge-port",
             str(home_port), "--apply", self._schema, *self._home_args],
        )  # fmt: skip
        await self._wait_file(state_file(self.data_dir), self._home, "home up")
        self.home_url = HomeSide(self.data_dir).nats_url()
        pulse = self._sync.enter_context(pulse_daemon(self.work_dir / "pulse"))
        self._pulse_env = pulse.env
        config = self.work_dir / "edge.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "device": DEVICE,
                    "audio": self._audio_config(),
                    "endpointing": {"mode": "vad", **({"vad": self._vad} if self._vad else {})},
                    "asr": {"grammar": [*self.phrases, "[unk]"]},
                    "tts": {**self._piper_threads(), **self._tts},
                    "nats": {"host": "127.0.0.1", "port": edge_nats},
                    "bridge": {
                        "half": str(self.board_dir / f"{DEVICE}.edge.yaml"),
                        "secrets": str(self.board_dir / "secrets"),
                    },
                },
                allow_unicode=True,
            )
        )
        self._copy_pairing_to_board(bridge_dir)
        self._edge = self._spawn(
            "edge-run", [_tool("edge"), "run", "--config", str(config), "--verbose"],
            env={"PULSE_SERVER": pulse.env["PULSE_SERVER"]},
        )  # fmt: skip
        self._edge_nc = await self._connect_edge(f"nats://127.0.0.1:{edge_nats}")
        # A link that never comes up is the smoke suite's finding, not a bring-up error.
        self.linked = await self.wait_link(True, LINK_TIMEOUT_S)

    def _audio_config(self) -> dict[str, dict[str, str]]:
        if self._audio == "spool":
            for folder in (self.spool_in, self.spool_out):
                folder.mkdir(parents=True, exist_ok=True)
            return {
                "input": {"kind": "spool", "dir": str(self.spool_in)},
                "output": {"kind": "spool", "dir": str(self.spool_out)},
            }
        return {
            "input": {"kind": "sounddevice", "device": "pulse"},
            "output": {"kind": "sounddevice", "device": "pulse"},
        }

    def _piper_threads(self) -> dict[str, int]:
        """With the embedded model, board and home share this machine's cores: Piper
        gets one, so the model writing the rest of an answer keeps the others (first
        audio p50 185 ms against 302 on 2 cores); with a model elsewhere, all of them
        (76 ms against 121)."""
        return {} if "--llm-url" in self._home_args else {"threads": 1}

    def _copy_pairing_to_board(self, bridge_dir: Path) -> Path:
        secrets = self.board_dir / "secrets"
        secrets.mkdir(mode=0o700, parents=True, exist_ok=True)
        key = secrets / f"{DEVICE}.edge.key"
        shutil.copyfile(bridge_dir / "secrets" / f"{DEVICE}.edge.key", key)
        key.chmod(0o600)
        half = self.board_dir / f"{DEVICE}.edge.yaml"
        text = (bridge_dir / f"{DEVICE}.edge.yaml").read_text()
        if self._wrong_host_key:
            stranger = asyncssh.generate_private_key("ssh-ed25519").export_public_key()
            pinned = yaml.safe_load(text)["connect"]["host_key"]
            text = text.replace(pinned, stranger.decode().strip())
        half.write_text(text)
        return half

    @property
    def edge_pid(self) -> int | None:
        """The ``edge run`` process, while it runs."""
        return self._edge.pid if self._edge is not None and self._edge.poll() is None else None

    def _spawn(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log = (self.work_dir / f"{name}.log").open("ab")
        self._sync.callback(log.close)
        return subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )

    async def _wait_file(self, path: Path, proc: subprocess.Popen[bytes], what: str) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not await asyncio.to_thread(path.exists):
            if proc.poll() is not None:
                raise HilError(f"{what} exited with {proc.returncode}: {await self.logs()}")
            if time.monotonic() > deadline:
                raise HilError(f"{what} did not start within {START_TIMEOUT_S:.0f} s")
            await asyncio.sleep(0.1)
        return await asyncio.to_thread(path.read_text)

    async def _connect_edge(self, url: str) -> Client:
        async def connect(_left_s: float) -> Client:
            if self._edge is not None and self._edge.poll() is not None:
                raise HilError(f"edge run exited with {self._edge.returncode}: {await self.logs()}")
            return await nats.connect(
                url, name="hil-board", allow_reconnect=False, error_cb=_ignore
            )

        def give_up(exc: Exception) -> HilError:
            return HilError(f"the edge's NATS at {url} never answered: {exc!r}")

        # The edge starts its NATS a moment after it starts: asked again until the deadline.
        nc = await retry_until_deadline(
            connect,
            within_s=START_TIMEOUT_S,
            retry_on=(NatsError, OSError, TimeoutError),
            give_up=give_up,
            pacing=Pacing(0.2),
        )
        await self._signals.watch(nc, DEVICE)
        return nc

    # --- the Board interface ---------------------------------------------------

    async def wait_link(self, up: bool, within_s: float) -> bool:
        """Wait until the board's bridge reports the link ``up`` (or down)."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if up and await asyncio.to_thread(self._home_link_state) == "up":
                return True
            if not up and self._signals.link_up is False:
                return True
            await asyncio.sleep(0.2)
        return False

    def _home_link_state(self) -> str | None:
        status = self._home_status()
        for component in status.get("components", []):
            if component.get("name") == "bridge":
                detail = str(component.get("detail", ""))
                return "up" if f"{DEVICE} up" in detail else detail
        return None

    def _home_status(self) -> dict[str, Any]:
        run = subprocess.run(
            [_tool("home"), "status", "--json", "--data-dir", str(self.data_dir)],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        try:
            return dict(json.loads(run.stdout))
        except json.JSONDecodeError:
            return {}

    async def reachable(self) -> str | None:
        # Its processes are this machine's: reachable once started.
        return None

    async def restarts(self) -> int | None:
        return 0  # nothing restarts the edge here; a dead one stays dead

    async def playbacks(self) -> int | None:
        return None  # playback goes to a sound card; speech.completed on home says it played

    async def services(self) -> dict[str, str]:
        out = {
            "edge": "active" if self._edge is not None and self._edge.poll() is None else "dead",
            "home": "active" if self._home is not None and self._home.poll() is None else "dead",
        }
        status = await asyncio.to_thread(self._home_status)
        for component in status.get("components", []):
            state = component.get("state")
            out[f"home/{component.get('name')}"] = "active" if state == "healthy" else str(state)
        return out

    async def versions(self) -> dict[str, str]:
        # Both sides run from this installation; a real board reports its own.
        return {"board": version("tether"), "home": version("tether")}

    async def half_digests(self) -> tuple[str, str]:
        carried = self.board_dir / f"{DEVICE}.edge.yaml"
        home_copy = self.data_dir / "bridge" / f"{DEVICE}.edge.yaml"
        return load_bridge_half(carried).digest(), load_bridge_half(home_copy).digest()

    async def clock(self) -> datetime:
        return datetime.now(UTC)

    async def headroom(self) -> Headroom:
        disk = shutil.disk_usage(self.work_dir)
        return Headroom(disk.free / 2**20, psutil.virtual_memory().available / 2**20)

    async def inject(self, phrase: str) -> float:
        clip = await asyncio.to_thread(self._speech.korean, phrase)
        played = await asyncio.create_subprocess_exec(
            "paplay", "--device", "tether_null", str(clip.path),
            env={**os.environ, "PULSE_SERVER": self._pulse_env["PULSE_SERVER"]},
        )  # fmt: skip
        if await played.wait() != 0:
            raise HilError(f"paplay could not play {clip.path}")
        return time.monotonic() - clip.tail_s

    async def notices(self) -> int:
        return self._signals.notices

    async def cut_link(self) -> None:
        if self._relay is None:
            raise HilError("the link relay is not running")
        self._relay.cut()

    async def restore_link(self) -> None:
        if self._relay is None:
            raise HilError("the link relay is not running")
        self._relay.restore()

    async def sample(self) -> ResourceSample:
        if self._edge is None or self._edge.poll() is not None:
            raise HilError("the edge process is not running")
        proc = psutil.Process(self._edge.pid)
        cpu = await asyncio.to_thread(proc.cpu_percent, 0.5)
        return ResourceSample(rss_mb=proc.memory_info().rss / 2**20, cpu_percent=cpu)

    async def logs(self) -> str:
        parts = []
        for name in ("home-up", "edge-run"):
            path = self.work_dir / f"{name}.log"
            if path.exists():
                text = path.read_bytes()[-8000:].decode(errors="replace")
                parts.append(f"--- {name} (last 8 kB) ---\n{text}")
        return "\n".join(parts)

    @property
    def pulse_server(self) -> str:
        """The private PulseAudio server whose null sink is the board's sound card."""
        return self._pulse_env.get("PULSE_SERVER", "")

    @property
    def relay(self) -> CuttableRelay | None:
        """The relay the board reaches home through (the link linkdrop cuts)."""
        return self._relay

    def watch(self) -> HomeWatch:
        """A watch on this home's NATS (open it with ``async with``)."""
        return HomeWatch(self.home_url)

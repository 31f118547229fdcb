"""A private PulseAudio daemon with a real-time null sink: a sound card for machines with none.

Used by the tests, the benchmark and HIL's virtual target: the same edge code
runs against it through sounddevice, paced in real time like real hardware
(unlike ALSA's null device, which is not paced).

As root, ``--system=false`` keeps it a per-user daemon; everything it needs
(runtime dir, home, cookie) lives in a temporary folder. The null sink's
monitor is the default source, so what is played is heard, paced in real time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from edge.audio.device import rescan_devices
from edge.errors import PulseError
from shared.proc import die_with_parent, terminate_blocking

READY_S = 30.0


@dataclass(frozen=True)
class Pulse:
    """A running daemon: the daemon's environment (for subprocesses), and its null sink."""

    env: dict[str, str]
    sink: str


@contextmanager
def pulse_daemon(root: Path, sink: str = "tether_null") -> Iterator[Pulse]:
    """Run pulseaudio under ``root`` with a 16 kHz mono null sink; this process uses it.

    While open, ``PULSE_SERVER`` points this process (and the subprocesses it
    starts) at the daemon; sounddevice's device ``"pulse"`` plays into the
    sink and records from its monitor. Subprocesses may take ``Pulse.env``.
    """
    if shutil.which("pulseaudio") is None:
        raise PulseError("pulseaudio is not installed (make bootstrap installs DEB_PACKAGES)")
    runtime, home, config = root / "run", root / "home", root / "config"
    for folder in (runtime, home, config):
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    socket_path = runtime / "native"
    env = {
        "XDG_RUNTIME_DIR": str(runtime),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(config),
        "PULSE_SERVER": f"unix:{socket_path}",
    }
    proc = subprocess.Popen(
        [
            "pulseaudio",
            "--daemonize=no",
            "--system=false",
            "--exit-idle-time=-1",
            "--disallow-exit",
            "--use-pid-file=false",
            "--disable-shm=true",
            "-n",
            f"--load=module-native-protocol-unix socket={socket_path} auth-anonymous=1",
            f"--load=module-null-sink sink_name={sink} rate=16000 channels=1",
        ],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=die_with_parent,  # noqa: PLW1509 - one async-signal-safe system call
    )
    # Clients need only the server's address; HOME and XDG_* stay the test run's own.
    client_env = {"PULSE_SERVER": env["PULSE_SERVER"]}
    saved = {key: os.environ.get(key) for key in client_env}
    try:
        _wait_ready(proc, env)
        os.environ.update(client_env)
        rescan_devices()  # PortAudio listed devices before this server existed
        yield Pulse(env, sink)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        terminate_blocking(proc, 10)
        if proc.stderr is not None:
            proc.stderr.close()
        rescan_devices()


def _wait_ready(proc: subprocess.Popen[bytes], env: dict[str, str]) -> None:
    deadline = time.monotonic() + READY_S
    while True:
        ready = subprocess.run(
            ["pactl", "info"],
            check=False,
            env={**os.environ, **env},
            capture_output=True,
            timeout=10,
        )
        if ready.returncode == 0:
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise PulseError(f"pulseaudio did not start: {stderr[-800:]}")
        time.sleep(0.1)

"""``scripts/up.sh`` (what ``make up`` runs), in tmux against a real ``home up``.

Uses the ``home`` CLI beside this interpreter and the embedded model, as ``make up``
does, and the script's default way: the TUI pairs through the running home and
talks across the real SSH bridge (on a free port here). The embedded model's
answer must reach the screen, and quitting must stop home.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shared.proc import free_port
from tests.edge.tui.conftest import Tmux

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[3]
# home up with the embedded defaults may load a model before it reports healthy.
UP_WAIT_S = 240.0
ANSWER_WAIT_S = 120.0


def home_status_ok(data_dir: Path) -> bool:
    result = subprocess.run(
        [str(BIN / "home"), "status", "--data-dir", str(data_dir), "--json"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return result.returncode == 0


@pytest.mark.slow
@pytest.mark.timeout(UP_WAIT_S + ANSWER_WAIT_S + 120)
async def test_up_script_opens_the_tui_and_quitting_stops_home(tmux: Tmux, tmp_path: Path) -> None:
    data_dir = tmp_path / "home"
    rc_file = tmp_path / "rc"
    command = (
        f"BIN={BIN} TETHER_BRIDGE_PORT={free_port()} TETHER_UP_TIMEOUT={UP_WAIT_S:.0f} "
        f"{ROOT / 'scripts' / 'up.sh'} {data_dir}; echo $? > {rc_file}"
    )
    await tmux.run(
        "new-session", "-d", "-s", "tui", "-e", "TERM=xterm-256color", "sh", "-c", command
    )  # fmt: skip
    deadline = time.monotonic() + UP_WAIT_S
    screen = ""
    while "link up (bridge tui)" not in screen:
        if time.monotonic() > deadline or rc_file.exists():
            log = data_dir / "logs" / "home-up.log"
            tail = log.read_text()[-2000:] if log.exists() else "(no log)"
            pytest.fail(f"the TUI never came up; screen:\n{screen}\nhome-up.log:\n{tail}")
        await asyncio.sleep(0.5)
        screen = await tmux.screen()
    # Running (its state file is there); healthy is up.sh's own gate before the TUI opens.
    assert (data_dir / "home.json").exists()

    await tmux.run("send-keys", "-t", "tui", "-l", "hello home")
    await tmux.run("send-keys", "-t", "tui", "Enter")
    await tmux.wait_for_text("you hello home")
    # The embedded model answers as the agent of the memory schema make up applies
    # (its first answer loads the model: allow it the time a busy machine takes).
    deadline = time.monotonic() + ANSWER_WAIT_S
    while "ms to first answer" not in (screen := await tmux.screen()):
        if time.monotonic() > deadline:
            pytest.fail(f"no answer from the embedded model; screen:\n{screen}")
        await asyncio.sleep(0.5)
    assert "edge_asr_memory" in screen
    assert (data_dir / "bridge" / "tui.edge.yaml").is_file()  # paired through home

    await tmux.run("send-keys", "-t", "tui", "C-c")
    deadline = time.monotonic() + 60
    while not rc_file.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"up.sh did not exit after Ctrl-C; screen:\n{await tmux.screen()}")
        await asyncio.sleep(0.2)
    assert rc_file.read_text().strip() == "0"
    assert not await asyncio.to_thread(home_status_ok, data_dir)
    assert not (data_dir / "home.json").exists()

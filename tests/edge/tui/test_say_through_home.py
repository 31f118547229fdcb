"""`edge say --data-dir`: a home on this machine, found, paired and talked to with no other step.

`home up` runs as a process with the scripted model server standing in for the
language model; `edge say` pairs through home's `bridge.pair` verb and crosses the
real SSH bridge. A device paired with `bridge pair` while home runs is served
without a restart; with home stopped, `edge say` gives up quickly, naming why.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.edge.tui.conftest import Tmux
from tests.support.home_up import running_home
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
ANSWER = "The kettle is on."


def _speak(request: RecordedRequest) -> Reply:
    return Reply.call("speak", {"text": ANSWER})


async def _run(*argv: str, timeout_s: float = 120) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(), err.decode()


async def _status(data_dir: Path) -> dict[str, Any]:
    _, out, _ = await _run(str(BIN / "home"), "status", "--json", "--data-dir", str(data_dir))
    result: dict[str, Any] = json.loads(out)
    return result


def _bridge(status: dict[str, Any]) -> dict[str, Any]:
    (component,) = [c for c in status["components"] if c["name"] == "bridge"]
    return component


async def test_edge_say_finds_pairs_and_talks_to_the_running_home(
    tmp_path: Path, tmux: Tmux
) -> None:
    async with (
        ScriptedModel(responder=_speak) as model,
        running_home(tmp_path / "home", model.url) as home,
    ):
        data_dir = home.data_dir
        assert not (data_dir / "bridge").exists()  # nothing paired before the first say
        code, out, err = await _run(
            str(BIN / "edge"), "say", "hello", "--data-dir", str(data_dir), "--json"
        )
        assert code == 0, err
        said = json.loads(out)
        assert said["device"] == "tui" and said["answer"]["text"] == ANSWER
        assert (data_dir / "bridge" / "tui.edge.yaml").is_file()
        assert any(r.last_user_text.endswith("hello") for r in model.requests)

        # `bridge pair` into the running home's folder: served without a restart.
        pid_before = (await _status(data_dir))["pid"]
        address = _bridge(await _status(data_dir))["address"]  # ssh://127.0.0.1:PORT
        code, _, err = await _run(
            str(BIN / "bridge"), "pair", "--device", "kitchen", "--home",
            address.removeprefix("ssh://"), "--out", str(data_dir / "bridge"),
        )  # fmt: skip
        assert code == 0, err
        async with asyncio.timeout(60):  # the endpoint looks at every health check
            while "kitchen" not in _bridge(await _status(data_dir))["detail"]:
                await asyncio.sleep(0.5)
        code, out, err = await _run(
            str(BIN / "edge"), "say", "what now", "--device", "kitchen",
            "--data-dir", str(data_dir), "--json",
        )  # fmt: skip
        assert code == 0, err
        assert json.loads(out)["device"] == "kitchen"
        status = await _status(data_dir)
        assert status["pid"] == pid_before
        assert "tui" in _bridge(status)["detail"]  # the first device is still served

    # Home stopped: a quick exit 1 that names the address it tried and what to check.
    code, out, err = await _run(
        str(BIN / "edge"), "say", "anyone?", "--data-dir", str(data_dir), timeout_s=10
    )
    assert code == 1
    assert len(err.strip().splitlines()) == 1, err  # one line, not one per attempt
    assert address.removeprefix("ssh://") in err
    assert f"home up --data-dir {data_dir}" in err

    # The TUI with home stopped: open, and its status bar says the same.
    await tmux.run(
        "new-session", "-d", "-s", "tui", "-x", "200", "-y", "30", "-e", "TERM=xterm-256color",
        str(BIN / "edge"), "tui", "--data-dir", str(data_dir),
    )  # fmt: skip
    await tmux.wait_for_text(
        f"link DOWN (bridge tui: cannot reach the home endpoint {address.removeprefix('ssh://')}"
    )

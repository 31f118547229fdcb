"""`edge run --data-dir`: pair with the home on this machine, then a spoken turn end to end.

`home up` runs as a process (the scripted model server stands in for the
language model); `edge run` pairs through home's `bridge.pair` control verb,
connects through the real SSH endpoint, hears a WAV file, and writes the
spoken answer to another WAV before exiting.
"""

from __future__ import annotations

import asyncio
import json
import sys
import wave
from pathlib import Path

import pytest

from hil.speech import SpeechLibrary
from tests.support.home_up import running_home
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

pytestmark = pytest.mark.slow
ANSWER = "The kettle is on."


def _speak(request: RecordedRequest) -> Reply:
    return Reply.call("speak", {"text": ANSWER})


async def edge_run(*args: str) -> tuple[int, dict[str, object], str]:
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("edge")), "run", *args, "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    summary = json.loads(out) if out.strip() else {}
    return proc.returncode or 0, summary, err.decode(errors="replace")


async def test_edge_run_pairs_with_the_home_and_speaks_its_answer(tmp_path: Path) -> None:
    clip = SpeechLibrary(tmp_path / "speech").korean("안녕하세요")
    out = tmp_path / "out.wav"
    async with (
        ScriptedModel(responder=_speak) as model,
        running_home(tmp_path / "home", model.url) as data_dir,
    ):
        code, summary, err = await edge_run(
            "--data-dir", str(data_dir), "--audio-in", str(clip.path), "--audio-out", str(out)
        )
        assert code == 0, err
        (turn,) = summary["turns"]  # type: ignore[misc]
        (ack,) = summary["acks"]  # type: ignore[misc]
        assert ack["binding_id"] == turn["binding_id"] and ack["ok"] is True
        assert (data_dir / "bridge" / "board.edge.yaml").is_file()
        assert any(turn["text"] in r.last_user_text for r in model.requests)
        with wave.open(str(out), "rb") as wav:
            assert wav.getnframes() > wav.getframerate() // 2  # the answer was spoken

        # A second run reuses the pairing: same half, same key.
        half_before = (data_dir / "bridge" / "board.edge.yaml").read_text()
        code, summary, err = await edge_run(
            "--data-dir", str(data_dir), "--audio-in", str(clip.path),
            "--audio-out", str(tmp_path / "out2.wav"),
        )  # fmt: skip
        assert code == 0, err
        assert (data_dir / "bridge" / "board.edge.yaml").read_text() == half_before


async def test_edge_run_without_a_home_says_how_to_start_one(tmp_path: Path) -> None:
    clip = SpeechLibrary(tmp_path / "speech").korean("안녕하세요")
    code, _, err = await edge_run(
        "--data-dir", str(tmp_path / "nohome"), "--audio-in", str(clip.path),
        "--audio-out", str(tmp_path / "o.wav"),
    )  # fmt: skip
    assert code == 1
    assert "home up --data-dir" in err

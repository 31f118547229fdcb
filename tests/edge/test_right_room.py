"""Two boards of one home hear one utterance: home answers once, on the board that heard
it louder (home/substrate/rooms.py), and counts the other board's turn by name.

`home up` runs as a process (the scripted model server stands in for the language
model); two `edge run` processes, kitchen and hall, pair with it and connect through
its SSH endpoint, each with a spool folder for a microphone and one for a speaker.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hil.speech import SpeechLibrary
from tests.edge.conftest import GRAMMAR
from tests.support.home_up import running_home
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

pytestmark = pytest.mark.slow
BOARDS = ("kitchen", "hall")


def _speak(request: RecordedRequest) -> Reply:
    return Reply.call("speak", {"text": "Hello from home."})


def _config(folder: Path, device: str) -> Path:
    folder.mkdir(parents=True)
    grammar = ", ".join(GRAMMAR)
    config = folder / "edge.yaml"
    config.write_text(
        f"device: {device}\n"
        f"audio: {{input: {{kind: spool, dir: {folder / 'mic'}}}, "
        f"output: {{kind: spool, dir: {folder / 'speaker'}}}}}\n"
        f"asr: {{grammar: [{grammar}]}}\n",
        encoding="utf-8",
    )
    return config


@contextlib.asynccontextmanager
async def edge_running(config: Path, data_dir: Path) -> AsyncIterator[None]:
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("edge")), "run", "--config", str(config),
        "--data-dir", str(data_dir),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def _drop(folder: Path, name: str, clip: Path, gain: float = 1.0) -> None:
    """Into a spool microphone: written as NAME.tmp, then renamed."""
    tmp = folder / f"{name}.tmp"
    subprocess.run(["sox", str(clip), "-t", "wav", str(tmp), "vol", str(gain)], check=True)
    tmp.rename(folder / f"{name}.wav")


def answers(board: Path) -> list[Path]:
    return sorted((board / "speaker").glob("*.wav"))


async def until(what: str, condition: object, limit_s: float = 90.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {limit_s:g} s waiting for {what}")
        await asyncio.sleep(0.1)


async def test_two_boards_hearing_one_utterance_get_one_answer_on_the_louder(
    tmp_path: Path,
) -> None:
    speech = SpeechLibrary(tmp_path / "speech")
    thanks, hello = speech.korean(GRAMMAR[1]).path, speech.korean(GRAMMAR[0]).path
    folders = {device: tmp_path / device for device in BOARDS}
    async with (
        ScriptedModel(responder=_speak) as model,
        running_home(tmp_path / "home", model.url) as home,
        edge_running(_config(folders["kitchen"], "kitchen"), home.data_dir),
        edge_running(_config(folders["hall"], "hall"), home.data_dir),
    ):
        # Each board is heard alone first (and answered): home now knows two boards hear.
        # Other words on each: the same words from two boards within seconds are one
        # utterance, and the second board's copy would be dropped.
        for (device, folder), clip in zip(folders.items(), (thanks, hello), strict=True):
            await until(f"{device}'s microphone", (folder / "mic").is_dir)
            _drop(folder / "mic", "01-alone", clip)
            await until(f"{device}'s answer", lambda f=folder: len(answers(f)) == 1)
        await asyncio.sleep(4.0)  # past the window in which the two would be one utterance
        # One utterance, heard by both: the hall board 10 dB quieter.
        _drop(folders["hall"] / "mic", "02-both", thanks, gain=0.3)
        _drop(folders["kitchen"] / "mic", "02-both", thanks)
        await until("the kitchen's answer", lambda: len(answers(folders["kitchen"])) == 2)
        await asyncio.sleep(4.0)  # a second answer, if any, comes right behind
        status = await home.status()
        assert status is not None
        router = status["router"]
        assert len(answers(folders["hall"])) == 1, router
        assert router["dropped"]["heard_elsewhere"] == 1, router
        detail = router["last_error"]["heard_elsewhere"]
        assert "of hall" in detail and "answered on kitchen" in detail
        assert sum(GRAMMAR[1] in r.last_user_text for r in model.requests) == 2

"""Vosk (Korean model, grammar mode) on espeak-ng speech through the WAV source: turns arrive."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from edge.runtime import EdgeRuntime, Models
from shared.subjects import sensation_partial_subject, sensation_turn_subject
from tests.edge.conftest import Collector, connect, file_config, wait_for

pytestmark = pytest.mark.slow


async def test_a_spoken_phrase_arrives_as_a_turn_with_a_binding_id(
    models: Models, annyeong_wav: Path, tmp_path: Path
) -> None:
    config = file_config(annyeong_wav, tmp_path / "out.wav")
    async with EdgeRuntime(config, models=models) as edge:
        client = await connect(edge.nats.url)
        try:
            seen = await Collector(client).watch("events.sensation.>")
            assert await edge.drain() == []
            await wait_for(lambda: seen.on(sensation_turn_subject("board")), "the turn event")
        finally:
            await client.close()
    (turn,) = seen.on(sensation_turn_subject("board"))
    assert turn.event_type == "sensation.turn"
    assert turn.payload["text"] == "안녕하세요"
    assert turn.binding_id is not None and len(turn.binding_id) == 32
    assert 0.0 < turn.payload["confidence"] <= 1.0
    (word,) = turn.payload["words"]
    assert word["word"] == "안녕하세요" and 0 <= word["start_s"] < word["end_s"]
    started = datetime.fromisoformat(turn.payload["started_at"])
    ended = datetime.fromisoformat(turn.payload["ended_at"])
    assert started < ended
    assert turn.payload["endpoint"] == "vad"
    partials = seen.on(sensation_partial_subject("board"))
    # Partials share the binding id the turn carries, and stay on the board's own rail.
    assert partials, "no partial transcript was published while the phrase was heard"
    assert all(p.binding_id == turn.binding_id for p in partials)
    assert partials[-1].payload["text"] == "안녕하세요"


async def test_two_utterances_reuse_the_recognizer_and_get_fresh_binding_ids(
    models: Models, two_turns_wav: Path, tmp_path: Path
) -> None:
    recognizer = models.recognizer._rec
    config = file_config(two_turns_wav, tmp_path / "out.wav")
    async with EdgeRuntime(config, models=models) as edge:
        await edge.drain()
        turns = list(edge.asr.turn_published)
    assert [t.text for t in turns] == ["안녕하세요", "감사합니다"]
    assert turns[0].binding_id != turns[1].binding_id
    assert models.recognizer._rec is recognizer

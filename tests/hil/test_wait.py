"""The wait of a turn by stage, from the board's marks and home's arrivals (pure)."""

from __future__ import annotations

import pytest

from hil.wait import HomeArrivals, summarize, turn_wait
from shared.messages.trace import Marks

TURN = {"voice_end": 100.0, "endpoint": 100.3, "asr_final": 100.32}
ACK = {"speak_received": 101.9, "tts_first_chunk": 102.2, "first_audio": 102.21}
HOME = HomeArrivals(turn=100.34, inbox=100.341, speak=101.89, recall=100.5, recall_latency_ms=100)


def test_every_stage_on_one_clock_adds_up_to_the_wait() -> None:
    stages = turn_wait(Marks("c", TURN), Marks("c", ACK), HOME, "c")
    assert list(stages) == [
        "endpointing", "asr_final", "bridge_up", "routing", "queue", "recall", "model",
        "bridge_down", "tts_first_chunk", "audio_device", "wait",
    ]  # fmt: skip
    assert stages["wait"] == pytest.approx(2210)
    assert sum(v for k, v in stages.items() if k != "wait") == pytest.approx(stages["wait"])
    assert stages["queue"] == pytest.approx(59) and stages["model"] == pytest.approx(1390)


def test_a_board_on_another_clock_leaves_the_bridge_stages_out() -> None:
    stages = turn_wait(Marks("board", TURN), Marks("board", ACK), HOME, "home")
    assert "bridge_up" not in stages and "bridge_down" not in stages
    assert stages["wait"] == pytest.approx(2210)


def test_without_marks_or_recall_only_what_can_be_known() -> None:
    home = HomeArrivals(turn=1.0, inbox=1.001, speak=2.0)
    stages = turn_wait(None, None, home, "c")
    assert set(stages) == {"routing", "model"}
    assert summarize([stages, stages])["model"]["p50_ms"] == pytest.approx(999)

"""The fleet suite: simulated boards, each over its own SSH link, on one virtual home.

The model is the scripted OpenAI-compatible server (the one test double); home,
its SSH endpoint, router and agent, and every board's edge bridge half are real.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edge.wire import SpeakRequest
from hil.cli import app
from hil.fleet import _Answers
from hil.runner import HilError, run_suites
from hil.suites import build_suites, parse_fleet_sizes
from hil.targets.base import HomeWatch, TargetContext
from hil.targets.virtual import DEFAULT_PHRASES, VirtualBoard
from shared.exit_codes import ExitCode
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

BOARDS = 10
TURNS = 2
# Every board's warm-up turn, then TURNS measured ones.
SENT = BOARDS * (1 + TURNS)


def _speak(request: RecordedRequest) -> Reply:
    if request.messages and request.messages[-1].get("role") == "tool":
        return Reply()
    return Reply.call("speak", {"text": "Understood."})


@pytest.mark.slow
async def test_ten_boards_have_every_turn_answered_exactly_once(tmp_path: Path) -> None:
    async with ScriptedModel(responder=_speak) as model:
        board = VirtualBoard(tmp_path / "run", home_args=("--llm-url", model.url))
        async with board, board.watch() as home:
            ctx = TargetContext(
                board, home, tmp_path / "run", turn_timeout_s=60, home_dir=board.data_dir,
                fleet_turns=TURNS, fleet_interval_s=3.0,
            )  # fmt: skip
            suites = build_suites(["fleet"], DEFAULT_PHRASES, (BOARDS,))
            result = await run_suites("virtual", suites, ctx, board.logs)
            # Home's own record, apart from what the boards heard: each turn arrived once.
            arrived = Counter(
                s.event.event_id
                for s in home.seen
                if s.subject.startswith("events.sensation.fleet-") and s.subject.endswith(".turn")
            )
    [case] = result.cases
    assert case.verdict == "pass", case.reason
    measured = {m.name: m.value for m in case.measurements}
    assert measured["turns_sent"] == SENT
    assert measured["turns_answered"] == SENT
    assert measured["turns_lost"] == 0
    assert measured["turns_duplicated"] == 0
    assert measured["turn_p99_ms"] >= measured["turn_p50_ms"] > 0
    assert measured["home_rss_per_board_mb"] > 0
    assert measured["home_open_files"] > 0
    assert measured["warmup_turn_p99_ms"] > 0
    assert len(arrived) == SENT
    assert set(arrived.values()) == {1}


def test_fleet_sizes_parse_and_bad_ones_are_named() -> None:
    assert parse_fleet_sizes("1,10, 50") == (1, 10, 50)
    for bad in ("ten", "0,10", ""):
        with pytest.raises(HilError, match="--fleet-boards"):
            parse_fleet_sizes(bad)


def test_hil_run_refuses_bad_fleet_sizes_as_usage() -> None:
    run = CliRunner().invoke(
        app, ["run", "--target", "virtual", "--suite", "fleet", "--fleet-boards", "many"]
    )
    assert run.exit_code == ExitCode.USAGE
    assert "--fleet-boards" in run.output


async def test_fleet_without_a_home_dir_fails_saying_so(tmp_path: Path) -> None:
    suites = build_suites(["fleet"], DEFAULT_PHRASES, (1,))
    ctx = TargetContext(
        board=None,  # type: ignore[arg-type]  # the case fails before it asks the board
        home=HomeWatch("nats://127.0.0.1:1"),
        work_dir=tmp_path,
    )
    result = await run_suites("virtual", suites, ctx, _no_logs)
    [case] = result.cases
    assert case.verdict == "fail"
    assert "--home-dir" in case.reason


async def _no_logs() -> str:
    return ""


async def test_an_answer_spoken_in_parts_is_one_answer_heard_at_its_first_part() -> None:
    answers = _Answers()
    first = SpeakRequest("a", "b", "bid", "First.", "e1", more=True)
    await answers.on_incoming(first)
    heard = answers.first_at["bid"]
    await answers.on_incoming(SpeakRequest("a", "b", "bid", "Second.", "e2"))
    await answers.on_incoming(first)  # the same event again is a redelivery
    assert answers.count == Counter({"bid": 1})
    assert answers.first_at["bid"] == heard
    assert answers.redelivered == 1

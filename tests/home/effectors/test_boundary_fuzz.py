"""Fuzzing an effector's outside input: anything on ``events.workspace.*.out.<verb>``.

Every event is acked ok, acked failed, counted unackable or counted a duplicate;
nothing escapes the handler or its write task, nothing lands in
``internal_errors``, and a good verb event after the fuzzed ones is still
performed. The write is the effector's own payload check with no JMFTS behind
it (the JMFTS boundary has its own suite). The slowest case is reported
(tests/support/fuzz_report.py), not asserted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from home.effectors.effector import Effector, note_text
from home.effectors.journal_append import SPEC as JOURNAL_APPEND
from home.jmfts.client import JmftsClient
from home.memory.provenance import Provenance
from shared.event import Event
from tests.support import json_strategy
from tests.support.fuzz_report import Slowest, report

EFFECTOR = Slowest("effector verb rail")
RAIL = "events.workspace.edge_asr.out.journal_append"


@dataclass
class Msg:
    subject: str
    data: bytes
    reply: str = ""


async def checked_write(client: JmftsClient, origin: Provenance, payload: dict[str, Any]) -> int:
    """The journal write's own check of its payload, and no store behind it."""
    note_text(payload)
    return 1


@pytest.fixture(scope="module", autouse=True)
def slowest_cases() -> Iterator[None]:
    yield
    report(EFFECTOR)


@pytest.fixture(scope="module")
def token_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tokens = tmp_path_factory.mktemp("tokens")
    (tokens / "edge_asr.token").write_text("tok-edge-asr\n")
    return tokens


def effector(token_dir: Path, spec: Any = None) -> Effector:
    """An effector not connected to NATS: its handler runs, its acks go nowhere."""
    return Effector(
        spec or replace(JOURNAL_APPEND, write=checked_write),
        nats_url="nats://127.0.0.1:1",
        jmfts_url="http://127.0.0.1:1",
        token_dir=token_dir,
    )


async def handled(eff: Effector, msg: Msg) -> None:
    await eff._on_verb(msg)  # type: ignore[arg-type]
    await asyncio.gather(*eff._tasks)


def _verb(**changes: Any) -> dict[str, Any]:
    event = Event.new(
        "journal_append", {"text": "kettle descaled"}, source="agent.edge_asr",
        sequence_number=1, binding_id="b1",
    )  # fmt: skip
    return event.to_dict() | changes


json_values = json_strategy.json_values()
GOOD = _verb()
subjects = st.sampled_from(
    [
        RAIL,
        "events.workspace.nobody.out.journal_append",
        "events.workspace.UPPER.out.journal_append",
        "events.workspace..out.journal_append",
        "events.workspace." + "x" * 300 + ".out.journal_append",
    ]
)
bodies = (
    st.dictionaries(st.sampled_from([*GOOD, "x"]), json_values, max_size=6).map(
        lambda changes: json.dumps(GOOD | changes).encode()
    )
    | st.dictionaries(st.sampled_from(["text", "title", "agent"]), json_values, max_size=3).map(
        lambda payload: json.dumps(GOOD | {"payload": payload}).encode()
    )
    | st.binary(max_size=200)
    | st.sampled_from([b'{"payload": ' + b"[" * 5000 + b"]" * 5000 + b"}", b"\xff", b""])
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(subjects, bodies), min_size=1, max_size=4))
async def test_every_verb_event_is_acked_or_counted_and_the_next_good_one_performed(
    token_dir: Path, batch: list[tuple[str, bytes]]
) -> None:
    eff = effector(token_dir)
    for subject, raw in batch:
        with EFFECTOR.timed((subject, raw)):
            await handled(eff, Msg(subject, raw))
    ok = eff.stats.ok
    await handled(eff, Msg(RAIL, json.dumps(_verb()).encode()))
    stats = eff.stats
    assert stats.ok == ok + 1, "the next good event was not performed"
    assert stats.received == stats.ok + stats.failed + stats.unackable + stats.duplicates
    assert stats.internal_errors == 0


async def test_a_bug_in_a_write_is_acked_failed_counted_and_logged(
    token_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: only EffectorError was caught; any other exception killed the write task
    unacked (the agent's tool waited out its timeout) and uncounted."""

    async def broken(client: JmftsClient, origin: Provenance, payload: dict[str, Any]) -> int:
        raise KeyError("a bug in the write")

    eff = effector(token_dir, replace(JOURNAL_APPEND, write=broken))
    await handled(eff, Msg(RAIL, json.dumps(GOOD).encode()))
    assert (eff.stats.failed, eff.stats.internal_errors) == (1, 1)
    (line,) = [r.getMessage() for r in caplog.records if "handler failed" in r.getMessage()]
    assert "a bug in the write" in line

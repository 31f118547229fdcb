"""``home timeline``'s gathering: what each source adds, the filters, the gaps (pure).

The command itself runs against a real ``home up`` in ``tests/home/test_voice_verbs.py``
(a memory kept, forgotten by voice and restored, on one device).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from home.jmfts.models import RETRACTION_USETYPE
from home.memory.fsrs import ReviewBook
from home.memory.provenance import Provenance
from home.substrate.eventlog import LoggedEvent, _logged
from home.timeline import (
    Line,
    assemble,
    faded_lines,
    gaps,
    human_gap,
    log_lines,
    memory_lines,
    since_moment,
)
from shared.event import Event, new_binding_id
from shared.messages.memory import Deposit, MemorizeReport

T0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
AGENT = "edge_asr_memory"


def logged(seq: int, seconds: float, subject: str, event: Event) -> LoggedEvent:
    return _logged(seq, T0 + timedelta(seconds=seconds), subject, event.to_json())


def an_event(event_type: str, payload: dict[str, object], binding: str | None) -> Event:
    return Event.new(event_type, payload, source="test", sequence_number=1, binding_id=binding)


def a_turn(binding: str, device: str = "kitchen") -> list[LoggedEvent]:
    """A turn on ``device``, its answer, its memorize report and its recall report."""
    report = MemorizeReport(
        evaluation_id="e1",
        status="deposited",
        memory_root=f"workspace/{AGENT}",
        queries=("the bins go out on tuesday", "the cat is fed at six"),
        document_ids=(41, 42),
        deposits=(
            Deposit(41, "created", kind="routine"),
            Deposit(
                42, "corrected", supersedes=7, knowledge="cat · is fed at · six (#3, closes #2)"
            ),
        ),
    )
    said = an_event("sensation.turn", {"text": "bins go out on tuesday"}, None)
    return [
        logged(1, 0, f"events.sensation.{device}.turn", said),
        # The router's copy: the same event, bound to the turn, on the agent's inbox.
        logged(2, 0.2, f"events.workspace.{AGENT}.in", replace(said, binding_id=binding)),
        logged(3, 1.5, f"events.workspace.{AGENT}.out.speak.{device}",
               an_event("speak", {"text": "Noted, Tuesdays."}, binding)),
        logged(4, 3.0, f"events.workspace.{AGENT}.out.memorize.{device}",
               report.to_event(source="test", sequence_number=2, binding_id=binding)),
        logged(5, 3.1, f"events.workspace.{AGENT}.out.recall.{device}",
               an_event("memory.recall", {"query": "bins"}, binding)),
    ]  # fmt: skip


def test_the_event_log_gives_turns_answers_and_what_was_kept() -> None:
    binding = new_binding_id()
    lines = log_lines(a_turn(binding))
    assert [(ln.kind, ln.device, ln.agent, ln.ref) for ln in lines] == [
        ("turn", "kitchen", AGENT, binding),  # bound by its routed copy
        ("answer", "kitchen", AGENT, binding),
        ("kept", "kitchen", AGENT, "#41"),
        ("corrected", "kitchen", AGENT, "#42"),
        ("believed", "kitchen", AGENT, "#42"),  # what the knowledge book closed and opened
    ]
    assert lines[1].text == "Noted, Tuesdays."
    assert lines[2].text == "the bins go out on tuesday (routine)"
    assert lines[3].text == "the cat is fed at six"
    assert lines[4].text == "cat · is fed at · six (#3, closes #2)"
    # What does not parse, or names no rail of the contract, makes no line.
    assert log_lines([_logged(9, T0, "events.sensation.kitchen.turn", b"{not json")]) == []
    assert log_lines([logged(9, 0, "events.nowhere", an_event("x", {"text": "hi"}, None))]) == []
    # A turn no router bound (no agent applied) stays a turn of its device.
    (alone,) = log_lines(a_turn(binding, "hall")[:1])
    assert (alone.kind, alone.device, alone.binding_id) == ("turn", "hall", None)


def test_forgotten_and_restored_memories_come_from_their_records() -> None:
    binding = new_binding_id()
    origin = Provenance(agent=AGENT, written_by="verb_desk", binding_id=binding)
    kept_in = new_binding_id()
    said_in = Provenance(agent=AGENT, written_by="memory_reflex", binding_id=kept_in)
    documents = [
        {"id": 1, "usetype": "workspace", "content": None, "created_at": T0.isoformat()},
        {"id": 41, "content": "my locker code is 4512", "created_at": T0.isoformat()},
        {"id": 50, "usetype": RETRACTION_USETYPE, "supersedes": 41,
         "content": "forgotten by voice on board: forget that",
         "structured_content": origin.structured_content(),
         "created_at": (T0 + timedelta(minutes=2)).isoformat()},
        # A restore writes the memory again with the memory's own provenance (its turn).
        {"id": 51, "supersedes": 50, "content": "my locker code is 4512",
         "structured_content": said_in.structured_content(),
         "created_at": (T0 + timedelta(hours=1)).isoformat()},
        {"id": 52, "supersedes": 999, "content": "a superseded one out of view",
         "created_at": T0.isoformat()},
        # The curator merged a memory said twice, woken by the report of turn ``kept_in``.
        {"id": 53, "content": "my locker code is 4512", "created_at": T0.isoformat()},
        {"id": 54, "usetype": RETRACTION_USETYPE, "supersedes": 53,
         "content": "merged into #51 by the curator: said again as 'my locker code is 4512'",
         "structured_content": Provenance(
             agent=AGENT, written_by="agent.memory_curator", binding_id=kept_in
         ).structured_content(),
         "created_at": (T0 + timedelta(hours=2)).isoformat()},
        {"id": 55, "content": "the bins go out on mondays", "created_at": T0.isoformat()},
        {"id": 56, "usetype": RETRACTION_USETYPE, "supersedes": 55,
         "content": "contradicted by #51 by the curator: 'tuesdays', not 'mondays'",
         "created_at": (T0 + timedelta(hours=3)).isoformat()},
    ]  # fmt: skip
    lines = memory_lines(AGENT, documents, {binding: "board", kept_in: "kitchen"})
    assert [(ln.kind, ln.ref, ln.device, ln.binding_id) for ln in lines] == [
        ("forgotten", "#41", "board", binding),
        ("restored", "#51", None, None),
        ("merged", "#53", "kitchen", kept_in),
        ("resolved", "#55", None, None),
    ]
    assert "my locker code is 4512" in lines[0].text and "forget that" in lines[0].text


def test_a_memory_fades_when_its_review_falls_due(tmp_path: Path) -> None:
    book = ReviewBook(tmp_path / "reviews.json", initial_stability_days=3.0)
    said = [(41, "the bins go out on tuesday", T0), (42, "the cat is fed at six", T0)]
    book.review(42, T0, T0 + timedelta(days=2))  # recalled and used: its clock restarts
    now = T0 + timedelta(days=4)
    (faded,) = faded_lines(AGENT, said, book, now)
    assert (faded.kind, faded.ref) == ("faded", "#41")
    assert T0 < faded.at <= now
    later = faded_lines(AGENT, said, book, T0 + timedelta(days=90))
    assert {ln.ref for ln in later} == {"#41", "#42"}
    assert min(ln.at for ln in later) == faded.at


def test_filters_keep_a_turn_with_its_agent_and_device_and_the_gaps_are_between_lines() -> None:
    kitchen, hall = new_binding_id(), new_binding_id()
    lines = log_lines(a_turn(kitchen))
    late = T0 + timedelta(hours=5)
    lines += [
        Line(late, "turn", "hello", "hall", None, hall, hall),
        Line(late + timedelta(seconds=2), "answer", "hi", "hall", "other", hall, hall),
        Line(late + timedelta(minutes=1), "forgotten", "x", None, AGENT, "#41", kitchen),
        Line(late + timedelta(days=2), "faded", "y", None, AGENT, "#42"),
    ]
    everything = assemble(reversed(lines))
    assert [ln.at for ln in everything] == sorted(ln.at for ln in lines)
    kitchen_only = assemble(lines, device="kitchen")
    assert {ln.binding_id for ln in kitchen_only} == {kitchen}
    assert "forgotten" in {ln.kind for ln in kitchen_only}  # its turn's device
    assert "faded" not in {ln.kind for ln in kitchen_only}  # no device to match
    others = assemble(lines, agent="other")
    assert [(ln.kind, ln.device) for ln in others] == [("turn", "hall"), ("answer", "hall")]
    recent = assemble(lines, since=late)
    assert recent[0].text == "hello" and len(recent) == 4
    between = gaps(recent)
    assert between[:3] == [None, 2.0, 58.0]
    assert [human_gap(g) for g in between] == ["", "+2.0 s", "+58 s", "+2 d"]


def test_since_takes_a_span_or_a_moment_and_names_what_it_takes() -> None:
    now = T0
    assert since_moment("90s", now) == now - timedelta(seconds=90)
    assert since_moment("12h", now) == now - timedelta(hours=12)
    assert since_moment("2w", now) == now - timedelta(weeks=2)
    assert since_moment("2026-11-01T10:00", now) == datetime(2026, 11, 1, 10, tzinfo=UTC)
    with pytest.raises(ValueError, match="neither a span"):
        since_moment("yesterday", now)

"""Subjects: builders, parsing back, and the wildcard algebra against a brute-force oracle."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared import subjects as S
from shared.errors import SubjectError

ALPHABET = ("a", "b", "c")
# One token more than the patterns use, and one level deeper, so the enumeration can
# tell '*' from a literal and a trailing '>' from a fixed length.
UNIVERSE = [
    ".".join(tokens)
    for n in range(1, 6)
    for tokens in itertools.product((*ALPHABET, "d"), repeat=n)
]


@st.composite
def patterns(draw: st.DrawFn) -> str:
    n = draw(st.integers(1, 4))
    tokens = [draw(st.sampled_from((*ALPHABET, "*"))) for _ in range(n)]
    if draw(st.booleans()):
        tokens[-1] = ">"
    return ".".join(tokens)


def test_builders_produce_the_design_subjects() -> None:
    bid = "0123abcd"
    assert S.sensation_turn_subject("board") == "events.sensation.board.turn"
    assert S.sensation_partial_subject("tui") == "events.sensation.tui.partial"
    assert S.workspace_in_subject("edge_asr") == "events.workspace.edge_asr.in"
    assert S.speak_subject("edge_asr", "tui") == "events.workspace.edge_asr.out.speak.tui"
    assert S.deviceless_speak_subject("edge_asr") == "events.workspace.edge_asr.out.speak"
    assert S.reply_subject("a", "board") == "events.workspace.a.out.reply.board"
    assert S.recall_subject("a", "board") == "events.workspace.a.out.recall.board"
    assert S.memorize_subject("a", "board") == "events.workspace.a.out.memorize.board"
    assert S.verb_subject("a", "journal_append") == "events.workspace.a.out.journal_append"
    assert S.speech_completed_subject(bid) == f"events.action.speech.completed.{bid}"
    assert S.journal_append_ack_subject(bid) == f"events.journal.append.{bid}"
    assert S.jmfts_write_ack_subject(bid) == f"events.journal.jmfts_write.{bid}"


@pytest.mark.parametrize("bad", ["", "Board", "two words", "a.b", "*", ">", "é"])
def test_names_are_single_lowercase_tokens(bad: str) -> None:
    with pytest.raises(SubjectError, match="device"):
        S.sensation_turn_subject(bad)


def test_the_delegation_rails_name_their_agents_and_binding() -> None:
    assert S.delegate_ack_subject("b1") == "events.journal.delegate.b1"
    answer = S.delegate_answer_subject("jmfts_operator", "edge_asr")
    assert answer == "events.workspace.jmfts_operator.out.answer.edge_asr"
    assert S.parse_subject(answer).asker == "edge_asr"
    with pytest.raises(SubjectError, match="agent"):
        S.delegate_answer_subject("jmfts_operator", "Edge ASR")


def test_unknown_verb_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(SubjectError, match="journal_append"):
        S.verb_subject("a", "shell")


@pytest.mark.parametrize(
    ("subject", "kind", "agent", "device", "verb", "bid"),
    [
        ("events.sensation.board.turn", "sensation.turn", None, "board", None, None),
        ("events.sensation.tui.partial", "sensation.partial", None, "tui", None, None),
        ("events.workspace.x.in", "workspace.in", "x", None, None, None),
        ("events.workspace.x.out.speak", "speak", "x", None, None, None),
        ("events.workspace.x.out.speak.tui", "speak", "x", "tui", None, None),
        ("events.workspace.x.out.reply.tui", "reply", "x", "tui", None, None),
        ("events.workspace.x.out.recall.tui", "recall", "x", "tui", None, None),
        ("events.workspace.x.out.memorize.tui", "memorize", "x", "tui", None, None),
        ("events.workspace.x.out.delegate", "verb", "x", None, "delegate", None),
        ("events.action.speech.completed.b1", "speech.completed", None, None, None, "b1"),
        ("events.journal.append.b1", "journal.append", None, None, None, "b1"),
        ("events.journal.jmfts_write.b1", "journal.jmfts_write", None, None, None, "b1"),
        ("events.journal.delegate.b1", "journal.delegate", None, None, None, "b1"),
        ("events.workspace.op.out.answer.asker", "answer", "op", None, None, None),
        ("events.audio.board.pcm", "audio", None, None, None, None),
    ],
)
def test_parse_subject_names_the_rail(
    subject: str,
    kind: str,
    agent: str | None,
    device: str | None,
    verb: str | None,
    bid: str | None,
) -> None:
    info = S.parse_subject(subject)
    assert (info.kind, info.agent, info.device, info.verb, info.binding_id) == (
        kind,
        agent,
        device,
        verb,
        bid,
    )
    assert info.is_report == (kind in ("recall", "memorize"))


@pytest.mark.parametrize(
    "bad",
    ["events.nothing.here", "events.sensation.*.turn", "events..x", "events.workspace.x.out.fly"],
)
def test_parse_subject_refuses_what_is_not_a_rail(bad: str) -> None:
    with pytest.raises(SubjectError):
        S.parse_subject(bad)


@pytest.mark.parametrize("bad", ["", "a..b", ".a", "a.", "a.>.b", "a b", "a.b*", "a.>x"])
def test_malformed_subjects_are_refused(bad: str) -> None:
    with pytest.raises(SubjectError):
        S.split_subject(bad)


def test_wildcards_cannot_be_published() -> None:
    with pytest.raises(SubjectError, match="wildcard"):
        S.matches("a.*", "a.*")


def test_device_of_reads_literal_devices_only() -> None:
    assert S.device_of("events.sensation.board.turn") == "board"
    assert S.device_of("events.workspace.*.out.speak.tui") == "tui"
    assert S.device_of("events.sensation.*.turn") is None
    assert S.device_of("events.action.speech.completed.*") is None


def test_audio_subjects_are_recognised() -> None:
    assert S.is_audio_subject("events.audio.>")
    assert S.is_audio_subject("events.>")
    assert S.is_audio_subject("events.sensation.board.pcm")
    assert not S.is_audio_subject("events.sensation.*.turn")


@settings(max_examples=300, deadline=None)
@given(patterns(), patterns())
def test_covers_agrees_with_enumeration(a: str, b: str) -> None:
    by_b = {s for s in UNIVERSE if S.matches(b, s)}
    by_a = {s for s in UNIVERSE if S.matches(a, s)}
    assert S.covers(a, b) == by_b.issubset(by_a)


@settings(max_examples=300, deadline=None)
@given(patterns(), patterns())
def test_overlaps_and_intersection_agree_with_enumeration(a: str, b: str) -> None:
    both = {s for s in UNIVERSE if S.matches(a, s) and S.matches(b, s)}
    assert S.overlaps(a, b) == bool(both)
    common = S.intersection(a, b)
    if common is None:
        assert not both
    else:
        assert {s for s in UNIVERSE if S.matches(common, s)} == both


@settings(max_examples=300, deadline=None)
@given(st.lists(patterns(), max_size=8), patterns())
def test_pattern_index_agrees_with_pairwise_comparison(indexed: list[str], query: str) -> None:
    index = S.PatternIndex(indexed)
    assert index.overlapping(query) == [i for i, p in enumerate(indexed) if S.overlaps(p, query)]
    assert index.covering(query) == [i for i, p in enumerate(indexed) if S.covers(p, query)]


def test_covers_handles_the_checker_cases() -> None:
    assert S.covers("a.>", "a.*.c")
    assert not S.covers("a.*.c", "a.>")
    assert S.covers("a.*", "a.b")
    assert not S.covers("a.b", "a.*")
    assert S.covers(">", "a.>")
    assert not S.covers("a.>", "a")

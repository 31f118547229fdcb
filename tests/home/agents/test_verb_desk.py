"""The verb desk's decisions: what a request to note, forget or cancel means, and what
is said back. The desk on a real bus and memory server is in test_verb_desk_on_bus.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from home.agents.operator_search import answer_from, search_topic
from home.agents.tau_command import DEFAULT_SYSTEM_PROMPT, system_prompt_for
from home.agents.verb_desk import (
    choose_to_cancel,
    confirm_reminder,
    is_yes,
    list_words,
    memory_root,
    operator_words,
    when_words,
)
from home.intent.frames import framed_call, unframed_call
from home.intent.step import Verb
from home.reminders.book import Reminder
from shared.messages.verbs import DelegateAnswer
from shared.schema.catalog import load_node_catalog
from tests.support.home_fixtures import REPO_ROOT

ZONE = timezone(timedelta(hours=-5))
NOW = datetime(2026, 12, 5, 9, 0, tzinfo=ZONE)


def reminder(text: str, minutes: float) -> Reminder:
    return Reminder.new("a", "board", text, NOW + timedelta(minutes=minutes), now=NOW)


@pytest.mark.parametrize(
    ("said", "note"),
    [
        ("note that the boiler was serviced today", "the boiler was serviced today"),
        ("Make a note that the car needs new tyres.", "the car needs new tyres"),
        ("please write down that we are out of rice", "we are out of rice"),
        (
            "um jot down the plumber's number is five five five",
            "the plumber's number is five five five",
        ),
        ("add to my journal the kids slept well", "the kids slept well"),
    ],
)
def test_a_note_is_what_follows_its_frame(said: str, note: str) -> None:
    call = framed_call(Verb.NOTE, said)
    assert call is not None and call["text"] == note


@pytest.mark.parametrize(
    ("said", "target"),
    [
        ("forget that", None),
        ("please forget it", None),
        ("don't remember that", None),
        ("scratch that", None),
        ("forget what I just said", None),
        ("forget what I said about the car", "the car"),
        ("forget everything about my old job", "my old job"),
        ("forget my locker code", "locker code"),
    ],
)
def test_forget_means_the_last_turn_or_what_it_names(said: str, target: str | None) -> None:
    call = framed_call(Verb.FORGET, said)
    assert call is not None and call["about"] == (target or "")


@pytest.mark.parametrize(
    ("verb", "said"),
    [(Verb.NOTE, "put it in my diary that the gutter is blocked"),
     (Verb.ASK_OPERATOR, "would the operator know when the bins go out"),
     (Verb.FORGET, "stop remembering that i'm allergic to cats")],
)  # fmt: skip
def test_a_frame_the_desk_does_not_know_is_left_to_the_model(verb: Verb, said: str) -> None:
    assert framed_call(verb, said) is None
    # With no model to write it, the whole turn is the argument.
    assert list(unframed_call(verb, said).arguments.values()) == [said]


@pytest.mark.parametrize(
    ("said", "yes"),
    [("yes", True), ("Yes please.", True), ("yeah do it", True), ("sure", True),
     ("no", False), ("yes but first tell me the time", False), ("what", False)],
)  # fmt: skip
def test_only_a_short_agreement_confirms(said: str, yes: bool) -> None:
    assert is_yes(said) is yes


@pytest.mark.parametrize(
    ("ahead", "words"),
    [
        (timedelta(seconds=20), "in 20 seconds"),
        (timedelta(minutes=1), "in 1 minute"),
        (timedelta(minutes=10), "in 10 minutes"),
        (timedelta(hours=8, minutes=30), "at 5:30 PM"),
        (timedelta(hours=22), "tomorrow at 7:00 AM"),
        (timedelta(days=3), "on Tuesday 8 December at 9:00 AM"),
    ],
)
def test_when_is_said_as_a_person_would(ahead: timedelta, words: str) -> None:
    assert when_words(NOW + ahead, NOW) == words


def test_a_confirmation_says_what_and_when_in_the_households_zone() -> None:
    oven = reminder("check the oven", 1)
    assert confirm_reminder(oven, NOW) == "Okay, I will remind you in 1 minute to check the oven."
    timer = reminder("", 10)
    assert confirm_reminder(timer, NOW) == "Timer set. It goes off in 10 minutes."
    # Stored in UTC, said in the household's time.
    assert oven.due.tzinfo == UTC


def test_cancel_picks_all_the_timer_the_matching_one_or_the_only_one() -> None:
    oven, cat, timer = reminder("check the oven", 5), reminder("feed the cat", 9), reminder("", 3)
    pending = [timer, oven, cat]
    assert choose_to_cancel("cancel all my reminders", pending) == pending
    assert choose_to_cancel("cancel the timer", pending) == [timer]
    assert choose_to_cancel("never mind about the oven", pending) == [oven]
    assert choose_to_cancel("cancel my reminder", [cat]) == [cat]
    assert choose_to_cancel("cancel my reminder", pending) == []


def test_the_list_is_said_soonest_first_and_bounded() -> None:
    assert list_words([], NOW) == "You have no reminders set."
    pending = [reminder("a", 5), reminder("b", 6), reminder("", 7), reminder("d", 8)]
    assert list_words(pending, NOW) == (
        "You have 4 reminders: a in 5 minutes; b in 6 minutes; a timer in 7 minutes, and 1 more."
    )


def test_the_desk_forgets_where_the_reflex_keeps() -> None:
    catalog = load_node_catalog(REPO_ROOT / "schemas" / "nodes.yaml")
    spec = catalog.nodes["agent.edge_asr_memory"]
    assert spec.config.get("intents") is True
    assert memory_root(spec) == "workspace/edge_asr_memory"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_text_gives_a_framed_call_or_none_without_failing(text: str) -> None:
    for verb in (Verb.NOTE, Verb.ASK_OPERATOR, Verb.FORGET, Verb.REMIND, Verb.CANCEL_REMINDER):
        call = framed_call(verb, text)
        assert call is None or all(isinstance(v, str) for v in call.arguments.values())
    assert isinstance(is_yes(text), bool)


@pytest.mark.parametrize(
    ("said", "question"),
    [
        ("ask the operator what I said about my car", "what i said about my car"),
        ("can you ask the operator to find out when the boiler was serviced",
         "when the boiler was serviced"),
        ("check with the operator whether we have spare keys", "we have spare keys"),
    ],
)  # fmt: skip
def test_the_operator_is_asked_what_follows_the_frame(said: str, question: str) -> None:
    call = framed_call(Verb.ASK_OPERATOR, said)
    assert call is not None and call["text"] == question


def test_the_operators_answer_is_said_as_it_came_or_why_there_is_none() -> None:
    ok = DelegateAnswer(
        "q", "edge_asr_memory", "board", ok=True, text="You told me: my car is red."
    )
    assert operator_words(ok) == "The operator says: You told me: my car is red."
    none = DelegateAnswer("q", "edge_asr_memory", "board", ok=False, error="nothing about cars")
    assert operator_words(none) == "I could not find out: nothing about cars."


@pytest.mark.parametrize(
    ("question", "topic"),
    [
        ("what i said about my car", "my car"),
        ("What did I tell you about the boiler?", "the boiler"),
        ("when is the dentist", "when is the dentist"),
    ],
)
def test_the_operator_searches_for_the_topic_of_the_question(question: str, topic: str) -> None:
    assert search_topic(question) == topic


def test_the_operator_answers_with_the_closest_memories_own_words_or_none() -> None:
    def hit(content: str, score: float) -> dict[str, object]:
        return {"document": {"id": 1, "content": content}, "score": score}

    results = [hit("my car is a blue volvo.", 0.71), hit("my car is a blue volvo", 0.70),
               hit("the car is in the garage", 0.5), hit("we like tea", 0.2)]  # fmt: skip
    assert answer_from(results) == (
        "You told me: my car is a blue volvo; and: the car is in the garage."
    )
    assert answer_from([hit("we like tea", 0.2)]) is None
    assert answer_from([{"document": "junk", "score": "x"}, {}]) is None


def test_a_tool_calling_model_is_told_when_to_use_its_verbs_and_a_small_one_is_not() -> None:
    catalog = load_node_catalog(REPO_ROOT / "schemas" / "nodes.yaml")
    spec = catalog.nodes["agent.edge_asr_memory"]
    small = system_prompt_for(spec, calls_tools=False, before_model=True)
    assert small == DEFAULT_SYSTEM_PROMPT
    big = system_prompt_for(spec, calls_tools=True, before_model=True)
    assert big.startswith(DEFAULT_SYSTEM_PROMPT)
    for verb in ("journal_append when asked to note", "delegate when asked to ask the operator"):
        assert verb in big
    assert "Reminders, timers and forgetting are done before you see the request." in big
    edge_asr = catalog.nodes["agent.edge_asr"]
    plain = system_prompt_for(edge_asr, calls_tools=True, before_model=False)
    assert "Reminders" not in plain

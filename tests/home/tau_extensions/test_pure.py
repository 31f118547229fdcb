"""The τ extensions' pure parts: the binding file, prose kinds and speakability."""

from __future__ import annotations

from pathlib import Path

import pytest

from home.tau_extensions.binding import TurnBinding, read_binding, write_binding
from home.tau_extensions.errors import BindingFileError, ExtensionError
from home.tau_extensions.handset import Handset, config_flag
from home.tau_extensions.prose import (
    ProseKind,
    assistant_prose,
    first_sentence,
    message_text,
    unspeakable_reason,
    whole_sentences,
)


def test_binding_file_round_trips_and_names_its_problems(tmp_path: Path) -> None:
    path = tmp_path / "binding.json"
    with pytest.raises(BindingFileError, match="no binding yet"):
        read_binding(path)
    binding = TurnBinding(binding_id="b1", device="tui", event_id="e1", turn=1)
    write_binding(path, binding)
    assert read_binding(path) == binding
    path.write_text('{"binding_id": "has space", "event_id": "e", "turn": 1}')
    with pytest.raises(BindingFileError, match="malformed"):
        read_binding(path)


def test_a_reprompt_is_marked_in_the_binding_file_and_an_older_file_is_no_reprompt(
    tmp_path: Path,
) -> None:
    path = tmp_path / "binding.json"
    reprompt = TurnBinding(binding_id="b1", device="tui", event_id="e1", turn=1, reprompt=True)
    write_binding(path, reprompt)
    assert read_binding(path).reprompt
    path.write_text('{"binding_id": "b1", "device": "tui", "event_id": "e1", "turn": 1}')
    assert not read_binding(path).reprompt


def test_prose_kind_follows_the_shape_of_the_turn() -> None:
    text = {"type": "text", "text": "Checking."}
    call = {"type": "toolCall", "name": "delegate"}
    assert assistant_prose({"content": [text, call]}).kind is ProseKind.STATUS
    assert assistant_prose({"content": [text]}).kind is ProseKind.ANSWER
    assert assistant_prose({"content": [call]}).kind is ProseKind.SILENCE
    assert assistant_prose({"content": []}).kind is ProseKind.SILENCE


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("The kettle is on.", None),
        ("```\nls\n```", "code block"),
        ("| a | b |\n| c | d |", "table"),
        ("- one\n- two\n- three", "list"),
        ("See https://example.org", "link"),
        ("word " * 200, "characters long"),
        ("{}[]<>=+-*/ 123 456", "symbols"),
    ],
)
def test_unspeakable_reasons(text: str, reason: str | None) -> None:
    found = unspeakable_reason(text)
    assert (found is None) if reason is None else (found is not None and reason in found)


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("Boil it for six minutes. Then cool it in cold", "Boil it for six minutes."),
        ('She said "go to bed early." Then she', 'She said "go to bed early."'),
        ("Really? Yes! It is 3.5 degrees and", "Really? Yes!"),
        ("No sentence ends in this cut", "No sentence ends in this cut"),
        ("One whole sentence.", "One whole sentence."),
    ],
)
def test_whole_sentences_drops_the_fragment_after_the_last_sentence(text: str, spoken: str) -> None:
    assert whole_sentences(text) == spoken


class _RecordingHandset(Handset):
    """A handset whose answers are recorded instead of spoken (no bus)."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(
            {"agent": "a", "nats_url": "nats://127.0.0.1:1", "binding_file": tmp_path / "b"}
        )
        self.answers: list[str] = []

    async def route_answer(self, text: str) -> None:
        self.answers.append(text)


@pytest.mark.parametrize(
    ("stop_reason", "spoken"),
    [("length", "Sleep at the same time."), ("stop", "Sleep at the same time. Keep")],
)
async def test_an_answer_the_token_cap_cut_is_spoken_to_its_last_whole_sentence(
    tmp_path: Path, stop_reason: str, spoken: str
) -> None:
    handset = _RecordingHandset(tmp_path)
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": "Sleep at the same time. Keep"}],
        "stop_reason": stop_reason,
    }
    await handset.on_turn_end({"messages": [message]}, None)
    assert handset.answers == [spoken]


@pytest.mark.parametrize(
    ("streamed", "sentence"),
    [
        ("The kettle is on", None),
        # Its end is the stream's end so far: "3." may yet become "3.5".
        ("The kettle is on.", None),
        ("The kettle is on. It", "The kettle is on."),
        ("  Sure! I can help ", "Sure!"),
        ("It costs 3.5 euros. More", "It costs 3.5 euros."),
        ("Dr. Smith is in. And", "Dr. Smith is in."),
        ('She said "go." Then', 'She said "go."'),
        ("Tips:\n1. Sleep. 2.", None),
        ("# Sleep\nGo to bed. Early", None),
        ("```\nls\n```. Then", None),
        ("See https://example.org. Then", None),
    ],
)
def test_first_sentence_of_an_answer_being_written(streamed: str, sentence: str | None) -> None:
    assert first_sentence(streamed) == sentence


@pytest.mark.parametrize(
    ("streamed", "part"),
    [
        ("I'm sorry for any misunderstanding, but", "I'm sorry for any misunderstanding,"),
        ("I'm sorry for any misunderstanding,", None),  # the stream has not gone past it
        ("Yes, it is", None),  # one word is no clause worth saying alone
        ("The kettle is on. It boils, and", "The kettle is on."),
        ("It costs 1,000 euros and", None),
        ("Dr. Smith, our neighbour, called", None),
        ("Here is the plan: first", "Here is the plan:"),
        ("# Plan\nWe go there, then", None),
        ("See https://example.org, then", None),
    ],
)
def test_a_long_first_clause_is_the_first_part_before_its_sentence_ends(
    streamed: str, part: str | None
) -> None:
    assert first_sentence(streamed, clause_words=4) == part
    if part is not None and not part.endswith("."):
        assert first_sentence(streamed) is None


def test_message_text_keeps_the_streams_spaces() -> None:
    message = {"content": [{"type": "text", "text": "On. "}, {"type": "text", "text": "It"}]}
    assert message_text(message) == "On. It"
    assert message_text({"content": "On. "}) == "On. "


def test_config_flags_read_bools_and_their_text_and_name_anything_else() -> None:
    assert config_flag({}, "first_sentence", default=True) is True
    assert config_flag({"first_sentence": False}, "first_sentence", default=True) is False
    assert config_flag({"first_sentence": "off"}, "first_sentence", default=True) is False
    with pytest.raises(ExtensionError, match=r"'first_sentence'.*'maybe'"):
        config_flag({"first_sentence": "maybe"}, "first_sentence", default=True)

"""The τ extensions' pure parts: the binding file, prose kinds and speakability."""

from __future__ import annotations

from pathlib import Path

import pytest

from home.tau_extensions.binding import TurnBinding, read_binding, write_binding
from home.tau_extensions.errors import BindingFileError
from home.tau_extensions.prose import ProseKind, assistant_prose, unspeakable_reason


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

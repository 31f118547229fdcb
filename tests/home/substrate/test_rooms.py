"""The right room (home/substrate/rooms.py): one utterance heard by several boards is
answered on the board that heard it best, the others' turns dropped by name."""

from __future__ import annotations

from home.substrate.rooms import Deliver, Heard, Hold, Late, Rooms, fold


def heard(device: str, words: str, wake: float = 0.0, level: float = -30.0) -> Heard[str]:
    return Heard(device, fold(words), (wake, level), f"{device}:{words}")


def test_one_board_is_never_held() -> None:
    rooms: Rooms[str] = Rooms()
    assert isinstance(rooms.offer("s", heard("kitchen", "lights on"), 0.0), Deliver)
    assert isinstance(rooms.offer("s", heard("kitchen", "lights off"), 1.0), Deliver)
    # The same board saying the same words again is a second utterance, not a copy.
    assert isinstance(rooms.offer("s", heard("kitchen", "lights off"), 1.2), Deliver)


def test_the_first_copy_from_a_new_board_is_late_and_then_boards_are_arbitrated() -> None:
    rooms: Rooms[str] = Rooms()
    assert isinstance(rooms.offer("s", heard("kitchen", "What time is it?"), 0.0), Deliver)
    late = rooms.offer("s", heard("hall", "what time is it", level=-10), 0.3)
    assert isinstance(late, Late) and late.group.best().device == "kitchen"
    # From now on both are boards that hear: a turn waits for its copies.
    first = rooms.offer("s", heard("kitchen", "turn the radio off", level=-35), 10.0)
    assert isinstance(first, Hold) and first.opened
    second = rooms.offer("s", heard("hall", "turn the radio of", level=-18), 10.2)
    assert isinstance(second, Hold) and not second.opened and second.group is first.group
    best, others = rooms.settle(first.group)
    assert best.device == "hall" and [o.device for o in others] == ["kitchen"]
    # A third copy after the window is late; other words are their own utterance.
    assert isinstance(rooms.offer("s", heard("garage", "turn the radio off"), 11.0), Late)
    assert isinstance(rooms.offer("s", heard("garage", "put the kettle on"), 11.1), Hold)


def test_the_wake_word_probability_counts_before_the_level() -> None:
    rooms: Rooms[str] = Rooms()
    rooms.offer("s", heard("a", "warm up"), 0.0)
    rooms.offer("s", heard("b", "cool down"), 0.1)
    held = rooms.offer("s", heard("a", "hello", wake=0.99, level=-40), 5.0)
    rooms.offer("s", heard("b", "hello", wake=0.90, level=-10), 5.1)
    assert isinstance(held, Hold)
    assert rooms.settle(held.group)[0].device == "a"


def test_schemas_and_old_groups_are_kept_apart() -> None:
    rooms: Rooms[str] = Rooms(window_s=0.5, late_s=1.0)
    rooms.offer("s", heard("a", "x"), 0.0)
    rooms.offer("s", heard("b", "y"), 0.0)
    held = rooms.offer("s", heard("a", "hello"), 1.0)
    assert isinstance(held, Hold)
    other_schema = rooms.offer("t", heard("b", "hello"), 1.1)
    assert isinstance(other_schema, Hold) and other_schema.group is not held.group
    rooms.settle(held.group)
    # Past the window and the late margin the group is forgotten: a new utterance.
    again = rooms.offer("s", heard("b", "hello"), 3.0)
    assert isinstance(again, Hold) and again.opened

"""When a spoken request to be reminded means, and what it asks to be reminded of."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from home.reminders.errors import NoTimeSaid
from home.reminders.when import number, span_seconds, when_said

# A Saturday afternoon in a zone east of UTC: the household's clock, not the server's.
ZONE = timezone(timedelta(hours=9))
NOW = datetime(2026, 12, 5, 14, 20, 0, tzinfo=ZONE)


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 12, day, hour, minute, tzinfo=ZONE)


@pytest.mark.parametrize(
    ("said", "due", "task"),
    [
        ("remind me in one minute to check the oven", NOW + timedelta(minutes=1), "check the oven"),
        (
            "Remind me to take the bread out in ten minutes.",
            NOW + timedelta(minutes=10),
            "take the bread out",
        ),
        ("set a timer for ten minutes", NOW + timedelta(minutes=10), ""),
        ("set a timer for an hour and a half", NOW + timedelta(minutes=90), ""),
        ("timer for half an hour", NOW + timedelta(minutes=30), ""),
        ("start a timer for three minutes please", NOW + timedelta(minutes=3), ""),
        (
            "in twenty five minutes remind me to check the laundry",
            NOW + timedelta(minutes=25),
            "check the laundry",
        ),
        (
            "remind me in a couple of minutes to stir the soup",
            NOW + timedelta(minutes=2),
            "stir the soup",
        ),
        ("remind me in 2 hours to move the car", NOW + timedelta(hours=2), "move the car"),
        (
            "remind me in one hour and ten minutes to call the garage",
            NOW + timedelta(minutes=70),
            "call the garage",
        ),
        ("remind me at five thirty pm to call my mum", at(5, 17, 30), "call your mum"),
        ("remind me at half past five to feed the cat", at(5, 17, 30), "feed the cat"),
        ("remind me at quarter to six to feed the cat", at(5, 17, 45), "feed the cat"),
        ("remind me at 9 to take my pills", at(5, 21), "take your pills"),
        ("remind me at 9 am to take my pills", at(6, 9), "take your pills"),
        ("remind me tomorrow at seven to water the plants", at(6, 7), "water the plants"),
        ("remind me at noon to eat", at(6, 12), "eat"),
        ("remind me tonight to lock the door", at(5, 21), "lock the door"),
        ("remind me tomorrow morning to buy milk", at(6, 9), "buy milk"),
        # A weekday: this week's, or next week's once its time has passed (NOW is Saturday).
        ("remind me on monday at eight to call the bank", at(7, 8), "call the bank"),
        ("on friday at noon remind me to pay the rent", at(11, 12), "pay the rent"),
        ("remind me next tuesday to renew the passport", at(8, 9), "renew the passport"),
        ("remind me on saturday at nine to stretch", at(12, 9), "stretch"),
        ("remind me saturday evening to call gran", at(5, 18), "call gran"),
        ("timer three minutes", NOW + timedelta(minutes=3), ""),
        ("set an alarm for six in the morning", at(6, 6), ""),
        ("don't let me forget to ring the garage at ten tomorrow", at(6, 10), "ring the garage"),
    ],
)
def test_a_request_gives_its_time_and_task(said: str, due: datetime, task: str) -> None:
    when = when_said(said, NOW)
    assert (when.due, when.task) == (due, task)


@pytest.mark.parametrize(
    "said",
    [
        "remind me to call bob",
        "remind me what my sister's name is",
        "set a timer",
        "",
        "remind me in 99999999999999999999999 days to breathe",
        "remind me in 0 minutes to blink",
    ],
)
def test_a_request_without_a_time_is_refused_naming_why(said: str) -> None:
    with pytest.raises(NoTimeSaid, match=r"no (?:time|length of time)"):
        when_said(said, NOW)


def test_numbers_and_spans_read_as_said() -> None:
    assert number("twenty five") == 25
    assert number("twenty-five") == 25
    assert number("12") == 12
    assert span_seconds("an hour and a half") == 5400
    assert span_seconds("two days") == 2 * 86400
    with pytest.raises(NoTimeSaid, match="not a number"):
        number("lots")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_a_time_after_now_or_no_time_said(text: str) -> None:
    try:
        when = when_said(text, NOW)
    except NoTimeSaid:
        return
    assert when.due.tzinfo is not None
    assert when.due > NOW - timedelta(seconds=1)
    assert len(when.task) <= len(text) * 2 + 10


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["in", "for", "after"]),
    st.integers(min_value=1, max_value=59),
    st.sampled_from(["seconds", "minutes", "hours"]),
)
def test_a_duration_in_digits_counts_from_now(prep: str, count: int, unit: str) -> None:
    when = when_said(f"remind me {prep} {count} {unit} to stretch", NOW.astimezone(UTC))
    seconds = count * {"seconds": 1, "minutes": 60, "hours": 3600}[unit]
    assert when.due == NOW + timedelta(seconds=seconds)
    assert when.task == "stretch"

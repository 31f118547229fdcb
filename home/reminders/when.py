"""When a spoken request to be reminded means, and what it asks to be reminded of.

Read off the turn as the recogniser writes it (numbers as words: "in ten minutes",
"at half past five", "tomorrow at seven thirty pm"; typed digits too). A duration
("in …", "for …", "… from now") counts from ``now``; a time of day ("at …", "noon")
is the next such time in the household's zone, tomorrow's with "tomorrow" or when
today's has passed. An hour without am or pm is the next one of the two. The task is
what is left once the request's frame ("remind me to", "set a timer") and the time
are taken out: an empty task is a timer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from home.intent.step import spoken_form
from home.reminders.errors import NoTimeSaid

# Past this a duration is no reminder (and past timedelta's range, no time at all).
MAX_SECONDS = 400 * 86400.0

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "a": 1, "an": 1,
}  # fmt: skip
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50}
_FEW = {"couple": 2, "few": 3}
_SECONDS = {"second": 1, "sec": 1, "minute": 60, "min": 60, "hour": 3600, "day": 86400,
            "week": 7 * 86400}  # fmt: skip

_NUMBER = (
    r"(?:\d+(?:\.\d+)?|(?:(?:twenty|thirty|forty|fifty)(?:[\s-](?:one|two|three|four|five|"
    r"six|seven|eight|nine))?)|" + "|".join(sorted(_UNITS, key=len, reverse=True)) + r")"
)
_COUNT = rf"(?:(?:a\s+)?(?:couple|few)(?:\s+of)?|{_NUMBER})"
_UNIT = r"(?:seconds?|secs?|minutes?|mins?|hours?|days?|weeks?)"
_AMOUNT = (
    rf"(?:{_COUNT}\s+{_UNIT}(?:\s+and\s+a\s+half)?|half\s+an?\s+hour|a\s+quarter\s+of\s+an\s+hour)"
)
_SPAN = rf"{_AMOUNT}(?:\s+(?:and\s+)?{_AMOUNT})*"
_DURATION = re.compile(
    rf"\b(?:in|for|after)\s+(?P<span>{_SPAN})\b|\b(?P<later>{_SPAN})\s+from\s+now\b"
    rf"|\b(?:timer|alarm)\s+(?:of\s+)?(?P<bare>{_SPAN})\b"
)

_CLOCK = (
    rf"(?:(?P<half>half|quarter|{_NUMBER})\s+(?P<dir>past|to|after)\s+(?P<hour1>{_NUMBER})"
    rf"|(?P<hour>{_NUMBER})(?:[:\s](?P<minute>{_NUMBER}|o'?clock|oh\s+{_NUMBER}))?)"
    r"(?:\s*(?P<ampm>am|pm|a\s+m|p\s+m|in\s+the\s+morning|in\s+the\s+afternoon|in\s+the\s+evening|"
    r"at\s+night|tonight))?"
)
# "at six", "by six", and an alarm "for six".
_AT = re.compile(
    rf"\b(?P<day>tomorrow\s+|today\s+|tonight\s+)?(?:at|by|(?<=alarm\s)for)\s+{_CLOCK}"
    r"(?P<after>\s+tomorrow)?\b"
)
_NAMED = re.compile(r"\b(?P<day>tomorrow\s+)?(?:at\s+)?(?P<name>noon|midday|midnight)\b")
_PARTS_OF_DAY = {"morning": 9, "afternoon": 15, "evening": 18, "night": 21}
_TOMORROW = re.compile(r"\btomorrow(?:\s+(?P<part>morning|afternoon|evening|night))?\b|\btonight\b")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY = re.compile(
    rf"\b(?:on\s+|next\s+|this\s+|coming\s+)?(?P<weekday>{'|'.join(WEEKDAYS)})"
    r"(?:\s+(?P<part>morning|afternoon|evening|night))?\b"
)

_FRAME = re.compile(
    r"^(?:.*?\b)?(?:remind\s+(?:me|us|him|her|them)(?:\s+(?:to|that|about|of))?"
    r"|set\s+(?:a|an|the|my)?\s*(?:timer|alarm|reminder)(?:\s+(?:to|for|that))?"
    r"|(?:start|make)\s+(?:a|an)?\s*(?:timer|reminder)(?:\s+(?:to|for|that))?"
    r"|(?:a\s+)?(?:timer|reminder)(?:\s+(?:to|for|that))?"
    r"|(?:tell|wake)\s+me(?:\s+(?:to|that|about|up))?"
    r"|(?:don'?t\s+let\s+me\s+forget|make\s+sure\s+i\s+(?:remember|don'?t\s+forget))"
    r"(?:\s+(?:to|that|about))?)\s*"
)
_FILLER = re.compile(
    r"^(?:to|that|about|of|for|please|and)(?:\s+|$)|(?:^|\s+)(?:please|and|to|for)$"
)


@dataclass(frozen=True)
class WhenSaid:
    """A request's time and its task (``""``: a timer)."""

    due: datetime
    task: str


def number(word: str) -> float:
    """``"twenty five"``, ``"25"``, ``"a"``, ``"couple"``: the number it says."""
    word = word.strip().replace("-", " ")
    try:
        return float(word)
    except ValueError:
        pass
    total = 0.0
    for part in word.split():
        if part in _TENS:
            total += _TENS[part]
        elif part in _UNITS:
            total += _UNITS[part]
        elif part in _FEW:
            total += _FEW[part]
        elif part != "of":
            raise NoTimeSaid(f"not a number: {word!r}")
    return total


def span_seconds(span: str) -> float:
    """How long ``"an hour and ten minutes"`` is, in seconds."""
    total = 0.0
    for match in re.finditer(
        rf"(?P<count>{_COUNT})\s+(?P<unit>{_UNIT})(?P<half>\s+and\s+a\s+half)?"
        r"|(?P<halfhour>half\s+an?\s+hour)|(?P<quarter>a\s+quarter\s+of\s+an\s+hour)",
        span,
    ):
        if match["halfhour"]:
            total += 1800
        elif match["quarter"]:
            total += 900
        else:
            unit = _SECONDS[match["unit"].rstrip("s") or "s"]
            total += (
                number(match["count"].removeprefix("a ")) + (0.5 if match["half"] else 0)
            ) * unit
    return total


def _hour_minute(match: re.Match[str]) -> tuple[int, int]:
    if match["dir"]:
        hour = int(number(match["hour1"]))
        offset = {"half": 30, "quarter": 15}.get(match["half"]) or int(number(match["half"]))
        return (hour, offset) if match["dir"] in ("past", "after") else (hour - 1, 60 - offset)
    hour = int(number(match["hour"]))
    minute_said = (match["minute"] or "").removeprefix("oh ").strip()
    minute = 0 if not minute_said or "clock" in minute_said else int(number(minute_said))
    return hour, minute


def _clock_time(match: re.Match[str], now: datetime, ahead: int | None) -> datetime:
    """The time of day ``match`` says, ``ahead`` days from today when a day was said
    (a weekday's time already past today is next week's), else the next such time."""
    hour, minute = _hour_minute(match)
    ampm = (match["ampm"] or "").replace(" ", "")
    pm = ampm in ("pm", "intheafternoon", "intheevening", "atnight", "tonight") or bool(
        match["day"] and "tonight" in match["day"]
    )
    if not 0 <= hour <= 24 or not 0 <= minute < 60:
        raise NoTimeSaid(f"not a time of day: {match[0]!r}")
    if ampm or pm:
        hour = hour % 12 + (12 if pm else 0)
    day = now.date() + timedelta(days=ahead or 0)
    at = datetime.combine(day, datetime.min.time(), now.tzinfo).replace(
        hour=hour % 24, minute=minute
    )
    if ahead is not None:
        return at if at > now else at + timedelta(days=7)
    if ampm or hour > 12:
        return at if at > now else at + timedelta(days=1)
    # "at five": the next five o'clock, morning or evening.
    for candidate in (at, at + timedelta(hours=12), at + timedelta(days=1)):
        if candidate > now:
            return candidate
    return at + timedelta(days=1)


def _strip(text: str, match: re.Match[str]) -> str:
    return f"{text[: match.start()]} {text[match.end() :]}"


def _without_day(text: str, weekday: bool) -> str:
    """``text`` without the day it says (a weekday, or "tomorrow")."""
    return _WEEKDAY.sub(" ", text, count=1) if weekday else re.sub(r"\btomorrow\b", " ", text)


def task_words(rest: str) -> str:
    """What a reminder is for, from the words left once its time is taken out: the
    request's frame and fillers dropped, "my" said back as "your"."""
    framed = _FRAME.match(rest)
    task = rest[framed.end() :] if framed else rest
    task = " ".join(task.split())
    for _ in range(3):
        task = _FILLER.sub("", task).strip()
    # "remind me to call mum": say it to the person as "call mum".
    return re.sub(r"\bmy\b", "your", task)


def when_said(text: str, now: datetime) -> WhenSaid:
    """The time and task of a request to be reminded; :class:`NoTimeSaid` when it names
    no time. ``now`` carries the household's zone."""
    spoken = spoken_form(text)
    if duration := _DURATION.search(spoken):
        seconds = span_seconds(duration["span"] or duration["later"] or duration["bare"])
        if not 0 < seconds <= MAX_SECONDS:
            raise NoTimeSaid(f"no length of time a reminder can wait in {duration[0]!r:.80}")
        return WhenSaid(now + timedelta(seconds=seconds), task_words(_strip(spoken, duration)))
    # The day said, if any: tomorrow, or a weekday ("on friday": today's, if still ahead).
    tomorrow = _TOMORROW.search(spoken)
    weekday = _WEEKDAY.search(spoken)
    day_said = tomorrow if tomorrow and tomorrow[0].startswith("tomorrow") else weekday
    ahead = None
    if day_said is tomorrow and tomorrow is not None:
        ahead = 1
    elif weekday is not None:
        ahead = (WEEKDAYS.index(weekday["weekday"]) - now.weekday()) % 7
    if clock := _AT.search(spoken):
        due = _clock_time(clock, now, 1 if clock["after"] else ahead)
        rest = _strip(spoken, clock)
        if day_said is not None and not clock["day"] and not clock["after"]:
            rest = _without_day(rest, day_said is weekday)
        return WhenSaid(due, task_words(rest))
    if named := _NAMED.search(spoken):
        hour = 0 if named["name"] == "midnight" else 12
        days = ahead if ahead is not None else (1 if hour == 0 else 0)
        day = now.date() + timedelta(days=days)
        due = datetime.combine(day, datetime.min.time(), now.tzinfo).replace(hour=hour)
        due = due if due > now else due + timedelta(days=1 if ahead is None else 7)
        rest = _strip(spoken, named)
        if day_said is not None:
            rest = _without_day(rest, day_said is weekday)
        return WhenSaid(due, task_words(rest))
    if day_said is not None or tomorrow is not None:
        said = day_said or tomorrow
        assert said is not None
        hour = _PARTS_OF_DAY.get(said["part"] or "", 9)
        day = now.date() + timedelta(days=ahead or 0)
        if said[0] == "tonight":
            hour, day = 21, now.date()
        due = datetime.combine(day, datetime.min.time(), now.tzinfo).replace(hour=hour)
        due = due if due > now else due + timedelta(days=7 if said is weekday else 1)
        return WhenSaid(due, task_words(_strip(spoken, said)))
    raise NoTimeSaid("no time in it (say when: 'in ten minutes', 'at half past five')")
